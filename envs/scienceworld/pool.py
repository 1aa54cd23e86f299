"""Simulator JVMs in a :class:`~agentfly_env.resources.pool.ResourcePool`: pre-warmed in parallel, checked, recycled.

The pool's hooks manage the JVMs: ``create`` starts one (a few seconds; ``prewarm`` starts several in
parallel), ``check`` makes sure a reused one still runs and answers, ``destroy`` kills and reaps it.
An episode loads its own task, so nothing needs resetting between leases. A JVM that failed is
released as broken and destroyed, and the next lease starts a new one; ``max_uses`` recycles JVMs
after that many episodes so a slow leak in the simulator cannot grow without bound.

Example:
    >>> from agentfly_env.resources.pool import ResourceManager
    >>> manager = ResourceManager({ENGINE_POOL: {"size": 2, "prewarm": 2}})
    >>> pool = engine_pool(manager, JvmConfig(heap_mb=256))
    >>> pool.config.size, pool.config.max_uses
    (2, 256)
    >>> engine_pool(manager) is pool  # every env of this manager shares it
    True
"""

from __future__ import annotations

import functools
import os

from agentfly_env.resources.pool import PoolConfig, ResourceManager, ResourcePool, ResourceSpec
from agentfly_envs.scienceworld.engine import JvmConfig, ScienceWorldEngine

__all__ = ["DEFAULT_POOL_CONFIG", "ENGINE_POOL", "engine_pool", "engine_spec"]

#: The pool name envs use unless told otherwise; size it in the manager's config under this name.
ENGINE_POOL = "scienceworld"

#: Defaults of an engine pool (one JVM per core, up to 4); a manager's config overrides them.
DEFAULT_POOL_CONFIG = PoolConfig(size=max(1, min(4, os.cpu_count() or 1)), max_uses=256, acquire_timeout_s=300.0)


def engine_spec(config: JvmConfig | None = None) -> ResourceSpec[ScienceWorldEngine]:
    """The hooks that start, check and kill simulator JVMs with ``config`` (run in worker threads)."""
    return ResourceSpec(
        create=functools.partial(ScienceWorldEngine, config or JvmConfig()),
        check=ScienceWorldEngine.healthy,
        destroy=ScienceWorldEngine.close,
        blocking=True,
    )


def engine_pool(
    manager: ResourceManager, config: JvmConfig | None = None, *, name: str = ENGINE_POOL
) -> ResourcePool[ScienceWorldEngine]:
    """The manager's engine pool called ``name``, registered on first use.

    Args:
        manager: Holds the pool; its config section ``name`` sizes it (over :data:`DEFAULT_POOL_CONFIG`).
        config: How the JVMs start; None takes the existing pool's, or the defaults for a new one.
        name: The pool's name.

    Raises:
        ValueError: a pool of that name already runs JVMs with another config.
    """
    return manager.shared_pool(
        name, engine_spec, config, default_settings=JvmConfig(), default=DEFAULT_POOL_CONFIG, kind="JVMs"
    )
