"""``Catalog``: the products of one shop, looked up by position or ASIN, with their prices and goals.

Two kinds exist: :class:`~agentfly_envs.webshop.data.FileCatalog` reads the files of the original
setup, :class:`~agentfly_envs.webshop.generator.GeneratedCatalog` makes products offline. Both hand
their raw records to :func:`~agentfly_envs.webshop.products.parse_product`, and share what this base
class does: the price a purchase is charged and the goals (built once, see :mod:`.goals`).

A product's position (its *ordinal*) is its place in the catalog; the search index stores ordinals.

Example:
    >>> from agentfly_envs.webshop.generator import GeneratedCatalog
    >>> catalog = GeneratedCatalog(50, seed=1)
    >>> product = catalog.product(7)
    >>> catalog.ordinal(product.asin), catalog.ordinal("NOPE")
    (7, None)
    >>> product.pricing[0] <= catalog.price(7) <= product.pricing[-1]
    True
"""

from __future__ import annotations

import abc
import hashlib
import threading
from collections.abc import Iterator
from typing import Any

from agentfly_envs.webshop.goals import build_goals
from agentfly_envs.webshop.products import Product

__all__ = ["Catalog"]


class Catalog(abc.ABC):
    """Products by ordinal and ASIN, prices, goal instructions; subclasses say where products come from.

    Attributes:
        name: A readable description (the data directory, or the generator's settings).
        fingerprint: A hash of everything the search index is built from; equal catalogs share an index.
        price_seed: Seeds the draw of a price inside a ``$a to $b`` range (the original draws it unseeded).
    """

    name: str
    fingerprint: str
    price_seed: int = 0

    def __init__(self) -> None:
        self._goals: dict[bool, list[dict[str, Any]]] = {}
        self._goals_lock = threading.Lock()

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of products."""

    @abc.abstractmethod
    def product(self, ordinal: int) -> Product:
        """The product at ``ordinal`` (0 <= ordinal < len)."""

    @abc.abstractmethod
    def ordinal(self, asin: str) -> int | None:
        """The ordinal of the product with this ASIN (upper case), or None."""

    @abc.abstractmethod
    def instructions(self, human: bool) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        """Goal records by product, in catalog order.

        Args:
            human: True: the records of ``items_human_ins.json`` (each with ``instruction``,
                ``instruction_attributes``, ``instruction_options``). False: the single record of
                ``items_ins_v2*.json`` for products that have an ``instruction``.
        """

    def listing(self, ordinal: int) -> tuple[str, str, str]:
        """What a results page shows of a product: its ASIN, title and price tag."""
        product = self.product(ordinal)
        return product.asin, product.title, product.price_tag

    def products(self) -> Iterator[Product]:
        """Every product, in order."""
        for ordinal in range(len(self)):
            yield self.product(ordinal)

    def price(self, ordinal: int) -> float:
        """The price a purchase of this product is charged.

        One price is itself. For a ``$a to $b`` range the original draws a uniform price once per product
        when the shop starts, unseeded; here the draw comes from a hash of the ASIN and ``price_seed``, so
        it is the same in every process and run.
        """
        product = self.product(ordinal)
        if len(product.pricing) == 1:
            return product.pricing[0]
        low, high = product.pricing
        digest = hashlib.blake2b(f"{self.price_seed}:{product.asin}".encode(), digest_size=8).digest()
        return low + (high - low) * (int.from_bytes(digest, "little") / 2**64)

    def goals(self, human: bool = True) -> list[dict[str, Any]]:
        """The shuffled goal list (built on first use, then shared); see :func:`.goals.build_goals`."""
        with self._goals_lock:
            if human not in self._goals:
                self._goals[human] = build_goals(self, human=human)
            return self._goals[human]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, {len(self)} products)"
