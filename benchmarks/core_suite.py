"""Framework micro-benchmarks: the cost AgentFly adds around the work of tools and backends.

- ``pool_lease``: ``async with pool.lease()`` + release of an idle resource (no hooks).
- ``astep_overhead``: one ``astep`` of a :class:`~agentfly_env.ToolEnv` whose only tool does nothing,
  so what is timed is parsing, validation, dispatch, formatting and the episode record.
- ``parse_<format>``: one parse of a typical one-call turn in each action format.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentfly_bench.measure import summarize
from agentfly_env import ListTasks, PoolConfig, ResourcePool, ResourceSpec, ToolCall, ToolEnv, get_parser, reward, tool
from agentfly_env.tools.parsing import PARSERS


async def bench_pool_lease(repeats: int = 20_000) -> dict[str, Any]:
    pool: ResourcePool[object] = ResourcePool(ResourceSpec(create=object), PoolConfig(size=1, prewarm=1), name="bench")
    await pool.start()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        async with pool.lease():
            pass
        samples.append(time.perf_counter() - started)
    await pool.close()
    return summarize(samples[repeats // 10 :])  # drop the warm-up tenth


@tool
def noop(text: str) -> str:
    """Return the text unchanged.

    Args:
        text: Anything.
    """
    return text


@reward
def zero() -> float:
    return 0.0


async def bench_astep_overhead(repeats: int = 20_000) -> dict[str, Any]:
    env = ToolEnv(
        tools=[noop],
        tasks=ListTasks([{"prompt": "Echo."}]),
        reward=zero,
        max_turns=repeats + 1,
        max_observation_chars=4096,
    )
    await env.areset(seed=0)
    action = 'I will echo. <tool_call>{"name": "noop", "arguments": {"text": "hello"}}</tool_call>'
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await env.astep(action)
        samples.append(time.perf_counter() - started)
    await env.aclose()
    return summarize(samples[repeats // 10 :])


def bench_parse(name: str, repeats: int) -> dict[str, Any]:
    parser = get_parser(name)
    call = ToolCall(
        "search", {"query": "red running shoes size 10"} if name != "bracket" else "red running shoes size 10"
    )
    text = f"I will search for this now, then summarize the results.\n{parser.format_call(call)}"
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        parser.parse(text)
        samples.append(time.perf_counter() - started)
    return summarize(samples[repeats // 10 :])


def run_core(quick: bool = False) -> dict[str, Any]:
    repeats = 2_000 if quick else 20_000
    results = {
        "pool_lease": asyncio.run(bench_pool_lease(repeats)),
        "astep_overhead": asyncio.run(bench_astep_overhead(repeats)),
    }
    for name in PARSERS:
        results[f"parse_{name}"] = bench_parse(name, repeats)
    return results
