"""``agentfly-bench --suite learning --quick``: each preset runs end to end (warm start, RL, three evaluated
stages) on the bundled SmolLM2, and the table and the plot come out. The learning itself is the suite's full run
(figures in the README); here the budgets are a smoke run's."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from agentfly_bench.suites import available, learning


def test_the_suite_runs_a_preset_through_its_three_stages(tmp_path, smollm2_dir, monkeypatch):
    monkeypatch.setenv("AGENTFLY_MODEL_CACHE", str(Path(smollm2_dir).parent))  # the preset's model, converted once
    assert available()["learning"] is learning and learning.DESCRIPTION
    results = learning.run(quick=True, envs=["search"], out_dir=str(tmp_path))
    row = results["envs"]["search"]
    assert row["env"] == "AgentFly/Search-v0" and row["steps"] == 1 and len(row["rewards"]) == 1
    assert list(row["stages"]) == ["base", "warm start", "rl"]
    for stage in row["stages"].values():
        assert 0 <= stage["success_rate"] <= 1 and stage["turns_per_episode"] >= 1
    assert (tmp_path / "search" / "warm-start" / "model.safetensors").exists()
    assert (tmp_path / "learning.png").stat().st_size > 10_000
    console = Console(record=True, width=160)
    learning.render(results, console)
    printed = console.export_text()
    assert "--config search" in printed and "AgentFly/Search-v0" in printed and "plumbing only" in printed


def test_an_unknown_env_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"unknown envs \['chess'\]; choose from \['math', 'search'\]"):
        learning.run(quick=True, envs=["chess"])
