"""The shop's search engine: BM25 over every product, built once per catalog and shared.

The original indexes each product with Lucene (pyserini): one ``contents`` field of title, description,
bullet points and options, analysed as pyserini's default English analyzer does (lower case, Lucene's
English stop words dropped, Porter-style stemming) and queried as a bag of words, top 50. Here tantivy
does the same (with the analyzer and query of :mod:`agentfly_envs._tantivy`, which Search-v0's index
shares), over the title, description, every bullet point (the original: the first), options and the
product's attributes.

An index is built once per catalog (keyed by :attr:`Catalog.fingerprint <agentfly_envs.webshop.catalog.Catalog.fingerprint>`)
and kept on disk, in ``cache_dir`` (see :func:`default_cache_dir`), by
:func:`~agentfly_env.resources.files.build_once`: builders take a file lock, build into a temporary
directory and rename it into place, so two processes never see a half-built index and never corrupt
each other's; an index found damaged is rebuilt. Once open, one :class:`SearchIndex` per directory serves
every env in the process; tantivy's searcher is read-only and thread-safe.

Example:
    >>> import tempfile
    >>> from agentfly_envs.webshop.generator import GeneratedCatalog
    >>> catalog = GeneratedCatalog(200, seed=3)
    >>> index = open_index(catalog, tempfile.mkdtemp())
    >>> first = catalog.product(5)
    >>> 5 in index.search(first.title)[:3]
    True
    >>> index.search("   "), index.search("the, and a"), len(index), open_index(catalog, index.path.parent) is index
    ([], [], 200, True)
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import tantivy

from agentfly_env.resources.cache_dir import cache_dir
from agentfly_env.resources.files import build_once
from agentfly_envs._tantivy import add_text_fields, any_term_query, create_index, english_analyzer, open_index_dir
from agentfly_envs.webshop.catalog import Catalog
from agentfly_envs.webshop.products import DUMMY_ATTRIBUTE, Product

__all__ = ["MAX_QUERY_TERMS", "SEARCH_RETURN_N", "SearchIndex", "default_cache_dir", "document_text", "open_index"]

#: How many results a search returns (the original's ``SEARCH_RETURN_N``).
SEARCH_RETURN_N = 50
#: Words of a query beyond this many are ignored, so a 100 kB "query" costs what a sentence costs.
MAX_QUERY_TERMS = 64
#: Bump when the documents or the schema change; old index directories are then left unused. (3: the
#: analyzer is registered under the name it has in Search-v0's indexes; it analyses as before.)
SCHEMA_VERSION = 3
MANIFEST = "agentfly-webshop-index.json"


def default_cache_dir() -> Path:
    """Where indexes live unless the env is told: ``$AGENTFLY_WEBSHOP_CACHE_DIR``, else ``webshop`` in
    the AgentFly cache (``$AGENTFLY_CACHE_DIR``, else ``~/.cache/agentfly``; see
    :func:`~agentfly_env.resources.cache_dir.cache_dir`)."""
    return cache_dir("webshop", "AGENTFLY_WEBSHOP_CACHE_DIR")


def document_text(product: Product) -> str:
    """What a product is found by: title, description, bullet points, options and attributes."""
    options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product.options.items())
    attributes = ", ".join(a for a in product.attributes if a != DUMMY_ATTRIBUTE)
    return " ".join((product.title, product.description, *product.bullet_points, options, attributes))


def _schema() -> tantivy.Schema:
    builder = add_text_fields(tantivy.SchemaBuilder(), "contents", stored=False)
    builder.add_unsigned_field("ordinal", stored=False, indexed=False, fast=True)
    return builder.build()


class SearchIndex:
    """An open index: keywords in, product ordinals out (best first).

    Build or find one with :func:`open_index` rather than directly.

    Args:
        path: The index directory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.manifest = json.loads((path / MANIFEST).read_text())
        self._index = open_index_dir(path)
        self._analyzer = english_analyzer()
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        if self._searcher.num_docs != self.manifest["num_docs"]:
            raise ValueError(
                f"{path} holds {self._searcher.num_docs} documents, its manifest says {self.manifest['num_docs']}"
            )

    def __len__(self) -> int:
        return self._searcher.num_docs

    def search(self, keywords: str, limit: int = SEARCH_RETURN_N) -> list[int]:
        """The ordinals of the ``limit`` best products for ``keywords`` (BM25, any word may match).

        The keywords are analysed as the documents are (punctuation splits words, stop words match
        nothing); only the first :data:`MAX_QUERY_TERMS` words count. Ties are broken by ordinal, so the
        results do not depend on how the index happened to be segmented.
        """
        words = keywords.split(maxsplit=MAX_QUERY_TERMS)[:MAX_QUERY_TERMS]
        terms = self._analyzer.analyze(" ".join(words))[:MAX_QUERY_TERMS]
        if not terms:  # nothing but punctuation and stop words
            return []
        hits = self._searcher.search(any_term_query(self._schema, ("contents",), terms), limit, count=False).hits
        ordinals = self._searcher.fast_field_values("ordinal", [address for _, address in hits])
        ranked = sorted(zip(hits, ordinals, strict=True), key=lambda pair: (-pair[0][0], pair[1]))
        return [ordinal for _, ordinal in ranked]


