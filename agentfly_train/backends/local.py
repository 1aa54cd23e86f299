"""The local backend: rollouts and PPO-style updates in one process with torch + transformers.

It runs on a laptop CPU and uses CUDA when present. One training step is: play a batch of episodes
with the current policy (:mod:`agentfly_train.rollout`), score the tokens (old log-probs, the
reference model's log-probs for the KL, the critic's values for PPO), compute advantages with the
configured estimator (:mod:`agentfly_train.algorithms`), then ``epochs`` passes of mini-batch updates
with gradient accumulation over micro-batches and gradient clipping.

Every step's randomness (tasks, sampling, shuffling) is derived from ``(seed, step)``, so a run resumed
from a checkpoint takes exactly the step the uninterrupted run would have taken.

Example:
    >>> trainer = LocalTrainer(Config.load("quickstart"))  # doctest: +SKIP
    >>> summary = trainer.fit()  # doctest: +SKIP
    >>> summary["reward_curve"]  # doctest: +SKIP
    'runs/quickstart/reward_curve.png'
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import torch
from torch import nn

from agentfly_env.core.aio import run_sync
from agentfly_env.core.env import AgentEnv
from agentfly_env.core.recording import TrajectoryWriter
from agentfly_env.resources.distributed import make_env_pool
from agentfly_env.resources.files import atomic_path
from agentfly_train import algorithms
from agentfly_train.chat import ChatFormat
from agentfly_train.config import Config
from agentfly_train.generation import build_generator, describe
from agentfly_train.generation.hf import TransformersGenerator
from agentfly_train.metrics import (
    MetricsLogger,
    episode_metrics,
    per_env_metrics,
    plot_reward_curve,
    read_metrics,
    sequence_metrics,
)
from agentfly_train.models import (
    load_causal_lm,
    load_tokenizer,
    pick_device,
    resolve_model_path,
)
from agentfly_train.rollout import Episode, Rollout
from agentfly_train.tokens_log import TOKENS_FILE, write_token_log

CHECKPOINT_PREFIX = "step-"
#: Where a run keeps its policy as the warm start left it (a transformers folder).
WARM_START_DIR = "warm-start"


class Critic(nn.Module):
    """A value model: the policy's transformer body (a copy) with a scalar head per token.

    Args:
        body: The base transformer (``policy.base_model``), copied by the caller.
        hidden_size: Its hidden size.
    """

    def __init__(self, body: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.body = body
        self.value_head = nn.Linear(hidden_size, 1, bias=False)
        nn.init.normal_(self.value_head.weight, std=1 / (hidden_size + 1))  # OpenRLHF's initialisation

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Values aligned with log-probs: column ``j`` is the value before token ``j + 1``."""
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.value_head(hidden.to(self.value_head.weight.dtype)).squeeze(-1)[:, :-1].float()


@dataclass
class Batch:
    """A rollout batch as right-padded tensors; per-token tensors are aligned with log-prob columns.

    Column ``j`` of ``action_mask``, ``old_logprobs``, ... concerns token ``j + 1`` of ``input_ids``.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    action_mask: torch.Tensor
    rollout_logprobs: torch.Tensor
    rewards: torch.Tensor
    lengths: torch.Tensor

    @classmethod
    def from_episodes(cls, episodes: Sequence[Episode], pad_id: int, device: torch.device) -> Batch:
        width = max(len(e.token_ids) for e in episodes)
        ids = torch.full((len(episodes), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(episodes), width), dtype=torch.long)
        action = torch.zeros((len(episodes), width), dtype=torch.float32)
        logprobs = torch.zeros((len(episodes), width), dtype=torch.float32)
        for row, episode in enumerate(episodes):
            n = len(episode.token_ids)
            ids[row, :n] = torch.tensor(episode.token_ids)
            attention[row, :n] = 1
            action[row, :n] = torch.tensor(episode.action_mask, dtype=torch.float32)
            logprobs[row, :n] = torch.tensor(episode.logprobs, dtype=torch.float32)
        return cls(
            input_ids=ids.to(device),
            attention_mask=attention.to(device),
            action_mask=action[:, 1:].to(device),
            rollout_logprobs=logprobs[:, 1:].to(device),
            rewards=torch.tensor([e.reward for e in episodes], dtype=torch.float32, device=device),
            lengths=attention.sum(-1).to(device),
        )

    def slice(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rows' ids, attention and action mask, cut to their own longest sequence."""
        width = int(self.lengths[rows].max())
        return self.input_ids[rows, :width], self.attention_mask[rows, :width], self.action_mask[rows, : width - 1]

    def micro_batches(self, rows: torch.Tensor, size: int) -> list[torch.Tensor]:
        """``rows`` in micro-batches of ``size`` similar lengths, so little compute goes into padding (a loss
        that sums the micro-batches' shares of the whole is not changed by the grouping)."""
        return chunks(rows[torch.argsort(self.lengths[rows].cpu(), stable=True)], size)


