"""ScienceWorld: steps/s per JVM against the stock ``ScienceWorldEnv.step``, pools of 1/2/4 JVMs, start, memory.

Every path replays the same recorded actions, on variation 0 of each task type in the run. Two
workloads: ``gold``, the first ``actions_per_task`` actions of ScienceWorld's gold path (solving the
task), and ``random``, as many valid actions drawn uniformly (seeded, ``focus on`` left out since it
ends the task) from the valid-action list of each state (exploring). Both are recorded beforehand on a
JVM of their own. Every JVM replays its workloads once untimed before the timed pass, so no path is
timed on a colder JIT than another; loads and resets are not timed, only the steps are.

* **Per JVM**: our engine's fast step (the world's own ``AgentInterface.step`` and the move count),
  with pinned hash codes (the default) and without; the stock ``scienceworld.ScienceWorldEnv.step`` on
  its own JVM, given the same heap and collector through ``JAVA_TOOL_OPTIONS`` so only the step path
  differs; and whole env turns (``ScienceWorldEnv.astep`` with one ``act`` call: parsing, the tool, the
  worker-thread hop). The ratios are ours over stock, per workload.
* **Pools** of N = 1, 2, 4 JVMs (gold workload): N envs step concurrently on one event loop, each on its
  own JVM; steps/s of all of them together. The machine's cores bound the gain.
* **JVM start**: spawn to ready, one at a time, and N at once (the pool's parallel prewarm); the first
  load of a fresh JVM; resident memory per JVM after its workload; gold-path planning; the cost of the
  valid-action list that the stock step rebuilds every time.

Example::

    agentfly-bench --suite scienceworld            # all 30 task types (several minutes)
    agentfly-bench --suite scienceworld --quick    # 6 task types, shorter replays
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentfly_bench.measure import proc_kib, summarize
from agentfly_env.core.types import ToolCall
from agentfly_env.resources.pool import ResourceManager
from agentfly_envs.scienceworld import ENGINE_POOL, JvmConfig, ScienceWorldEngine, ScienceWorldEnv, task_names

DESCRIPTION = "ScienceWorld: fast step vs stock ScienceWorldEnv.step per JVM, pools of 1/2/4 JVMs, JVM start and memory"

QUICK_TASKS = ("boil", "find-animal", "chemistry-mix", "power-component", "use-thermometer", "grow-plant")

Workload = list[tuple[str, tuple[str, ...]]]


def record_workloads(
    engine: ScienceWorldEngine, tasks: Sequence[str], actions_per_task: int, seed: int = 0
) -> tuple[dict[str, Workload], list[float]]:
    """The ``gold`` and ``random`` workloads (see the module docstring), and each gold plan's time."""
    rng = np.random.default_rng(seed)
    gold: Workload = []
    explore: Workload = []
    plan_s = []
    for name in tasks:
        started = time.perf_counter()
        path = engine.load(name, 0, gold=True).gold or ()
        plan_s.append(time.perf_counter() - started)
        gold.append((name, path[:actions_per_task]))
        engine.load(name, 0)
        drawn: list[str] = []
        while len(drawn) < actions_per_task:
            choices = [action for action in engine.valid_actions() if not action.startswith("focus on")]
            drawn.append(choices[int(rng.integers(len(choices)))])
            engine.step(drawn[-1])
        explore.append((name, tuple(drawn)))
    return {"gold": gold, "random": explore}, plan_s


def _rate(samples: list[float]) -> dict[str, Any]:
    return {"steps_per_s": len(samples) / sum(samples), "step": summarize(samples)}


def replay_engine(engine: ScienceWorldEngine, workloads: dict[str, Workload]) -> dict[str, Any]:
    """Our fast step on one JVM: per workload, steps/s and latency; the JVM's memory afterwards."""

    def replay(workload: Workload) -> list[float]:
        samples = []
        for name, actions in workload:
            engine.load(name, 0)
            for command in actions:
                started = time.perf_counter()
                engine.step(command)
                samples.append(time.perf_counter() - started)
        return samples

    for workload in workloads.values():
        replay(workload)  # warm-up
    rows: dict[str, Any] = {name: _rate(replay(workload)) for name, workload in workloads.items()}
    rows["rss_mib"] = proc_kib(engine.pid) / 1024
    return rows


