"""Registers every ``AgentFly/*`` env with Gymnasium.

Entry points are strings, so importing :mod:`agentfly_env` stays light: an env's package (and its
heavy dependencies) loads only when that env is made.

Example:
    >>> import gymnasium as gym
    >>> import agentfly_env
    >>> "AgentFly/Math-v0" in agentfly_env.registered_ids()
    True
"""

from __future__ import annotations

import gymnasium as gym

#: id -> entry point. Add a line here when a new env lands; the test suite picks it up by itself.
ENV_ENTRY_POINTS: dict[str, str] = {
    "AgentFly/Math-v0": "agentfly_envs.math:MathEnv",
    "AgentFly/WebShop-v0": "agentfly_envs.webshop:WebShopEnv",
    "AgentFly/Code-v0": "agentfly_envs.code:CodeEnv",
    "AgentFly/ScienceWorld-v0": "agentfly_envs.scienceworld:ScienceWorldEnv",
    "AgentFly/ALFWorld-v0": "agentfly_envs.alfworld:ALFWorldEnv",
    "AgentFly/Search-v0": "agentfly_envs.search:SearchEnv",
}


def register_envs() -> None:
    """Register the ids in :data:`ENV_ENTRY_POINTS` (idempotent)."""
    for env_id, entry_point in ENV_ENTRY_POINTS.items():
        if env_id not in gym.registry:
            # No max_episode_steps: the env owns its turn budget and reports why it truncated.
            gym.register(env_id, entry_point=entry_point, kwargs={"env_id": env_id})


def registered_ids() -> list[str]:
    """Every ``AgentFly/*`` id known to Gymnasium, including ones other packages registered."""
    return sorted(env_id for env_id in gym.registry if env_id.startswith("AgentFly/"))
