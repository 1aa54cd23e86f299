"""``AgentVectorEnv``: many text envs stepped concurrently on one event loop.

LLM rollouts are ragged: in a given round only some episodes have a model turn ready, and episodes end
at different turns. So ``step`` takes actions for *some* envs (a mapping from index to text, or a list
with None for the envs that sit out) and answers for those only. There is no autoreset by default:
finished envs wait for an explicit ``reset(indices=...)``.

Unlike Gymnasium's ``AsyncVectorEnv`` (one process per env, pickled messages), all envs live in one
process and overlap on ``await``: a tool waiting on a sandbox or a search server does not hold up the
others, and nothing is copied between processes.

Example:
    >>> import agentfly_env
    >>> vec = AgentVectorEnv.make("AgentFly/Math-v0", num_envs=4)
    >>> observations, infos = vec.reset(seed=0)
    >>> result = vec.step({0: "<answer>1</answer>", 2: "<answer>2</answer>"})
    >>> result.indices, bool(result.terminated.all())
    ([0, 2], True)
    >>> vec.close()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from agentfly_env.core.aio import gather, run_sync
from agentfly_env.core.env import AgentEnv, EnvStateError


@dataclass
class VectorStepResult:
    """The outcome of one vector step, for the envs that acted, in ``indices`` order."""

    indices: list[int]
    observations: list[str]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    infos: list[dict[str, Any]]


class AgentVectorEnv:
    """N :class:`~agentfly_env.core.env.AgentEnv` instances driven together.

    Args:
        env_fns: One callable per env that builds it.
        autoreset: Reset an env in the same call in which its episode ends; the ended episode's last
            observation and info go to ``info["final_observation"]`` / ``info["final_info"]``.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], *, autoreset: bool = False) -> None:
        if not env_fns:
            raise ValueError("AgentVectorEnv needs at least one env")
        self.envs: list[AgentEnv] = []
        for index, make in enumerate(env_fns):
            env = make().unwrapped
            if not isinstance(env, AgentEnv):
                raise TypeError(f"env {index} is a {type(env).__name__}, not an AgentEnv")
            self.envs.append(env)
        self.num_envs = len(self.envs)
        self.autoreset = autoreset
        self.done = np.ones(self.num_envs, dtype=bool)

    @classmethod
    def make(cls, env_id: str, num_envs: int, *, autoreset: bool = False, **kwargs: Any) -> AgentVectorEnv:
        """``num_envs`` copies of a registered env, made with the same keyword arguments."""
        return cls([lambda: gym.make(env_id, **kwargs) for _ in range(num_envs)], autoreset=autoreset)

    def _seeds(self, seed: int | Sequence[int | None] | None, indices: Sequence[int]) -> list[int | None]:
        if seed is None or isinstance(seed, int):
            return [None if seed is None else seed + index for index in indices]
        if len(seed) != len(indices):
            raise ValueError(f"{len(seed)} seeds for {len(indices)} envs")
        return list(seed)

    async def areset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
        indices: Sequence[int] | None = None,
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """Reset the envs in ``indices`` (all by default); an int seed gives env ``i`` the seed ``seed + i``."""
        indices = list(range(self.num_envs)) if indices is None else list(indices)
        seeds = self._seeds(seed, indices)
        results = await gather(
            *(self.envs[i].areset(seed=s, options=options) for i, s in zip(indices, seeds, strict=True))
        )
        self.done[indices] = False
        if not results:
            return [], []
        observations, infos = map(list, zip(*results))
        return observations, infos

    async def astep(self, actions: Mapping[int, str] | Sequence[str | None]) -> VectorStepResult:
        """Step the envs that have an action; the rest are untouched.

        Raises:
            EnvStateError: when an action is given for an env whose episode has ended (and autoreset is
                off); no env is stepped in that case.
        """
        if not isinstance(actions, Mapping):
            if len(actions) != self.num_envs:
                raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs; use None for envs that sit out")
            actions = {i: action for i, action in enumerate(actions) if action is not None}
        indices = sorted(actions)
        finished = [i for i, done in zip(indices, self.done[indices].tolist()) if done]
        if finished:
            raise EnvStateError(f"envs {finished} have ended their episodes; reset(indices={finished}) first")
        outcomes = await gather(*(self.envs[i].astep(actions[i]) for i in indices))
        if outcomes:
            observations, rewards, terminated, truncated, infos = map(list, zip(*outcomes))
        else:
            observations, rewards, terminated, truncated, infos = [], [], [], [], []
        positions = [position for position, (term, trunc) in enumerate(zip(terminated, truncated)) if term or trunc]
        ended = [indices[position] for position in positions]
        self.done[ended] = True
        if self.autoreset and ended:
            new_observations, new_infos = await self.areset(indices=ended)
            for position, observation, info in zip(positions, new_observations, new_infos, strict=True):
                info["final_observation"] = observations[position]
                info["final_info"] = infos[position]
                observations[position], infos[position] = observation, info
        return VectorStepResult(
            indices=indices,
            observations=observations,
            rewards=np.array(rewards, dtype=np.float64),
            terminated=np.array(terminated, dtype=bool),
            truncated=np.array(truncated, dtype=bool),
            infos=infos,
        )

    async def aclose(self) -> None:
        await gather(*(env.aclose() for env in self.envs))

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
        indices: Sequence[int] | None = None,
    ) -> tuple[list[str], list[dict[str, Any]]]:
        return run_sync(self.areset(seed=seed, options=options, indices=indices))

    def step(self, actions: Mapping[int, str] | Sequence[str | None]) -> VectorStepResult:
        return run_sync(self.astep(actions))

    def close(self) -> None:
        run_sync(self.aclose())

    def __len__(self) -> int:
        return self.num_envs
