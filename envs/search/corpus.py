"""Passages in the wiki-18 JSONL layout that Search-R1 and FlashRAG use, read as a stream.

One JSON object a line: ``{"id": "0", "contents": "\\"Title\\"\\ntext"}``: the title in double quotes
on the first line of ``contents``, the passage text after it. Lines with separate ``title`` and
``text`` fields (and no ``contents``) are accepted too. ``.jsonl.gz`` files are read compressed.

Nothing here holds a corpus in memory: :func:`iter_corpus` yields one :class:`Passage` at a time,
and :func:`corpus_fingerprint` hashes the file in 1 MiB chunks (memoised by path, size and
modification time), so the 21M passages of wiki-18 stream in bounded memory.

Example:
    >>> from importlib.resources import files
    >>> path = files("agentfly_envs.search") / "data" / "example_corpus.jsonl"
    >>> first = next(iter_corpus(path))
    >>> first.id, first.title
    ('0', 'Velmouth')
    >>> format_contents(first.title, "A city.")
    '"Velmouth"\\nA city.'
"""

from __future__ import annotations

import abc
import gzip
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

import msgspec

from agentfly_env.resources.files import atomic_path

__all__ = [
    "CorpusFile",
    "CorpusFormatError",
    "CorpusSource",
    "Passage",
    "corpus_fingerprint",
    "decode_passage",
    "format_contents",
    "iter_corpus",
    "open_text_file",
    "parse_contents",
    "write_corpus",
]


class CorpusFormatError(ValueError):
    """A corpus or QA file is not in the expected layout; the message names the file and line."""


class Passage(msgspec.Struct, frozen=True):
    """One retrievable passage.

    Attributes:
        id: The corpus id (a string; numeric ids are converted).
        title: The article title.
        text: The passage text, without the title.
    """

    id: str
    title: str
    text: str


class _Line(msgspec.Struct):
    """A raw corpus line; either ``contents`` or ``title`` + ``text`` must be present."""

    id: str | int
    contents: str | None = None
    title: str | None = None
    text: str | None = None


_DECODER = msgspec.json.Decoder(_Line)
_ENCODER = msgspec.json.Encoder()


def parse_contents(contents: str) -> tuple[str, str]:
    """Split wiki-18 ``contents`` into ``(title, text)``; the title loses its surrounding quotes."""
    title, _, text = contents.partition("\n")
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text.strip()


def format_contents(title: str, text: str) -> str:
    """Write ``(title, text)`` as wiki-18 ``contents``."""
    return f'"{title}"\n{text}'


