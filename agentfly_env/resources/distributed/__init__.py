"""Pools of whole envs, in this process or as async Ray actors across a cluster.

:func:`make_env_pool` gives a :class:`~agentfly_env.resources.pool.ResourcePool` of :class:`EnvHandle` s: lease
one per episode and await its ``areset``/``astep``, wherever the env runs. The Ray backend needs the
``ray`` extra (``pip install agentfly-gym[ray]``); nothing here imports Ray until an actor is made.

Example:
    >>> pool = make_env_pool("AgentFly/Math-v0", {"difficulty": 0}, backend="local", size=4)
    >>> pool.name, pool.config.size
    ('local:AgentFly/Math-v0', 4)
"""

from __future__ import annotations

from agentfly_env.resources.distributed.envs import make_env_pool
from agentfly_env.resources.distributed.handle import EnvHandle, make_env
from agentfly_env.resources.distributed.ray_actors import (
    ActorPlacementError,
    EnvActorDiedError,
    EnvActorTimeoutError,
    RayEnvHandle,
    RayEnvOptions,
)

__all__ = [
    "ActorPlacementError",
    "EnvActorDiedError",
    "EnvActorTimeoutError",
    "EnvHandle",
    "RayEnvHandle",
    "RayEnvOptions",
    "make_env",
    "make_env_pool",
]
