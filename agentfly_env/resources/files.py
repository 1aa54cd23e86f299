"""Writing files and folders so that a reader never sees half of one, and building them once across
processes.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> target = Path(tempfile.mkdtemp()) / "settings.json"
    >>> with atomic_path(target) as scratch:
    ...     _ = scratch.write_text(json.dumps({"seed": 0}))
    >>> json.loads(target.read_text()), sorted(p.name for p in target.parent.iterdir())
    ({'seed': 0}, ['settings.json'])
    >>> with atomic_path(target.parent / "index") as scratch:  # a folder, built whole or not at all
    ...     scratch.mkdir()
    ...     _ = (scratch / "segment").write_text("terms")
    >>> sorted(p.name for p in target.parent.iterdir()), (target.parent / "index" / "segment").read_text()
    (['index', 'settings.json'], 'terms')
"""

from __future__ import annotations

import glob
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:  # POSIX; elsewhere builders rely on the atomic rename alone
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def _scratch_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A scratch path beside ``path`` to write a file or a folder into, renamed over ``path`` in one step
    when the block ends without error (a folder already there is replaced) and removed otherwise.

    Scratch paths are named ``.<name>.<hex>.tmp``; :func:`remove_leftovers` clears those of a writer
    that died.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = _scratch_beside(path)
    try:
        yield scratch
        if scratch.is_dir() and path.is_dir():
            # A rename cannot replace a folder that has files in it: move the old one aside first, so
            # that ``path`` is never seen half-deleted.
            aside = _scratch_beside(path)
            path.rename(aside)
            os.replace(scratch, path)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            os.replace(scratch, path)
    finally:
        _remove(scratch)


def remove_leftovers(path: str | os.PathLike[str]) -> None:
    """Remove the scratch paths that :func:`atomic_path` writers of ``path`` left when they died; call it
    only while no writer of ``path`` runs (under the lock that serialises them)."""
    path = Path(path)
    for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        _remove(leftover)


@contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` across processes (blocking; released when the process
    dies, too)."""
    with open(path, "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def lock_beside(path: str | os.PathLike[str]) -> Path:
    """The lock file that serialises the writers of ``path``: ``.<name>.lock`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


def build_once(path: str | os.PathLike[str], build: Callable[[Path], None], built: Callable[[Path], bool]) -> Path:
    """Make ``path`` once across processes and return it.

    Unless ``built(path)`` already holds, take the lock beside ``path``, check again (another process
    may have finished while this one waited), clear dead writers' leftovers and run ``build(scratch)``
    in :func:`atomic_path`; ``scratch`` does not exist yet (``build`` makes the file or folder).

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "table.csv"
        >>> calls = []
        >>> for _ in range(2):
        ...     _ = build_once(target, lambda scratch: calls.append(scratch.write_text("a,b")), Path.is_file)
        >>> target.read_text(), len(calls)
        ('a,b', 1)
    """
    path = Path(path)
    if built(path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(lock_beside(path)):
        if built(path):
            return path
        remove_leftovers(path)
        with atomic_path(path) as scratch:
            build(scratch)
    return path
