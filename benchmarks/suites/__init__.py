"""Env-specific benchmark suites, found by name: ``agentfly-bench --suite NAME``.

A suite is a module in this package that defines::

    DESCRIPTION: str                                    # one line for --help
    def run(quick: bool) -> dict                         # measure; JSON-able results
    def render(results: dict, console: rich.console.Console) -> None   # readable tables

Dropping a module here is all it takes; nothing else needs editing.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def available() -> dict[str, ModuleType]:
    """Every suite module in this package, by name."""
    return {
        info.name: importlib.import_module(f"{__name__}.{info.name}")
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_")
    }