@contextlib.contextmanager
def _java_tool_options(options: str) -> Iterator[None]:
    before = os.environ.get("JAVA_TOOL_OPTIONS")
    os.environ["JAVA_TOOL_OPTIONS"] = options
    try:
        yield
    finally:
        if before is None:
            del os.environ["JAVA_TOOL_OPTIONS"]
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = before


def replay_stock(workloads: dict[str, Workload], config: JvmConfig) -> dict[str, Any]:
    """The package's own ``ScienceWorldEnv.step``, on a JVM it starts, with our heap and collector."""
    from scienceworld import ScienceWorldEnv as StockEnv

    with _java_tool_options(" ".join([f"-Xmx{config.heap_mb}m", *config.java_options])):
        env = StockEnv(envStepLimit=10**9)
    process = env._gateway.java_process

    def replay(workload: Workload) -> list[float]:
        samples = []
        for name, actions in workload:
            env.load(name, 0)
            env.reset()
            for command in actions:
                started = time.perf_counter()
                env.step(command)
                samples.append(time.perf_counter() - started)
        return samples

    try:
        for workload in workloads.values():
            replay(workload)  # warm-up
        rows: dict[str, Any] = {name: _rate(replay(workload)) for name, workload in workloads.items()}
        rows["rss_mib"] = proc_kib(process.pid) / 1024
    finally:
        env.close()
        process.kill()
        process.wait()
    return rows


async def _pool_run(workload: Workload, size: int) -> dict[str, Any]:
    """``size`` envs on a pool of ``size`` JVMs; each round every env loads a task, then all step it."""
    manager = ResourceManager({ENGINE_POOL: {"size": size, "prewarm": size}})
    envs = [ScienceWorldEnv(resources=manager, lease_timeout_s=600) for _ in range(size)]
    started = time.perf_counter()
    await manager.start()
    prewarm_s = time.perf_counter() - started

    async def play(env: ScienceWorldEnv, actions: tuple[str, ...]) -> int:
        for done, command in enumerate(actions, 1):
            *_, terminated, truncated, _ = await env.astep(
                env.parser.format_call(ToolCall("act", {"command": command}))
            )
            if terminated or truncated:  # a short gold path can finish within the prefix
                return done
        return len(actions)

    async def rounds(replayed: Workload) -> tuple[int, float]:
        steps, stepping = 0, 0.0
        for round_index in range(len(replayed)):
            jobs = [replayed[(round_index + offset) % len(replayed)] for offset in range(size)]
            await asyncio.gather(
                *(
                    env.areset(options={"task_name": name, "variation": 0})
                    for env, (name, _) in zip(envs, jobs, strict=True)
                )
            )
            started = time.perf_counter()
            steps += sum(
                await asyncio.gather(*(play(env, actions) for env, (_, actions) in zip(envs, jobs, strict=True)))
            )
            stepping += time.perf_counter() - started
        return steps, stepping

    try:
        await rounds(workload)  # warm-up
        steps, stepping = await rounds(workload)
    finally:
        for env in envs:
            await env.aclose()
        await manager.close()
    return {"jvms": size, "steps_per_s": steps / stepping, "steps": steps, "prewarm_s": prewarm_s}


