"""``agentfly-bench --suite gateway --quick``: tool-calling episodes over HTTP through the gateway and straight to
the generator, with both generator kinds; the JSON holds every figure and the table comes out. The figures
themselves (and the 2 ms target) are the suite's full run, in docs/benchmarks.md: no timing is asserted here."""

from __future__ import annotations

import pytest
from rich.console import Console

from agentfly_bench.suites import available, gateway


def test_the_suite_measures_the_gateway_and_the_generator_directly(smollm2_dir):
    assert available()["gateway"] is gateway and gateway.DESCRIPTION
    results = gateway.run(quick=True, concurrency=[1, 4], episodes=4, model=smollm2_dir)

    assert [(row["generator"], row["concurrency"]) for row in results["rows"]] == [
        ("async", 1),
        ("async", 4),
        ("sync", 1),
        ("sync", 4),
    ]
    for row in results["rows"]:
        through, direct = row["gateway"], row["direct"]
        calls = row["episodes"] * results["config"]["calls_per_episode"]
        assert row["episodes"] == 4 and through["failed_episodes"] == 0 and through["errors"] == []
        # Each episode ended with the answer and was recorded as one token-exact row.
        assert through["rows_per_episode"] == 1 and through["prefix_mismatches"] == 0
        assert through["calls"] == through["counted"]["n"] == through["client"]["n"] == calls
        assert direct["calls"] == direct["added"]["n"] == calls  # the same prompts, replayed
        for stats in (through["counted"], through["client"], direct["added"]):
            assert 0 <= stats["p50_s"] <= stats["p99_s"] < 60
        # A round trip over HTTP holds the gateway's own part of it.
        assert through["client"]["p50_s"] > through["counted"]["p50_s"] > 0
        assert through["calls_per_s"] > 0 and direct["calls_per_s"] > 0
        assert through["cpu_ms_per_call"]["gateway"] > 0 and through["cpu_ms_per_call"]["programs"] > 0
        assert row["ratio"] == pytest.approx(direct["calls_per_s"] / through["calls_per_s"])
        assert set(row["meets_target"]) == {"counted", "client"}
    assert len(results["load_before"]) == len(results["load_after"]) == 3

    console = Console(record=True, width=240)
    gateway.render(results, console)
    printed = console.export_text()
    assert "added latency per call" in printed and "target p50 <= 2 ms" in printed
    assert printed.count("│ async ") == 2 and printed.count("│ sync ") == 2
    assert "CPU ms/call" in printed


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"generators": ["gpu"]}, r"unknown generator kinds \['gpu'\]; known: \['async', 'sync'\]"),
        ({"calls_per_episode": 0}, "calls_per_episode must be from 1 to 63, not 0"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(options, message):
    with pytest.raises(ValueError, match=message):
        gateway.run(quick=True, **options)
