"""agentfly-bench end to end on a small budget: every section present, numbers sane, baselines run."""

from __future__ import annotations

import json

import pytest

from agentfly_bench.cli import main


def test_bench_writes_json_with_core_env_and_baselines(tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = main(
        ["AgentFly/Math-v0", "--quick", "--concurrency", "1", "4", "--steps", "40", "--compare", "gym-sync", "gym-async", "--json", str(out)]
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
