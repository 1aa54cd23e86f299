"""Every registered AgentFly env: Gymnasium's env checker and a seeded rollout that repeats exactly.

Parametrized over the registry, so an env that registers itself is checked without touching this file. The one
env that needs arguments to exist is the mixture, made here of two env families.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentfly_env
from agentfly_env.runners.checker import check_agent_env, rollout

ENV_IDS = agentfly_env.registered_ids()
#: What an env needs to be made at all (the mixture: its components).
NEEDS = {"AgentFly/Mix-v0": {"envs": [{"id": "AgentFly/Math-v0"}, {"id": "AgentFly/Search-v0", "weight": 2}]}}


def test_the_registry_is_not_empty():
    assert "AgentFly/Math-v0" in ENV_IDS


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_check_env_and_seeded_determinism(env_id):
    check_agent_env(env_id, **NEEDS.get(env_id, {}))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_expert_finishes_an_episode_with_reward(env_id):
    env = gym.make(env_id, **NEEDS.get(env_id, {}))
    trajectory = rollout(env, seed=1)
    env.close()
    assert trajectory.done and trajectory.steps[-1].terminated
    assert trajectory.total_reward > 0


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_make_with_module_prefix_and_make_vec(env_id):
    env = gym.make(f"agentfly_env:{env_id}", **NEEDS.get(env_id, {}))
    assert env.unwrapped.env_id == env_id
    env.close()
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", **NEEDS.get(env_id, {}))
    observations, _ = vec.reset(seed=0)
    assert len(observations) == 2 and all(isinstance(o, str) for o in observations)
    vec.close()
