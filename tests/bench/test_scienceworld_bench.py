"""``agentfly-bench --suite scienceworld`` end to end on a tiny workload: every section measured and rendered."""

from __future__ import annotations

from rich.console import Console

from agentfly_bench.suites import available, scienceworld


def test_the_suite_is_found_and_measures_everything_on_a_tiny_workload():
    assert available()["scienceworld"] is scienceworld and scienceworld.DESCRIPTION
    results = scienceworld.measure(["find-animal"], actions_per_task=3, pool_sizes=[1], starts=1, compare_hashing=False)
    assert results["steps"] == {"gold": 3, "random": 3}
    for path in ("ours", "stock"):
        row = results["per_jvm"][path]
        assert row["gold"]["step"]["n"] == row["random"]["step"]["n"] == 3
        assert row["gold"]["steps_per_s"] > 0 and 50 < row["rss_mib"] < 2000
    assert set(results["ratios"]["gold"]) == {"ours / stock", "env turns (1 JVM) / stock"}
    assert results["ratios"]["gold"]["ours / stock"] > 1  # the stock step also rebuilds the valid actions
    (pool,) = results["pools"]
    assert pool["jvms"] == 1 and pool["steps"] == 3 and pool["prewarm_s"] > 0
    jvm = results["jvm"]
    assert jvm["start_s"]["n"] == 1 and jvm["first_load_s"] > 0 and jvm["valid_actions"]["n"] == 1
    console = Console(record=True, width=160)
    scienceworld.render(results, console)
    printed = console.export_text()
    for heading in ("steps/s per JVM", "Ours over the stock", "concurrently", "spawn to ready", "valid-action list"):
        assert heading in printed
