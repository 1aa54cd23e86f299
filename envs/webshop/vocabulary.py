"""The word lists the catalog generator draws from: shop categories, product types, brands, phrases.

They are data, kept in ``vocabulary.json`` beside this module (shipped as package data) and read once,
when this module is imported; this module gives them their types.

Each :class:`ProductType` is one kind of product as WebShop's scraped data has it: the search query it
was found with, its Amazon-style category path, the attribute phrases its instructions ask for
(``"long lasting"``, ``"machine wash"``), its customization options (``color``, ``size``, ...) and a
typical price range. The five top-level categories are WebShop's own.

Example:
    >>> sorted(CATEGORIES)
    ['beauty', 'electronics', 'fashion', 'food', 'furniture']
    >>> all(len(kind.attributes) >= 6 for kinds in CATEGORIES.values() for kind in kinds)
    True
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, NamedTuple


class ProductType(NamedTuple):
    """One kind of product.

    Attributes:
        noun: The product's name in titles and instructions (``"hair extension"``).
        query: The search query the product was found with (WebShop's ``query`` field).
        path: The category path, coarse to fine (WebShop's ``product_category``, joined by ``›``).
        attributes: Phrases instructions ask for; each product has several of them.
        options: Option group name to the values a product of this kind may offer.
        price: Typical (low, high) price in dollars.
        uses: Short phrases for what the product is for, used in descriptions and reviews.
    """

    noun: str
    query: str
    path: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: tuple[float, float]
    uses: tuple[str, ...]


def _load() -> dict[str, Any]:
    with resources.files(__package__).joinpath("vocabulary.json").open(encoding="utf-8") as handle:
        return json.load(handle)


def _product_type(record: dict[str, Any]) -> ProductType:
    return ProductType(
        noun=record["noun"],
        query=record["query"],
        path=tuple(record["path"]),
        attributes=tuple(record["attributes"]),
        options={name: tuple(values) for name, values in record["options"].items()},
        price=(float(record["price"][0]), float(record["price"][1])),
        uses=tuple(record["uses"]),
    )


def _by_stars(table: dict[str, list[str]]) -> dict[int, tuple[str, ...]]:
    return {int(stars): tuple(phrases) for stars, phrases in table.items()}


_TABLES = _load()
#: Each of WebShop's five top-level categories with its product types.
CATEGORIES: dict[str, tuple[ProductType, ...]] = {
    category: tuple(map(_product_type, kinds)) for category, kinds in _TABLES["categories"].items()
}
BRANDS: tuple[str, ...] = tuple(_TABLES["brands"])
#: Sentences of product descriptions: ``{brand}``, ``{noun}``, ``{a}``, ``{b}`` and ``{use}`` are filled in.
DESCRIPTIONS: tuple[str, ...] = tuple(_TABLES["descriptions"])
#: Feature bullet templates: ``{A}`` is the attribute in upper case, ``{a}`` as is.
BULLETS: tuple[str, ...] = tuple(_TABLES["bullets"])
#: Review titles and bodies by star rating (1 to 5); bodies fill in ``{noun}``, ``{use}`` and ``{a}``.
REVIEW_TITLES: dict[int, tuple[str, ...]] = _by_stars(_TABLES["review_titles"])
REVIEW_BODIES: dict[int, tuple[str, ...]] = _by_stars(_TABLES["review_bodies"])
#: Instruction templates in the style of WebShop's human-written goals: ``{article}`` (a/an),
#: ``{noun}``, ``{attributes}`` (joined with "and") and ``{options}`` (already phrased) are filled in.
INSTRUCTIONS: tuple[str, ...] = tuple(_TABLES["instructions"])
