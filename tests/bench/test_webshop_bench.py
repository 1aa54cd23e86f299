"""``agentfly-bench --suite webshop`` end to end on small sizes: every section measured, sane, rendered."""

from __future__ import annotations

from rich.console import Console

from agentfly_bench.suites import available, webshop


def test_the_suite_is_found_and_measures_everything_on_small_sizes():
    assert available()["webshop"] is webshop and webshop.DESCRIPTION
    results = webshop.measure(
        build_sizes=[200, 500],
        search_size=500,
        queries=40,
        baseline_queries=4,
        episodes=6,
        throughput_episodes=24,
        concurrency=(8,),
    )
    assert [row["products"] for row in results["build"]] == [200, 500]
    for row in results["build"]:
        assert 0 < row["documents_s"] < row["build_s"] and row["index_s"] > 0 and row["size_mib"] > 0
    search = results["search"]
    assert search["tantivy"]["n"] == 40 and search["rank_bm25"]["n"] == 4
    assert search["tantivy"]["target_in_top50"] > 0.5 and search["rank_bm25"]["build_s"] > 0
    latency = results["latency"]
    assert latency["reset"]["n"] == 6 and latency["search"]["n"] >= 6 and latency["click_buy"]["n"] == 6
    assert latency["click_sub_page"]["n"] == latency["click_back"]["n"] == 6
    (throughput,) = results["throughput"]
    assert (
        throughput["envs"] == 8
        and throughput["episodes"] >= 24
        and throughput["episodes_per_s"] > 0
        and throughput["mean_reward"] == 1.0
    )
    assert 0 < results["cold_start"]["warm_s"] and 0 < results["cold_start"]["cold_s"]
    console = Console(record=True, width=140)
    webshop.render(results, console)
    printed = console.export_text()
    for heading in ("index build", "search latency", "env call latency", "episodes/s", "rank-bm25", "empty cache"):
        assert heading in printed
