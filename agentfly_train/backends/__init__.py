"""Training backends: where a validated :class:`~agentfly_train.config.Config` is run.

``local`` (:mod:`agentfly_train.backends.local`) is one process with torch + transformers; ``openrlhf``
(:mod:`agentfly_train.backends.openrlhf`) launches OpenRLHF on vLLM and Ray (GPU machines) from the
same config, with the same dataset export. Backends are imported only when chosen.

A backend is one entry of :data:`BACKENDS` (:func:`register_backend` adds one): the class that runs a
config and, when it has settings of its own, the section that reads its TOML table (``[openrlhf]``),
a :class:`~agentfly_train.config.BackendSection` defined beside the backend. The config module knows
no backend by name: it decodes every registered section and asks the chosen one for its checks.

Example:
    >>> from agentfly_train.config import Config
    >>> backend_class(Config.from_dict({"backend": "openrlhf"})).__name__
    'OpenRLHFLauncher'
    >>> sorted(backend_sections())
    ['openrlhf']
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the config module reads the registry: nothing of it is imported at runtime here
    from agentfly_train.config import BackendSection, Config


class Backend(NamedTuple):
    """A backend, named by ``module:attribute`` strings so that nothing is imported before it is used.

    Attributes:
        runner: The class built as ``cls(config)`` to run the training.
        section: The :class:`~agentfly_train.config.BackendSection` that decodes the backend's own table
            (named like the backend), or ``""`` for none. Its module must import light (no torch).
    """

    runner: str
    section: str = ""


#: Backend name (``config.backend``, ``--backend``) -> where its code is.
BACKENDS: dict[str, Backend] = {
    "local": Backend("agentfly_train.backends.local:LocalTrainer"),
    "openrlhf": Backend(
        "agentfly_train.backends.openrlhf.launcher:OpenRLHFLauncher",
        section="agentfly_train.backends.openrlhf.config:OpenRLHFConfig",
    ),
}


def register_backend(name: str, runner: str, section: str = "") -> None:
    """Add a backend (a third-party one too): ``--backend name`` runs ``runner``; ``[name]`` is its ``section``."""
    BACKENDS[name] = Backend(runner, section)


def backend_class(config: Config) -> Any:
    """The backend class of ``config.backend``, built as ``cls(config)`` (imports it: torch and
    transformers for ``local``; nothing heavy for ``openrlhf``, whose run happens in a subprocess)."""
    return _load(BACKENDS[config.backend].runner)


def backend_sections() -> dict[str, type[BackendSection]]:
    """Each registered backend's own section, by the name of its TOML table (the backend's name)."""
    return {name: _load(backend.section) for name, backend in BACKENDS.items() if backend.section}


def _load(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
