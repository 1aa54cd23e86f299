"""Writing files and folders so that a reader never sees half of one.

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> target = Path(tempfile.mkdtemp()) / "settings.json"
    >>> with atomic_path(target) as scratch:
    ...     _ = scratch.write_text(json.dumps({"seed": 0}))
    >>> json.loads(target.read_text()), sorted(p.name for p in target.parent.iterdir())
    ({'seed': 0}, ['settings.json'])
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A scratch path beside ``path`` to write a file or a folder into, renamed over ``path`` in one step
    when the block ends without error (a folder already there is replaced) and removed otherwise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        yield scratch
        if scratch.is_dir() and path.is_dir():  # a rename cannot replace a folder that has files in it
            shutil.rmtree(path)
        os.replace(scratch, path)
    finally:
        if scratch.is_dir():
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            scratch.unlink(missing_ok=True)
