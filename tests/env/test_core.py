"""AgentEnv: the episode state machine, bounded observations, sync and async forms, run_sync."""

from __future__ import annotations

import asyncio

import pytest

from agentfly_env.core.aio import run_sync
from agentfly_env.core.env import AgentEnv, EnvStateError
from agentfly_env.core.types import Step


class Counter(AgentEnv):
    """Counts turns; says 'stop' to terminate, 'die' to truncate as a dead backend would."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.ended_episodes = 0
        self.closed = 0

    async def _reset(self, seed, options):
        return f"start {int(self.np_random.integers(1000))}", {"task": {"id": "count"}}

    async def _step(self, action):
        if action == "die":
            return Step(observation="backend gone", reward=0.0, truncation_reason="backend_died"), {}
        return Step(observation=action * 3, reward=1.0, terminated=action == "stop"), {}

    async def _end_episode(self):
        self.ended_episodes += 1

    async def _close(self):
        self.closed += 1


def test_step_before_reset_and_after_the_end_raise_clear_errors():
    env = Counter()
    with pytest.raises(EnvStateError, match="not started; call reset"):
        env.step("x")
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step("stop")
    assert (reward, terminated, truncated, info["step"].truncation_reason) == (1.0, True, False, None)
    with pytest.raises(EnvStateError, match="ended; call reset"):
        env.step("again")
    with pytest.raises(TypeError, match="must be the model's text"):
        env.reset()
        env.step(b"bytes")


def test_turn_budget_truncates_with_the_reason():
    env = Counter(max_turns=2)
    env.reset(seed=0)
    assert env.step("a")[3] is False
    _, _, terminated, truncated, info = env.step("b")
    assert (terminated, truncated, info["step"].truncation_reason, info["turn"]) == (False, True, "max_turns", 2)
    assert env.ended_episodes == 1


def test_backend_truncation_reason_reaches_info_and_record():
    env = Counter()
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step("die")
    assert (terminated, truncated, info["step"].truncation_reason) == (False, True, "backend_died")
    assert env.trajectory.steps[-1].truncation_reason == "backend_died"


def test_observations_are_bounded_with_a_marker():
    env = Counter(max_observation_chars=100)
    env.reset(seed=0)
    observation = env.step("y" * 500)[0]
    assert len(observation) <= 100 and "[truncated: 1500 characters total]" in observation
    assert observation in env.observation_space


def test_seeding_is_deterministic_and_trajectory_is_recorded():
    env = Counter()
    first = env.reset(seed=42)[0]
    assert env.reset(seed=42)[0] == first
    env.step("a")
    env.step("stop")
    trajectory = env.trajectory
    assert trajectory.seed == 42 and trajectory.observation == first
    assert [s.action for s in trajectory.steps] == ["a", "stop"]
    assert trajectory.total_reward == 2.0 and trajectory.done


def test_reset_mid_episode_ends_it_once_and_close_is_idempotent():
    env = Counter()
    env.reset(seed=0)
    env.step("a")
    env.reset(seed=1)  # abandons the first episode
    assert env.ended_episodes == 1
    env.close()
    env.close()
    assert env.ended_episodes == 2 and env.closed == 1
    with pytest.raises(EnvStateError, match="after close"):
        env.reset()


def test_render_ansi_shows_the_last_exchange():
    env = Counter(render_mode="ansi")
    env.reset(seed=0)
    env.step("ab")
    assert env.render() == "[action] ab\n[observation] ababab\n[reward] 1"
    with pytest.raises(ValueError, match="render_mode"):
        Counter(render_mode="human")


async def test_async_api_runs_many_envs_on_one_loop():
    envs = [Counter() for _ in range(50)]
    await asyncio.gather(*(env.areset(seed=i) for i, env in enumerate(envs)))
    results = await asyncio.gather(*(env.astep("stop") for env in envs))
    assert all(terminated for _, _, terminated, _, _ in results)


async def test_run_sync_works_inside_a_running_loop():
    async def answer():
        await asyncio.sleep(0)
        return 42

    assert run_sync(answer()) == 42  # offloaded to a helper thread because this loop is busy
