"""The training backends ``agentfly-train`` knows, one record each: where each one's code is, named by strings.

:data:`BACKENDS` maps a backend's name (``config.backend``, ``--backend``) to a :class:`Backend`: the class that
runs a config, whether it has a dry run, and the section that reads its own TOML table (``[openrlhf]``).
:func:`register_backend` adds one (a third-party one too). Like :mod:`agentfly_train.algorithm_registry`, this
module imports nothing of the trainer: the config reads it to decode and check every registered section, and
:mod:`agentfly_train.backends` builds the chosen backend from it, so neither imports the other.

Example:
    >>> BACKENDS["openrlhf"].dry_run, BACKENDS["local"].section
    (True, '')
    >>> sorted(backend_sections())
    ['openrlhf']
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from agentfly_train.config import BackendSection


class Backend(NamedTuple):
    """A backend, named by ``module:attribute`` strings so that nothing is imported before it is used.

    Attributes:
        runner: The :class:`TrainingBackend` class built as ``cls(config)`` to run the training.
        section: The :class:`~agentfly_train.config.BackendSection` that decodes the backend's own table
            (named like the backend), or ``""`` for none. Its module must import light (no torch).
        dry_run: It can prepare and describe a run without running it (``--dry-run``).
    """

    runner: str
    section: str = ""
    dry_run: bool = False


#: Backend name (``config.backend``, ``--backend``) -> where its code is.
BACKENDS: dict[str, Backend] = {
    "local": Backend("agentfly_train.backends.local:LocalTrainer"),
    "openrlhf": Backend(
        "agentfly_train.backends.openrlhf.launcher:OpenRLHFLauncher",
        section="agentfly_train.backends.openrlhf.config:OpenRLHFConfig",
        dry_run=True,
    ),
}


def register_backend(name: str, runner: str, section: str = "", *, dry_run: bool = False) -> None:
    """Add a backend (a third-party one too): ``--backend name`` runs ``runner``; ``[name]`` is its ``section``."""
    BACKENDS[name] = Backend(runner, section, dry_run)


def backend_sections() -> dict[str, type[BackendSection]]:
    """Each registered backend's own section, by the name of its TOML table (the backend's name)."""
    return {name: load(backend.section) for name, backend in BACKENDS.items() if backend.section}


def load(target: str) -> Any:
    """The attribute a ``module:attribute`` string names (imports the module)."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
