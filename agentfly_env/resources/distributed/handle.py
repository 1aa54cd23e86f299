"""What an env pool lends (:class:`EnvHandle`) and how a local env is built for one.

Both pool backends build on this: the local one lends the env itself, the Ray one builds it inside
its actor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import gymnasium as gym

from agentfly_env.core.env import AgentEnv

__all__ = ["EnvHandle", "built_env", "make_env"]


class EnvHandle(Protocol):
    """What an env pool lends: the async half of the Gymnasium API, plus a way to release the env.

    :class:`~agentfly_env.core.env.AgentEnv` is one (the local backend lends the env itself); so is
    :class:`~agentfly_env.resources.distributed.ray_actors.RayEnvHandle`. The values are the env's own.
    """

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]: ...

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]: ...

    async def aclose(self) -> None: ...


def make_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> AgentEnv:
    """``gym.make(env_id, **env_kwargs)``, unwrapped: the async-native env that pools lend.

    Gymnasium's wrappers only have the sync ``reset``/``step``; the pool's callers need ``areset`` and
    ``astep``, so the handle is the env inside them.

    Raises:
        gymnasium.error.Error: ``env_id`` is not registered.
        TypeError: The env is not an :class:`~agentfly_env.core.env.AgentEnv`.

    Example:
        >>> make_env("AgentFly/Math-v0", {"difficulty": 0}).env_id
        'AgentFly/Math-v0'
    """
    return built_env(functools.partial(gym.make, env_id, **dict(env_kwargs or {})), env_id)


def built_env(factory: Callable[[], gym.Env], name: str) -> AgentEnv:
    """The env ``factory`` makes, unwrapped; an env without the async API is refused."""
    env = factory().unwrapped
    if not isinstance(env, AgentEnv):
        raise TypeError(f"{name} is a {type(env).__name__}, not an AgentEnv: it has no areset/astep to pool")
    return env
