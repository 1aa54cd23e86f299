"""The local backend: rollouts and PPO-style updates in one process with torch + transformers.

It runs on a laptop CPU and uses CUDA when present. One training step is: play a batch of episodes
with the current policy (:mod:`agentfly_train.rollout`), score the tokens (old log-probs, the
reference model's log-probs for the KL, the critic's values for PPO), compute advantages with the
configured estimator (:mod:`agentfly_train.algorithms`), then ``epochs`` passes of mini-batch updates
with gradient accumulation over micro-batches and gradient clipping. An episode whose env failed
(``episode.failure``) is left out of the update; so is a group of a group-baseline algorithm (GRPO, RLOO)
left with fewer than two finished episodes.

The update reads top to bottom in :meth:`LocalTrainer._update`: ``_scores`` (one no-grad pass),
``_advantages``, then per mini-batch ``_learn``: ``_backward`` per micro-batch and one ``_optimiser_step``.

Every step's randomness (tasks, sampling, shuffling) is derived from ``(seed, step)``, so a run resumed
from a checkpoint takes exactly the step the uninterrupted run would have taken.

Example:
    >>> trainer = LocalTrainer(Config.load("quickstart"))  # doctest: +SKIP
    >>> summary = trainer.fit()  # doctest: +SKIP
    >>> summary["reward_curve"]  # doctest: +SKIP
    'runs/quickstart/reward_curve.png'
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import random
import shutil
import time
from collections.abc import Callable
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
from agentfly_env.resources.files import atomic_path
from agentfly_train import algorithms, lifecycle
from agentfly_train.config import Config
from agentfly_train.generation import build_generator, describe
from agentfly_train.generation.hf import TransformersGenerator
from agentfly_train.metrics import (
    episode_metrics,
    gateway_metrics,
    per_env_metrics,
    sequence_metrics,
    uniform_group_rate,
)
from agentfly_train.models import pad_id, pick_device
from agentfly_train.rollout import Episode, run_env_pool
from agentfly_train.run_files import (
    CHECKPOINT_PREFIX,
    CHECKPOINT_STATE_FILE,
    CHECKPOINTS_DIR,
    STAGES_DIR,
    TOKENS_FILE,
    WARM_START_DIR,
    checkpoint_name,
)
from agentfly_train.tokens_log import write_token_log
from agentfly_train.training import Batch, CompiledBlocks, chunks, sequence_logprobs, use_float32_attention_gradients

logger = logging.getLogger("agentfly.train")


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
class Scores:
    """What the update reads per token besides the batch, scored before its first optimiser step.

    Attributes:
        old: Log-probs of the policy that sampled (the generator's, or recomputed; with ``fill_old``, filled in
            by the update's own forward passes).
        ref: The reference model's log-probs (for the KL), or None without one.
        values: The critic's values, or None without one.
        fill_old: The policy taking the step is the one that sampled, so its log-probs in the update are the old
            ones (one epoch, one mini-batch, no KL in the reward): a scoring pass saved.
    """

    old: torch.Tensor
    ref: torch.Tensor | None
    values: torch.Tensor | None
    fill_old: bool


class UpdateStats:
    """The update's diagnostics, added per micro-batch (or per optimiser step) and reported as means.

    A micro-batch's loss is its share of its mini-batch's mean, so losses are summed per mini-batch and
    averaged over the mini-batches; everything else is averaged over the values added.
    """

    LOSSES = ("policy_loss", "value_loss", "kl_loss")

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, name: str, value: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + value
        self.counts[name] = self.counts.get(name, 0) + 1

    def means(self, minibatches: int) -> dict[str, float]:
        return {
            name: total / (minibatches if name in self.LOSSES else self.counts[name])
            for name, total in self.totals.items()
        }


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
        model, tokenizer = lifecycle.load_policy(config, model, tokenizer)
        self.tokenizer = tokenizer
        self.policy = model.to(self.device)
        # Eval mode throughout (no dropout), so the rollout's and the update's log-probs agree.
        self.policy.eval()
        if config.train.gradient_checkpointing:
            self.policy.gradient_checkpointing_enable()
        #: Whether the update's attention runs in float32 under bf16 autocast (on a CPU, where that is faster).
        self.float32_attention = config.train.bf16_autocast and use_float32_attention_gradients(self.policy)
        #: The policy's decoder layers compiled for the update (``train.compile``), None when not.
        self.compiled = CompiledBlocks(self.policy) if config.train.compile else None
        self.reference = self._frozen_copy(self.policy) if config.algorithm.kl_coef > 0 else None
        self.critic: Critic | None = None
        if config.algo_spec.critic:
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

        self.envs = run_env_pool(config, config.episodes_per_step, env_fn=env_fn)
        self.generator = build_generator(config, self.policy, tokenizer)
        #: Which generator samples, for the run's log (``vllm (float32)``).
        self.generator_label = describe(self.generator)
        self.rollout = lifecycle.make_rollout(config, self.envs, self.generator, tokenizer, config.rollout)
        #: The episodes of the last training step, as they were trained on (for reports and soaks).
        self.last_episodes: list[Episode] = []
        #: The warm start's demonstrations (encoded), kept for self-imitation (``sft.self_imitation_every``).
        self.demonstrations: list[Any] = []
        #: The policy's winning training episodes since the last self-imitation.
        self.own_wins: list[Episode] = []
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
        self.pad_id = pad_id(tokenizer)
        #: Where the steps' trajectories go while :meth:`fit` runs (``log.trajectories``).
        self.trajectories: TrajectoryWriter | None = None

    def describe(self) -> str:
        """What will run, in one line: the algorithm, env, model, budget, device and generator."""
        config = self.config
        return (
            f"{config.algo} ({config.estimator}) on {config.env.id} with {config.model.path}: {config.train.steps} "
            f"steps x {config.episodes_per_step} episodes, device {self.device}, generator {self.generator_label}"
            + (", update in bfloat16 autocast" if config.train.bf16_autocast else "")
            + (" (attention in float32)" if self.float32_attention else "")
            + (", decoder layers compiled for the update" if config.train.compile else "")
        )

    def _numerics(self) -> torch.autocast:
        """The update's numerics: float32, or bfloat16 autocast (``train.bf16_autocast``) for every forward it makes."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.config.train.bf16_autocast)

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
        episodes = self.last_episodes = result.episodes
        metrics: dict[str, Any] = {
            **episode_metrics(episodes),
            **sequence_metrics(episodes),
            **{f"rollout_{k}": v for k, v in result.stats.as_dict().items()},
            **gateway_metrics(episodes),
            "uniform_group_rate": uniform_group_rate(episodes),
        }
        if config.env.mix:
            metrics.update(per_env_metrics(episodes))
        if self.trajectories is not None:
            for episode in episodes:
                if (trajectory := episode.written()) is not None:
                    self.trajectories.write(trajectory)
            write_token_log(self.run_dir / TOKENS_FILE, episodes, self.tokenizer)  # what was trained on: agentfly-view

        update_started = time.perf_counter()
        batch = Batch.from_episodes(episodes, self.pad_id, self.device, anchors=config.algo_spec.step_credit)
        metrics.update(self._update(batch))
        if hasattr(self.generator, "update_weights"):  # an engine with its own copy of the weights
            synced = time.perf_counter()
            self.generator.update_weights(self.policy.state_dict().items())
            metrics["weight_sync_s"] = time.perf_counter() - synced
        metrics["update_s"] = time.perf_counter() - update_started
        metrics["step_s"] = time.perf_counter() - started
        metrics["lr"] = self.scheduler.get_last_lr()[0]
        self.step += 1
        every = config.sft.self_imitation_every
        if every:
            self.own_wins += [episode for episode in episodes if self._won(episode)]
            if self.step % every == 0:
                metrics.update(self.self_imitate())
        return metrics

    def _won(self, episode: Episode) -> bool:
        """Whether self-imitation keeps a training episode: it finished, and succeeded (or reached ``sft.min_reward``)."""
        threshold = self.config.sft.min_reward
        return episode.failure is None and (episode.success if threshold is None else episode.reward >= threshold)

    def self_imitate(self) -> dict[str, float]:
        """Fine-tune on the policy's wins since the last time (and the warm start's demonstrations), then push the
        weights to the generator's engine; its metrics. No wins: nothing is trained."""
        from agentfly_train.sft import fine_tune

        wins, self.own_wins = self.own_wins, []
        if not wins:
            return {"self_imitation_episodes": 0}
        result = fine_tune(self.config, self.policy, self.tokenizer, [*wins, *self.demonstrations])
        if hasattr(self.generator, "update_weights"):
            self.generator.update_weights(self.policy.state_dict().items())
        return {
            "self_imitation_episodes": len(wins),
            "self_imitation_loss": result.losses[-1],
            "self_imitation_s": result.seconds,
        }

    # ----------------------------------------------------------------- the update

    def _update(self, batch: Batch) -> dict[str, float]:
        """Learn from one rollout batch: leave out the episodes that cannot teach, score the rest, estimate their
        advantages, then take ``train.epochs`` passes of mini-batch optimiser steps; return the update's metrics."""
        with self.compiled or contextlib.nullcontext():  # train.compile: the layers compiled, for the update only
            config = self.config
            trained = algorithms.trained_episodes(
                batch.finished, config.rollout.samples_per_prompt, config.estimator, batch.episode_of
            )
            batch = batch.keeping(trained)
            scores = self._scores(batch)
            advantages = self._advantages(batch, scores, trained)
            stats = UpdateStats()
            learns = self._has_signal(batch, scores, advantages)
            for epoch in range(config.train.epochs if learns else 0):
                for minibatch in self._minibatches(len(batch), epoch):
                    self._learn(batch, minibatch, scores, advantages, stats)
            report = self._report(batch, scores, advantages, stats, trained, learned=learns)
            report["update_skipped"] = float(not learns)
            return report

    def _has_signal(self, batch: Batch, scores: Scores, advantages: algorithms.Advantages) -> bool:
        """Whether the update has anything to learn: a non-zero advantage on an action token, a critic to fit or a KL
        loss. Without any (every group all wins or all losses), the gradients are zero, but AdamW would still move
        the weights on its momentum, replaying the last step's signal over the next ones (several times its size in
        all), so the step is skipped, with its forward and backward passes."""
        if self.critic is not None or (scores.ref is not None and self.config.kl_mode == "loss"):
            return True
        return bool((advantages.advantages * batch.action_mask).any())

    def _scores(self, batch: Batch) -> Scores:
        """Old log-probs, the reference's log-probs and the critic's values of every token, before any step."""
        config = self.config
        size, mini = len(batch), config.train.mini_batch_size or len(batch)
        fill_old = (
            self.recompute_logprobs
            and config.train.epochs == 1
            and mini >= size
            and not (self.reference is not None and config.kl_mode == "reward")  # the reward's KL needs them first
        )
        scored = self._score(batch, score_old=self.recompute_logprobs and not fill_old)
        if "old" in scored:
            old = scored["old"]
        elif fill_old:
            old = torch.zeros_like(batch.action_mask)  # filled in by the update's own forward
        else:
            old = batch.rollout_logprobs  # the generator is the trained model
        return Scores(old=old, ref=scored.get("ref"), values=scored.get("values"), fill_old=fill_old)

    @torch.no_grad()
    def _score(self, batch: Batch, *, score_old: bool) -> dict[str, torch.Tensor]:
        """Reference log-probs, old values and (with ``score_old``) old log-probs, micro-batch by micro-batch."""
        temperature = self.config.rollout.temperature
        models = {
            "old": self.policy if score_old else None,
            "ref": self.reference,
            "values": self.critic,
        }
        out = {name: torch.zeros_like(batch.action_mask) for name, model in models.items() if model is not None}
        for rows in batch.micro_batches(torch.arange(len(batch)), self.config.train.micro_batch_size):
            ids, attention, mask = batch.slice(rows)
            for name in out:
                with self._numerics():
                    if name == "values":
                        scored = self.critic(ids, attention)[:, : ids.size(1) - 1]  # type: ignore[misc]
                    else:
                        scored = sequence_logprobs(models[name], ids, attention, mask, temperature)
                out[name][rows] = batch.full_width(scored.float())
        return out

    def _kl(self, batch: Batch, scores: Scores) -> torch.Tensor:
        """The per-token KL of the old policy to the reference, on action tokens."""
        assert scores.ref is not None
        return algorithms.approx_kl(scores.old, scores.ref, self.config.kl_estimator) * batch.action_mask

    def _advantages(self, batch: Batch, scores: Scores, trained: torch.Tensor) -> algorithms.Advantages:
        config, algorithm = self.config, self.config.algorithm
        kl_in_reward = scores.ref is not None and config.kl_mode == "reward"
        return algorithms.compute_advantages(
            batch.rewards,
            batch.action_mask,
            estimator=config.estimator,
            group_size=config.rollout.samples_per_prompt,
            kl=self._kl(batch, scores) if kl_in_reward else None,
            kl_coef=algorithm.kl_coef,
            values=scores.values,
            gamma=algorithm.gamma,
            lambd=algorithm.lambd,
            std_norm=algorithm.advantage_std_norm,
            reward_clip=algorithm.reward_clip,
            included=trained,
            episode_of=batch.episode_of,
            step=self._step_advantages(batch, trained) if config.algo_spec.step_credit else None,
            step_weight=algorithm.step_weight,
        )

    def _step_advantages(self, batch: Batch, trained: torch.Tensor) -> torch.Tensor:
        """GiGPO's step-level advantages of the trained episodes' turns, grouped by task (consecutive chains)."""
        anchors = [anchor for anchor in batch.anchors if trained[anchor.row]]
        group_of_row = (batch.episode_of // self.config.rollout.samples_per_prompt).tolist()
        step = algorithms.step_advantages(
            anchors, group_of_row, tuple(batch.action_mask.shape), self.config.algorithm.gamma
        )
        return step.to(batch.action_mask.device)

    def _minibatches(self, size: int, epoch: int) -> list[torch.Tensor]:
        """The batch's rows in the order of ``epoch`` (seeded by the step), cut into ``train.mini_batch_size``."""
        config = self.config
        order = torch.randperm(
            size, generator=torch.Generator().manual_seed(step_seed(config.seed, self.step, 2 + epoch))
        )
        return chunks(order, config.train.mini_batch_size or size)

    def _learn(
        self,
        batch: Batch,
        minibatch: torch.Tensor,
        scores: Scores,
        advantages: algorithms.Advantages,
        stats: UpdateStats,
    ) -> None:
        """One optimiser step on a mini-batch, its gradients accumulated over micro-batches."""
        train = self.config.train
        mask = batch.action_mask[minibatch]
        # The whole mini-batch's counts: each micro-batch's loss is its share of the mini-batch's mean. A sequence
        # is an episode, however many rows it has (windows of a bounded history, an agent program's calls).
        episode_tokens = torch.zeros(len(batch), device=mask.device).index_add_(
            0, batch.episode_of[minibatch], mask.sum(-1)
        )
        aggregation = {
            "mode": self.config.algorithm.loss_agg,
            "num_tokens": mask.sum().clamp(min=1),
            "num_sequences": (episode_tokens > 0).sum().clamp(min=1),
        }
        self.policy.train(train.gradient_checkpointing)  # HF checkpoints only in train mode
        for rows in batch.micro_batches(minibatch, train.micro_batch_size):
            sequence_tokens = episode_tokens[batch.episode_of[rows]]
            self._backward(batch, rows, scores, advantages, {**aggregation, "sequence_tokens": sequence_tokens}, stats)
        self.policy.eval()
        self._optimiser_step(stats)

    def _backward(
        self,
        batch: Batch,
        rows: torch.Tensor,
        scores: Scores,
        advantages: algorithms.Advantages,
        aggregation: dict[str, Any],
        stats: UpdateStats,
    ) -> None:
        """The policy's (and critic's) loss on one micro-batch, back-propagated."""
        config, algorithm = self.config, self.config.algorithm
        ids, attention, mask = batch.slice(rows)
        width = ids.size(1) - 1
        with self._numerics():
            logprobs = sequence_logprobs(self.policy, ids, attention, mask, config.rollout.temperature)
        if scores.fill_old:
            scores.old[rows, :width] = logprobs.detach()
        policy = algorithms.policy_loss(
            logprobs,
            scores.old[rows, :width],
            advantages.advantages[rows, :width],
            mask,
            clip_eps_low=algorithm.clip_eps_low,
            clip_eps_high=algorithm.clip_eps_high,
            dual_clip=algorithm.dual_clip or None,
            correction=self.correction,
            rollout_log_probs=batch.rollout_logprobs[rows, :width],
            **aggregation,
        )
        loss = policy.loss
        if policy.vllm_kl is not None:
            stats.add("vllm_kl", policy.vllm_kl.item())
            stats.add("is_filter_ratio", policy.is_filter_ratio.item())
        if scores.ref is not None and config.kl_mode == "loss":
            kl_term = algorithms.kl_loss(
                logprobs, scores.ref[rows, :width], mask, estimator=config.kl_estimator, **aggregation
            )
            loss = loss + algorithm.kl_coef * kl_term
            stats.add("kl_loss", kl_term.item())
        loss.backward()
        stats.add("policy_loss", policy.loss.item())
        stats.add("clip_ratio", policy.clip_ratio.item())
        stats.add("ppo_kl", policy.ppo_kl.item())
        if self.critic is not None:
            assert scores.values is not None
            with self._numerics():
                values = self.critic(ids, attention)[:, :width].float()
            critic_loss = algorithms.value_loss(
                values,
                scores.values[rows, :width],
                advantages.returns[rows, :width],
                mask,
                clip_eps=algorithm.value_clip or None,
                **aggregation,
            )
            critic_loss.backward()
            stats.add("value_loss", critic_loss.item())

    def _optimiser_step(self, stats: UpdateStats) -> None:
        """Clip the accumulated gradients, step the policy (and critic) and clear them."""
        max_norm = self.config.train.max_grad_norm
        if max_norm:
            stats.add("grad_norm", torch.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm).item())
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.critic is not None and self.critic_optimizer is not None:
            if max_norm:
                torch.nn.utils.clip_grad_norm_(self.critic.parameters(), max_norm)
            self.critic_optimizer.step()
            self.critic_optimizer.zero_grad(set_to_none=True)

    def _report(
        self,
        batch: Batch,
        scores: Scores,
        advantages: algorithms.Advantages,
        stats: UpdateStats,
        trained: torch.Tensor,
        *,
        learned: bool,
    ) -> dict[str, float]:
        """The update's metrics: the losses and diagnostics, and what the batch's advantages and KL were."""
        size, mask = len(batch), batch.action_mask
        mini = self.config.train.mini_batch_size or size
        report = stats.means(minibatches=self.config.train.epochs * -(-size // mini))
        report["advantage_mean"] = float(algorithms.masked_mean(advantages.advantages, mask)) if mask.sum() else 0.0
        report["return_mean"] = float(advantages.token_rewards[trained].sum(-1).mean()) if trained.any() else 0.0
        if scores.ref is not None:  # from the old log-probs as the update left them (filled in, with fill_old)
            report["kl"] = float(algorithms.masked_mean(self._kl(batch, scores), mask)) if mask.sum() else 0.0
        if self.recompute_logprobs and mask.sum() and (learned or not scores.fill_old):  # else never computed
            report["logprob_mismatch"] = float(((scores.old - batch.rollout_logprobs).abs() * mask).max())
            # KL(engine || trainer) on the engine's own samples (k3: unbiased, non-negative), per sampled token.
            kl = algorithms.approx_kl(batch.rollout_logprobs, scores.old, "k3")
            report["mismatch_kl"] = float(algorithms.masked_mean(kl, mask))
        report["left_out_episodes"] = int((~trained[algorithms.first_rows(batch.episode_of)]).sum())
        return report

    # ----------------------------------------------------------------- the loop

    def fit(self, *, on_step: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train ``train.steps`` steps (from the resumed step); write metrics, trajectories, checkpoints, the plot.

        Args:
            on_step: Called after each step with the step number and its metrics (the CLI's progress bar).

        Returns:
            A summary: steps, first and last reward, wall time and the paths written.
        """
        return lifecycle.run(self, on_step=on_step)

    def evaluate_stage(self, name: str) -> dict[str, float]:
        """The policy as it is now on ``eval.episodes`` held-out tasks (greedy at ``eval.temperature``, through
        the trainer's own generator), overall and per env (``<env>/<metric>``) in a mixed run; the report and
        trajectories go to ``<run dir>/stages/<name>/eval``."""
        from agentfly_train.evaluate import evaluate

        config = msgspec.structs.replace(self.config, out_dir=str(self.run_dir / STAGES_DIR / name))
        summary = evaluate(
            config, model=self.policy, tokenizer=self.tokenizer, env_fn=self.env_fn, generator=self.generator
        )
        logger.info(
            "held-out tasks, %s: success %.3f, reward %.3f, %.2f tool calls per episode (%d episodes, %.0f s)",
            name,
            summary["success_rate"],
            summary["reward_mean"],
            summary["tool_calls_per_episode"],
            summary["episodes"],
            summary["wall_s"],
        )
        keys = ("success_rate", "reward_mean", "tool_calls_per_episode", "turns_per_episode")
        return {key: value for key, value in summary.items() if key.rpartition("/")[2] in keys}

    def warm_start(self) -> dict[str, float]:
        """The ``[sft]`` stage on the policy (then pushed to the generator's engine); returns its metrics."""
        from agentfly_train.sft import demonstrations, fine_tune

        self.demonstrations = demonstrations(self.config, self.tokenizer, self.env_fn)
        result = fine_tune(self.config, self.policy, self.tokenizer, self.demonstrations)
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
        logger.info(
            "warm start: %d episodes (%d model tokens), %d steps in %.0f s; loss %.3f -> %.3f",
            result.episodes,
            result.action_tokens,
            len(result.losses),
            result.seconds,
            result.losses[0],
            result.losses[-1],
        )
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
        root = self.run_dir / CHECKPOINTS_DIR
        target = root / checkpoint_name(self.step)
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
            torch.save(state, scratch / CHECKPOINT_STATE_FILE)
        kept = sorted(root.glob(f"{CHECKPOINT_PREFIX}*"))
        for old in kept[: max(0, len(kept) - self.config.train.keep_checkpoints)]:
            shutil.rmtree(old, ignore_errors=True)
        return target

    def latest_checkpoint(self) -> Path | None:
        found = sorted((self.run_dir / CHECKPOINTS_DIR).glob(f"{CHECKPOINT_PREFIX}*"))
        return found[-1] if found else None

    def resume(self, where: str | os.PathLike[str]) -> bool:
        """Load a checkpoint (``auto``: the latest in the run dir, if any); True when one was loaded."""
        path = self.latest_checkpoint() if str(where) == "auto" else Path(where)
        if path is None:
            return False
        state = torch.load(Path(path) / CHECKPOINT_STATE_FILE, map_location=self.device, weights_only=True)
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
