"""agentfly-play, the quick start's main job: episodes, summary table, trajectories on disk."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import agentfly_env
from agentfly_env.core.recording import read_trajectories
from agentfly_env.registration import MIXTURE_ID
from agentfly_env.runners.play import main


def test_play_writes_every_episode_and_prints_the_summary(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["AgentFly/Math-v0", "--episodes", "12", "--concurrency", "5", "--out", str(out)]) == 0
    trajectories = list(read_trajectories(out))
    assert len(trajectories) == 12
    assert sorted(t.seed for t in trajectories) == list(range(12))  # each episode played exactly once
    assert all(t.total_reward == 1.0 and t.steps[-1].terminated for t in trajectories)
    printed = capsys.readouterr().out
    assert "AgentFly/Math-v0" in printed and "1.00" in printed
    # The per-tool table: the expert calls the calculator once an episode, and it never fails.
    [row] = [line for line in printed.splitlines() if "calculator" in line]
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    assert cells[:5] == ["AgentFly/Math-v0", "calculator", "1.00", "0.00", "0.00"]
    assert 0 < float(cells[5]) <= float(cells[6])  # latency p50 and p95 in ms


def test_make_play_plays_every_registered_env_it_can_and_says_why_it_skips_the_others(tmp_path):
    """`make play` as the README runs it (the console script, every registered env), one episode each."""
    out = tmp_path / "play.jsonl"
    command = [str(Path(sys.executable).with_name("agentfly-play")), "--episodes", "1", "--concurrency", "1"]
    run = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    skipped = dict(re.findall(r"^skipped (\S+): (.+)$", run.stdout, flags=re.MULTILINE))
    reason = skipped.pop(MIXTURE_ID)
    assert reason.startswith("needs arguments") and "give at least one component env" in reason  # the env's own words
    played = {trajectory.env_id for trajectory in read_trajectories(out)}
    assert played == set(agentfly_env.registered_ids()) - {MIXTURE_ID} - set(skipped), skipped
    assert {"AgentFly/Math-v0", "AgentFly/Code-v0"} <= played


def test_an_env_asked_for_by_name_that_needs_arguments_fails_saying_why(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([MIXTURE_ID, "--episodes", "1", "--out", str(tmp_path / "t.jsonl")])
    assert exit_.value.code == 2
    assert f"cannot play {MIXTURE_ID}: needs arguments" in capsys.readouterr().err
