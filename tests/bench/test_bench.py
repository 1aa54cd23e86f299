"""agentfly-bench end to end on a small budget: every section present, numbers sane, baselines run."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from agentfly_bench.cli import main
from agentfly_bench.suites import gem as gem_suite
from agentfly_bench.suites.gem import gem_python


def test_bench_writes_json_with_core_env_and_baselines(tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = main(
        [
            "AgentFly/Math-v0",
            "--quick",
            "--concurrency",
            "1",
            "4",
            "--steps",
            "40",
            "--compare",
            "gym-sync",
            "gym-async",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    results = json.loads(out.read_text())
    for name in ("pool_lease", "astep_overhead"):
        stats = results["core"][name]
        assert 0 < stats["p50_us"] <= stats["p99_us"] and stats["n"] > 1000
    env = results["envs"]["AgentFly/Math-v0"]
    assert env["step"]["n"] == 40 and env["reset"]["p50_us"] > 0
    assert set(env["throughput"]) == {"1", "4"}
    for row in env["throughput"].values():
        assert set(row) == {"agentfly", "gym-sync", "gym-async"} and all(v > 0 for v in row.values())
    printed = capsys.readouterr().out
    assert "steps/s by number of concurrent envs" in printed and "ours / gym-async" in printed


def test_unknown_env_id_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["AgentFly/Nope-v0"])
    assert "unknown env ids ['AgentFly/Nope-v0']" in capsys.readouterr().err


def test_gem_suite_without_gem_gives_our_figures_and_says_how_to_get_gem(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AGENTFLY_GEM_PYTHON", str(tmp_path / "no-such-venv" / "python"))
    out = tmp_path / "gem.json"
    assert main(["--suite", "gem", "--quick", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["gem"]
    assert "make peers" in results["gem_error"]
    assert set(results["rows"]) == {"sync", "async", "vector"}
    for row in results["rows"].values():
        assert row["agentfly"] > 0 and row["agentfly_solved"] == 1.0  # the scripted answers are right
        assert row["gem"] is None and row["ratio"] is None
        assert len(row["agentfly_rounds"]) == results["config"]["rounds"]
    assert "make peers" in capsys.readouterr().out


@pytest.mark.skipif(gem_python() is None, reason="GEM's venv is missing: make peers")
def test_gem_suite_runs_gem_in_its_own_venv_side_by_side(capsys):
    results = gem_suite.run(quick=True, rounds=2, seconds=0.02)
    assert results["gem_error"] is None
    assert results["config"]["gem"]["gem-llm"] == "0.1.0"
    assert results["config"]["gem"]["reasoning-gym"] != results["config"]["agentfly"]["reasoning-gym"]
    for row in results["rows"].values():
        assert row["agentfly"] > 0 and row["gem"] > 0
        assert row["ratio"] == pytest.approx(row["agentfly"] / row["gem"])
        assert row["agentfly_solved"] == 1.0 and row["gem_solved"] == 1.0  # both sides answer correctly
    gem_suite.render(results, Console(width=200))
    printed = capsys.readouterr().out
    assert "agentfly / GEM" in printed and "64 envs, vector" in printed