def measure(
    tasks: Sequence[str],
    actions_per_task: int,
    pool_sizes: Sequence[int] = (1, 2, 4),
    starts: int = 3,
    compare_hashing: bool = True,
) -> dict[str, Any]:
    """Every measurement of the suite, on the given task types (see the module docstring)."""
    config = JvmConfig()
    start_s = []
    for _ in range(starts):
        started = time.perf_counter()
        engine = ScienceWorldEngine(config)
        start_s.append(time.perf_counter() - started)
        if len(start_s) < starts:
            engine.close()
    try:
        started = time.perf_counter()
        engine.load(tasks[0], 0)
        first_load_s = time.perf_counter() - started
        workloads, plan_s = record_workloads(engine, tasks, actions_per_task)
        valid = []
        for name, actions in workloads["gold"]:
            engine.load(name, 0)
            for command in actions[:3]:
                engine.step(command)
            started = time.perf_counter()
            engine.valid_actions()
            valid.append(time.perf_counter() - started)
    finally:
        engine.close()
    variants = {
        "ours": config,
        **({"ours, default hash codes": JvmConfig(deterministic=False)} if compare_hashing else {}),
    }
    per_jvm = {}
    for name, variant in variants.items():
        engine = ScienceWorldEngine(variant)
        try:
            per_jvm[name] = replay_engine(engine, workloads)
        finally:
            engine.close()
    per_jvm["stock"] = replay_stock(workloads, config)
    pools = [asyncio.run(_pool_run(workloads["gold"], size)) for size in pool_sizes]
    ratios = {
        workload: {
            f"{name} / stock": row[workload]["steps_per_s"] / per_jvm["stock"][workload]["steps_per_s"]
            for name, row in per_jvm.items()
            if name != "stock"
        }
        for workload in workloads
    }
    if pools and pools[0]["jvms"] == 1:
        ratios["gold"]["env turns (1 JVM) / stock"] = pools[0]["steps_per_s"] / per_jvm["stock"]["gold"]["steps_per_s"]
    return {
        "tasks": list(tasks),
        "actions_per_task": actions_per_task,
        "steps": {name: sum(len(actions) for _, actions in workload) for name, workload in workloads.items()},
        "per_jvm": per_jvm,
        "ratios": ratios,
        "pools": pools,
        "jvm": {
            "heap_mb": config.heap_mb,
            "start_s": summarize(start_s),
            "first_load_s": first_load_s,
            "gold_plan_s": summarize(plan_s),
            "valid_actions": summarize(valid),
        },
    }


def run(quick: bool) -> dict[str, Any]:
    if quick:
        return measure(QUICK_TASKS, actions_per_task=8, starts=2)
    return measure(task_names(), actions_per_task=20)


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"ScienceWorld steps/s per JVM ({len(results['tasks'])} task types, {results['actions_per_task']} actions each)"
    )
    table.add_column("path")
    for workload in results["steps"]:
        table.add_column(f"{workload} steps/s", justify="right")
        table.add_column(f"{workload} p50 ms", justify="right")
    table.add_column("JVM RSS MiB", justify="right")
    for name, row in results["per_jvm"].items():
        cells = []
        for workload in results["steps"]:
            cells += [f"{row[workload]['steps_per_s']:.1f}", f"{row[workload]['step']['p50_us'] / 1000:.2f}"]
        table.add_row(name, *cells, f"{row['rss_mib']:.0f}")
    for row in results["pools"][:1]:
        table.add_row(
            "env turns, act tool (1 JVM)", f"{row['steps_per_s']:.1f}", *[""] * (2 * len(results["steps"]) - 1), ""
        )
    console.print(table)
    ratios = Table(title="Ours over the stock ScienceWorldEnv.step (same actions, same heap)")
    ratios.add_column("workload")
    ratios.add_column("ratio")
    ratios.add_column("x", justify="right")
    for workload, rows in results["ratios"].items():
        for name, value in rows.items():
            ratios.add_row(workload, name, f"{value:.1f}")
    console.print(ratios)
    pools = Table(title="Envs stepping concurrently, one JVM each (gold workload, one event loop)")
    for column in ("JVMs", "steps/s", "prewarm s (parallel)"):
        pools.add_column(column, justify="right")
    for row in results["pools"]:
        pools.add_row(str(row["jvms"]), f"{row['steps_per_s']:.1f}", f"{row['prewarm_s']:.2f}")
    console.print(pools)
    jvm = results["jvm"]
    other = Table(title=f"JVM (heap limit {jvm['heap_mb']} MB)")
    other.add_column("measure")
    other.add_column("value", justify="right")
    other.add_row("start, spawn to ready (p50)", f"{jvm['start_s']['p50_us'] / 1e6:.2f} s")
    other.add_row("first load of a fresh JVM", f"{jvm['first_load_s']:.2f} s")
    other.add_row("gold-path planning (p50)", f"{jvm['gold_plan_s']['p50_us'] / 1e6:.2f} s")
    other.add_row("valid-action list, as JSON (p50)", f"{jvm['valid_actions']['p50_us'] / 1000:.1f} ms")
    console.print(other)
