"""One episode, played and summarised the same way everywhere.

:func:`aplay_episode` (and its sync form :func:`play_episode`) is the loop every scripted driver runs:
reset, then step a policy until the episode ends. :class:`EpisodeSummary` is what an episode came to,
derived from its steps alone, and :func:`summarize` the means over many: the numbers ``agentfly-play``,
the trainer's metrics and the viewer report alike.

A policy is a function of the env that returns the next action, or an awaitable of it
(:func:`~agentfly_env.core.policies.expert_action`, :func:`~agentfly_env.core.policies.random_action`,
or a model's turn).

Example:
    >>> import gymnasium as gym, agentfly_env
    >>> from agentfly_env.core.policies import expert_action
    >>> trajectory = play_episode(gym.make("AgentFly/Math-v0", difficulty=0), expert_action, seed=0)
    >>> summary = EpisodeSummary.of(trajectory.steps)
    >>> summary.success, summary.turns, summary.tool_calls
    (True, 2, 1)
    >>> summarize([summary])["success_rate"]
    1.0
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import gymnasium as gym

from agentfly_env.core.aio import run_sync
from agentfly_env.core.env import AgentEnv
from agentfly_env.core.types import EpisodeSummary, Trajectory, summarize

__all__ = ["EpisodeSummary", "Policy", "aplay_episode", "play_episode", "summarize"]

#: The next action for the env as it stands (or an awaitable of it).
Policy = Callable[[AgentEnv], "str | Awaitable[str]"]


async def aplay_episode(
    env: gym.Env,
    policy: Policy,
    *,
    seed: int | None = None,
    options: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
) -> Trajectory:
    """Reset ``env`` and step ``policy`` until the episode ends (or ``max_steps`` steps); its trajectory.

    The env's action space is seeded with ``seed`` too, so a random policy replays with the task.
    """
    agent_env: AgentEnv = env.unwrapped  # type: ignore[assignment]
    await agent_env.areset(seed=seed, options=dict(options) if options else None)
    if seed is not None:
        agent_env.action_space.seed(seed)
    steps = 0
    done = False
    while not done and (max_steps is None or steps < max_steps):
        action = policy(agent_env)
        if inspect.isawaitable(action):
            action = await action
        _, _, terminated, truncated, _ = await agent_env.astep(action)
        done, steps = terminated or truncated, steps + 1
    assert agent_env.trajectory is not None
    return agent_env.trajectory


def play_episode(
    env: gym.Env,
    policy: Policy,
    *,
    seed: int | None = None,
    options: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
) -> Trajectory:
    """Sync form of :func:`aplay_episode`."""
    return run_sync(aplay_episode(env, policy, seed=seed, options=options, max_steps=max_steps))