def open_text_file(path: str | os.PathLike[str], mode: str = "rb") -> IO[bytes]:
    """Open a possibly gzip-compressed file (by its ``.gz`` suffix) in binary mode."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, mode)  # type: ignore[return-value]
    return path.open(mode)  # type: ignore[return-value]


def decode_passage(line: bytes, where: str) -> Passage:
    """Decode one corpus line.

    Raises:
        CorpusFormatError: naming ``where`` (``path:line``) and what is wrong.
    """
    try:
        raw = _DECODER.decode(line)
    except msgspec.ValidationError as error:
        raise CorpusFormatError(f'{where}: not a corpus passage ({error}); expected {{"id", "contents"}}') from None
    except msgspec.DecodeError as error:
        raise CorpusFormatError(f"{where}: not valid JSON ({error})") from None
    if raw.contents is not None:
        title, text = parse_contents(raw.contents)
    elif raw.title is not None and raw.text is not None:
        title, text = raw.title, raw.text
    else:
        raise CorpusFormatError(f'{where}: a passage needs "contents" (or "title" and "text")')
    if not title and not text:
        raise CorpusFormatError(f"{where}: the passage is empty")
    return Passage(str(raw.id), title, text)


def iter_corpus(path: str | os.PathLike[str], *, on_bytes: Callable[[int], object] | None = None) -> Iterator[Passage]:
    """Stream the passages of a corpus JSONL file, one at a time; blank lines are skipped.

    Args:
        path: A ``.jsonl`` or ``.jsonl.gz`` file in the wiki-18 layout.
        on_bytes: Called with the size of each line read (for progress bars).

    Raises:
        CorpusFormatError: at the first broken line, naming the file and line number.
        FileNotFoundError: when the file does not exist.
    """
    with open_text_file(path) as handle:
        for number, line in enumerate(handle, 1):
            if on_bytes is not None:
                on_bytes(len(line))
            if line.strip():
                yield decode_passage(line, f"{path}:{number}")


def write_corpus(passages: Iterable[Passage], path: str | os.PathLike[str]) -> int:
    """Write passages as wiki-18 JSONL (gzip-compressed for ``.gz``); returns how many were written."""
    count = 0
    with open_text_file(path, "wb") as handle:
        for passage in passages:
            handle.write(_ENCODER.encode({"id": passage.id, "contents": format_contents(passage.title, passage.text)}))
            handle.write(b"\n")
            count += 1
    return count


_FINGERPRINTS: dict[tuple[str, int, int], str] = {}


def corpus_fingerprint(path: str | os.PathLike[str], memo_dir: str | os.PathLike[str] | None = None) -> str:
    """A content hash of a corpus file (BLAKE2b, 32 hex characters), read in 1 MiB chunks.

    Memoised by absolute path, size and modification time: in-process, and in ``memo_dir`` when
    given, so that a 13 GB corpus is hashed once per machine rather than once per process.

    Args:
        path: The corpus file.
        memo_dir: A directory for the on-disk memo (the index cache directory).
    """
    resolved = Path(path).resolve()
    stat = resolved.stat()
    memo_key = (str(resolved), stat.st_size, stat.st_mtime_ns)
    cached = _FINGERPRINTS.get(memo_key)
    if cached is not None:
        return cached
    memo_file = None
    if memo_dir is not None:
        name = hashlib.blake2b(repr(memo_key).encode(), digest_size=16).hexdigest()
        memo_file = Path(memo_dir) / "fingerprints" / name
        if memo_file.is_file():
            cached = memo_file.read_text().strip()
    if not cached:
        digest = hashlib.blake2b(digest_size=16)
        with resolved.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        cached = digest.hexdigest()
        if memo_file is not None:
            with atomic_path(memo_file) as partial:  # a concurrent reader never sees half a hash
                partial.write_text(cached)
    _FINGERPRINTS[memo_key] = cached
    return cached


class CorpusSource(abc.ABC):
    """A corpus an index is built from: a content fingerprint and an ordered stream of passages.

    Attributes:
        description: Names the corpus in progress bars and errors.
        total: How many progress units :meth:`stream` reports in all (None when unknown).
        unit: What a progress unit is (``"B"`` for bytes, ``"passages"``).
    """

    description: str = "corpus"
    total: int | None = None
    unit: str = "passages"

    @abc.abstractmethod
    def fingerprint(self, memo_dir: str | os.PathLike[str] | None = None) -> str:
        """A hash of the content: equal hashes, equal corpora (and one shared index)."""

    @abc.abstractmethod
    def stream(self, advance: Callable[[int], object] | None = None) -> Iterator[Passage]:
        """The passages in their fixed order (the row order of every index); ``advance`` gets progress."""


class CorpusFile(CorpusSource):
    """A wiki-18 JSONL (or ``.jsonl.gz``) file as a :class:`CorpusSource`; progress is in bytes read.

    Args:
        path: The corpus file.

    Raises:
        FileNotFoundError: when the file does not exist.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"corpus file {self.path} does not exist")
        self.description = self.path.name
        # A compressed file's size does not measure the bytes read from it.
        self.total = None if self.path.suffix == ".gz" else self.path.stat().st_size
        self.unit = "B"

    def fingerprint(self, memo_dir: str | os.PathLike[str] | None = None) -> str:
        return corpus_fingerprint(self.path, memo_dir)

    def stream(self, advance: Callable[[int], object] | None = None) -> Iterator[Passage]:
        return iter_corpus(self.path, on_bytes=advance)
