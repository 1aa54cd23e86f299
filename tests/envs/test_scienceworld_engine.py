"""The ScienceWorld engine on real JVMs: start, the fast step, failures, the pool's hooks, the task table.

At most two JVMs run at once here; every one is killed before its test ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import msgspec
import pytest

from agentfly_env.resources.pool import PoolConfig, ResourcePool
from agentfly_envs.scienceworld import EngineFailure, JvmConfig, ScienceWorldEngine, SimulatorError, engine_spec
from agentfly_envs.scienceworld.tasks import DATA_FILE, SIMPLIFICATIONS, read_variations


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture(scope="module")
def engine():
    started = ScienceWorldEngine(JvmConfig(heap_mb=256))
    yield started
    started.close()
    assert started._process.poll() is not None


def test_the_shipped_variation_table_matches_the_jar(engine):
    shipped = json.loads(DATA_FILE.read_text())
    assert read_variations(engine) == shipped
    assert sorted(engine.simplification_names()) == sorted(SIMPLIFICATIONS)


def test_the_fast_step_reports_score_and_completion(engine):
    loaded = engine.load("find-animal", 150, gold=True)
    assert "animal" in loaded.description and "You also see" in loaded.state.observation
    assert 0 <= loaded.state.score < 1 and loaded.state.moves == 0 and loaded.gold
    states = [engine.step(command) for command in loaded.gold]
    scores = [loaded.state.score] + [state.score for state in states]
    assert scores == sorted(scores) and states[-1].completed and states[-1].progress == 1.0
    moves = [state.moves for state in states]
    assert moves == sorted(moves) and 0 < moves[-1] <= len(states)
    assert all(not state.completed for state in states[:-1])


def test_the_fast_step_answers_as_the_servers_own_step(engine):
    """Stepping the world's AgentInterface skips the server's extras, not what the game says or scores."""
    server = engine._server
    plan = engine.load("find-animal", 150, gold=True).gold
    # The server's special inputs and an unknown one along the gold path, then an ambiguous one and its answer.
    commands = ["look around", "task", "help", "xyzzy", *plan[:2], "objects", "wait1", *plan[2:], "open door", "1"]

    def play(step) -> list[tuple[str, float, bool, int, str, str]]:
        engine.load("find-animal", 150)
        return [(*step(command), engine.look(), engine.inventory()) for command in commands]

    ours = play(lambda command: msgspec.structs.astuple(engine.step(command)))
    theirs = play(
        lambda command: (server.step(command), server.getScore(), server.getCompleted(), server.getNumMoves())
    )
    assert ours == theirs
    assert "Task description" in ours[1][0] and ours[1][3] == ours[0][3]  # no time passed
    assert ours[-3][2] and "Ambiguous request" in ours[-2][0] and "door" in ours[-1][0]


def test_free_actions_and_valid_actions_do_not_spend_moves(engine):
    engine.load("boil", 3)
    valid = engine.valid_actions()
    assert "open door to kitchen" in valid and valid == sorted(set(valid))
    assert engine.inventory().startswith("In your inventory")
    assert "This outside location" in engine.look()
    assert engine.step("open door to kitchen").moves == 1
    assert "close door to kitchen" in engine.valid_actions()


def test_a_failed_task_has_a_negative_score(engine):
    engine.load("find-animal", 0)
    state = engine.step("focus on air")
    assert state.failed and state.progress == 0.0 and not state.completed


def test_java_exceptions_leave_the_engine_usable(engine):
    with pytest.raises(SimulatorError, match="ArrayIndexOutOfBounds"):
        engine.load("boil", -1)
    with pytest.raises(ValueError, match="exceeds the total number of variations"):
        engine.load("boil", 10_000)
    assert engine.healthy() and engine.load("boil", 0).state.score == 0


def test_the_heap_is_bounded_and_the_hash_codes_pinned(engine):
    arguments = Path(f"/proc/{engine.pid}/cmdline").read_bytes().split(b"\0")
    assert b"-Xmx256m" in arguments and b"-XX:hashCode=2" in arguments
    assert _rss_mib(engine.pid) < 256 + 300  # heap plus the JVM's own code and metadata


def test_two_jvms_with_different_histories_play_identically(engine):
    """The reason for pinned hash codes: heat flow and room listings follow identity-hash order."""
    first, second = engine, ScienceWorldEngine(JvmConfig(heap_mb=256))
    try:
        second.load("grow-plant", 2)
        for command in ("look around", "open door to greenhouse", "wait"):
            second.step(command)
        plan = first.load("boil", 5, gold=True).gold
        assert plan
        runs = []
        for player in (first, second):
            player.load("boil", 5)
            runs.append([(player.step(command), player.look(), player.inventory()) for command in plan])
        assert runs[0] == runs[1] and runs[0][-1][0].completed
    finally:
        second.close()


async def test_a_killed_jvm_fails_fast_and_every_later_call_too():
    engine = await asyncio.to_thread(ScienceWorldEngine)
    try:
        await engine.call(engine.load, "find-animal", 3)
        os.kill(engine.pid, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(EngineFailure, match="signal 9"):
            await engine.call(engine.step, "look around")
        assert time.monotonic() - started < 10
        assert not engine.alive and not engine.healthy()
        with pytest.raises(EngineFailure):
            await engine.call(engine.look)
    finally:
        engine.close()


async def test_a_hung_jvm_is_killed_at_the_deadline():
    engine = await asyncio.to_thread(ScienceWorldEngine, JvmConfig(call_timeout_s=2))
    try:
        await engine.call(engine.load, "find-animal", 3)
        os.kill(engine.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(EngineFailure, match="no answer within 2 s"):
            await engine.call(engine.step, "look around")
        assert 1.5 < time.monotonic() - started < 10
        engine._process.wait(timeout=10)  # killed, not left stopped
        assert engine._process.returncode == -signal.SIGKILL
    finally:
        engine.close()


def test_a_jvm_that_cannot_start_says_why():
    with pytest.raises(EngineFailure, match="exited at start"):
        ScienceWorldEngine(JvmConfig(java_options=("-XX:+NoSuchOption",)))


async def test_the_pool_recycles_checks_and_replaces_jvms():
    async with ResourcePool(engine_spec(), PoolConfig(size=1, max_uses=3), name="sw") as pool:
        pids = []
        for _ in range(4):
            async with pool.lease(timeout=120) as engine:
                pids.append(engine.pid)
        first = pids[0]
        assert pids[0] == pids[1] == pids[2] != pids[3]  # recycled after three episodes
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)  # the recycled JVM was reaped
        async with pool.lease(timeout=120) as engine:
            os.kill(engine.pid, signal.SIGKILL)
            dead = engine.pid
        async with pool.lease(timeout=120) as engine:  # the health check replaced the dead one
            assert engine.pid != dead and engine.healthy()
            last = engine.pid
        stats = pool.stats()
        assert stats.created == 3 and stats.failures == 1
    with pytest.raises(ProcessLookupError):
        os.kill(last, 0)


def test_config_from_a_mapping_is_checked():
    assert JvmConfig.from_value({"heap_mb": 300}).heap_mb == 300
    with pytest.raises(ValueError, match="invalid JVM config"):
        JvmConfig.from_value({"heap": 300})
    with pytest.raises(ValueError, match="at least 64"):
        JvmConfig(heap_mb=8)