def chunks(indices: torch.Tensor, size: int) -> list[torch.Tensor]:
    """``indices`` in consecutive pieces of ``size`` (the last may be shorter)."""
    return [indices[start : start + size] for start in range(0, len(indices), size)]


def sequence_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    action_mask: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """Log-probs of each token given its prefix, ``(batch, length - 1)``, at the sampling temperature.

    Only the columns from the first action token on are computed (``logits_to_keep``): prompts can be
    long and the vocabulary is large.
    """
    length = input_ids.size(1)
    acting = action_mask.any(0).nonzero()
    first = int(acting[0]) if len(acting) else length - 2
    keep = length - first  # positions first..length-1; the last one predicts past the end
    out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep, use_cache=False)
    logits = out.logits[:, :-1].float() / temperature
    targets = input_ids[:, first + 1 :]
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    result = torch.zeros(action_mask.shape, dtype=torch.float32, device=input_ids.device)
    result[:, first:] = picked
    return result


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def step_seed(seed: int, step: int, stream: int) -> int:
    """A seed for one purpose (``stream``) of one step, independent of everything that came before."""
    return int(np.random.SeedSequence([seed, step, stream]).generate_state(1, np.uint32)[0])


class LocalTrainer:
    """Trains a policy on an env in this process.

    Args:
        config: The run (validated here).
        model: A policy to train instead of loading ``config.model.path`` (tests pass tiny models).
        tokenizer: Its tokenizer (required with ``model``).
        env_fn: Builds one env, instead of ``gym.make(config.env.id, **config.env.options)``.
    """

    def __init__(
        self,
        config: Config,
        *,
        model: nn.Module | None = None,
        tokenizer: Any = None,
        env_fn: Callable[[], AgentEnv] | None = None,
    ) -> None:
        self.config = config.validate(check_env=env_fn is None, check_model=model is None)
        self.env_fn = env_fn
        if config.backend != "local":
            raise ValueError(f"LocalTrainer runs backend 'local', not {config.backend!r}")
        if config.model.threads:
            torch.set_num_threads(config.model.threads)
        seed_everything(config.seed)
        self.device = pick_device(config.model.device)
        self.run_dir = Path(config.out_dir)
        if model is None:
            path = resolve_model_path(config.model.path, config.model.cache_dir or None)
            tokenizer = load_tokenizer(path)
            model = load_causal_lm(path, dtype=config.model.dtype, device=str(self.device))
        elif tokenizer is None:
            raise ValueError("pass the tokenizer with the model")
        self.tokenizer = tokenizer
        self.policy = model.to(self.device)
        # Eval mode throughout (no dropout), so the rollout's and the update's log-probs agree.
        self.policy.eval()
        if config.train.gradient_checkpointing:
            self.policy.gradient_checkpointing_enable()
        self.reference = self._frozen_copy(self.policy) if config.algorithm.kl_coef > 0 else None
        self.critic: Critic | None = None
        if config.estimator == "gae":
            self.critic = Critic(copy.deepcopy(self.policy.base_model), self.policy.config.hidden_size).to(self.device)
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(), lr=config.train.lr, weight_decay=config.train.weight_decay
        )
        self.critic_optimizer = (
            torch.optim.AdamW(
                self.critic.parameters(), lr=config.train.critic_lr, weight_decay=config.train.weight_decay
            )
            if self.critic is not None
            else None
        )
        warmup = config.train.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda n: min(1.0, (n + 1) / warmup) if warmup else 1.0
        )

        self.chat = ChatFormat(tokenizer, config.rollout.observation_role)
        size = config.episodes_per_step
        self.envs = (
            make_env_pool(env_fn, size=size)
            if env_fn is not None
            else make_env_pool(config.env.id, config.env.options, backend=config.env.pool, size=size)
        )
        self.generator = build_generator(config, self.policy, tokenizer)
        #: Which generator samples, for the run's log (``vllm (float32)``).
        self.generator_label = describe(self.generator)
        self.rollout = Rollout(self.envs, self.chat, self.generator, config.rollout)
        # A separate engine (vLLM) samples with its own numerics: score the tokens with the trained model.
        self.recompute_logprobs = config.train.recompute_logprobs or not isinstance(
            self.generator, TransformersGenerator
        )
        algorithm = config.algorithm
        low, high = [0.0, *algorithm.is_correction_threshold][-2:]  # [high] alone: low 0
        #: The train/rollout correction (a no-op unless the generator has numerics of its own).
        self.correction = algorithms.ISCorrection(
            algorithm.is_correction_level, algorithm.is_correction_mode, algorithm.is_correction_gating, low, high
        )
        self.step = 0
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)
        self._logger: MetricsLogger | None = None
        self._trajectories: TrajectoryWriter | None = None

    @staticmethod
    def _frozen_copy(model: nn.Module) -> nn.Module:
        frozen = copy.deepcopy(model)
        frozen.eval()
        frozen.requires_grad_(False)
        return frozen

    # ----------------------------------------------------------------- one step

    def train_step(self) -> dict[str, Any]:
        """Play one rollout batch and update the policy (and critic); return the step's metrics."""
        config = self.config
        started = time.perf_counter()
        rng = np.random.default_rng(step_seed(config.seed, self.step, 0))
        task_seeds = rng.integers(0, 2**31 - 1, size=config.rollout.prompts_per_step).tolist()
        result = self.rollout.run(task_seeds, step_seed(config.seed, self.step, 1), episode_id_prefix=f"{self.step}-")
        episodes = result.episodes
        metrics: dict[str, Any] = {
            **episode_metrics(episodes),
            **sequence_metrics(episodes),
            **{f"rollout_{k}": v for k, v in result.stats.as_dict().items()},
        }
        if config.env.mix:
            metrics.update(per_env_metrics(episodes))
        if self._trajectories is not None:
            for episode in episodes:
                if episode.trajectory is not None:
                    self._trajectories.write(episode.trajectory)
            write_token_log(self.run_dir / TOKENS_FILE, episodes, self.tokenizer)  # what was trained on: agentfly-view

        update_started = time.perf_counter()
        batch = Batch.from_episodes(episodes, self.pad_id, self.device)
        metrics.update(self._update(batch))
        if hasattr(self.generator, "update_weights"):  # an engine with its own copy of the weights
            synced = time.perf_counter()
            self.generator.update_weights(self.policy.state_dict().items())
            metrics["weight_sync_s"] = time.perf_counter() - synced
        metrics["update_s"] = time.perf_counter() - update_started
        metrics["step_s"] = time.perf_counter() - started
        metrics["lr"] = self.scheduler.get_last_lr()[0]
        self.step += 1
        return metrics

    @torch.no_grad()
    def _score(self, batch: Batch, *, score_old: bool) -> dict[str, torch.Tensor]:
        """Reference log-probs, old values and (with ``score_old``) old log-probs, micro-batch by micro-batch."""
        config = self.config
        temperature = config.rollout.temperature
        models = {
            "old": self.policy if score_old else None,
            "ref": self.reference,
            "values": self.critic,
        }
        out = {name: torch.zeros_like(batch.action_mask) for name, model in models.items() if model is not None}
        for rows in batch.micro_batches(torch.arange(len(batch.rewards)), self.config.train.micro_batch_size):
            ids, attention, mask = batch.slice(rows)
            for name in out:
                if name == "values":
                    scored = self.critic(ids, attention)[:, : ids.size(1) - 1]  # type: ignore[misc]
                else:
                    scored = sequence_logprobs(models[name], ids, attention, mask, temperature)
                out[name][rows] = _pad(scored, batch)
        return out

    def _update(self, batch: Batch) -> dict[str, float]:
        config, algorithm = self.config, self.config.algorithm
        size = len(batch.rewards)
        mini = config.train.mini_batch_size or size
        # One optimiser step on the batch (one epoch, one mini-batch) and no KL in the reward (which needs the old
        # log-probs before the advantages): the policy that takes the step is the one that sampled, so the old
        # log-probs are its own forward in the update, detached. That saves a scoring pass, a quarter of the update.
        old_in_update = (
            self.recompute_logprobs
            and config.train.epochs == 1
            and mini >= size
            and not (self.reference is not None and config.kl_mode == "reward")
        )
        scores = self._score(batch, score_old=self.recompute_logprobs and not old_in_update)
        ref, values = scores.get("ref"), scores.get("values")
        if "old" in scores:
            old = scores["old"]
        elif old_in_update:
            old = torch.zeros_like(batch.action_mask)  # filled in by the update's own forward
        else:
            old = batch.rollout_logprobs  # the generator is the trained model
        mask = batch.action_mask
        kl = algorithms.approx_kl(old, ref, self.config.kl_estimator) * mask if ref is not None else None
        use_kl_reward = ref is not None and config.kl_mode == "reward"
        result = algorithms.compute_advantages(
            batch.rewards,
            mask,
            estimator=config.estimator,
            group_size=config.rollout.samples_per_prompt,
            kl=kl if use_kl_reward else None,
            kl_coef=algorithm.kl_coef,
            values=values,
            gamma=algorithm.gamma,
            lambd=algorithm.lambd,
            std_norm=algorithm.advantage_std_norm,
            reward_clip=algorithm.reward_clip,
        )
        totals: dict[str, float] = {}
        counts: dict[str, int] = {}

        def add(name: str, value: float) -> None:
            totals[name] = totals.get(name, 0.0) + float(value)
            counts[name] = counts.get(name, 0) + 1

        for epoch in range(config.train.epochs):
            order = torch.randperm(
                size, generator=torch.Generator().manual_seed(step_seed(config.seed, self.step, 2 + epoch))
            )
            for minibatch in chunks(order, mini):
                num_tokens = mask[minibatch].sum().clamp(min=1)
                num_sequences = (mask[minibatch].sum(-1) > 0).sum().clamp(min=1)
                aggregation = {"mode": algorithm.loss_agg, "num_tokens": num_tokens, "num_sequences": num_sequences}
                self.policy.train(config.train.gradient_checkpointing)  # HF checkpoints only in train mode
                for rows in batch.micro_batches(minibatch, config.train.micro_batch_size):
                    ids, attention, micro_mask = batch.slice(rows)
                    width = ids.size(1) - 1
                    logprobs = sequence_logprobs(self.policy, ids, attention, micro_mask, config.rollout.temperature)
                    if old_in_update:
                        old[rows, :width] = logprobs.detach()
                    loss_result = algorithms.policy_loss(
                        logprobs,
                        old[rows, :width],
                        result.advantages[rows, :width],
                        micro_mask,
                        clip_eps_low=algorithm.clip_eps_low,
                        clip_eps_high=algorithm.clip_eps_high,
                        dual_clip=algorithm.dual_clip or None,
                        correction=self.correction,
                        rollout_log_probs=batch.rollout_logprobs[rows, :width],
                        **aggregation,
                    )
                    loss = loss_result.loss
                    if loss_result.vllm_kl is not None:
                        add("vllm_kl", loss_result.vllm_kl.item())
                        add("is_filter_ratio", loss_result.is_filter_ratio.item())
                    if ref is not None and config.kl_mode == "loss":
                        kl_term = algorithms.kl_loss(
                            logprobs, ref[rows, :width], micro_mask, estimator=config.kl_estimator, **aggregation
                        )
                        loss = loss + algorithm.kl_coef * kl_term
                        add("kl_loss", kl_term.item())
                    loss.backward()
                    add("policy_loss", loss_result.loss.item())
                    add("clip_ratio", loss_result.clip_ratio.item())
                    add("ppo_kl", loss_result.ppo_kl.item())
                    if self.critic is not None:
                        predicted = self.critic(ids, attention)[:, :width]
                        critic_loss = algorithms.value_loss(
                            predicted,
                            values[rows, :width],  # type: ignore[index]
                            result.returns[rows, :width],
                            micro_mask,
                            clip_eps=algorithm.value_clip or None,
                            **aggregation,
                        )
                        critic_loss.backward()
                        add("value_loss", critic_loss.item())
                self.policy.eval()
                if config.train.max_grad_norm:
                    norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), config.train.max_grad_norm)
                    add("grad_norm", norm.item())
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                if self.critic is not None and self.critic_optimizer is not None:
                    if config.train.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_(self.critic.parameters(), config.train.max_grad_norm)
                    self.critic_optimizer.step()
                    self.critic_optimizer.zero_grad(set_to_none=True)
        # Per-micro-batch losses are shares of their mini-batch's mean: sum them per mini-batch.
        minibatches = config.train.epochs * -(-size // mini)
        report = {
            name: totals[name] / minibatches
            if name in ("policy_loss", "value_loss", "kl_loss")
            else totals[name] / counts[name]
            for name in totals
        }
        report["advantage_mean"] = float(algorithms.masked_mean(result.advantages, mask)) if mask.sum() else 0.0
        report["return_mean"] = float(result.token_rewards.sum(-1).mean())
        if kl is not None:
            report["kl"] = float(algorithms.masked_mean(kl, mask)) if mask.sum() else 0.0
        if self.recompute_logprobs and mask.sum():
            report["logprob_mismatch"] = float(((old - batch.rollout_logprobs).abs() * mask).max())
        return report

    # ----------------------------------------------------------------- the loop

    def fit(self, *, on_step: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train ``train.steps`` steps (from the resumed step); write metrics, trajectories, checkpoints, the plot.

        Args:
            on_step: Called after each step with the step number and its metrics (the CLI's progress bar).

        Returns:
            A summary: steps, first and last reward, wall time and the paths written.
        """
        config = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
        resumed = bool(config.train.resume) and self.resume(config.train.resume)
        _keep_records_up_to(self.run_dir, self.step if resumed else 0)
        self._logger = MetricsLogger(
            self.run_dir,
            tensorboard=config.log.tensorboard,
            wandb=config.log.wandb,
            wandb_project=config.log.wandb_project,
            config=config.to_dict(),
        )
        if config.log.trajectories:
            self._trajectories = TrajectoryWriter(self.run_dir / "trajectories.jsonl", durable=False)
        started = time.perf_counter()
        stages: dict[str, dict[str, float]] = {}
        if config.eval.stages and not resumed:
            stages["base"] = self.evaluate_stage("base")
        if config.sft.enabled and not resumed:
            self._logger.log(0, self.warm_start())
            if config.eval.stages:
                stages["warm start"] = self.evaluate_stage("warm-start")
        try:
            while self.step < config.train.steps:
                metrics = self.train_step()
                self._logger.log(self.step, metrics)
                if on_step is not None:
                    on_step(self.step, metrics)
                if config.train.save_every and self.step % config.train.save_every == 0:
                    self.save_checkpoint()
        finally:
            self._logger.close()
            if self._trajectories is not None:
                self._trajectories.close()
        if config.eval.stages:
            stages["rl"] = self.evaluate_stage("rl")
        summary: dict[str, Any] = {"steps": self.step, "wall_s": time.perf_counter() - started}
        if stages:
            summary["stages"] = stages
        summary["checkpoint"] = str(self.save_checkpoint())
        summary["final_model"] = str(self.save_model(self.run_dir / "final"))
        records = [r for r in read_metrics(self.run_dir / "metrics.jsonl") if "reward_mean" in r]
        if records:
            summary["reward_first"], summary["reward_last"] = records[0]["reward_mean"], records[-1]["reward_mean"]
        summary["metrics"] = str(self.run_dir / "metrics.jsonl")
        if config.log.trajectories:
            summary["trajectories"] = str(self.run_dir / "trajectories.jsonl")
        if config.log.tensorboard:
            summary["tensorboard"] = str(self.run_dir / "tensorboard")
        if config.log.plot and records:
            title = f"{config.algo} on {config.env.id} ({config.model.path})"
            summary["reward_curve"] = str(plot_reward_curve(records, self.run_dir / "reward_curve.png", title=title))
        self.close()
        return summary

    def evaluate_stage(self, name: str) -> dict[str, float]:
        """The policy as it is now on ``eval.episodes`` held-out tasks (greedy at ``eval.temperature``, through
        the trainer's own generator), overall and per env (``<env>/<metric>``) in a mixed run; the report and
        trajectories go to ``<run dir>/stages/<name>/eval``."""
        from agentfly_train.evaluate import evaluate

        config = msgspec.structs.replace(self.config, out_dir=str(self.run_dir / "stages" / name))
        summary = evaluate(
            config, model=self.policy, tokenizer=self.tokenizer, env_fn=self.env_fn, generator=self.generator
        )
        keys = ("success_rate", "reward_mean", "tool_calls_per_episode", "turns_per_episode")
        return {key: value for key, value in summary.items() if key.rpartition("/")[2] in keys}

    def warm_start(self) -> dict[str, float]:
        """The ``[sft]`` stage on the policy (then pushed to the generator's engine); returns its metrics."""
        from agentfly_train.sft import warm_start

        result = warm_start(self.config, self.policy, self.tokenizer, env_fn=self.env_fn)
        if hasattr(self.generator, "update_weights"):
            self.generator.update_weights(self.policy.state_dict().items())
        # RL starts from the warm-started model, as OpenRLHF's recipes pass the SFT checkpoint as --pretrain: the
        # KL's reference and the critic's body are that model (a KL to the base model would pull the policy back
        # to making no tool calls). It is saved for a resumed run's reference, and as a model of its own.
        if self.reference is not None:
            self.reference.load_state_dict(self.policy.state_dict())
        if self.critic is not None:
            self.critic.body.load_state_dict(self.policy.base_model.state_dict())
        self.save_model(self.run_dir / WARM_START_DIR)
        return {
            "sft_loss_first": result.losses[0],
            "sft_loss_last": result.losses[-1],
            "sft_episodes": result.episodes,
            "sft_action_tokens": result.action_tokens,
            "sft_s": result.seconds,
        }

    def _warm_started_weights(self) -> dict[str, torch.Tensor]:
        """The policy's weights right after this run's warm start (saved in ``<run dir>/warm-start``)."""
        path = self.run_dir / WARM_START_DIR
        if not path.is_dir():
            raise FileNotFoundError(f"{path} is missing: the run's warm start is the KL reference of a resumed run")
        saved = type(self.policy).from_pretrained(path, dtype=next(self.policy.parameters()).dtype)
        return saved.state_dict()

    def close(self) -> None:
        run_sync(self.envs.close())
        if hasattr(self.generator, "close"):  # a vLLM engine: its KV cache, maybe its process
            self.generator.close()

    # ----------------------------------------------------------------- checkpoints

    def save_model(self, path: str | os.PathLike[str]) -> Path:
        """The policy and tokenizer as a transformers folder (loadable with ``--model PATH``)."""
        path = Path(path)
        with atomic_path(path) as scratch:
            self.policy.save_pretrained(scratch)
            self.tokenizer.save_pretrained(scratch)
        return path

    def save_checkpoint(self) -> Path:
        """Everything needed to continue exactly: weights, optimiser states, the step. Old ones are pruned."""
        root = self.run_dir / "checkpoints"
        target = root / f"{CHECKPOINT_PREFIX}{self.step:06d}"
        state: dict[str, Any] = {
            "step": self.step,
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "config": self.config.to_dict(),
        }
        if self.critic is not None and self.critic_optimizer is not None:
            state["critic"] = self.critic.state_dict()
            state["critic_optimizer"] = self.critic_optimizer.state_dict()
        with atomic_path(target) as scratch:
            scratch.mkdir()
            torch.save(state, scratch / "trainer.pt")
        kept = sorted(root.glob(f"{CHECKPOINT_PREFIX}*"))
        for old in kept[: max(0, len(kept) - self.config.train.keep_checkpoints)]:
            shutil.rmtree(old, ignore_errors=True)
        return target

    def latest_checkpoint(self) -> Path | None:
        found = sorted((self.run_dir / "checkpoints").glob(f"{CHECKPOINT_PREFIX}*"))
        return found[-1] if found else None

    def resume(self, where: str | os.PathLike[str]) -> bool:
        """Load a checkpoint (``auto``: the latest in the run dir, if any); True when one was loaded."""
        path = self.latest_checkpoint() if str(where) == "auto" else Path(where)
        if path is None:
            return False
        state = torch.load(Path(path) / "trainer.pt", map_location=self.device, weights_only=True)
        self.policy.load_state_dict(state["policy"])
        if self.reference is not None and self.config.sft.enabled:
            self.reference.load_state_dict(self._warm_started_weights())
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.critic is not None and self.critic_optimizer is not None:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.step = int(state["step"])
        return True


class _EpisodeLine(msgspec.Struct):
    """What a line of ``trajectories.jsonl`` or ``tokens.jsonl`` says about its step: ``{step}-{group}-{chain}``."""

    episode_id: str | None = None


def _keep_records_up_to(run_dir: Path, step: int) -> None:
    """Drop metrics, trajectories and token records of steps after ``step`` (all of them for a fresh run).

    A run that died after its last checkpoint logged steps that the resumed run will take again. Lines are kept
    byte for byte; a damaged one (the crash cut it) is dropped.
    """
    metrics = run_dir / "metrics.jsonl"
    if metrics.exists():
        kept = [r for r in read_metrics(metrics) if r.get("step", 0) <= step]
        metrics.write_text("".join(json.dumps(r) + "\n" for r in kept))
    decoder = msgspec.json.Decoder(_EpisodeLine)

    def before_step(line: bytes) -> bool:
        try:
            episode_id = decoder.decode(line).episode_id or "0-"
        except msgspec.DecodeError:
            return False
        return int(episode_id.split("-")[0]) < step

    for path in (run_dir / "trajectories.jsonl", run_dir / TOKENS_FILE):
        if not path.exists():
            continue
        kept_lines = [line for line in path.read_bytes().splitlines(keepends=True) if step and before_step(line)]
        with atomic_path(path) as scratch:
            scratch.write_bytes(b"".join(line if line.endswith(b"\n") else line + b"\n" for line in kept_lines))


def _pad(values: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Right-pad a micro-batch's per-token tensor to the batch's width."""
    width = batch.action_mask.size(1)
    return torch.nn.functional.pad(values, (0, width - values.size(1)))
