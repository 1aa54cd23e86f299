"""Baselines that run in the same call as our numbers, so the ratio means something.

A baseline measures steps/s of the same env id, at the same concurrency, with the same scripted expert,
through another way of running it. Later suites add their own (e.g. the stock engine of a task) by
adding to :data:`BASELINES`; ``agentfly-bench --compare NAME`` picks them.

In every runner only ``step`` calls are timed. Computing the scripted actions is not, because a model
would produce them outside the env in any setup; resetting finished episodes is not either (it is done
between steps, with Gymnasium's autoreset disabled), because reset latency is measured on its own and
some task generators spend far longer making a task than an env spends on a step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from agentfly_env import AgentVectorEnv, run_sync
from agentfly_env.core.policies import expert_action

#: (env_id, num_envs, steps, env_kwargs) -> steps per second
ThroughputRunner = Callable[[str, int, int, dict[str, Any]], float]


def agentfly_vector(env_id: str, num_envs: int, steps: int, env_kwargs: dict[str, Any]) -> float:
    """Ours: :class:`~agentfly_env.AgentVectorEnv`, every env stepped concurrently on one event loop."""
    vec = AgentVectorEnv.make(env_id, num_envs, **env_kwargs)
    try:
        vec.reset(seed=0)
        done, elapsed = 0, 0.0
        while done < steps:
            actions = {i: expert_action(env) for i, env in enumerate(vec.envs)}
            started = time.perf_counter()
            result = run_sync(vec.astep(actions))
            elapsed += time.perf_counter() - started
            done += num_envs
            ended = [i for i, end in zip(result.indices, result.terminated | result.truncated, strict=True) if end]
            if ended:
                vec.reset(indices=ended)
        return done / elapsed
    finally:
        vec.close()


def _gymnasium_vector(mode: str) -> ThroughputRunner:
    def runner(env_id: str, num_envs: int, steps: int, env_kwargs: dict[str, Any]) -> float:
        vector_kwargs: dict[str, Any] = {"autoreset_mode": AutoresetMode.DISABLED}
        if mode == "async":
            vector_kwargs["shared_memory"] = False  # text observations cannot live in shared arrays
        vec = gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode=mode, vector_kwargs=vector_kwargs, **env_kwargs
        )
        try:
            vec.reset(seed=0)
            done, elapsed = 0, 0.0
            while done < steps:
                actions = vec.call("expert_action")
                started = time.perf_counter()
                _, _, terminated, truncated, _ = vec.step(actions)
                elapsed += time.perf_counter() - started
                done += num_envs
                ended = terminated | truncated
                if ended.any():
                    vec.reset(options={"reset_mask": ended})
            return done / elapsed
        finally:
            vec.close()

    runner.__doc__ = f"Gymnasium's {'SyncVectorEnv' if mode == 'sync' else 'AsyncVectorEnv (one process per env)'}."
    return runner


BASELINES: dict[str, ThroughputRunner] = {
    "gym-sync": _gymnasium_vector("sync"),
    "gym-async": _gymnasium_vector("async"),
}
