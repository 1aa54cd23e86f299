"""``agentfly-bench --suite ray_pool``: what running envs in Ray actors costs, against envs in this process.

AgentFly/Math-v0 episodes (a calculator call on the task's expression, then the answer: the env does
real work on every step) through :func:`~agentfly_env.resources.distributed.make_env_pool` with the ``local``
and the ``ray`` backend, same pool size, same machine, same run:

- **episodes/s** with several episodes in flight per env (the pool's queue stays full), and the ratio
  local / ray;
- **latency** of ``areset`` and ``astep`` with one episode at a time (no queueing): the per-step
  overhead Ray adds is the difference of the p50s (a round trip to the actor, pickling included);
- **start-up**: prewarming the pool (for Ray: actor processes started, each importing and building
  its env).

A Ray cluster already initialised in this process is used; otherwise a local one is started with
``ray.init`` and shut down at the end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

from agentfly_bench.measure import summarize
from agentfly_env.core.types import ToolCall
from agentfly_env.resources.distributed import EnvHandle, make_env_pool
from agentfly_env.resources.pool import ResourcePool
from agentfly_env.tools.parsing import get_parser

DESCRIPTION = "Env pool on Ray actors vs in-process: episodes/s, per-step overhead (p50), start-up, on Math-v0"

ENV_ID = "AgentFly/Math-v0"
ENV_KWARGS = {"difficulty": 0}
BACKENDS = ("local", "ray")
PARSER = get_parser("hermes")  # Math-v0's default
MAX_TURNS = 8  # the scripted episode takes 2


def scripted_action(turn: int, info: dict[str, Any]) -> str:
    """Math-v0's expert moves, from the task ``areset`` returned: the calculator first, then the answer."""
    task = info["task"]
    if turn == 0:
        return PARSER.format_call(ToolCall("calculator", {"expression": task["metadata"]["expression"]}))
    return f"<answer>{task['answer']}</answer>"


async def play(
    pool: ResourcePool[EnvHandle], seed: int, resets: list[float] | None = None, steps: list[float] | None = None
) -> float:
    """One episode on a leased env; appends call latencies (seconds) when given lists. Returns its reward."""
    async with pool.lease(timeout=120) as env:
        started = time.perf_counter()
        _, info = await env.areset(seed=seed)
        if resets is not None:
            resets.append(time.perf_counter() - started)
        for turn in range(MAX_TURNS):
            started = time.perf_counter()
            _, reward, terminated, truncated, _ = await env.astep(scripted_action(turn, info))
            if steps is not None:
                steps.append(time.perf_counter() - started)
            if terminated or truncated:
                return reward
    raise RuntimeError(f"seed {seed}: the scripted episode did not end within {MAX_TURNS} turns")


async def measure(backend: str, *, size: int, episodes: int, in_flight: int, sequential: int) -> dict[str, Any]:
    pool = make_env_pool(ENV_ID, ENV_KWARGS, backend=backend, size=size, prewarm=size)
    started = time.perf_counter()
    await pool.start()
    startup_s = time.perf_counter() - started
    try:
        await asyncio.gather(*(play(pool, seed) for seed in range(size)))  # warm every env once
        resets: list[float] = []
        steps: list[float] = []
        for seed in range(sequential):
            await play(pool, seed, resets, steps)

        seeds: Iterator[int] = iter(range(episodes))
        rewards: list[float] = []

        async def worker() -> None:
            for seed in seeds:  # shared: each worker takes the next seed
                rewards.append(await play(pool, seed))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - started
        stats = pool.stats()
    finally:
        await pool.close()
    return {
        "startup_s": startup_s,
        "episodes_per_s": episodes / elapsed,
        "solved": sum(reward == 1.0 for reward in rewards) / len(rewards),
        "reset": summarize(resets),
        "step": summarize(steps),
        "acquire_p50_us": stats.acquire_latency_s.p50 * 1e6,
        "envs_created": stats.created,
    }


def run(quick: bool) -> dict[str, Any]:
    """Both backends in one run; starts (and stops) a local Ray cluster if none is initialised."""
    import ray

    size = 2 if quick else 4
    config = {
        "size": size,
        "episodes": 40 if quick else 2000,
        "in_flight": 4 * size,  # episodes waiting for an env, so none sits idle
        "sequential": 20 if quick else 300,
    }
    started_here = not ray.is_initialized()
    if started_here:
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # silences a FutureWarning
        ray.init(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    try:
        results: dict[str, Any] = {backend: asyncio.run(measure(backend, **config)) for backend in BACKENDS}
        results["ray_cluster"] = {
            name: amount for name, amount in ray.cluster_resources().items() if name in ("CPU", "GPU")
        }
    finally:
        if started_here:
            ray.shutdown()
    local, remote = results["local"], results["ray"]
    results["config"] = config
    results["episodes_per_s_ratio"] = local["episodes_per_s"] / remote["episodes_per_s"]
    results["step_overhead_p50_us"] = remote["step"]["p50_us"] - local["step"]["p50_us"]
    results["step_p50_ratio"] = remote["step"]["p50_us"] / local["step"]["p50_us"]
    return results


def render(results: dict[str, Any], console: Console) -> None:
    config = results["config"]
    table = Table(
        title=f"{ENV_ID}: env pool of {config['size']}, local vs Ray actors "
        f"({config['episodes']} episodes, {config['in_flight']} in flight)"
    )
    for column in ("backend", "episodes/s", "step p50 ms", "step p99 ms", "reset p50 ms", "start-up s", "solved"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for backend in BACKENDS:
        row = results[backend]
        table.add_row(
            backend,
            f"{row['episodes_per_s']:,.0f}",
            f"{row['step']['p50_us'] / 1000:.3f}",
            f"{row['step']['p99_us'] / 1000:.3f}",
            f"{row['reset']['p50_us'] / 1000:.3f}",
            f"{row['startup_s']:.2f}",
            f"{row['solved']:.0%}",
        )
    console.print(table)
    console.print(
        f"Ray adds {results['step_overhead_p50_us'] / 1000:.2f} ms per step at p50 "
        f"({results['step_p50_ratio']:.0f}x the in-process step); local runs "
        f"{results['episodes_per_s_ratio']:.1f}x the episodes/s of Ray on this machine "
        f"(Ray cluster: {results['ray_cluster']})"
    )
