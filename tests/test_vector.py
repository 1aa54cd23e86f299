"""AgentVectorEnv: ragged steps, no autoreset by default, autoreset on request, sync use."""

from __future__ import annotations

import asyncio
import time

import pytest

import agentfly_env  # noqa: F401  (registers the ids)
from agentfly_env import AgentVectorEnv, EnvStateError, ListTasks, ToolEnv, reward, tool


def test_ragged_steps_touch_only_the_envs_that_act():
    vec = AgentVectorEnv.make("AgentFly/Math-v0", num_envs=4)
    observations, infos = vec.reset(seed=10)
    assert len(observations) == 4 and len({info["task"]["id"] for info in infos}) > 1
    turns_before = [env.turn for env in vec.envs]
    result = vec.step([None, '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>', None, None])
    assert result.indices == [1] and result.observations == ["2"]
    assert [env.turn for env in vec.envs] == [turns_before[0], 1, 0, 0]
    vec.close()


def test_finished_envs_wait_for_reset_without_autoreset():
    vec = AgentVectorEnv.make("AgentFly/Math-v0", num_envs=2)
    vec.reset(seed=0)
    result = vec.step({0: "<answer>x</answer>"})
    assert result.terminated.tolist() == [True]
    with pytest.raises(EnvStateError, match=r"envs \[0\] have ended"):
        vec.step({0: "<answer>y</answer>", 1: "<answer>y</answer>"})
    assert vec.envs[1].turn == 0  # the refused call stepped nothing
    vec.reset(indices=[0], seed=5)
    assert vec.step({0: "<answer>y</answer>"}).indices == [0]
    vec.close()


def test_autoreset_returns_the_new_episode_and_keeps_the_final_one():
    vec = AgentVectorEnv.make("AgentFly/Math-v0", num_envs=2, autoreset=True)
    vec.reset(seed=0)
    result = vec.step(["<answer>x</answer>", None])
    info = result.infos[0]
    assert info["final_info"]["answer"] == "x" and info["final_observation"] == ""
    assert result.observations[0] == vec.envs[0].trajectory.observation  # the new episode's prompt
    assert not vec.done[0]
    vec.close()


async def test_slow_tools_of_many_envs_overlap():
    @tool
    async def slow() -> str:
        """Slow backend call."""
        await asyncio.sleep(0.2)
        return "ok"

    @reward
    def zero():
        return 0.0

    def make():
        return ToolEnv(tools=[slow], tasks=ListTasks([{"prompt": "go"}]), reward=zero)

    vec = AgentVectorEnv([make] * 32)
    await vec.areset(seed=0)
    started = time.perf_counter()
    result = await vec.astep(['<tool_call>{"name": "slow", "arguments": {}}</tool_call>'] * 32)
    assert time.perf_counter() - started < 0.6  # 32 x 0.2 s overlapped
    assert result.observations == ["ok"] * 32
    await vec.aclose()


def test_bad_inputs_are_refused_clearly():
    with pytest.raises(ValueError, match="at least one env"):
        AgentVectorEnv([])
    vec = AgentVectorEnv.make("AgentFly/Math-v0", num_envs=2)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="use None for envs that sit out"):
        vec.step(["<answer>1</answer>"])
    with pytest.raises(ValueError, match="3 seeds for 2 envs"):
        vec.reset(seed=[1, 2, 3])
    vec.close()
