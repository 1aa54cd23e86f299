"""Products: the raw record of WebShop's ``items_shuffle*.json`` and the product the shop shows.

A raw record is what the original setup downloads: ``name``, ``asin``, ``pricing`` as ``"$877.80"``,
``"$12.99 to $24.99"`` or ``""``, ``customization_options`` as ``""`` or a dict of option name to a list of
``{"value", "image"}`` (or ``null``), ``product_category`` as ``"A › B › C"``, ``small_description`` (a list,
sometimes a bare string), ``full_description``, ``category``, ``query`` and many fields the shop ignores
(``product_information`` with untidy keys, ``brand``, ...). :func:`parse_product` turns one into a
:class:`Product` with the original's rules: the price tag, options lower-cased with ``/`` shown as
``" | "``, ``DUMMY_ATTR`` when the product has no attributes, ``N.A.`` when it has no rating.

Generated catalogs and files in the original format go through this same function.

Example:
    >>> raw = {"asin": "B0TEST0001", "name": "Lumora Lip Balm", "pricing": "$3.50 to $4", "query": "Lip Balm",
    ...        "customization_options": {"Color": [{"value": "Red/Pink", "image": None}], "Size": None},
    ...        "product_category": "Beauty › Lips", "category": "beauty", "small_description": "Soft.",
    ...        "full_description": "A balm."}
    >>> product = parse_product(decode_product(raw), attributes=["moisturizing"])
    >>> product.price_tag, product.pricing, product.options, product.bullet_points, product.query
    ('$3.5 to $4.0', (3.5, 4.0), {'color': ['red | pink']}, ['Soft.'], 'lip balm')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec

__all__ = [
    "MISSING_PRICE",
    "DataError",
    "Product",
    "RawProduct",
    "Review",
    "decode_product",
    "parse_price",
    "parse_product",
]

#: The price the original assumes for a product whose ``pricing`` is empty.
MISSING_PRICE = 100.0
#: What the original puts in ``Attributes`` when a product has none.
DUMMY_ATTRIBUTE = "DUMMY_ATTR"

_NOT_A_PRICE_CHARACTER = re.compile(r"[^\d.]")


class DataError(ValueError):
    """A data file (or a record in one) is missing or malformed; the message names the file and the fault."""


class RawOption(msgspec.Struct):
    """One value of a customization option as scraped: its label and an image URL."""

    value: str
    image: str | None = None


class RawProduct(msgspec.Struct):
    """The fields of an ``items_shuffle*.json`` record that the shop reads; the rest is ignored.

    The required fields are those the original loader reads without a default.
    """

    asin: str
    name: str
    category: str
    query: str
    product_category: str
    small_description: list[str] | str | None
    full_description: str | None
    customization_options: dict[str, list[RawOption] | None] | str | None
    pricing: str | None = ""
    average_rating: float | str | None = None
    images: list[str | None] | None = None


class Review(msgspec.Struct, frozen=True):
    """One customer review as the Reviews page shows it."""

    title: str
    score: float | int | str
    body: str


class Product(msgspec.Struct, frozen=True):
    """A product as the shop shows it and the reward reads it (the original's field meanings).

    Attributes:
        asin: The product id (upper case, at most 10 characters).
        title: The product name (``Title``).
        query: The search query it was scraped with, lower-cased and stripped.
        category: The shop category (``beauty``, ``electronics``, ...).
        product_category: The ``A › B › C`` category path.
        description: The full description (``Description``).
        bullet_points: The feature bullets (``BulletPoints``).
        pricing: One price, or the low and high ends of a range.
        price_tag: The price as shown: ``$12.5`` or ``$12.5 to $20.0``.
        options: Option group name (lower case) to its values (lower case, ``/`` shown as ``" | "``).
        option_images: Option value to its image URL, if any.
        attributes: The product's attribute phrases (``Attributes``).
        rating: The average rating, or ``"N.A."``.
        reviews: The customer reviews.
        main_image: The first image URL, if any.
    """

    asin: str
    title: str
    query: str
    category: str
    product_category: str
    description: str
    bullet_points: list[str]
    pricing: tuple[float, ...]
    price_tag: str
    options: dict[str, list[str]]
    option_images: dict[str, str | None]
    attributes: list[str]
    rating: float | str = "N.A."
    reviews: list[Review] = msgspec.field(default_factory=list)
    main_image: str | None = None


def decode_product(raw: Mapping[str, Any]) -> RawProduct:
    """Check a raw record's types; raises :class:`msgspec.ValidationError` naming the faulty field."""
    return msgspec.convert(raw, RawProduct)


def parse_price(pricing: str | None) -> tuple[tuple[float, ...], str]:
    """The prices and price tag of a ``pricing`` string, as the original reads it.

    Every ``$``-prefixed amount counts (thousands separators and words dropped); a range keeps its first
    two. An empty string means :data:`MISSING_PRICE`.

    Raises:
        ValueError: when the text holds no ``$`` amount or an amount is not a number.

    Example:
        >>> parse_price("$1,299.99"), parse_price("$5 to $7.25"), parse_price("")
        (((1299.99,), '$1299.99'), ((5.0, 7.25), '$5.0 to $7.25'), ((100.0,), '$100.0'))
    """
    if not pricing:
        return (MISSING_PRICE,), f"${MISSING_PRICE}"
    amounts = pricing.split("$")[1:]
    if not amounts:
        raise ValueError(f"pricing {pricing[:80]!r} has no $ amount")
    try:
        prices = tuple(float(Decimal(_NOT_A_PRICE_CHARACTER.sub("", amount))) for amount in amounts)
    except InvalidOperation:
        raise ValueError(f"pricing {pricing[:80]!r} has an amount that is not a number") from None
    if len(prices) == 1:
        return prices, f"${prices[0]}"
    return prices[:2], f"${prices[0]} to ${prices[1]}"


def _parse_options(
    raw: dict[str, list[RawOption] | None] | str | None,
) -> tuple[dict[str, list[str]], dict[str, str | None]]:
    options: dict[str, list[str]] = {}
    images: dict[str, str | None] = {}
    if not isinstance(raw, dict):  # "" (or null) means the product has no options
        return options, images
    for name, contents in raw.items():
        if contents is None:
            continue
        values = []
        for content in contents:
            value = content.value.strip().replace("/", " | ").lower()
            values.append(value)
            images[value] = content.image
        options[name.lower()] = values
    return options, images


def parse_product(
    raw: RawProduct,
    *,
    attributes: Sequence[str] | None = None,
    reviews: Sequence[Mapping[str, Any]] | None = None,
    rating: float | str | None = None,
) -> Product:
    """The shop's view of a raw record.

    Args:
        raw: The decoded record (see :func:`decode_product`).
        attributes: The product's attributes from ``items_ins_v2*.json``; None or empty gives the
            original's ``["DUMMY_ATTR"]``.
        reviews: Review records (``title``, ``score`` or ``stars``, ``body`` or ``review``).
        rating: The average rating from a reviews file; else the record's ``average_rating``; else ``N.A.``.

    Raises:
        ValueError: when the pricing cannot be read (the caller adds the file name).
    """
    pricing, price_tag = parse_price(raw.pricing)
    options, images = _parse_options(raw.customization_options)
    bullets = raw.small_description
    if rating is None:
        rating = raw.average_rating if raw.average_rating not in (None, "") else "N.A."
    return Product(
        asin=raw.asin,
        title=raw.name,
        query=raw.query.lower().strip(),
        category=raw.category,
        product_category=raw.product_category,
        description=raw.full_description or "",
        bullet_points=list(bullets) if isinstance(bullets, list) else [bullets or ""],
        pricing=pricing,
        price_tag=price_tag,
        options=options,
        option_images=images,
        attributes=list(attributes) if attributes else [DUMMY_ATTRIBUTE],
        rating=rating,
        reviews=[_review(record) for record in reviews or ()],
        main_image=raw.images[0] if raw.images else None,
    )


def _review(record: Mapping[str, Any]) -> Review:
    """A review record in either of the original's spellings (``stars``/``review`` or ``score``/``body``)."""
    score = record.get("score", record.get("stars", ""))
    return Review(
        title=str(record.get("title", "")), score=score, body=str(record.get("body", record.get("review", "")))
    )
