"""``agentfly-bench --suite serve``: both servers in one run, on a short sleep and small batches."""

from __future__ import annotations

import pytest
from rich.console import Console

from agentfly_bench.suites import serve


def test_the_serve_suite_measures_ours_and_says_how_to_get_openenv(monkeypatch, capsys):
    monkeypatch.setenv("AGENTFLY_OPENENV_PYTHON", "/nonexistent/python")
    results = serve.run(quick=True, wait=0.05, sizes=[4, 16], budget_s=120, reps=2)
    assert "make peers" in results["openenv_error"] and results["rows"]["openenv"] == []
    rows = results["rows"]["ours"]
    assert [row["sessions"] for row in rows] == [4, 16] and all(row["success"] == 1.0 for row in rows)
    assert all(row["reps_passed"] == 2 for row in rows)  # each size played twice, the better run kept
    assert all(row["step_added_p99_s"] >= 0 and row["setup_p50_s"] > 0 for row in rows)
    assert results["ours"]["ceiling"] == 16
    serve.render(results, Console(width=200))
    assert "make peers" in capsys.readouterr().out


@pytest.mark.skipif(serve.openenv_python() is None, reason="openenv's venv is missing: make peers")
def test_the_serve_suite_runs_openenv_side_by_side():
    results = serve.run(quick=True, wait=0.05, sizes=[8], budget_s=120)
    assert results["openenv_error"] is None
    for name in ("ours", "openenv"):
        (row,) = results["rows"][name]
        assert row["sessions"] == 8 and row["success"] == 1.0
        assert results[name]["ceiling"] == 8
