"""Where the peers' venvs are: the projects a suite compares against run in venvs of their own.

``make peers`` creates ``.venv-peers/NAME`` for each (they pin other versions of what we use, so they cannot
share our process); a suite drives the peer's Python as a child process. An environment variable points at
another Python that has the peer installed.

Example:
    >>> peer_python("no-such-peer", "AGENTFLY_NO_SUCH_PEER_PYTHON") is None
    True
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def peer_python(name: str, variable: str) -> Path | None:
    """The Python of the peer's venv: ``$variable``, else ``.venv-peers/NAME`` here or in the repo; None if none."""
    configured = os.environ.get(variable)
    if configured:
        candidates = [Path(configured)]
    else:
        candidates = [root / ".venv-peers" / name / "bin" / "python" for root in (Path.cwd(), REPO_ROOT)]
    return next((path for path in candidates if path.is_file()), None)
