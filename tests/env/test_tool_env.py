"""ToolEnv driven by a scripted client: tool calls, answers, errors as observations, pooled resources."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfly_env import ListTasks, PoolConfig, ResourceManager, ResourceSpec, RewardResult, ToolEnv, reward, tool


def call(name: str, arguments: str = "{}") -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {arguments}}}</tool_call>'


@tool(examples=[{"seconds": 0.001}])
async def wait(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@reward
def graded(prediction, answer):
    correct = float(prediction == answer)
    return RewardResult(correct, {"correct": correct, "format": 1.0})


TASKS = ListTasks([{"id": "sum", "prompt": "What is 2 + 3?", "answer": "5"}])


def make_env(**kwargs) -> ToolEnv:
    return ToolEnv(tools=[wait, add], tasks=TASKS, reward=graded, **kwargs)


def test_reset_info_carries_task_tools_and_system_prompt():
    env = make_env()
    observation, info = env.reset(seed=0)
    assert observation == "What is 2 + 3?"
    assert info["task"] == {"id": "sum", "prompt": "What is 2 + 3?", "answer": "5"}
    assert [t["function"]["name"] for t in info["tools"]] == ["wait", "add"]
    assert '"name": "add"' in info["system_prompt"] and "<answer>" in info["system_prompt"]
    assert "<tool_call>" in info["system_prompt"]


def test_a_compact_system_prompt_of_ones_own_replaces_the_tool_descriptions():
    env = make_env(system_prompt="  Add with <tool_call>; answer in <answer>.  ", describe_tools=False)
    _, info = env.reset(seed=0)
    assert info["system_prompt"] == "Add with <tool_call>; answer in <answer>."
    assert [t["function"]["name"] for t in info["tools"]] == ["wait", "add"]  # still offered and callable
    observation, *_ = env.step(call("add", '{"a": 2, "b": 3}'))
    assert observation == "5"


def test_tool_call_then_answer_ends_with_reward_components():
    env = make_env()
    env.reset(seed=0)
    observation, reward_value, terminated, truncated, info = env.step("Let me add. " + call("add", '{"a": 2, "b": 3}'))
    assert (observation, reward_value, terminated, truncated) == ("5", 0.0, False, False)
    assert info["step"].tool_calls[0].name == "add" and info["step"].tool_results[0].output == "5"
    assert info["step"].errors == {}
    observation, reward_value, terminated, truncated, info = env.step("It is <answer> 5 </answer>")
    assert (reward_value, terminated, truncated) == (1.0, True, False)
    assert info["step"].success is True and info["answer"] == "5"
    assert info["step"].reward_components == {"correct": 1.0, "format": 1.0}


def test_wrong_answer_scores_zero_and_is_not_success():
    env = make_env()
    env.reset(seed=0)
    _, reward_value, terminated, _, info = env.step("<answer>6</answer>")
    assert (reward_value, terminated, info["step"].success) == (0.0, True, False)


async def test_calls_in_one_turn_run_concurrently():
    all_called = asyncio.Barrier(3)

    @tool
    async def meet() -> str:
        """Return once the turn's three calls have all started."""
        await asyncio.wait_for(all_called.wait(), 10)  # one at a time, the first call would time out
        return "met"

    env = ToolEnv(tools=[meet], tasks=TASKS, reward=graded)
    await env.areset(seed=0)
    observation, *_, info = await env.astep(call("meet", "{}") * 3)
    assert observation == "\n".join(["[meet] met"] * 3)
    assert len(info["step"].tool_results) == 3


def test_bad_turns_become_observations_and_counters():
    env = make_env(max_turns=20)
    env.reset(seed=0)
    observation, _, _, _, info = env.step(call("multiply", '{"a": 1}'))
    assert "unknown tool `multiply`" in observation and "wait, add" in observation
    assert info["step"].errors == {"unknown_tool": 1}
    observation, _, _, _, info = env.step(call("add", '{"a": "two", "b": 3}'))
    assert "invalid arguments for `add`" in observation and info["step"].errors == {"invalid_arguments": 1}
    observation, _, _, _, info = env.step('<tool_call>{"name": "add", "arguments": {"a": 1,</tool_call>')
    assert observation.startswith("Error:") and info["step"].errors == {"parse_error": 1}
    observation, _, _, _, info = env.step("I am thinking out loud.")
    assert "No tool call or final answer found" in observation and info["step"].errors == {"no_action": 1}
    observation, _, _, _, info = env.step(call("add", '{"a": 1, "b": 1}') * 10)
    assert info["step"].errors == {"too_many_calls": 1} and "only the first 8 were run" in observation
    assert len(info["step"].tool_results) == 8


