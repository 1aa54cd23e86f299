"""AgentVectorEnv: ragged steps, no autoreset by default, autoreset on request, sync use."""

from __future__ import annotations

import asyncio
import contextvars
import functools

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfly_env import AgentEnv, AgentVectorEnv, EnvStateError, ListTasks, Step, ToolEnv, reward, tool

#: A registered id for ``AgentVectorEnv.make``: a small ToolEnv with a calculator, so the core's tests
#: need no env of the suite.
SUMS_ID = "AgentFlyTest/Sums-v0"


@tool
def calculator(expression: str) -> str:
    """Add up integers.

    Args:
        expression: Integers joined by "+", e.g. "1+1".
    """
    return str(sum(int(term) for term in expression.split("+")))


@reward
def correct(prediction, answer):
    return float(prediction == answer)


def sums_env(**kwargs) -> ToolEnv:
    tasks = ListTasks([{"id": f"sum/{n}", "prompt": f"What is {n}+{n}?", "answer": str(2 * n)} for n in range(20)])
    return ToolEnv(tools=[calculator], tasks=tasks, reward=correct, **kwargs)


if SUMS_ID not in gym.registry:
    gym.register(SUMS_ID, entry_point=sums_env)


def test_ragged_steps_touch_only_the_envs_that_act():
    vec = AgentVectorEnv.make(SUMS_ID, num_envs=4)
    observations, infos = vec.reset(seed=10)
    assert len(observations) == 4 and len({info["task"]["id"] for info in infos}) > 1
    turns_before = [env.turn for env in vec.envs]
    result = vec.step(
        [None, '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>', None, None]
    )
    assert result.indices == [1] and result.observations == ["2"]
    assert [env.turn for env in vec.envs] == [turns_before[0], 1, 0, 0]
    vec.close()


def test_finished_envs_wait_for_reset_without_autoreset():
    vec = AgentVectorEnv.make(SUMS_ID, num_envs=2)
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
    vec = AgentVectorEnv.make(SUMS_ID, num_envs=2, autoreset=True)
    vec.reset(seed=0)
    result = vec.step(["<answer>x</answer>", None])
    info = result.infos[0]
    assert info["final_info"]["answer"] == "x" and info["final_observation"] == ""
    assert result.observations[0] == vec.envs[0].trajectory.observation  # the new episode's prompt
    assert not vec.done[0]
    vec.close()


async def test_slow_tools_of_many_envs_overlap():
    all_called = asyncio.Barrier(32)

    @tool
    async def slow() -> str:
        """Slow backend call: returns once every env's call has started."""
        await asyncio.wait_for(all_called.wait(), 10)  # one at a time, the first call would time out
        return "ok"

    @reward
    def zero():
        return 0.0

    def make():
        return ToolEnv(tools=[slow], tasks=ListTasks([{"prompt": "go"}]), reward=zero)

    vec = AgentVectorEnv([make] * 32)
    await vec.areset(seed=0)
    result = await vec.astep(['<tool_call>{"name": "slow", "arguments": {}}</tool_call>'] * 32)
    assert result.observations == ["ok"] * 32  # the 32 calls overlapped
    await vec.aclose()


def test_bad_inputs_are_refused_clearly():
    with pytest.raises(ValueError, match="at least one env"):
        AgentVectorEnv([])
    vec = AgentVectorEnv.make(SUMS_ID, num_envs=2)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="use None for envs that sit out"):
        vec.step(["<answer>1</answer>"])
    with pytest.raises(ValueError, match="3 seeds for 2 envs"):
        vec.reset(seed=[1, 2, 3])
    vec.close()


class Scripted(AgentEnv):
    """Each step suspends ``plan[0]`` times (sleep(0)), then answers, or raises when ``plan[1]`` says so."""

    def __init__(self, index: int, plan: tuple[int, str]) -> None:
        super().__init__(max_turns=3)
        self.index, self.plan = index, plan
        self.seen: list = []

    async def _reset(self, seed, options):
        self.seen.append(("reset", asyncio.current_task(), variable.get()))
        variable.set(f"env {self.index}")
        return f"env {self.index}", {}

    async def _step(self, action):
        suspensions, outcome = self.plan
        for _ in range(suspensions):
            await asyncio.sleep(0)
        self.seen.append(("step", asyncio.current_task(), variable.get()))
        variable.set(f"env {self.index}")
        if outcome == "raise":
            raise ValueError(f"env {self.index}")
        return Step(
            observation=f"{action} from {self.index}", reward=float(self.index), terminated=outcome == "end"
        ), {}


variable: contextvars.ContextVar[str] = contextvars.ContextVar("vector_variable", default="caller")


@settings(max_examples=60, deadline=None)
@given(plans=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["go", "end", "raise"])), min_size=1, max_size=8))
def test_vector_steps_match_stepping_each_env_with_gather(plans):
    vec = AgentVectorEnv([functools.partial(Scripted, i, plan) for i, plan in enumerate(plans)])
    reference = [Scripted(i, plan) for i, plan in enumerate(plans)]

    async def expected():
        await asyncio.gather(*(env.areset() for env in reference))
        return await asyncio.gather(*(env.astep(f"a{i}") for i, env in enumerate(reference)))

    loop = asyncio.new_event_loop()
    try:
        try:
            outcomes = loop.run_until_complete(expected())
        except ValueError as error:
            outcomes = error
    finally:
        loop.close()
    observations, _ = vec.reset()
    assert observations == [f"env {i}" for i in range(len(plans))]
    if isinstance(outcomes, ValueError):
        with pytest.raises(ValueError) as raised:
            vec.step([f"a{i}" for i in range(len(plans))])
        assert str(raised.value) == str(outcomes)
    else:
        result = vec.step([f"a{i}" for i in range(len(plans))])
        assert result.observations == [outcome[0] for outcome in outcomes]
        assert result.rewards.tolist() == [outcome[1] for outcome in outcomes]
        assert result.terminated.tolist() == [outcome[2] for outcome in outcomes]
    for env in vec.envs:
        # every call ran in a task, with the caller's context and none of the other envs'
        tasks = [task for _, task, _ in env.seen]
        assert all(isinstance(task, asyncio.Task) for task in tasks)
        assert {value for _, _, value in env.seen} == {"caller"}
    # A step that suspended kept its task: no step that started after it (while it waited) ran in it.
    steps = [(env.plan[0], task) for env in vec.envs for kind, task, _ in env.seen if kind == "step"]
    for position, (suspensions, task) in enumerate(steps):
        assert not suspensions or all(other is not task for _, other in steps[position + 1 :])
    vec.close()


def test_envs_that_suspend_and_envs_that_do_not_step_together():
    @tool
    async def waits(tag: str) -> str:
        """Answers after a real wait."""
        await asyncio.sleep(0.01)
        return f"waited {tag}"

    @tool
    def instant(tag: str) -> str:
        """Answers at once."""
        return f"instant {tag}"

    @reward
    def zero():
        return 0.0

    def make():
        return ToolEnv(tools=[waits, instant], tasks=ListTasks([{"prompt": "go"}]), reward=zero)

    vec = AgentVectorEnv([make] * 6)
    vec.reset(seed=0)
    calls = [
        f'<tool_call>{{"name": "{"waits" if i % 2 else "instant"}", "arguments": {{"tag": "{i}"}}}}</tool_call>'
        for i in range(6)
    ]
    result = vec.step(calls)
    assert result.observations == [f"{'waited' if i % 2 else 'instant'} {i}" for i in range(6)]
    assert [env.turn for env in vec.envs] == [1] * 6
    vec.close()
