"""The trainer on this machine: rollout tokens/s, env-wait share with and without overlap, step time,
and the quick-start run (``agentfly-bench --suite train``).

- Rollout: SmolLM2-135M plays Math-v0 episodes (up to three turns, the calculator offered). Each is measured
  in the same call with the overlapped scheduler and with lockstep rounds (generate for all, then step
  all: the usual synchronous loop), on the env as it is and on the same env with 500 ms added to every
  step (a sandbox or a search backend). The env-wait share is the part of the rollout's wall time in
  which the generator sat idle.
- Train step: one GRPO step of the quick-start config, split into rollout and update.
- Quick start: ``agentfly-train --config quickstart`` as the README runs it: reward at the first and the
  last step, wall time (skipped with ``--quick``).

Example:
    >>> DESCRIPTION.startswith("trainer")
    True
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

DESCRIPTION = "trainer: rollout tokens/s, env-wait share (overlap vs lockstep), train-step time, the quick-start run"

ENV_LATENCY_S = 0.5


def _latency_env(options: dict[str, Any]) -> Any:
    """Math-v0 whose every step waits ``ENV_LATENCY_S`` first, like a tool calling out to a backend."""
    from agentfly_envs.math import MathEnv

    class SlowMath(MathEnv):
        async def _step(self, action: str) -> Any:
            await asyncio.sleep(ENV_LATENCY_S)
            return await super()._step(action)

    return SlowMath(**options)


def run(quick: bool) -> dict[str, Any]:
    import gymnasium as gym
    import torch

    import agentfly_env  # noqa: F401 - registers the ids
    from agentfly_env.aio import run_sync
    from agentfly_env.distributed import make_env_pool
    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.chat import ChatFormat
    from agentfly_train.config import Config, RolloutConfig, apply_overrides
    from agentfly_train.generation.hf import TransformersGenerator
    from agentfly_train.models import load_causal_lm, load_tokenizer, resolve_model_path
    from agentfly_train.rollout import Rollout

    results: dict[str, Any] = {"threads": torch.get_num_threads()}
    started = time.perf_counter()
    path = resolve_model_path("smollm2-135m")
    results["model_ready_s"] = time.perf_counter() - started
    tokenizer = load_tokenizer(path)
    model = load_causal_lm(path, device="cpu")
    chat = ChatFormat(tokenizer)
    generator = TransformersGenerator(model, tokenizer)

    prompts, chains, new_tokens = (2, 2, 16) if quick else (4, 4, 32)
    options = {"difficulty": 0}
    results["rollout"] = {}
    for env_name, make in [
        ("Math-v0", lambda: gym.make("AgentFly/Math-v0", **options)),
        (f"Math-v0 + {ENV_LATENCY_S * 1000:.0f} ms per step", lambda: _latency_env(options)),
    ]:
        envs = make_env_pool(make, size=prompts * chains)
        rows = {}
        for mode, overlap, batch in [
            ("lockstep", False, prompts * chains),
            ("overlap", True, prompts * chains),
            ("overlap, 2 cohorts", True, prompts * chains // 2),
        ]:
            config = RolloutConfig(
                samples_per_prompt=chains,
                max_turns=3,
                max_new_tokens=new_tokens,
                max_episode_tokens=1024,
                stop=["</tool_call>", "</answer>"],
                overlap=overlap,
                max_batch_size=batch,
            )
            result = Rollout(envs, chat, generator, config).run(list(range(prompts)), sample_seed=0)
            rows[mode] = {**result.stats.as_dict(), "episodes": len(result.episodes)}
        run_sync(envs.close())
        results["rollout"][env_name] = rows

    config = Config.load("quickstart")
    config.out_dir = tempfile.mkdtemp(prefix="agentfly-bench-train-")
    apply_overrides(config, ["log.tensorboard=false", "log.plot=false", "log.trajectories=false"])
    if quick:
        apply_overrides(config, ["rollout.prompts_per_step=2", "train.micro_batch_size=8"])
    trainer = LocalTrainer(config, model=model, tokenizer=tokenizer)
    metrics = trainer.train_step()
    trainer.close()
    results["train_step"] = {
        "episodes": config.episodes_per_step,
        "step_s": metrics["step_s"],
        "rollout_s": metrics["rollout_wall_s"],
        "update_s": metrics["update_s"],
        "sequence_tokens_per_episode": metrics["sequence_tokens_per_episode"],
        "rollout_tokens_per_s": metrics["rollout_tokens_per_s"],
    }
    if not quick:
        results["quickstart"] = _quickstart()
    return results


def _quickstart() -> dict[str, Any]:
    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.config import Config

    config = Config.load("quickstart")
    config.out_dir = tempfile.mkdtemp(prefix="agentfly-quickstart-")
    started = time.perf_counter()
    trainer = LocalTrainer(config)
    rewards: list[float] = []
    summary = trainer.fit(on_step=lambda step, metrics: rewards.append(metrics["reward_mean"]))
    return {
        "steps": summary["steps"],
        "episodes_per_step": config.episodes_per_step,
        "reward_first": rewards[0],
        "reward_last": rewards[-1],
        "reward_first3_mean": sum(rewards[:3]) / 3,
        "reward_last3_mean": sum(rewards[-3:]) / 3,
        "rewards": rewards,
        "wall_s": time.perf_counter() - started,
        "reward_curve": summary.get("reward_curve"),
        "config": msgspec.to_builtins(config.rollout) | {"lr": config.train.lr, "algo": config.algo},
    }


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(title=f"Rollout, SmolLM2-135M on this CPU ({results['threads']} torch threads)")
    for column in ("env", "scheduler", "episodes", "tokens", "tokens/s", "wall s", "env-wait share", "batches"):
        table.add_column(column, justify="left" if column in ("env", "scheduler") else "right")
    for env_name, rows in results["rollout"].items():
        for mode, row in rows.items():
            table.add_row(
                env_name,
                mode,
                str(row["episodes"]),
                str(row["generated_tokens"]),
                f"{row['tokens_per_s']:.1f}",
                f"{row['wall_s']:.1f}",
                f"{100 * row['env_wait_share']:.1f}%",
                str(row["batches"]),
            )
    console.print(table)
    step = results["train_step"]
    console.print(
        f"train step (quick-start config, {step['episodes']} episodes of ~{step['sequence_tokens_per_episode']:.0f} tokens): "
        f"{step['step_s']:.1f} s = rollout {step['rollout_s']:.1f} s + update {step['update_s']:.1f} s"
    )
    quickstart = results.get("quickstart")
    if quickstart:
        console.print(
            f"quick start: {quickstart['steps']} GRPO steps x {quickstart['episodes_per_step']} episodes in "
            f"{quickstart['wall_s']:.0f} s; mean reward {quickstart['reward_first']:.3f} at the first step -> "
            f"{quickstart['reward_last']:.3f} at the last (first three {quickstart['reward_first3_mean']:.3f}, "
            f"last three {quickstart['reward_last3_mean']:.3f}); curve: {quickstart['reward_curve']}"
        )
