"""A WebShop catalog made offline: raw records in the original files' schema, from 1k to 1M products.

Product *i* of a seed is a pure function of ``(seed, i)``: a BLAKE2b hash of the pair gives the random
numbers (product type, brand, attributes, options, price, rating, reviews), so any product can be made
on its own, in any order, in any process, and a million-product catalog costs no memory until used.
Goals are made the same way from ``(seed, j)``: goal *j* picks a product and asks for some of its
attributes and option values, in the style of WebShop's human-written instructions.

The records match the original files field for field (:meth:`GeneratedCatalog.raw_product` is an
``items_shuffle*.json`` record, :meth:`~GeneratedCatalog.attribute_record` an ``items_ins_v2*.json``
value, :meth:`~GeneratedCatalog.human_records` the ``items_human_ins.json`` values, and
:meth:`~GeneratedCatalog.review_record` a ``reviews.json`` record), and become products through the
same :func:`~agentfly_envs.webshop.products.parse_product` as a downloaded file. :meth:`~GeneratedCatalog.write`
writes them out as those files.

Example:
    >>> catalog = GeneratedCatalog(1000, seed=0)
    >>> raw = catalog.raw_product(3)
    >>> sorted(raw)[:6]
    ['asin', 'average_rating', 'brand', 'category', 'customization_options', 'full_description']
    >>> catalog.product(3).asin == raw["asin"] and catalog.ordinal(raw["asin"]) == 3
    True
    >>> len(catalog.goals()) == 3000
    True
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentfly_envs.webshop.catalog import Catalog
from agentfly_envs.webshop.products import Product, decode_product, parse_price, parse_product
from agentfly_envs.webshop.vocabulary import (
    BRANDS,
    BULLETS,
    CATEGORIES,
    DESCRIPTIONS,
    INSTRUCTIONS,
    REVIEW_BODIES,
    REVIEW_TITLES,
    ProductType,
)

__all__ = ["GENERATOR_VERSION", "GeneratedCatalog"]

#: Bump when the generated records change, so cached indexes of the old records are not reused.
GENERATOR_VERSION = 2

_TYPES: list[tuple[str, ProductType]] = [(category, kind) for category, kinds in CATEGORIES.items() for kind in kinds]
_ASIN_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ASIN_PAIRS = [a + b for a in _ASIN_DIGITS for b in _ASIN_DIGITS]  # base 1296: four lookups per ASIN
_ASIN_SPACE = 36**8
# Ordinal -> ASIN is an affine bijection of [0, 36^8): the multiplier is prime to 36, so it has an inverse.
_ASIN_MULTIPLIER = 2_654_435_761
_ASIN_INVERSE = pow(_ASIN_MULTIPLIER, -1, _ASIN_SPACE)
_UNTIDY = "\u200f"  # the scraped product_information keys are wrapped in right-to-left marks


class _Draws:
    """The random numbers of one product or goal: 16-bit values from a BLAKE2b hash chain, used in order."""

    __slots__ = ("_digest", "_next", "_values")

    def __init__(self, *key: object) -> None:
        self._digest = hashlib.blake2b(":".join(map(str, key)).encode(), digest_size=64).digest()
        self._values = memoryview(self._digest).cast("H")
        self._next = 0

    def below(self, bound: int) -> int:
        """A number in ``[0, bound)``."""
        if self._next == len(self._values):  # used up: hash the hash for 32 more
            self._digest = hashlib.blake2b(self._digest, digest_size=64).digest()
            self._values = memoryview(self._digest).cast("H")
            self._next = 0
        value = self._values[self._next]
        self._next += 1
        return value % bound

    def unit(self) -> float:
        """A number in ``[0, 1]``."""
        return self.below(65536) / 65535

    def pick(self, items: tuple[Any, ...] | list[Any], count: int) -> list[Any]:
        """``count`` distinct items, in the order they were drawn (a partial Fisher-Yates shuffle)."""
        pool = list(items)
        for position in range(min(count, len(pool))):
            swap = position + self.below(len(pool) - position)
            pool[position], pool[swap] = pool[swap], pool[position]
        return pool[:count]


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


class GeneratedCatalog(Catalog):
    """A deterministic catalog of ``num_products`` products and ``num_goals`` human-style goals.

    Args:
        num_products: How many products (1 to 36^8).
        seed: Which catalog: same seed, same products and goals, in every process.
        num_goals: How many goal records to make (several may share a product).
        price_seed: Seeds price draws inside ranges and the goals' price caps (as for a file catalog).
        cache_size: Products kept parsed in memory (the rest are remade on use, in microseconds).
    """

    def __init__(
        self,
        num_products: int = 1000,
        *,
        seed: int = 0,
        num_goals: int = 3000,
        price_seed: int = 0,
        cache_size: int = 16_384,
    ) -> None:
        super().__init__()
        if not 1 <= num_products < _ASIN_SPACE:
            raise ValueError(f"num_products must be between 1 and {_ASIN_SPACE - 1}, got {num_products}")
        if num_goals < 0:
            raise ValueError(f"num_goals must be >= 0, got {num_goals}")
        self.num_products = num_products
        self.seed = seed
        self.num_goals = num_goals
        self.price_seed = price_seed
        self.name = f"generated(num_products={num_products}, seed={seed}, num_goals={num_goals})"
        self.fingerprint = hashlib.blake2b(
            f"generated:{GENERATOR_VERSION}:{num_products}:{seed}".encode(), digest_size=16
        ).hexdigest()
        self._asin_offset = (
            int.from_bytes(hashlib.blake2b(f"asin:{seed}".encode(), digest_size=8).digest()) % _ASIN_SPACE
        )
        self._cached_product = functools.lru_cache(maxsize=cache_size)(self._make_product)
        self._cached_listing = functools.lru_cache(maxsize=cache_size)(self._make_listing)
        self._cache_size = cache_size
        self._goal_products: dict[int, list[int]] | None = None

    # ----------------------------------------------------------------- identity

    def __len__(self) -> int:
        return self.num_products

    def asin(self, ordinal: int) -> str:
        """The ASIN of product ``ordinal``: ``B0`` and 8 base-36 digits, distinct for every ordinal."""
        code = (ordinal * _ASIN_MULTIPLIER + self._asin_offset) % _ASIN_SPACE
        high, low = divmod(code, 1296**2)
        return f"B0{_ASIN_PAIRS[high // 1296]}{_ASIN_PAIRS[high % 1296]}{_ASIN_PAIRS[low // 1296]}{_ASIN_PAIRS[low % 1296]}"

    def ordinal(self, asin: str) -> int | None:
        if len(asin) != 10 or not asin.startswith("B0"):
            return None
        code = 0
        for char in asin[2:]:
            digit = _ASIN_DIGITS.find(char)
            if digit < 0:
                return None
            code = code * 36 + digit
        ordinal = ((code - self._asin_offset) * _ASIN_INVERSE) % _ASIN_SPACE
        return ordinal if ordinal < self.num_products else None

    # ----------------------------------------------------------------- raw records

    def _design(self, ordinal: int) -> dict[str, Any]:
        """What product ``ordinal`` is: everything its records are written from."""
        draws = _Draws("product", GENERATOR_VERSION, self.seed, ordinal)
        category, kind = _TYPES[draws.below(len(_TYPES))]
        brand = BRANDS[draws.below(len(BRANDS))]
        model = f"{_ASIN_DIGITS[10 + draws.below(26)]}{_ASIN_DIGITS[10 + draws.below(26)]}-{1000 + draws.below(9000)}"
        attributes = draws.pick(kind.attributes, 4 + draws.below(3))
        options: dict[str, list[str]] = {}
        for name, values in kind.options.items():
            if draws.below(10) < 8:
                count = 2 + draws.below(len(values) - 1)
                start = draws.below(len(values) - count + 1)
                options[name] = list(values[start : start + count])
        quirk = draws.below(50)  # 0: customization_options is "" (no options); 1: one option group is null
        if quirk == 0:
            options = {}
        in_title = attributes[: 1 + draws.below(2)]
        title = f"{brand} {' '.join(a.title() for a in in_title)} {kind.noun.title()} {model}"
        if len(attributes) > len(in_title):
            title += " - " + ", ".join(a.title() for a in attributes[len(in_title) : len(in_title) + 2])
        low, high = kind.price
        price = max(round(low + (high - low) * draws.unit() ** 2) - 0.01, 0.99)
        pricing_draw = draws.below(40)
        if pricing_draw == 0:
            pricing = ""
        elif pricing_draw < 5 and options:
            pricing = f"${price:.2f} to ${price * (1.2 + draws.unit() * 0.6):.2f}"
        else:
            pricing = f"${price:,.2f}"
        return {
            "asin": self.asin(ordinal),
            "draws": draws,
            "category": category,
            "kind": kind,
            "brand": brand,
            "model": model,
            "attributes": attributes,
            "options": options,
            "quirk": quirk,
            "title": title,
            "pricing": pricing,
        }

    def raw_product(self, ordinal: int) -> dict[str, Any]:
        """Product ``ordinal`` as an ``items_shuffle*.json`` record, quirks included.

        About one product in fifty has ``customization_options`` ``""``, one in fifty an option group that
        is ``null``, one in ten a ``"$a to $b"`` price range, one in forty an empty ``pricing``.
        """
        return self._raw(ordinal, self._design(ordinal))

    def _raw(self, ordinal: int, design: dict[str, Any]) -> dict[str, Any]:
        draws: _Draws = design["draws"]  # continues where the design stopped
        kind: ProductType = design["kind"]
        brand, attributes = design["brand"], design["attributes"]
        use = kind.uses[draws.below(len(kind.uses))]
        fill = {"brand": brand, "noun": kind.noun, "use": use, "a": attributes[0], "b": attributes[1]}
        sentences = draws.pick(DESCRIPTIONS, 3)
        description = " ".join(sentence.format(**fill) for sentence in sentences)
        bullets = [
            template.format(A=attribute.upper(), a=attribute, noun=kind.noun, use=use)
            for template, attribute in zip(draws.pick(BULLETS, 4), attributes, strict=False)
        ]
        asin = design["asin"]
        customization: dict[str, Any] | str = {
            name: [
                {"value": value, "image": f"https://images.example.com/{asin}/{index}.jpg"}
                for index, value in enumerate(values)
            ]
            for name, values in design["options"].items()
        }
        if not customization:
            customization = ""
        elif design["quirk"] == 1:
            customization["style"] = None
        rating_draw = draws.below(20)
        return {
            "name": design["title"],
            "full_description": description,
            "pricing": design["pricing"],
            "list_price": "",
            "images": [f"https://images.example.com/{asin}/main.jpg"],
            "product_category": " › ".join(kind.path),
            "average_rating": None if rating_draw == 0 else round(3.0 + rating_draw / 10, 1),
            "small_description": bullets,
            "total_reviews": draws.below(5000),
            "customization_options": customization,
            "category": design["category"],
            "query": kind.query,
            "page": 1 + draws.below(10),
            "asin": asin,
            "brand": brand,
            "product_information": {
                f"{_UNTIDY}Item model number{_UNTIDY} : {_UNTIDY}": design["model"],
                f"{_UNTIDY}Manufacturer{_UNTIDY} : {_UNTIDY}": brand,
                "Best Sellers Rank": f"#{1 + draws.below(60000):,} in {kind.path[0]}",
            },
        }

    def attribute_record(self, ordinal: int) -> dict[str, Any]:
        """Product ``ordinal``'s ``items_ins_v2*.json`` value: its attributes, and an instruction if it has goals."""
        design = self._design(ordinal)
        record: dict[str, Any] = {
            "attributes": design["attributes"],
            "instruction": None,
            "instruction_attributes": None,
        }
        goals = self._goals_by_product().get(ordinal)
        if goals:
            first = self._goal_record(ordinal, goals[0], design)
            record["instruction"] = self._instruction(design, first["instruction_attributes"], {}, goals[0])
            record["instruction_attributes"] = first["instruction_attributes"]
        return record

    def review_record(self, ordinal: int, design: dict[str, Any] | None = None) -> dict[str, Any]:
        """Product ``ordinal``'s ``reviews.json`` record (``stars`` and ``review``, as the original's file spells them)."""
        design = design or self._design(ordinal)
        kind: ProductType = design["kind"]
        draws = _Draws("reviews", GENERATOR_VERSION, self.seed, ordinal)
        reviews = []
        for _ in range(draws.below(4)):
            stars = 1 + draws.below(5)
            fill = {"noun": kind.noun, "use": kind.uses[draws.below(len(kind.uses))], "a": design["attributes"][0]}
            reviews.append(
                {
                    "title": REVIEW_TITLES[stars][draws.below(len(REVIEW_TITLES[stars]))],
                    "stars": stars,
                    "review": REVIEW_BODIES[stars][draws.below(len(REVIEW_BODIES[stars]))].format(**fill),
                }
            )
        return {"asin": design["asin"], "reviews": reviews}

    # ----------------------------------------------------------------- goals

    def _goals_by_product(self) -> dict[int, list[int]]:
        """Goal numbers by the ordinal of their product, both in increasing order."""
        if self._goal_products is None:
            by_product: dict[int, list[int]] = {}
            for number in range(self.num_goals):
                draws = _Draws("goal", GENERATOR_VERSION, self.seed, number)
                ordinal = (draws.below(65536) << 16 | draws.below(65536)) % self.num_products
                by_product.setdefault(ordinal, []).append(number)
            self._goal_products = dict(sorted(by_product.items()))
        return self._goal_products

    def _goal_record(self, ordinal: int, number: int, design: dict[str, Any]) -> dict[str, Any]:
        draws = _Draws("goal-content", GENERATOR_VERSION, self.seed, number)
        wanted = draws.pick(design["attributes"], 1 + draws.below(3))
        chosen = {}
        for name, values in design["options"].items():
            if draws.below(10) < 7:
                chosen[name] = values[draws.below(len(values))]
        shown = {name: value.strip().replace("/", " | ").lower() for name, value in chosen.items()}
        return {
            "asin": self.asin(ordinal),
            "instruction": self._instruction(design, wanted, chosen, number),
            "attributes": list(design["attributes"]),
            "options": [f"{name}: {value}" for name, value in shown.items()],
            "instruction_attributes": wanted,
            "instruction_options": list(shown.values()),
            "assignment_id": f"generated-{self.seed}-{number}",
            "worker_id": "generator",
        }

    @staticmethod
    def _instruction(design: dict[str, Any], attributes: list[str], options: dict[str, str], number: int) -> str:
        kind: ProductType = design["kind"]
        phrases = []
        for name, value in options.items():
            value = value.lower().replace("/", " and ")
            phrases.append(
                f"{value} color" if name == "color" else f"size {value}" if name == "size" else f"{value} {name}"
            )
        template = INSTRUCTIONS[number % len(INSTRUCTIONS)]
        return template.format(
            article=_article(attributes[0] if "{attributes} {noun}" in template else kind.noun),
            attributes=" and ".join(attributes),
            noun=kind.noun,
            options=f", in {' and '.join(phrases)}" if phrases else "",
        )

    def human_records(self) -> dict[str, list[dict[str, Any]]]:
        """The ``items_human_ins.json`` content: ASIN to its goal records, in catalog order."""
        return {
            self.asin(ordinal): [self._goal_record(ordinal, number, self._design(ordinal)) for number in numbers]
            for ordinal, numbers in self._goals_by_product().items()
        }

    def instructions(self, human: bool) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        for ordinal, numbers in self._goals_by_product().items():
            design = self._design(ordinal)
            if human:
                yield ordinal, [self._goal_record(ordinal, number, design) for number in numbers]
            else:
                yield ordinal, [self.attribute_record(ordinal)]

    # ----------------------------------------------------------------- products

    def _make_product(self, ordinal: int) -> Product:
        design = self._design(ordinal)
        reviews = self.review_record(ordinal, design)["reviews"]
        return parse_product(
            decode_product(self._raw(ordinal, design)), attributes=design["attributes"], reviews=reviews
        )

    def _make_listing(self, ordinal: int) -> tuple[str, str, str]:
        design = self._design(ordinal)
        return design["asin"], design["title"], parse_price(design["pricing"])[1]

    def listing(self, ordinal: int) -> tuple[str, str, str]:
        # A results page shows ten products it may never open: make only what it shows.
        return self._cached_listing(ordinal)

    def product(self, ordinal: int) -> Product:
        if not 0 <= ordinal < self.num_products:
            raise IndexError(f"product {ordinal} is outside 0..{self.num_products - 1}")
        return self._cached_product(ordinal)

    def products(self) -> Iterator[Product]:
        # A pass over a catalog larger than the cache would only churn it.
        make = self._make_product if self.num_products > self._cache_size else self.product
        for ordinal in range(self.num_products):
            yield make(ordinal)

    # ----------------------------------------------------------------- files

    def write(self, directory: str | Path) -> Path:
        """Write the catalog as the original setup's files (``items_shuffle.json``, ``items_ins_v2.json``,
        ``items_human_ins.json``, ``reviews.json``), for tools that read them; returns the directory."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        ordinals = range(self.num_products)
        contents = {
            "items_shuffle.json": [self.raw_product(i) for i in ordinals],
            "items_ins_v2.json": {self.asin(i): self.attribute_record(i) for i in ordinals},
            "items_human_ins.json": self.human_records(),
            "reviews.json": [self.review_record(i) for i in ordinals],
        }
        for name, content in contents.items():
            (directory / name).write_text(json.dumps(content, ensure_ascii=False))
        return directory
