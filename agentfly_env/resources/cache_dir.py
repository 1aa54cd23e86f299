"""Where AgentFly keeps what it builds once and reuses: search indexes, generated games, converted models.

Everything lives under one root, so that one variable moves it all (to a fast local disk, or a shared
one): ``$AGENTFLY_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentfly``, else ``~/.cache/agentfly``. Each user
of the cache has its own folder in the root, and may have its own variable that overrides the folder
alone (``$AGENTFLY_SEARCH_INDEX_DIR`` for Search-v0's indexes, for instance).

Example:
    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"AGENTFLY_CACHE_DIR": "/scratch/agentfly"}, clear=True):
    ...     cache_dir("search", "AGENTFLY_SEARCH_INDEX_DIR").as_posix()
    '/scratch/agentfly/search'
    >>> with mock.patch.dict(os.environ, {"AGENTFLY_SEARCH_INDEX_DIR": "/data/indexes", "HOME": "/home/me"}, clear=True):
    ...     cache_dir("search", "AGENTFLY_SEARCH_INDEX_DIR").as_posix(), cache_dir("webshop").as_posix()
    ('/data/indexes', '/home/me/.cache/agentfly/webshop')
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_DIR_ENV", "cache_dir"]

#: The environment variable that moves every cache folder at once.
CACHE_DIR_ENV = "AGENTFLY_CACHE_DIR"


def cache_dir(name: str, override_env: str | None = None) -> Path:
    """The cache folder ``name`` (not created here): the first of ``$<override_env>``,
    ``$AGENTFLY_CACHE_DIR/<name>``, ``$XDG_CACHE_HOME/agentfly/<name>`` and ``~/.cache/agentfly/<name>``.

    Args:
        name: The folder's name in the root (``"search"``, ``"webshop"``, ...).
        override_env: A variable that names this folder alone, and wins over the root when set.
    """
    if override_env and os.environ.get(override_env):
        return Path(os.environ[override_env]).expanduser()
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser() / name
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "agentfly" / name
