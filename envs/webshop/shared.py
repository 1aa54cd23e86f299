"""What every WebShop env in a process shares: one catalog per data setting (and, through it, one index).

Making the 64th env of a batch costs what a reset costs: the catalog is looked up here, its index in
:func:`~agentfly_envs.webshop.index.open_index`'s table.

Example:
    >>> shared_catalog(num_products=100) is shared_catalog(num_products=100)
    True
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from agentfly_envs.webshop.catalog import Catalog
from agentfly_envs.webshop.data import DATA_DIR_ENV, FileCatalog, Variant
from agentfly_envs.webshop.generator import GeneratedCatalog

__all__ = ["DEFAULT_NUM_GOALS", "DEFAULT_NUM_PRODUCTS", "shared_catalog"]

#: Products in the default generated catalog (the original's ``-d small`` has 1,000).
DEFAULT_NUM_PRODUCTS = 1000
#: Goals in a generated catalog: enough for the original's test/eval/train cut (500/1,000/rest).
DEFAULT_NUM_GOALS = 3000

_CATALOGS: dict[tuple[object, ...], Catalog] = {}
_LOCK = threading.Lock()


def shared_catalog(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    data_variant: Variant = "auto",
    num_products: int | None = None,
    catalog_seed: int = 0,
    num_goals: int = DEFAULT_NUM_GOALS,
    price_seed: int = 0,
) -> Catalog:
    """The catalog for these settings, made on first use.

    Args:
        data_dir: A directory with the original data files; default ``$AGENTFLY_WEBSHOP_DATA``; when
            neither is set, a generated catalog.
        data_variant: Which files of the directory (see :func:`~agentfly_envs.webshop.data.find_data_files`).
        num_products: Products to read from the files (default all), or to generate (default 1,000).
        catalog_seed: The generated catalog's seed.
        num_goals: The generated catalog's number of goals.
        price_seed: Seeds price draws inside ranges and the goals' price caps.
    """
    directory = data_dir or os.environ.get(DATA_DIR_ENV) or None
    size = num_products or DEFAULT_NUM_PRODUCTS
    key: tuple[object, ...]
    if directory is not None:
        key = ("files", str(Path(directory).expanduser().resolve()), data_variant, num_products, price_seed)
    else:
        key = ("generated", size, catalog_seed, num_goals, price_seed)
    with _LOCK:
        catalog = _CATALOGS.get(key)
        if catalog is None:
            if directory is not None:
                catalog = FileCatalog(directory, variant=data_variant, num_products=num_products, price_seed=price_seed)
            else:
                catalog = GeneratedCatalog(size, seed=catalog_seed, num_goals=num_goals, price_seed=price_seed)
            _CATALOGS[key] = catalog
        return catalog
