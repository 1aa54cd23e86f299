"""Scripted policies: the stand-in for a model in the demo, the benchmark and the tests.

An env that knows how to solve its own task offers ``expert_action()`` (it may read the task and the
episode so far); every env can be played at random through its action space, whose samples are
well-formed tool calls or answers, and idly, with turns that say nothing (what must never earn the
maximum reward: ``agentfly-env validate`` checks it).

Example:
    >>> import gymnasium as gym, agentfly_env
    >>> env = gym.make("AgentFly/Math-v0")
    >>> _ = env.reset(seed=0)
    >>> expert_action(env).startswith("<tool_call>")
    True
"""

from __future__ import annotations

import gymnasium as gym


def has_expert(env: gym.Env) -> bool:
    """Whether the env offers a scripted expert."""
    return callable(getattr(env.unwrapped, "expert_action", None))


def expert_action(env: gym.Env) -> str:
    """The env's expert move, or a random well-formed action when it has no expert."""
    return env.unwrapped.expert_action() if has_expert(env) else random_action(env)


def random_action(env: gym.Env) -> str:
    """A sample of the env's action space (seed it with ``env.action_space.seed``)."""
    return env.unwrapped.action_space.sample()


def do_nothing(env: gym.Env) -> str:
    """An empty turn: no call, no answer."""
    return ""
