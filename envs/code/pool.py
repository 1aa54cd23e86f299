"""Sandboxes in a :class:`~agentfly_env.resources.pool.ResourcePool`: pre-warmed, reset between episodes, replaced when broken.

The pool's hooks manage the worker process: ``create`` starts a sandbox, ``reset`` gives it a fresh
session (a fork inside the sandbox, a few milliseconds) before it serves the next episode, ``check``
makes sure it is still running, ``destroy`` kills and reaps it. A sandbox that timed out or died is
released as broken (by the env) and destroyed; the next lease creates a new one.

Example:
    >>> import asyncio
    >>> from agentfly_env.resources.pool import ResourceManager
    >>> async def demo() -> list[str]:
    ...     async with ResourceManager({SANDBOX_POOL: {"size": 2, "prewarm": 1}}) as manager:
    ...         pool = sandbox_pool(manager)
    ...         outputs = []
    ...         for episode in range(2):
    ...             async with pool.lease(timeout=30) as sandbox:
    ...                 result = await sandbox.run("'x' in globals()")
    ...                 await sandbox.run("x = 1")
    ...                 outputs.append(result.value)
    ...         return outputs
    >>> asyncio.run(demo())  # the second episode does not see the first one's variable
    ['False', 'False']
"""

from __future__ import annotations

import functools
import operator

from agentfly_env.resources.pool import PoolConfig, ResourceManager, ResourcePool, ResourceSpec
from agentfly_envs.code.sandbox import Sandbox, SandboxConfig

__all__ = ["DEFAULT_POOL_CONFIG", "SANDBOX_POOL", "sandbox_pool", "sandbox_spec"]

#: The pool name envs use unless told otherwise; size it in the manager's config under this name.
SANDBOX_POOL = "code_sandbox"

#: Defaults of a sandbox pool; a manager's config overrides them field by field. An episode holds its
#: sandbox from its first call to its end, so ``size`` should cover the episodes run at once: past
#: it, episodes wait for one to finish (and envs stepped in lockstep, as a vector env does, would wait
#: for each other until the lease timeout). Sandboxes are made only when needed, so a large cap costs
#: nothing until it is used; each takes about 12 MiB (PSS).
DEFAULT_POOL_CONFIG = PoolConfig(size=256, prewarm=0, max_uses=256, acquire_timeout_s=120.0)


def sandbox_spec(config: SandboxConfig | None = None) -> ResourceSpec[Sandbox]:
    """The hooks that make, reset, check and destroy sandboxes with ``config``."""
    return ResourceSpec(
        create=functools.partial(Sandbox.start, config or SandboxConfig()),
        reset=Sandbox.reset,
        check=operator.attrgetter("alive"),
        destroy=Sandbox.close,
    )


def sandbox_pool(
    manager: ResourceManager, config: SandboxConfig | None = None, *, name: str = SANDBOX_POOL
) -> ResourcePool[Sandbox]:
    """The manager's sandbox pool called ``name``, registered on first use.

    Every env that runs code with the same manager and pool name shares it. Checking for bubblewrap
    happens here, so a missing one fails when the env is built, not at its first tool call.

    Args:
        manager: Holds the pool; its config section ``name`` sizes it (over :data:`DEFAULT_POOL_CONFIG`).
        config: The sandboxes' jail and limits.
        name: The pool's name.

    Raises:
        SandboxUnavailable: bubblewrap is missing and the config refuses to run without it.
        ValueError: a pool of that name already runs sandboxes with another config.
    """
    config = config or SandboxConfig()
    config.find_bwrap()
    return manager.shared_pool(name, sandbox_spec, config, default=DEFAULT_POOL_CONFIG, kind="sandboxes")
