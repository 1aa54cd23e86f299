"""``agentfly-bench --suite code``: the pooled Python sandbox of AgentFly/Code-v0.

- **round trip**: ``print(1)`` through a pooled, warm sandbox (host -> supervisor -> session and
  back) against, in the same call, a fresh sandboxed process per call (``bwrap ... python -c``,
  the same jail: how simpler frameworks run code) and a fresh unsandboxed ``python -c``.
- **concurrency**: calls/s of 32 concurrent sessions (episodes of 5 calls) over pools of 4 and 32
  sandboxes.
- **memory**: resident (RSS) and proportional (PSS: pages shared by fork counted once) memory of one
  sandbox's process tree.
- **recovery**: time until the pool serves again after a sandbox is killed (a call timed out: the
  pool destroys it and creates a new one), a session restart after a crash (``os._exit``), and the
  reset between episodes.
- **grading**: the reference solutions of HumanEval's problems scored in the sandbox.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from agentfly_bench.measure import descendants, memory_mib, proc_kib, summarize
from agentfly_env.resources.pool import ResourceManager
from agentfly_envs.code import (
    SANDBOX_POOL,
    HumanEvalTasks,
    Sandbox,
    SandboxConfig,
    SandboxError,
    grade,
    sandbox_pool,
)
from agentfly_envs.code.sandbox import bwrap_command, host_interpreter

DESCRIPTION = (
    "Code-v0 sandbox: pooled round trip vs fresh bwrap process, calls/s at 32 sessions, memory, recovery, grading"
)

CONFIG = SandboxConfig()


async def bench_pooled_round_trip(calls: int) -> dict[str, Any]:
    sandbox = await Sandbox.start(CONFIG)
    try:
        for _ in range(50):  # warm up
            await sandbox.run("print(1)")
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            result = await sandbox.run("print(1)")
            samples.append(time.perf_counter() - started)
            assert result.stdout == "1\n"
    finally:
        await sandbox.close()
    return summarize(samples)


def bench_fresh_processes(calls: int) -> dict[str, Any]:
    """The baselines: a new process per call, in the same jail and without one."""
    python = host_interpreter().executable
    bwrap = CONFIG.find_bwrap()
    assert bwrap is not None, "the round-trip baseline needs bubblewrap"
    commands = {
        "fresh_bwrap_process": bwrap_command(CONFIG, bwrap, [python, "-s", "-P", "-c", "print(1)"]),
        "fresh_python_process": [python, "-s", "-P", "-c", "print(1)"],
    }
    results = {}
    for name, command in commands.items():
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            output = subprocess.run(command, capture_output=True, check=True).stdout
            samples.append(time.perf_counter() - started)
            assert output == b"1\n"
        results[name] = summarize(samples)
    return results


def bench_round_trip(calls: int, fresh_calls: int) -> dict[str, Any]:
    results = {"pooled_worker": asyncio.run(bench_pooled_round_trip(calls)), **bench_fresh_processes(fresh_calls)}
    results["ratio_p50"] = results["fresh_bwrap_process"]["p50_us"] / results["pooled_worker"]["p50_us"]
    results["ratio_mean"] = results["fresh_bwrap_process"]["mean_us"] / results["pooled_worker"]["mean_us"]
    return results


async def bench_concurrency(sessions: int, pool_size: int, calls_per_session: int) -> dict[str, Any]:
    manager = ResourceManager({SANDBOX_POOL: {"size": pool_size, "prewarm": pool_size}})
    pool = sandbox_pool(manager, CONFIG)
    started = time.perf_counter()
    await manager.start()
    prewarm_s = time.perf_counter() - started
    episode_calls = 5

    async def session(number: int) -> int:
        done = 0
        while done < calls_per_session:
            async with pool.lease(timeout=300) as sandbox:  # one episode: a fresh session
                await sandbox.run(f"total = {number}")
                for _ in range(episode_calls - 1):
                    await sandbox.run("total = total + 1")
                done += episode_calls
        return done

    try:
        started = time.perf_counter()
        calls = sum(await asyncio.gather(*(session(number) for number in range(sessions))))
        elapsed = time.perf_counter() - started
        stats = pool.stats()
    finally:
        await manager.close()
    return {
        "sessions": sessions,
        "pool_size": pool_size,
        "calls": calls,
        "calls_per_s": calls / elapsed,
        "episodes_per_s": calls / episode_calls / elapsed,
        "prewarm_s": prewarm_s,
        "acquire_p50_ms": stats.acquire_latency_s.p50 * 1000,
        "acquire_p99_ms": stats.acquire_latency_s.p99 * 1000,
    }


async def bench_memory(count: int) -> dict[str, Any]:
    sandboxes = await asyncio.gather(*(Sandbox.start(CONFIG) for _ in range(count)))
    try:
        for sandbox in sandboxes:
            await sandbox.run("x = sum(range(1000))")
        rss, pss, processes = [], [], []
        for sandbox in sandboxes:
            assert sandbox.pid is not None
            usage = memory_mib(sandbox.pid)
            tree = [sandbox.pid, *descendants(sandbox.pid)]
            rss.append(usage["self_mib"] + usage["backends_mib"])
            pss.append(sum(proc_kib(pid, "Pss", "smaps_rollup") for pid in tree) / 1024)
            processes.append(len(tree))
    finally:
        await asyncio.gather(*(sandbox.close() for sandbox in sandboxes))
    return {
        "sandboxes": count,
        "processes_per_sandbox": statistics.median(processes),
        "rss_mib_per_sandbox": statistics.median(rss),
        "pss_mib_per_sandbox": statistics.median(pss),
    }


async def bench_recovery(repeats: int) -> dict[str, Any]:
    manager = ResourceManager({SANDBOX_POOL: {"size": 1, "prewarm": 1}})
    config = SandboxConfig(timeout_s=0.3)
    pool = sandbox_pool(manager, config)
    await manager.start()
    replace, restart, reset = [], [], []
    try:
        for _ in range(repeats):
            lease = await pool.acquire(timeout=60)
            try:
                await lease.resource.run("while True:\n    pass")
            except SandboxError:
                pass
            started = time.perf_counter()
            await lease.release(broken=True)  # as the env does after a timeout
            async with pool.lease(timeout=60) as sandbox:
                assert (await sandbox.run("print(1)")).stdout == "1\n"
            replace.append(time.perf_counter() - started)
        async with pool.lease(timeout=60) as sandbox:
            for _ in range(repeats):
                started = time.perf_counter()
                crashed = await sandbox.run("import os\nos._exit(1)")
                assert crashed.crashed and (await sandbox.run("print(1)")).stdout == "1\n"
                restart.append(time.perf_counter() - started)
            for _ in range(repeats * 5):
                await sandbox.run("import json\nx = [1] * 1000")
                started = time.perf_counter()
                await sandbox.reset()
                reset.append(time.perf_counter() - started)
    finally:
        await manager.close()
    return {
        "replace_killed_sandbox": summarize(replace),
        "restart_crashed_session": summarize(restart),
        "reset_between_episodes": summarize(reset),
    }


async def bench_grading(problems: int) -> dict[str, Any]:
    tasks = HumanEvalTasks()
    sandbox = await Sandbox.start(CONFIG)
    samples, perfect, tests = [], 0, 0
    try:
        for index in range(problems):
            task = tasks[index]
            started = time.perf_counter()
            result = await grade(sandbox, task["solution"], task)
            samples.append(time.perf_counter() - started)
            perfect += result.score == 1.0
            tests += result.total
    finally:
        await sandbox.close()
    return {"problems": problems, "reference_at_1_0": perfect, "tests": tests, "grade": summarize(samples)}


async def _run_pools(quick: bool) -> dict[str, Any]:
    return {
        "concurrency": [
            await bench_concurrency(32, pool_size, calls_per_session=20 if quick else 100) for pool_size in (4, 32)
        ],
        "memory": await bench_memory(4 if quick else 8),
        "recovery": await bench_recovery(3 if quick else 10),
        "grading": await bench_grading(30 if quick else 164),
    }


def run(quick: bool) -> dict[str, Any]:
    """Measure the sandbox; needs bubblewrap."""
    round_trip = bench_round_trip(calls=300 if quick else 3000, fresh_calls=8 if quick else 40)
    return {"round_trip": round_trip, **asyncio.run(_run_pools(quick))}


def render(results: dict[str, Any], console: Console) -> None:
    trip = results["round_trip"]
    table = Table(title="Code-v0: round trip of print(1) (ms)")
    for column in ("how", "p50", "p90", "p99", "mean", "n"):
        table.add_column(column, justify="left" if column == "how" else "right")
    for name in ("pooled_worker", "fresh_bwrap_process", "fresh_python_process"):
        stats = trip[name]
        table.add_row(
            name.replace("_", " "),
            *(f"{stats[key] / 1000:.3f}" for key in ("p50_us", "p90_us", "p99_us", "mean_us")),
            str(stats["n"]),
        )
    console.print(table)
    console.print(
        f"pooled worker vs a fresh sandboxed process per call: {trip['ratio_p50']:.0f}x (p50), {trip['ratio_mean']:.0f}x (mean)"
    )

    table = Table(title="Code-v0: 32 concurrent sessions (episodes of 5 calls)")
    for column in ("pool size", "calls/s", "episodes/s", "prewarm s", "lease p50 ms", "lease p99 ms"):
        table.add_column(column, justify="right")
    for row in results["concurrency"]:
        table.add_row(
            str(row["pool_size"]),
            f"{row['calls_per_s']:,.0f}",
            f"{row['episodes_per_s']:,.0f}",
            f"{row['prewarm_s']:.2f}",
            f"{row['acquire_p50_ms']:.2f}",
            f"{row['acquire_p99_ms']:.1f}",
        )
    console.print(table)

    memory = results["memory"]
    console.print(
        f"memory per sandbox ({memory['processes_per_sandbox']:.0f} processes: bwrap, supervisor, session): "
        f"RSS {memory['rss_mib_per_sandbox']:.1f} MiB, PSS {memory['pss_mib_per_sandbox']:.1f} MiB"
    )

    table = Table(title="Code-v0: recovery (ms)")
    for column in ("event", "p50", "p99", "n"):
        table.add_column(column, justify="left" if column == "event" else "right")
    for name, stats in results["recovery"].items():
        table.add_row(
            name.replace("_", " "), f"{stats['p50_us'] / 1000:.2f}", f"{stats['p99_us'] / 1000:.2f}", str(stats["n"])
        )
    console.print(table)

    grading = results["grading"]
    console.print(
        f"grading: {grading['reference_at_1_0']}/{grading['problems']} HumanEval reference solutions score 1.0 "
        f"({grading['tests']} tests); {grading['grade']['p50_us'] / 1000:.1f} ms per problem (p50)"
    )
