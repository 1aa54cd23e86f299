"""AgentFly/Mix-v0: several envs as one, each episode on a component drawn by weight from its seed.

(Gymnasium's checker, seeded determinism, the expert and ``make_vec`` run on it with every registered env,
in test_registered_envs.py.)
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfly_env
from agentfly_env.core.env import AgentEnv, EnvStateError
from agentfly_env.core.mixture import MixtureEnv
from agentfly_env.core.policies import expert_action
from agentfly_env.core.types import Step

ARITHMETIC = {"id": "AgentFly/Math-v0", "name": "arithmetic", "options": {"dataset": "basic_arithmetic"}}
COUNTDOWN = {"id": "AgentFly/Math-v0", "name": "countdown", "options": {"dataset": "countdown"}}


class Counted(AgentEnv):
    """Counts the episodes it ends, to show that switching components releases the one left."""

    ended = 0

    async def _reset(self, seed, options):
        return "go", {}

    async def _step(self, action):
        return Step(observation="ok", reward=1.0, terminated=True), {}

    async def _end_episode(self):
        type(self).ended += 1


gym.register("Test/Counted-v0", entry_point=Counted)


def test_components_are_drawn_by_weight_and_a_seed_always_draws_the_same():
    env = gym.make("AgentFly/Mix-v0", envs=[ARITHMETIC, {**COUNTDOWN, "weight": 3}])
    drawn = [env.reset(seed=seed)[1]["env_id"] for seed in range(1000)]
    assert 0.70 < drawn.count("countdown") / 1000 < 0.80
    for seed in (0, 5, 17):  # the chains of a GRPO group share a seed: the same env and task
        first, again = env.reset(seed=seed), env.reset(seed=seed)
        assert first[0] == again[0] and first[1]["env_id"] == again[1]["env_id"]
    env.close()


def test_the_episode_is_the_components_own_records_prompt_and_tools():
    env = gym.make("AgentFly/Mix-v0", envs=[ARITHMETIC, {"id": "AgentFly/Search-v0"}])
    seen = {}
    for seed in range(12):
        _, info = env.reset(seed=seed)
        mixture = env.unwrapped
        assert info["start"].env_id == mixture.trajectory.env_id == info["env_id"]
        assert mixture.system_prompt == mixture.active.system_prompt == info["start"].system_prompt
        seen[info["env_id"]] = {tool["function"]["name"] for tool in info["tools"]}
        while True:
            *_, terminated, truncated, info = env.step(expert_action(env))
            if terminated or truncated:
                break
        assert mixture.trajectory.steps[-1] == info["step"] and mixture.trajectory.total_reward > 0
    assert seen.keys() == {"arithmetic", "AgentFly/Search-v0"}
    assert "retrieve" in seen["AgentFly/Search-v0"] and "retrieve" not in seen["arithmetic"]
    env.close()


def test_shared_options_reach_every_component_under_its_own():
    env = gym.make("AgentFly/Mix-v0", envs=[ARITHMETIC, {**COUNTDOWN, "options": {"max_turns": 5}}], max_turns=2)
    mixture = env.unwrapped
    assert [c["options"]["max_turns"] for c in mixture.components] == [2, 2]  # shared wins over a component's
    env.reset(seed=0)
    assert mixture.active.max_turns == 2
    env.close()


def test_switching_components_ends_the_episode_left_open():
    Counted.ended = 0
    env = MixtureEnv([{"id": "Test/Counted-v0", "name": "a"}, {"id": "Test/Counted-v0", "name": "b"}])
    seeds = {env.component_index(seed): seed for seed in range(50)}
    env.reset(seed=seeds[0])  # left mid-episode
    env.reset(seed=seeds[1])
    assert Counted.ended == 1
    env.close()
    assert Counted.ended == 2


@pytest.mark.parametrize(
    ("envs", "message"),
    [
        ([], "at least one component"),
        ([{"name": "no id"}], "component 0 needs an 'id'"),
        ([ARITHMETIC, {**COUNTDOWN, "wieght": 2}], r"component 1 needs an 'id' and takes only .*wieght"),
        ([{**ARITHMETIC, "weight": 0}], "component 0 .* has weight 0.0; give > 0"),
        ([ARITHMETIC, {**COUNTDOWN, "name": "arithmetic"}], "share a name"),
    ],
)
def test_bad_components_are_named(envs, message):
    with pytest.raises(ValueError, match=message):
        MixtureEnv(envs)


def test_stepping_before_a_reset_is_a_clear_error():
    env = MixtureEnv([ARITHMETIC])
    with pytest.raises(EnvStateError, match="call reset"):
        env.step("hello")
    env.close()
    with pytest.raises(EnvStateError, match="after close"):
        env.reset(seed=0)


@settings(max_examples=60, deadline=None)
@given(weights=st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=6), seed=st.integers(0, 2**31 - 1))
def test_any_weights_and_seed_draw_one_component_the_same_every_time(weights, seed):
    env = MixtureEnv([{"id": "Test/Counted-v0", "name": str(n), "weight": w} for n, w in enumerate(weights)])
    index = env.component_index(seed)
    assert 0 <= index < len(weights) and index == env.component_index(seed)


def test_the_mixture_is_registered_by_the_core():
    assert "AgentFly/Mix-v0" in agentfly_env.registered_ids()
