"""Pools of whole envs: lease an env for an episode, here or on a Ray cluster, through one interface.

:func:`make_env_pool` returns a :class:`~agentfly_env.resources.pool.ResourcePool` whose resource is an
:class:`EnvHandle`: something with the env's own ``areset``/``astep`` that a trainer awaits without
knowing where the env runs. With ``backend="local"`` the handle is the env itself, built in this
process; with ``backend="ray"`` it is a :class:`~agentfly_env.resources.distributed.ray_actors.RayEnvHandle` on an
async Ray actor that holds the env (see that module).

Example:
    >>> import asyncio
    >>> async def one_episode() -> float:
    ...     async with make_env_pool("AgentFly/Math-v0", {"difficulty": 0}, backend="local", size=2) as pool:
    ...         async with pool.lease(timeout=30) as env:
    ...             obs, info = await env.areset(seed=5)
    ...             answer = info["task"]["answer"]
    ...             obs, reward, terminated, truncated, info = await env.astep(f"<answer>{answer}</answer>")
    ...             return reward
    >>> asyncio.run(one_episode())
    1.0
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any, Literal

import gymnasium as gym

from agentfly_env.core.env import AgentEnv
from agentfly_env.resources.distributed.handle import EnvHandle, built_env, make_env
from agentfly_env.resources.distributed.ray_actors import RayEnvOptions, ray_env_spec
from agentfly_env.resources.pool import PoolConfig, ResourcePool, ResourceSpec

__all__ = ["EnvHandle", "make_env", "make_env_pool"]


def make_env_pool(
    env_id: str | Callable[[], gym.Env],
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    backend: Literal["local", "ray"] = "local",
    size: int,
    ray_options: RayEnvOptions | Mapping[str, Any] | None = None,
    **pool_options: Any,
) -> ResourcePool[EnvHandle]:
    """A pool of ``size`` envs, each leased for one episode at a time.

    Args:
        env_id: A registered id, e.g. ``"AgentFly/Math-v0"``; or, for ``backend="local"``, a callable
            that builds one env (``env_kwargs`` then stays empty).
        env_kwargs: Passed to ``gym.make`` (in each Ray actor for ``backend="ray"``, so picklable).
        backend: ``"local"``: envs in this process. ``"ray"``: one env per async Ray actor, spread over
            the cluster (Ray must be installed; a process that has not called ``ray.init`` gets Ray's
            default one on the first actor).
        size: Most envs alive at once.
        ray_options: Actor resources, scheduling and timeouts (:class:`RayEnvOptions` or its fields as a
            mapping); only for ``backend="ray"``.
        **pool_options: Other :class:`~agentfly_env.resources.pool.PoolConfig` fields (``prewarm``, ``max_uses``,
            ``idle_ttl_s``, ``acquire_timeout_s``).

    Raises:
        ValueError: Unknown backend, ``ray_options`` given for the local backend, or a bad pool option.
        gymnasium.error.Error: ``env_id`` is not registered.
        ImportError: ``backend="ray"`` without Ray installed.
    """
    config = PoolConfig.from_dict({"size": size, **pool_options})
    kwargs = dict(env_kwargs or {})
    if callable(env_id):
        if backend != "local" or kwargs:
            raise ValueError("an env factory makes local envs by itself: no backend='ray', no env_kwargs")
        factory, env_id = env_id, getattr(env_id, "__name__", type(env_id).__name__)
        make = functools.partial(built_env, factory, env_id)
    else:
        gym.spec(env_id)  # an unknown id fails here, not in every create
        make = functools.partial(make_env, env_id, kwargs)
    spec: ResourceSpec[Any]
    if backend == "local":
        if ray_options is not None:
            raise ValueError("ray_options only apply to backend='ray'")
        # gym.make can load data (task sets, indexes): build envs off the event loop.
        # Ended before it is lent again: an episode one user left open never passes to the next.
        spec = ResourceSpec(create=make, reset=_end_episode, destroy=_close_env, blocking=True)
    elif backend == "ray":
        if importlib.util.find_spec("ray") is None:
            raise ImportError("backend='ray' needs Ray: pip install 'agentfly-gym[ray]'")
        if not isinstance(ray_options, RayEnvOptions):
            ray_options = RayEnvOptions(**(ray_options or {}))
        spec = ray_env_spec(env_id, kwargs, ray_options)
    else:
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    return ResourcePool(spec, config, name=f"{backend}:{env_id}")


async def _end_episode(env: AgentEnv) -> None:
    await env.aend_episode()


async def _close_env(env: AgentEnv) -> None:
    await env.aclose()
