"""Trajectory JSONL: round trip, crash mid-write, full disk; nothing already written is lost."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentfly_env.core.recording import RecordingError, TrajectoryWriter, read_trajectories
from agentfly_env.core.types import Step, ToolCall, ToolResult, Trajectory


def trajectory(n: int) -> Trajectory:
    step = Step(
        action='<tool_call>{"name": "calc"}</tool_call>',
        observation="ünïcode\nand newlines",
        reward=0.5,
        terminated=False,
        truncated=False,
        tool_calls=[ToolCall("calc", {"expression": "1+1"})],
        tool_results=[ToolResult("calc", "2")],
    )
    return Trajectory(env_id="AgentFly/Math-v0", observation=f"task {n}", seed=n, task={"id": n}, steps=[step])


def test_round_trip(tmp_path):
    path = tmp_path / "sub" / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        for n in range(3):
            writer.write(trajectory(n))
    assert writer.count == 3
    assert list(read_trajectories(path)) == [trajectory(n) for n in range(3)]


def test_a_process_killed_mid_run_loses_nothing_it_wrote(tmp_path):
    path = tmp_path / "t.jsonl"
    script = f"""
import os
from agentfly_env.core.recording import TrajectoryWriter
from agentfly_env.core.types import Trajectory
writer = TrajectoryWriter({str(path)!r})
for n in range(5):
    writer.write(Trajectory(env_id="AgentFly/Math-v0", observation=f"task {{n}}", seed=n))
# simulate dying in the middle of a line: a raw partial write, then SIGKILL
os.write(writer._file.fileno(), b'{{"env_id": "AgentFly/Ma')
os.kill(os.getpid(), 9)
"""
    process = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert process.returncode == -9, process.stderr.decode()
    with pytest.warns(UserWarning, match="partial line"):
        assert [t.seed for t in read_trajectories(path)] == [0, 1, 2, 3, 4]
    with TrajectoryWriter(path) as writer:  # a new writer starts a fresh line after the fragment
        writer.write(trajectory(5))
    with pytest.warns(UserWarning, match="partial line"):
        assert [t.seed for t in read_trajectories(path)] == [0, 1, 2, 3, 4, 5]


def test_full_disk_raises_a_clear_error_and_keeps_earlier_lines(tmp_path):
    # Linux's /dev/full accepts opens and fails every write with ENOSPC, as a full disk does.
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as good:
        good.write(trajectory(0))
    writer = TrajectoryWriter(path)
    writer._file.close()
    writer._file = open("/dev/full", "ab", buffering=0)
    with pytest.raises(RecordingError, match="cannot write trajectory to .*t.jsonl"):
        writer.write(trajectory(1))
    writer.close()
    assert [t.seed for t in read_trajectories(path)] == [0]


def test_damage_in_the_middle_is_an_error_not_silently_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path, durable=False) as writer:
        writer.write(trajectory(0))
    with open(path, "ab") as handle:
        handle.write(b'{"env_id": 3}\n')
    with TrajectoryWriter(path, durable=False) as writer:
        writer.write(trajectory(1))
    with pytest.raises(ValueError, match=r"t.jsonl:2: damaged trajectory line"):
        list(read_trajectories(path))
