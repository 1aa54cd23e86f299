"""Per-tool metrics: each call's status (derived from ``ToolResult.error``) and wall time (``duration_s``, left
out of comparisons), and the one computation of calls per episode, error and timeout rates and latency."""

from __future__ import annotations

import asyncio
import typing

import msgspec
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfly_env import ListTasks, ToolEnv, reward, tool
from agentfly_env.core.types import (
    TOOL_METRICS,
    Step,
    ToolError,
    ToolResult,
    ToolStats,
    Trajectory,
    tool_metrics,
    tool_stats,
    tool_status,
)

EXPECTED_STATUS = {
    None: "ok",
    "tool_error": "error",
    "resource_broken": "error",
    "timeout": "timeout",
    "invalid_arguments": "invalid_arguments",
    "unknown_tool": "unknown_tool",
}


def test_every_error_kind_has_its_status():
    assert set(EXPECTED_STATUS) == {None, *typing.get_args(ToolError)}


@given(st.sampled_from([None, *typing.get_args(ToolError)]), st.text(max_size=5), st.floats(0, 10))
def test_a_calls_status_is_derived_from_its_error(error, output, seconds):
    result = ToolResult("f", output, error, duration_s=seconds)
    assert tool_status(error) == result.status == EXPECTED_STATUS[error]
    assert "status" not in msgspec.to_builtins(result)  # derived, never stored


def calls(*results: tuple[str, str | None, float]) -> Step:
    """A step whose tool results are ``(name, error, milliseconds)``."""
    return Step(
        observation="", reward=0.0, tool_results=[ToolResult(n, "", e, duration_s=ms / 1000) for n, e, ms in results]
    )


def test_stats_of_hand_made_episodes():
    episodes = [
        [calls(("search", None, 10), ("search", "timeout", 50)), calls(("open", None, 2))],
        [calls(("search", None, 20)), calls(("search", "tool_error", 30), ("open", "invalid_arguments", 4))],
        [Step(observation="", reward=1.0, terminated=True)],  # no calls: counts as an episode all the same
        [],
    ]
    stats = tool_stats(episodes)
    assert list(stats) == ["open", "search"]
    # search: 10, 20, 30, 50 ms. p50 interpolates halfway between 20 and 30; p95 at rank 2.85: 30 + 0.85 * 20.
    assert stats["search"] == ToolStats(
        calls=4, calls_per_episode=1.0, error_rate=0.5, timeout_rate=0.25, latency_ms_p50=25.0, latency_ms_p95=47.0
    )
    assert stats["open"].calls_per_episode == 0.5 and stats["open"].error_rate == 0.5
    assert stats["open"].timeout_rate == 0.0 and stats["open"].latency_ms_p50 == pytest.approx(3.0)
    assert stats["open"].latency_ms_p95 == pytest.approx(3.9)
    flat = tool_metrics(stats)
    assert set(flat) == {f"tool/{name}/{field}" for name in ("open", "search") for field in TOOL_METRICS}
    assert flat["tool/search/latency_ms_p95"] == 47.0 and flat["tool/open/calls_per_episode"] == 0.5
    assert tool_stats([]) == {} and tool_metrics({}) == {}


@given(st.lists(st.floats(0, 60, allow_nan=False), min_size=1, max_size=40))
def test_latency_percentiles_are_numpys(seconds):
    stats = tool_stats([[calls(*(("f", None, 1000 * s) for s in seconds))]])["f"]
    assert stats.latency_ms_p50 == pytest.approx(np.percentile(np.asarray(seconds) * 1000, 50), abs=1e-9)
    assert stats.latency_ms_p95 == pytest.approx(np.percentile(np.asarray(seconds) * 1000, 95), abs=1e-9)


@tool(timeout_s=0.05)
async def nap(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    return "rested"


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("no")


@reward
def nothing() -> float:
    return 0.0


def call(name: str, arguments: str = "{}") -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {arguments}}}</tool_call>'


TURNS = [
    call("nap", '{"seconds": 0.01}'),
    call("nap", '{"seconds": 1}'),  # past its timeout
    call("nap", '{"seconds": "long"}') + call("broken") + call("missing"),
]


def play() -> Trajectory:
    env = ToolEnv(tools=[nap, broken], tasks=ListTasks([{"prompt": "Rest."}]), reward=nothing, max_turns=10)
    env.reset(seed=3)
    for action in TURNS:
        env.step(action)
    trajectory = env.trajectory
    env.close()
    return trajectory


def test_each_call_carries_its_status_and_wall_time_and_seeded_steps_still_compare_equal():
    first, second = play(), play()
    results = [result for step in first.steps for result in step.tool_results]
    statuses = [result.status for result in results]
    assert statuses == ["ok", "timeout", "invalid_arguments", "error", "unknown_tool"]
    assert results[0].duration_s >= 0.01 and 0.05 <= results[1].duration_s < 1
    assert all(result.duration_s > 0 for result in results)  # an unknown tool's too: what the env spent on it
    assert [r.duration_s for s in second.steps for r in s.tool_results] != [r.duration_s for r in results]
    assert first.steps == second.steps  # the timing is left out of comparisons
    assert msgspec.json.decode(msgspec.json.encode(first), type=Trajectory).steps[0].tool_results[0].duration_s == (
        results[0].duration_s
    )  # but kept in the records written and sent
    stats = tool_stats([first.steps])
    assert stats["nap"].calls == 3 and stats["nap"].timeout_rate == pytest.approx(1 / 3)
    assert stats["nap"].error_rate == pytest.approx(2 / 3) and stats["broken"].error_rate == 1.0
    assert stats["missing"].calls_per_episode == 1.0
