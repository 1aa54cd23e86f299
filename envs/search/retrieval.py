"""Retrievers behind one interface, and how their results read to a model.

* :class:`BM25Retriever`: the tantivy index (the default; no model, sub-millisecond queries).
* :class:`DenseRetriever`: cosine search over sentence embeddings (loads torch on first use).
* :class:`HybridRetriever`: both, fused by reciprocal rank (RRF, k=60): robust to their different
  score scales, and what most hybrid search systems do.

:func:`format_hits` writes results as the model sees them, with ids and titles, each passage cut to
a configurable length; :func:`parse_hits` reads them back (for scripted policies and tests).

Example:
    >>> import asyncio, tempfile
    >>> from agentfly_envs.search.generate import Encyclopedia
    >>> from agentfly_envs.search.index import ensure_index
    >>> world = Encyclopedia(num_entities=60, seed=0)
    >>> retriever = BM25Retriever(ensure_index(world.corpus(), tempfile.mkdtemp(), progress=False))
    >>> hits = asyncio.run(retriever.search("Who founded " + world.name("organisation", 2), k=2))
    >>> print(format_hits(hits[:1], passage_chars=40))
    Doc 1 [id 14] (Title: Waigrox Guild)
    Waigrox Guild opened its doors in 191...
    >>> parse_hits(format_hits(hits, 600))[0].title
    'Waigrox Guild'
"""

from __future__ import annotations

import abc
import asyncio
import os
import re
from collections.abc import Sequence
from typing import Literal

from agentfly_envs.search.corpus import CorpusSource
from agentfly_envs.search.index import BM25Index, Hit

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "HybridRetriever",
    "Retriever",
    "format_hits",
    "make_retriever",
    "parse_hits",
]

RetrievalMode = Literal["bm25", "dense", "hybrid"]
#: The constant of reciprocal rank fusion (Cormack et al., 2009).
RRF_K = 60
_HEADER = re.compile(r"^Doc (\d+) \[id (.*?)\] \(Title: (.*)\)$", re.MULTILINE)


class Retriever(abc.ABC):
    """Finds passages for a free-text query.

    Attributes:
        name: Identifies the method and model; part of the cache scope, so results of different
            retrievers are never mixed up.
    """

    name: str

    @abc.abstractmethod
    async def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` best passages, best first.

        Raises:
            ValueError: for a query with nothing to search for (the model is told).
        """


class BM25Retriever(Retriever):
    """BM25 over the tantivy index; large indexes are searched on a worker thread.

    Args:
        index: An open index (see :func:`~agentfly_envs.search.index.ensure_index`).
    """

    name = "bm25"

    def __init__(self, index: BM25Index) -> None:
        self.index = index

    async def search(self, query: str, k: int) -> list[Hit]:
        if self.index.threaded:
            return await asyncio.to_thread(self.index.search, query, k)
        return self.index.search(query, k)


class DenseRetriever(Retriever):
    """Exact cosine search over passage embeddings; passages are read from the BM25 index.

    Args:
        index: The BM25 index of the same corpus (it stores the passages).
        source: The corpus, to embed on first use.
        model: The embedding model (see :mod:`agentfly_envs.search.dense`).
        index_dir: Where the embeddings are kept.
        device: Torch device for the model.
        progress: Show a progress bar while embedding (None: only on a terminal).
    """

    def __init__(
        self,
        index: BM25Index,
        source: CorpusSource,
        model: str | None = None,
        index_dir: str | os.PathLike[str] | None = None,
        device: str | None = None,
        progress: bool | None = None,
    ) -> None:
        from agentfly_envs.search import dense  # torch comes in here, and only here

        self.index = index
        self.encoder = dense.load_encoder(model or dense.DEFAULT_MODEL, device)
        self.embeddings = dense.ensure_dense_index(source, self.encoder, index.num_docs, index_dir, progress=progress)
        self.name = f"dense:{self.encoder.name}"

    def _search(self, query: str, k: int) -> list[Hit]:
        if not query.strip():
            raise ValueError("the query is empty; write a few keywords")
        vector = self.encoder.encode([query])[0]
        return [self.index.by_row(row, score) for row, score in self.embeddings.search(vector, k)]

    async def search(self, query: str, k: int) -> list[Hit]:
        return await asyncio.to_thread(self._search, query, k)  # a model call: keep the event loop free


class HybridRetriever(Retriever):
    """BM25 and dense results fused by reciprocal rank; the score is the fused one.

    Args:
        sparse: The BM25 retriever.
        dense: The dense retriever over the same corpus.
        depth: Candidates taken from each before fusing, at least ``k``.
    """

    def __init__(self, sparse: BM25Retriever, dense: DenseRetriever, depth: int = 20) -> None:
        self.sparse, self.dense, self.depth = sparse, dense, depth
        self.name = f"hybrid:{dense.name}"

    async def search(self, query: str, k: int) -> list[Hit]:
        depth = max(k, self.depth)
        ranked = await asyncio.gather(self.sparse.search(query, depth), self.dense.search(query, depth))
        fused: dict[int, float] = {}
        passages: dict[int, Hit] = {}
        for hits in ranked:
            for rank, hit in enumerate(hits, 1):
                fused[hit.row] = fused.get(hit.row, 0.0) + 1.0 / (RRF_K + rank)
                passages.setdefault(hit.row, hit)
        best = sorted(fused, key=lambda row: (-fused[row], row))[:k]
        return [Hit(passages[row].id, passages[row].title, passages[row].text, fused[row], row) for row in best]


def make_retriever(
    mode: RetrievalMode,
    index: BM25Index,
    source: CorpusSource,
    *,
    model: str | None = None,
    index_dir: str | os.PathLike[str] | None = None,
    device: str | None = None,
    progress: bool | None = None,
) -> Retriever:
    """The retriever for a mode: ``"bm25"``, ``"dense"`` or ``"hybrid"`` (see the classes for the rest)."""
    if mode == "bm25":
        return BM25Retriever(index)
    if mode not in ("dense", "hybrid"):
        raise ValueError(f"retrieval must be 'bm25', 'dense' or 'hybrid', got {mode!r}")
    dense = DenseRetriever(index, source, model, index_dir, device, progress)
    return dense if mode == "dense" else HybridRetriever(BM25Retriever(index), dense)


def shorten(text: str, limit: int) -> str:
    """Collapse white space and cut to ``limit`` characters, marking a cut with ``...``."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."


def format_hits(hits: Sequence[Hit], passage_chars: int) -> str:
    """Results as the model reads them: ``Doc i [id ID] (Title: T)`` and the passage, cut to length."""
    if not hits:
        return "No passages matched the query. Try other keywords."
    return "\n\n".join(
        f"Doc {number} [id {hit.id}] (Title: {hit.title})\n{shorten(hit.text, passage_chars)}"
        for number, hit in enumerate(hits, 1)
    )


def parse_hits(text: str) -> list[Hit]:
    """Read :func:`format_hits` output back (scores and rows are not shown, so they come back 0)."""
    headers = list(_HEADER.finditer(text))
    hits = []
    for position, header in enumerate(headers):
        end = headers[position + 1].start() if position + 1 < len(headers) else len(text)
        hits.append(Hit(header.group(2), header.group(3), text[header.end() : end].strip(), 0.0, 0))
    return hits