def _build(catalog: Catalog, directory: Path) -> None:
    """Index every product of ``catalog`` into ``directory`` (made here) and write its manifest.

    The manifest records the build time and, within it, the time spent making the documents (reading or
    generating products), so the indexing cost can be told apart from the catalog's.
    """
    started = time.perf_counter()
    directory.mkdir()
    index = create_index(_schema(), directory)
    # One thread writes the documents in ordinal order into one segment (up to the heap's worth), so two
    # builds of a catalog are the same index and equal scores rank the same everywhere; Python makes
    # the documents slower than one indexing thread consumes them anyway.
    writer = index.writer(512_000_000, 1)
    products = iter(catalog.products())
    count, documents_s = 0, 0.0
    while True:
        before = time.perf_counter()
        product = next(products, None)
        if product is None:
            break
        text = document_text(product)
        documents_s += time.perf_counter() - before
        document = tantivy.Document()
        document.add_text("contents", text)
        document.add_unsigned("ordinal", count)
        writer.add_document(document)
        count += 1
    writer.commit()
    writer.wait_merging_threads()
    manifest = {
        "fingerprint": catalog.fingerprint,
        "schema_version": SCHEMA_VERSION,
        "num_docs": count,
        "catalog": catalog.name,
        "build_s": round(time.perf_counter() - started, 3),
        "documents_s": round(documents_s, 3),
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))


def _is_built(path: Path, catalog: Catalog) -> bool:
    """Whether ``path`` holds a complete index of this catalog (not a damaged one, nor another's)."""
    try:
        manifest = SearchIndex(path).manifest
    except (OSError, ValueError, KeyError):
        return False
    return manifest.get("fingerprint") == catalog.fingerprint and manifest.get("schema_version") == SCHEMA_VERSION


_OPEN: dict[Path, SearchIndex] = {}
_OPEN_LOCK = threading.Lock()


def open_index(catalog: Catalog, cache_dir: str | os.PathLike[str] | None = None) -> SearchIndex:
    """The search index of ``catalog``: already open in this process, on disk, or built now.

    Args:
        catalog: The products to search.
        cache_dir: Where indexes are kept (default: :func:`default_cache_dir`).

    Raises:
        OSError: when the cache directory cannot be created or written.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = (cache / f"index-v{SCHEMA_VERSION}-{catalog.fingerprint[:32]}").absolute()
    with _OPEN_LOCK:  # one build per process at a time; other processes wait on build_once's file lock
        if final not in _OPEN:
            # An index there that is not usable (half-deleted, damaged by hand) is built again over it.
            build_once(final, lambda staging: _build(catalog, staging), built=lambda path: _is_built(path, catalog))
            _OPEN[final] = SearchIndex(final)
        return _OPEN[final]