def test_finish_tool_answer_mode():
    env = make_env(answer_mode="tool")
    _, info = env.reset(seed=0)
    assert "finish" in [t["function"]["name"] for t in info["tools"]]
    assert env.step("<answer>5</answer>")[2] is False  # tags mean nothing in tool mode
    _, reward_value, terminated, _, _ = env.step(call("finish", '{"answer": "5"}'))
    assert (reward_value, terminated) == (1.0, True)


@pytest.mark.parametrize(("arguments", "named"), [("{}", "`answer`"), ('{"solution": "5"}', "`solution`")])
def test_malformed_finish_call_says_what_is_wrong(arguments, named):
    env = make_env(answer_mode="tool")
    env.reset(seed=0)
    observation, _, terminated, _, info = env.step(call("finish", arguments))
    assert not terminated and info["step"].errors == {"invalid_arguments": 1}
    assert "unknown tool" not in observation and named in observation


def test_other_parsers_plug_in():
    env = make_env(parser="react")
    _, info = env.reset(seed=0)
    assert "Action:" in info["system_prompt"]
    assert env.step('Thought: add\nAction: add\nAction Input: {"a": 20, "b": 22}')[0] == "42"


def test_action_space_samples_plausible_calls_that_the_env_accepts():
    env = make_env(max_turns=100)
    env.reset(seed=0)
    env.action_space.seed(0)
    kinds = set()
    for _ in range(40):
        action = env.action_space.sample()
        assert action in env.action_space
        _, _, terminated, _, info = env.step(action)
        kinds.add("answer" if terminated else info["step"].tool_calls[0].name)
        assert "parse_error" not in info["step"].errors and "unknown_tool" not in info["step"].errors
        if terminated:
            env.reset()
    assert kinds == {"answer", "wait", "add"}


class Session:
    """A stand-in for an expensive stateful backend (e.g. a sandboxed interpreter)."""

    created = 0

    def __init__(self):
        Session.created += 1
        self.values: list[str] = []


@tool(resource="session", timeout_s=0.1)
async def remember(value: str, resource: Session) -> str:
    """Store a value in the session and list what it holds.

    Args:
        value: What to store; "hang" blocks the backend.
    """
    if value == "hang":
        await asyncio.sleep(5)
    resource.values.append(value)
    return ",".join(resource.values)


async def test_stateful_tools_lease_one_resource_per_episode():
    Session.created = 0
    manager = ResourceManager()
    manager.register("session", ResourceSpec(create=Session, reset=lambda s: s.values.clear()), PoolConfig(size=1))
    env = ToolEnv(tools=[remember], tasks=TASKS, reward=graded, resources=manager)
    await env.areset(seed=0)
    assert (await env.astep(call("remember", '{"value": "a"}')))[0] == "a"
    assert (await env.astep(call("remember", '{"value": "b"}')))[0] == "a,b"
    assert manager.stats()["session"].in_use == 1
    await env.astep("<answer>5</answer>")
    assert manager.stats()["session"].in_use == 0  # released as soon as the episode ended
    await env.areset(seed=1)
    assert (await env.astep(call("remember", '{"value": "c"}')))[0] == "c"  # reset between episodes
    observation = (await env.astep(call("remember", '{"value": "hang"}')))[0]
    assert "timed out" in observation and "restarted" in observation
    assert (await env.astep(call("remember", '{"value": "d"}')))[0] == "d"  # a fresh session
    assert Session.created == 2
    await env.aclose()
    assert manager.stats()["session"].in_use == 0
    await manager.close()


async def test_an_exhausted_pool_is_reported_to_the_model():
    manager = ResourceManager()
    manager.register("session", ResourceSpec(create=Session), PoolConfig(size=1))
    holder = await manager.pool("session").acquire()
    env = ToolEnv(tools=[remember], tasks=TASKS, reward=graded, resources=manager, lease_timeout_s=0.05)
    await env.areset(seed=0)
    observation, _, _, _, info = await env.astep(call("remember", '{"value": "a"}'))
    assert "`remember` is unavailable" in observation and info["step"].errors == {"tool_error": 1}
    await holder.release()
    await manager.close()


