"""@reward: injection by name, result forms, slow rewards off the event loop."""

from __future__ import annotations

import asyncio
import math
import threading

import pytest

from agentfly_env.tools.rewards import RewardResult, reward


async def test_arguments_are_injected_by_name():
    seen = {}

    @reward
    def check(prediction, answer, trajectory=None):
        seen.update(prediction=prediction, answer=answer, trajectory=trajectory)
        return prediction == answer

    result = await check.compute({"prediction": "4", "answer": "4", "task": {}, "env": None, "unused": 1})
    assert result == RewardResult(1.0)
    assert seen == {"prediction": "4", "answer": "4", "trajectory": None}


async def test_missing_context_value_is_a_clear_programming_error():
    @reward
    def needs_tests(prediction, tests):
        return 0.0

    with pytest.raises(TypeError, match=r"asks for \['tests'\].*available: \['answer', 'prediction'\]"):
        await needs_tests.compute({"prediction": "x", "answer": "y"})


async def test_kwargs_reward_receives_the_whole_context():
    @reward
    def everything(**context):
        return len(context)

    assert (await everything.compute({"a": 1, "b": 2})).score == 2.0


async def test_result_with_components_passes_through():
    @reward(name="graded")
    async def graded(prediction):
        return RewardResult(0.5, {"format": 0.1, "correct": 0.4}, success=False, details={"why": "half"})

    result = await graded.compute({"prediction": "x"})
    assert graded.name == "graded"
    assert result.components == {"format": 0.1, "correct": 0.4}
    assert result.success is False and result.details == {"why": "half"}


@pytest.mark.parametrize("bad", [None, "1.0", math.nan, math.inf, [1.0]])
async def test_non_numeric_or_non_finite_results_are_rejected(bad):
    @reward
    def broken():
        return bad

    with pytest.raises(ValueError, match="expected a finite number or RewardResult"):
        await broken.compute({})


async def test_slow_rewards_run_concurrently_without_blocking_the_loop():
    # Each reward returns only once the other three of its kind have started: in a row, or a blocking
    # one on the loop's thread, the first would wait in vain (BrokenBarrierError, TimeoutError).
    threads_met, tasks_met = threading.Barrier(4, timeout=10), asyncio.Barrier(4)

    @reward(blocking=True)
    def slow_sync(prediction):
        threads_met.wait()
        return 1.0

    @reward
    async def slow_async(prediction):
        await asyncio.wait_for(tasks_met.wait(), 10)
        return 1.0

    results = await asyncio.gather(*(r.compute({"prediction": "p"}) for r in [slow_sync] * 4 + [slow_async] * 4))
    assert all(r.score == 1.0 for r in results)
