"""agentfly-play, the quick start's main job: episodes, summary table, trajectories on disk."""

from __future__ import annotations

from agentfly_env.play import main
from agentfly_env.recording import read_trajectories


def test_play_writes_every_episode_and_prints_the_summary(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["AgentFly/Math-v0", "--episodes", "12", "--concurrency", "5", "--out", str(out)]) == 0
    trajectories = list(read_trajectories(out))
    assert len(trajectories) == 12
    assert sorted(t.seed for t in trajectories) == list(range(12))  # each episode played exactly once
    assert all(t.total_reward == 1.0 and t.steps[-1].terminated for t in trajectories)
    printed = capsys.readouterr().out
    assert "AgentFly/Math-v0" in printed and "1.00" in printed
