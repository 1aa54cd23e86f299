"""The core's tests (agentfly_env): they pass on a core-only install (no extra).

So nothing here or in these tests imports the suite, the trainer or the benchmarks: a test that needs
an env builds a small ToolEnv of its own, and a test of core code that needs an extra (the Redis cache:
redis; Ray env pools: ray) calls ``pytest.importorskip`` at the top of its module, so it skips without
the extra and runs in the dev install. The fixtures these tests share with the other folders
(redis_server, ray_cluster) are in ../conftest.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
LOADED = pytest.StashKey[list[str]]()


def beyond_the_core(names) -> list[str]:
    """The loaded modules of the trainer, the benchmarks and the suite's envs (the suite's package
    itself is the core's entry point, loaded by ``import agentfly_env``)."""
    return sorted(
        name
        for name in names
        if name.partition(".")[0] in ("agentfly_train", "agentfly_bench") or name.startswith("agentfly_envs.")
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """When only the core's tests ran, fail the run if they loaded a module beyond the core."""
    items = getattr(session, "items", [])
    if not items or not all(Path(item.path).is_relative_to(HERE) for item in items):
        return
    loaded = beyond_the_core(sys.modules)
    if loaded:
        session.config.stash[LOADED] = loaded
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    loaded = config.stash.get(LOADED, None)
    if loaded:
        terminalreporter.write_line(
            f"FAILED: the core's tests loaded modules beyond the core: {', '.join(loaded)}", red=True
        )
