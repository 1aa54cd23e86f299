"""The BM25 index: tantivy on disk, built once per corpus, shared read-only by every env and process.

:func:`ensure_index` maps a corpus to ``<index_dir>/bm25-v<format>-<fingerprint>``, building it on first use
and opening it afterwards; :func:`open_index` keeps one open handle per index and process, so a
thousand envs share one memory map (and, through the OS page cache, every process on the machine
shares the same pages).

**Building wiki-18 (21M passages, about 13 GB of JSONL) in bounded memory.**

1. *Key.* The corpus fingerprint is a streaming BLAKE2b of the file (1 MiB chunks), memoised on disk
   by path, size and mtime, so later processes skip the hashing pass.
2. *Once.* Builders of one corpus take an exclusive ``flock`` on ``.<name>.lock``; the others block,
   then open what the first one built. 64 processes starting together index the corpus once.
3. *Stream.* Passages are read and parsed one line at a time; Python holds one passage at a time.
4. *Bounded writer.* tantivy's ``IndexWriter`` buffers documents in a fixed budget (``heap_mb``,
   split across its threads) and flushes a segment to disk whenever the budget fills, so the
   writer's memory is ``heap_mb`` whether the corpus has 10k or 21M passages.
5. *Merges.* tantivy's log merge policy merges segments in background threads, streaming from disk;
   the build waits for them before it ends, so queries see few, large segments.
6. *Size.* Title and text are stored in tantivy's compressed document store (no second copy of the
   corpus); postings keep term frequencies but no positions (``index_option="freq"``): BM25 needs no
   phrase queries, and positions would be the largest part of the index. English stop words are
   not indexed (nor searched), and words are Porter-stemmed, as in Pyserini's default analyzer
   (:mod:`agentfly_envs._tantivy`, which WebShop's index shares).
7. *Atomic.* Everything is written into a temp dir beside the target and renamed into place after the
   last commit, with ``agentfly-index.json`` (counts, timing, fingerprint), by
   :func:`agentfly_env.resources.files.build_once`. Readers never see a partial index; a builder that died leaves
   a temp dir the next builder removes.

The search suite of ``agentfly-bench`` measures build time, size and query latency at 100k and 1M
passages; 21M scales about linearly in time and size (the writer's memory stays ``heap_mb``).

Example:
    >>> import tempfile
    >>> from agentfly_envs.search.generate import Encyclopedia
    >>> world = Encyclopedia(num_entities=60, seed=0)
    >>> index = ensure_index(world.corpus(), tempfile.mkdtemp(), progress=False)
    >>> hit = index.search("Which river flows through " + world.name("city", 3), k=1)[0]
    >>> hit.title == world.name("city", 3), index.num_docs
    (True, 60)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import tantivy
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from agentfly_env.resources.cache_dir import cache_dir
from agentfly_env.resources.files import build_once
from agentfly_envs._tantivy import (
    MAX_TOKEN_BYTES,
    STOP_WORDS,
    add_text_fields,
    any_term_query,
    create_index,
    english_analyzer,
    open_index_dir,
)
from agentfly_envs.search.corpus import CorpusSource

__all__ = [
    "INDEX_DIR_ENV",
    "BM25Index",
    "Hit",
    "default_index_dir",
    "ensure_index",
    "open_index",
    "query_terms",
]

#: Environment variable naming the directory where indexes are built and shared.
INDEX_DIR_ENV = "AGENTFLY_SEARCH_INDEX_DIR"
#: Bump when the schema or layout changes: old indexes are then left alone, new ones built.
INDEX_FORMAT = 2
META_FILE = "agentfly-index.json"
#: Query words beyond this are dropped: a pasted page must not become a 10,000-term query.
MAX_QUERY_TERMS = 64
#: Indexes with more passages than this are searched on a worker thread, off the event loop.
THREADED_SEARCH_ABOVE = 200_000


class Hit(msgspec.Struct, frozen=True):
    """One retrieved passage with its score and its row (its position in the corpus)."""

    id: str
    title: str
    text: str
    score: float
    row: int


def default_index_dir() -> Path:
    """``$AGENTFLY_SEARCH_INDEX_DIR``, else ``search`` in the AgentFly cache (``$AGENTFLY_CACHE_DIR``,
    else ``~/.cache/agentfly``; see :func:`~agentfly_env.resources.cache_dir.cache_dir`)."""
    return cache_dir("search", INDEX_DIR_ENV)


def query_terms(query: str) -> list[str]:
    """The words of a free-text query, lower-cased: runs of letters and digits, as the analyzer splits
    them (query syntax and underscores are separators).

    Example:
        >>> query_terms('title:"Velmouth" AND (population OR -river) Shirley_Temple')
        ['title', 'velmouth', 'and', 'population', 'or', 'river', 'shirley', 'temple']
    """
    return re.findall(r"[^\W_]+", query.lower())[:MAX_QUERY_TERMS]


#: The fields a query searches.
SEARCHED_FIELDS = ("title", "text")


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    add_text_fields(builder, *SEARCHED_FIELDS, stored=True)
    builder.add_unsigned_field("row", stored=True, indexed=True)
    return builder.build()


class BM25Index:
    """An open, read-only tantivy BM25 index over ``title`` and ``text``. Get one with :func:`open_index`.

    Args:
        path: An index directory made by :func:`ensure_index`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.meta = json.loads((self.path / META_FILE).read_text())
        self._index = open_index_dir(self.path)
        self._analyzer = english_analyzer()
        self._schema = self._index.schema
        self._searcher = self._index.searcher()
        self.num_docs: int = self._searcher.num_docs
        self.threaded = self.num_docs > THREADED_SEARCH_ABOVE

    def __repr__(self) -> str:
        return f"BM25Index({str(self.path)!r}, num_docs={self.num_docs})"

    def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` best passages for a free-text query, best first.

        Raises:
            ValueError: when the query has no searchable word: none at all, only stop words, or only
                words too long to be indexed.
        """
        words = query_terms(query)
        if not words:
            raise ValueError("the query has no searchable words; write a few keywords")
        terms = self._analyzer.analyze(" ".join(words))
        if not terms:
            if all(word in STOP_WORDS for word in words):
                raise ValueError("the query has only common words; add names or keywords")
            raise ValueError(
                f"the query's words are common words or too long to be indexed ({MAX_TOKEN_BYTES} bytes or "
                "more); write a few keywords"
            )
        result = self._searcher.search(any_term_query(self._schema, SEARCHED_FIELDS, terms), k, count=False)
        return [self._hit(address, score) for score, address in result.hits]

    def by_row(self, row: int, score: float = 0.0) -> Hit:
        """The passage at position ``row`` of the corpus.

        Raises:
            IndexError: when there is no such row.
        """
        result = self._searcher.search(tantivy.Query.term_query(self._schema, "row", row), 1, count=False)
        if not result.hits:
            raise IndexError(f"row {row} is not in the index ({self.num_docs} passages)")
        return self._hit(result.hits[0][1], score)

    def _hit(self, address: tantivy.DocAddress, score: float) -> Hit:
        document = self._searcher.doc(address)
        return Hit(
            document.get_first("id"),
            document.get_first("title"),
            document.get_first("text"),
            float(score),
            int(document.get_first("row")),
        )


_OPEN: dict[Path, BM25Index] = {}
_OPEN_LOCK = threading.Lock()


def open_index(path: str | os.PathLike[str]) -> BM25Index:
    """The process-wide handle of an index directory (opened on first use)."""
    resolved = Path(path).resolve()
    with _OPEN_LOCK:
        index = _OPEN.get(resolved)
        if index is None:
            index = _OPEN[resolved] = BM25Index(resolved)
        return index


def progress_bar(source: CorpusSource, task: str, enabled: bool | None) -> Progress:
    """A rich progress bar on stderr for a pass over ``source`` (shown on a terminal when None)."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    amount = DownloadColumn() if source.unit == "B" else MofNCompleteColumn()
    columns = [
        SpinnerColumn(),
        TextColumn(f"{task} [bold]{source.description}[/]"),
        BarColumn(),
        amount,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    return Progress(*columns, console=Console(stderr=True), disable=not enabled)


def build_atomically(index_dir: Path, name: str, build: Callable[[Path], None]) -> Path:
    """Build ``index_dir/name`` once across processes: lock, build into a temp dir, rename.

    ``build(temp_dir)`` writes the files; it is skipped when another process finished first.
    """

    def build_folder(scratch: Path) -> None:
        # Temp dirs that builders before agentfly_env.resources.files named `.building-*` and left when they died.
        for stale in index_dir.glob(f".{name}.building-*"):
            shutil.rmtree(stale, ignore_errors=True)
        scratch.mkdir()
        build(scratch)

    return build_once(index_dir / name, build_folder, built=lambda final: (final / META_FILE).is_file())


def ensure_index(
    source: CorpusSource,
    index_dir: str | os.PathLike[str] | None = None,
    *,
    heap_mb: int = 256,
    threads: int | None = None,
    progress: bool | None = None,
) -> BM25Index:
    """Open the BM25 index of ``source``, building it first if no process has.

    Args:
        source: The corpus (a :class:`~agentfly_envs.search.corpus.CorpusFile`, a generated one, ...).
        index_dir: Where indexes live (default: :func:`default_index_dir`).
        heap_mb: The writer's memory budget for a build, split across its threads.
        threads: Indexing threads (default: up to 4, at most the CPU count).
        progress: Show a progress bar while building (None: only on a terminal).
    """
    index_dir = Path(index_dir) if index_dir is not None else default_index_dir()
    fingerprint = source.fingerprint(index_dir)
    name = f"bm25-v{INDEX_FORMAT}-{fingerprint}"
    threads = threads or min(4, os.cpu_count() or 1)

    def build(directory: Path) -> None:
        started = time.perf_counter()
        index = create_index(_schema(), directory)
        # tantivy needs at least 15 MB per thread; fewer threads beat a refused budget.
        threads_used = max(1, min(threads, heap_mb // 16))
        writer = index.writer(heap_size=heap_mb * 1_000_000, num_threads=threads_used)
        count = 0
        with progress_bar(source, "indexing", progress) as bar:
            task = bar.add_task("index", total=source.total)
            for passage in source.stream(lambda amount: bar.advance(task, amount)):
                document = tantivy.Document()
                document.add_text("id", passage.id)
                document.add_text("title", passage.title)
                document.add_text("text", passage.text)
                document.add_unsigned("row", count)
                writer.add_document(document)
                count += 1
        if count == 0:
            raise ValueError(f"{source.description}: the corpus has no passages")
        writer.commit()
        writer.wait_merging_threads()
        meta = {
            "format": INDEX_FORMAT,
            "fingerprint": fingerprint,
            "corpus": source.description,
            "passages": count,
            "build_seconds": round(time.perf_counter() - started, 3),
        }
        (directory / META_FILE).write_text(json.dumps(meta, indent=2))

    return open_index(build_atomically(index_dir, name, build))
