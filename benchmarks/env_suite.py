"""Per-env benchmark: reset and step latency, throughput at several concurrencies, pools and memory."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import msgspec

from agentfly_bench.baselines import BASELINES, agentfly_vector
from agentfly_bench.measure import memory_mib, summarize
from agentfly_env import run_sync
from agentfly_env.core.policies import expert_action


def latencies(env_id: str, steps: int, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Reset and step latency of one env played by its scripted expert, one call at a time."""
    env = gym.make(env_id, **env_kwargs).unwrapped
    resets: list[float] = []
    step_times: list[float] = []
    try:
        seed = 0
        while len(step_times) < steps:
            started = time.perf_counter()
            run_sync(env.areset(seed=seed))
            resets.append(time.perf_counter() - started)
            seed += 1
            done = False
            while not done and len(step_times) < steps:
                action = expert_action(env)
                started = time.perf_counter()
                _, _, terminated, truncated, _ = run_sync(env.astep(action))
                step_times.append(time.perf_counter() - started)
                done = terminated or truncated
        pools = env.stats().get("pools", {}) if hasattr(env, "stats") else {}
        memory = memory_mib()
    finally:
        env.close()
    return {
        "reset": summarize(resets),
        "step": summarize(step_times),
        "pools": {name: msgspec.to_builtins(stats) for name, stats in pools.items()},
        "memory": memory,
    }


def run_env(
    env_id: str,
    *,
    concurrency: Sequence[int],
    steps: int,
    compare: Sequence[str],
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """All measurements for one env id; ``compare`` names baselines from :data:`BASELINES`."""
    env_kwargs = dict(env_kwargs or {})
    result: dict[str, Any] = latencies(env_id, min(steps, 2_000), env_kwargs)
    result["throughput"] = {}
    for level in concurrency:
        row = {"agentfly": agentfly_vector(env_id, level, steps, env_kwargs)}
        for name in compare:
            row[name] = BASELINES[name](env_id, level, steps, env_kwargs)
        result["throughput"][str(level)] = row
    return result
