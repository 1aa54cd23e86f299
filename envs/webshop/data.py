"""Load the product data of the original WebShop setup from a directory the user gives.

The original ``setup.sh`` downloads, into one directory:

* ``items_shuffle_1000.json`` (``-d small``) or ``items_shuffle.json`` (``-d all``): a JSON list of raw
  product records (see :mod:`.products`);
* ``items_ins_v2_1000.json`` or ``items_ins_v2.json``: an object of ASIN to ``{"attributes": [...],
  "instruction": ..., "instruction_attributes": [...]}``, the products' attributes and synthetic goals;
* ``items_human_ins.json``: an object of ASIN to a list of human goal records (``instruction``,
  ``instruction_attributes``, ``instruction_options``, ``assignment_id``, ...).

An optional ``reviews.json`` (a list of ``{"asin", "reviews", "average_rating"}``, as an early version of
the original read) adds reviews and ratings. The loader keeps the original's rules: only the first
``num_products`` records, records whose ASIN is ``"nan"`` or longer than 10 characters skipped, a repeated
ASIN kept once. A missing or malformed file raises :class:`~.products.DataError` naming the file and
what is wrong with it.

Example:
    >>> import tempfile
    >>> from agentfly_envs.webshop.generator import GeneratedCatalog
    >>> directory = GeneratedCatalog(30, seed=5, num_goals=40).write(tempfile.mkdtemp())
    >>> catalog = FileCatalog(directory)
    >>> len(catalog), catalog.product(0) == GeneratedCatalog(30, seed=5).product(0)
    (30, True)
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

import msgspec

from agentfly_envs.webshop.catalog import Catalog
from agentfly_envs.webshop.products import DataError, Product, RawProduct, parse_product

__all__ = ["DATA_DIR_ENV", "DataFiles", "FileCatalog", "find_data_files"]

#: The environment variable that names the data directory when the env is not given one.
DATA_DIR_ENV = "AGENTFLY_WEBSHOP_DATA"
PRODUCT_FILES = {"small": "items_shuffle_1000.json", "all": "items_shuffle.json"}
ATTRIBUTE_FILES = {"small": "items_ins_v2_1000.json", "all": "items_ins_v2.json"}
HUMAN_GOALS_FILE = "items_human_ins.json"
REVIEWS_FILE = "reviews.json"

Variant = Literal["auto", "small", "all"]


class AttributeRecord(msgspec.Struct):
    """One value of ``items_ins_v2*.json``."""

    attributes: list[str] | None = None
    instruction: str | None = None
    instruction_attributes: list[str] | None = None


class HumanGoalRecord(msgspec.Struct):
    """One record of ``items_human_ins.json`` (other fields, such as ``worker_id``, are ignored)."""

    instruction: str
    instruction_attributes: list[str]
    instruction_options: list[str] = msgspec.field(default_factory=list)


class ReviewsRecord(msgspec.Struct):
    """One record of ``reviews.json``."""

    asin: str
    reviews: list[dict[str, Any]] = msgspec.field(default_factory=list)
    average_rating: float | str | None = None


class DataFiles(NamedTuple):
    """The files of one data directory (``human_goals`` and ``reviews`` may not exist)."""

    products: Path
    attributes: Path
    human_goals: Path
    reviews: Path


def find_data_files(directory: str | os.PathLike[str], variant: Variant = "auto") -> DataFiles:
    """The data files in ``directory``.

    Args:
        directory: Where ``setup.sh`` put the files.
        variant: ``"small"`` (the ``_1000`` files), ``"all"``, or ``"auto"``: small when present (the
            original's default), else all.

    Raises:
        DataError: the directory or its product or attribute file is missing.
    """
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise DataError(
            f"{root}: not a directory (the WebShop data directory; set it with data_dir= or ${DATA_DIR_ENV})"
        )
    if variant not in ("auto", "small", "all"):
        raise ValueError(f"data_variant must be 'auto', 'small' or 'all', got {variant!r}")
    if variant == "auto":
        variant = "small" if (root / PRODUCT_FILES["small"]).exists() else "all"
    files = DataFiles(
        root / PRODUCT_FILES[variant], root / ATTRIBUTE_FILES[variant], root / HUMAN_GOALS_FILE, root / REVIEWS_FILE
    )
    for path in (files.products, files.attributes):
        if not path.is_file():
            raise DataError(f"{path}: file not found (expected the original setup's {path.name} in {root})")
    return files


def _decode(path: Path, data: bytes, shape: type) -> Any:
    """``data`` (the bytes of ``path``) as JSON of the given top-level ``shape`` (list or dict)."""
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise DataError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(value, shape):
        expected = "a JSON list" if shape is list else "a JSON object"
        raise DataError(f"{path}: expected {expected} at the top level, got {type(value).__name__}")
    return value


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot read ({error.strerror or error})") from None


def _convert(path: Path, where: str, value: Any, kind: type) -> Any:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as error:
        raise DataError(f"{path}: {where}: {error}") from None


class FileCatalog(Catalog):
    """The products and goals of an original WebShop data directory.

    Args:
        directory: The data directory (see :func:`find_data_files`).
        variant: ``"auto"``, ``"small"`` or ``"all"`` (which product and attribute files to read).
        num_products: Read only the first this many product records (the original's ``num_products``).
        price_seed: Seeds price draws inside ranges and the goals' price caps.

    Raises:
        DataError: a file is missing, is not valid JSON, or holds a record of the wrong shape.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        variant: Variant = "auto",
        num_products: int | None = None,
        price_seed: int = 0,
    ) -> None:
        super().__init__()
        self.files = find_data_files(directory, variant)
        self.name = str(self.files.products.parent)
        self.price_seed = price_seed
        product_bytes, attribute_bytes = _read(self.files.products), _read(self.files.attributes)
        digest = hashlib.blake2b(digest_size=16)
        for part in (product_bytes, attribute_bytes, str(num_products).encode()):
            digest.update(hashlib.blake2b(part).digest())
        self.fingerprint = digest.hexdigest()

        records = _decode(self.files.products, product_bytes, list)
        del product_bytes
        attributes = {
            asin: _convert(self.files.attributes, f"entry {asin!r}", value, AttributeRecord)
            for asin, value in _decode(self.files.attributes, attribute_bytes, dict).items()
        }
        self._attributes = attributes
        reviews = self._read_reviews()
        if num_products is not None:
            records = records[:num_products]
        self._products: list[Product] = []
        self._ordinals: dict[str, int] = {}
        for number, record in enumerate(records):
            if not isinstance(record, dict):
                raise DataError(
                    f"{self.files.products}: product {number}: expected an object, got {type(record).__name__}"
                )
            raw = _convert(self.files.products, f"product {number} (asin {record.get('asin')!r})", record, RawProduct)
            if raw.asin == "nan" or len(raw.asin) > 10 or raw.asin in self._ordinals:
                continue
            entry = attributes.get(raw.asin)
            review = reviews.get(raw.asin)
            try:
                product = parse_product(
                    raw,
                    attributes=entry.attributes if entry else None,
                    reviews=review.reviews if review else None,
                    rating=review.average_rating if review else None,
                )
            except ValueError as error:
                raise DataError(f"{self.files.products}: product {number} (asin {raw.asin!r}): {error}") from None
            self._ordinals[raw.asin] = len(self._products)
            self._products.append(product)
        if not self._products:
            raise DataError(f"{self.files.products}: no usable product records")
        self._human: dict[str, list[HumanGoalRecord]] | None = None

    def _read_reviews(self) -> dict[str, ReviewsRecord]:
        if not self.files.reviews.is_file():
            return {}
        records = _decode(self.files.reviews, _read(self.files.reviews), list)
        converted = (
            _convert(self.files.reviews, f"record {number}", value, ReviewsRecord)
            for number, value in enumerate(records)
        )
        return {record.asin: record for record in converted}

    def _human_goals(self) -> dict[str, list[HumanGoalRecord]]:
        if self._human is None:
            path = self.files.human_goals
            if not path.is_file():
                raise DataError(f"{path}: file not found (human goals need it; or use human_goals=False)")
            content = _decode(path, _read(path), dict)
            self._human = {
                asin: _convert(path, f"entry {asin!r}", value, list[HumanGoalRecord]) for asin, value in content.items()
            }
        return self._human

    def __len__(self) -> int:
        return len(self._products)

    def product(self, ordinal: int) -> Product:
        return self._products[ordinal]

    def products(self) -> Iterator[Product]:
        return iter(self._products)

    def ordinal(self, asin: str) -> int | None:
        return self._ordinals.get(asin)

    def instructions(self, human: bool) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        human_goals = self._human_goals() if human else {}
        for ordinal, product in enumerate(self._products):
            if human:
                if product.asin in human_goals:
                    yield ordinal, [msgspec.to_builtins(record) for record in human_goals[product.asin]]
            else:
                entry = self._attributes.get(product.asin)
                if entry is not None and entry.instruction is not None:
                    yield ordinal, [msgspec.to_builtins(entry)]
