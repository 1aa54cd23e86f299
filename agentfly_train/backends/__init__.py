"""Training backends: where a validated :class:`~agentfly_train.config.Config` is run.

``local`` (:mod:`agentfly_train.backends.local`) is one process with torch + transformers; ``openrlhf``
(:mod:`agentfly_train.backends.openrlhf`) launches OpenRLHF on vLLM and Ray (GPU machines) from the
same config, with the same dataset export. Backends are imported only when chosen.

Example:
    >>> from agentfly_train.config import Config
    >>> backend_class(Config.from_dict({"backend": "openrlhf"})).__name__
    'OpenRLHFLauncher'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the config module imports the backends' own sections from this package
    from agentfly_train.config import Config


def backend_class(config: Config) -> Any:
    """The backend class of ``config.backend``, built as ``cls(config)`` (imports it: torch and
    transformers for ``local``; nothing heavy for ``openrlhf``, whose run happens in a subprocess)."""
    if config.backend == "openrlhf":
        from agentfly_train.backends.openrlhf.launcher import OpenRLHFLauncher

        return OpenRLHFLauncher
    from agentfly_train.backends.local import LocalTrainer

    return LocalTrainer
