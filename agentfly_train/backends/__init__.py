"""Training backends: where a validated :class:`~agentfly_train.config.Config` is run.

``local`` (:mod:`agentfly_train.backends.local`) is one process with torch + transformers; ``openrlhf``
(OpenRLHF on vLLM and Ray, GPU only) shares the config, the algorithms, the rollout data types and
the dataset export, and lands with its own issue. Backends are imported only when chosen.

Example:
    >>> from agentfly_train.config import Config
    >>> backend_class(Config.from_dict({"backend": "local"})).__name__  # doctest: +SKIP
    'LocalTrainer'
"""

from __future__ import annotations

from typing import Any

from agentfly_train.config import Config


def backend_class(config: Config) -> Any:
    """The trainer class of ``config.backend`` (imports it: torch and transformers for ``local``).

    Raises:
        NotImplementedError: for ``openrlhf``, which is not part of this build yet.
    """
    if config.backend == "local":
        from agentfly_train.backends.local import LocalTrainer

        return LocalTrainer
    raise NotImplementedError(
        f"the {config.backend!r} backend is not available in this build yet; use --backend local"
    )