async def test_cached_tools_hit_on_repeat():
    calls = 0

    @tool(cache=True)
    def lookup(word: str) -> str:
        """Look a word up."""
        nonlocal calls
        calls += 1
        return word.upper()

    env = ToolEnv(tools=[lookup], tasks=TASKS, reward=graded)
    await env.areset(seed=0)
    first = (await env.astep(call("lookup", '{"word": "hi"}')))[4]["step"].tool_results[0]
    second = (await env.astep(call("lookup", '{"word": "hi"}')))[4]["step"].tool_results[0]
    assert (first.output, first.cached, second.output, second.cached) == ("HI", False, "HI", True)
    assert calls == 1
    assert env.stats()["cache"]["hits"] == 1


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=2000))
def test_any_text_is_a_valid_step(text):
    env = make_env(max_turns=3)
    env.reset(seed=0)
    observation, reward_value, terminated, truncated, info = env.step(text)
    assert isinstance(observation, str) and isinstance(reward_value, float)
    assert terminated or observation  # a non-final turn always tells the model something


# ----------------------------------------------------------------- the turn report: tools that decide the episode


@tool
def pay(amount: int, turn) -> str:
    """Pay; paying ends the episode, scored by the amount, and paying nothing counts as an error.

    Args:
        amount: How much.
    """
    if amount <= 0:
        turn.count_error("nothing_paid")
        return "Nothing paid."
    turn.end_episode(RewardResult(amount / 10, {"paid": float(amount)}) if amount < 10 else None)
    return f"Paid {amount}."


@tool
def crash(turn) -> str:
    """A backend that dies."""
    turn.truncate("backend_died", backend_error="gone")
    return "The backend died."


def test_a_tool_ends_the_episode_with_its_result_or_the_envs_reward():
    env = make_env_with(pay)
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(call("pay", '{"amount": 4}'))
    assert (observation, reward, terminated, truncated) == ("Paid 4.", 0.4, True, False)
    assert info["step"].reward_components == {"paid": 4.0} and not info["step"].success and info["step"].terminated
    env.reset(seed=0)
    # No result given: the env's own reward scores the episode (no prediction: 0 here).
    _, reward, terminated, _, info = env.step(call("pay", '{"amount": 12}'))
    assert (reward, terminated) == (0.0, True) and info["step"].reward_components == {"correct": 0.0, "format": 1.0}


def test_a_tool_counts_errors_and_truncates_without_reward():
    env = make_env_with(pay, crash)
    env.reset(seed=0)
    _, _, terminated, _, info = env.step(call("pay", '{"amount": 0}'))
    assert not terminated and info["step"].errors == {"nothing_paid": 1} and info["step"].errors == {"nothing_paid": 1}
    observation, reward, terminated, truncated, info = env.step(call("pay", '{"amount": 5}') + call("crash"))
    assert (reward, terminated, truncated) == (0.0, False, True) and not info["step"].success
    assert info["step"].truncation_reason == "backend_died" and info["backend_error"] == "gone"
    assert "[crash] The backend died." in observation


def test_every_turn_can_be_scored():
    scores = iter([0.25, 0.5, 1.0])
    progress = reward(lambda: RewardResult(next(scores), {"progress": 1.0}), name="progress")
    env = ToolEnv(tools=[add], tasks=TASKS, reward=progress, reward_every_turn=True)
    env.reset(seed=0)
    rewards = [env.step(call("add", '{"a": 1, "b": 2}'))[1] for _ in range(2)]
    *_, info = env.step("<answer>5</answer>")
    assert rewards == [0.25, 0.5] and info["step"].success and info["step"].reward_components == {"progress": 1.0}


def test_without_answers_only_a_tool_ends_the_episode():
    env = make_env_with(pay, answer_mode="none")
    _, info = env.reset(seed=0)
    assert "<answer>" not in info["system_prompt"] and info["start"].system_prompt == info["system_prompt"]
    _, _, terminated, _, info = env.step("<answer>5</answer>")
    assert not terminated and info["step"].errors == {"no_action": 1}


def test_a_tool_that_reports_to_its_turn_cannot_be_cached():
    with pytest.raises(ValueError, match="cannot be cached"):
        tool(cache=True)(crash.function)


def make_env_with(*tools, **kwargs) -> ToolEnv:
    return ToolEnv(tools=list(tools), tasks=TASKS, reward=graded, **kwargs)
