"""Checks every AgentFly env must pass: Gymnasium's env checker and seeded determinism.

Example:
    >>> import agentfly_env
    >>> check_agent_env("AgentFly/Math-v0")  # raises AssertionError on a problem
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from agentfly_env.core.episode import play_episode
from agentfly_env.core.policies import expert_action, random_action
from agentfly_env.core.types import Trajectory


def rollout(env: gym.Env, seed: int, *, expert: bool = True, max_steps: int = 50) -> Trajectory:
    """Play one episode with a scripted policy and return its record."""
    return play_episode(env, expert_action if expert else random_action, seed=seed, max_steps=max_steps)


def check_determinism(env_id: str, seed: int = 7, **kwargs: Any) -> None:
    """Two fresh envs, the same seed and the same scripted policy give identical episodes."""
    for expert in (True, False):
        episodes = []
        for _ in range(2):
            env = gym.make(env_id, **kwargs)
            try:
                episodes.append(rollout(env, seed, expert=expert))
            finally:
                env.close()
        first, second = episodes
        assert first.observation == second.observation, f"{env_id}: reset observations differ for seed {seed}"
        assert len(first.steps) == len(second.steps), f"{env_id}: episode lengths differ for seed {seed}"
        for number, (a, b) in enumerate(zip(first.steps, second.steps, strict=True), 1):
            assert a == b, f"{env_id}: step {number} differs for seed {seed}:\n{a}\n{b}"


def check_agent_env(env_id: str, **kwargs: Any) -> None:
    """Run Gymnasium's ``check_env`` on the unwrapped env, then :func:`check_determinism`."""
    env = gym.make(env_id, **kwargs)
    try:
        check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()
    check_determinism(env_id, **kwargs)
