"""Training backends: where a validated :class:`~agentfly_train.config.Config` is run.

``local`` (:mod:`agentfly_train.backends.local`) is one process with torch + transformers; ``openrlhf``
(:mod:`agentfly_train.backends.openrlhf`) launches OpenRLHF on vLLM and Ray (GPU machines) from the
same config, with the same dataset export. Backends are imported only when chosen.

A backend is one entry of :data:`~agentfly_train.backend_registry.BACKENDS` (its own module, which the config
reads; :func:`~agentfly_train.backend_registry.register_backend` adds one): the class that runs a config (a
:class:`TrainingBackend`), whether it has a dry run, and, when it has settings of its own, the section that reads
its TOML table (``[openrlhf]``), a :class:`~agentfly_train.config.BackendSection` defined beside the backend. The
config module and ``agentfly-train`` know no backend by name: the
config decodes every registered section and asks the chosen one for its checks; the command line
builds the chosen backend with :func:`build_backend`, prints :meth:`TrainingBackend.describe`, runs
:meth:`TrainingBackend.fit`.

Example:
    >>> from agentfly_train.config import Config
    >>> backend_class(Config.from_dict({"backend": "openrlhf"})).__name__
    'OpenRLHFLauncher'
    >>> sorted(backend_sections())
    ['openrlhf']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from agentfly_train.backend_registry import BACKENDS, Backend, backend_sections, load, register_backend

if TYPE_CHECKING:
    from agentfly_train.config import Config

__all__ = [
    "BACKENDS",
    "Backend",
    "OnStep",
    "TrainingBackend",
    "backend_class",
    "backend_sections",
    "build_backend",
    "register_backend",
]

#: Called by a backend after each training step with the step's number (from 1) and metrics.
OnStep = Callable[[int, dict[str, Any]], None]


class TrainingBackend(Protocol):
    """What ``agentfly-train`` asks of a backend: built as ``cls(config)`` (``cls(config, dry_run=True)`` for a
    dry run, where the entry allows one), which checks what the run needs (a
    :class:`~agentfly_train.config.ConfigError` names what cannot work) and gets ready; then this."""

    def describe(self) -> str:
        """What will run, printed before :meth:`fit` (for a dry run, all it prints)."""
        ...

    def fit(self, *, on_step: OnStep | None = None) -> dict[str, Any]:
        """Run the training (nothing in a dry run), calling ``on_step`` after each step it sees.

        Returns:
            The run's summary: any of ``steps``, ``reward_first`` / ``reward_last``, ``stages`` (held-out
            metrics by stage), paths of what it wrote (``metrics``, ``trajectories``, ``tensorboard``,
            ``reward_curve``, ``checkpoint``, ``final_model``), and ``exit_code`` for a run in a process of
            its own.
        """
        ...


def backend_class(config: Config) -> Any:
    """The backend class of ``config.backend``, built as ``cls(config)`` (imports it: torch and
    transformers for ``local``; nothing heavy for ``openrlhf``, whose run happens in a subprocess)."""
    return load(BACKENDS[config.backend].runner)


def build_backend(config: Config, *, dry_run: bool = False) -> TrainingBackend:
    """The backend of ``config.backend``, built for ``config`` (a dry run only where its entry has one).

    Raises:
        ConfigError: a dry run asked of a backend without one (before anything is imported), or what the
            backend finds it cannot run.
    """
    if dry_run and not BACKENDS[config.backend].dry_run:
        from agentfly_train.config import ConfigError

        able = [name for name, backend in BACKENDS.items() if backend.dry_run]
        raise ConfigError(
            f"--dry-run prints the command a backend would run: use it with --backend {' or '.join(able)}"
        )
    cls = backend_class(config)
    return cls(config, dry_run=True) if dry_run else cls(config)
