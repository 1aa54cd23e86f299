"""A run's parts, built one way for training, evaluation and the command line, and a run's lifecycle, written once.

- :func:`load_policy`: the model and tokenizer a config names (or the ones given), on its device.
- :func:`make_rollout`: what plays a batch of episodes: the env loop, or the user's agent program through the
  token-exact gateway (``agent.program`` / ``agent.command``).
- :func:`run`: the lifecycle of a training run on any :class:`SteppedBackend`: held-out evaluation of the base
  model, the warm start and its evaluation, the steps (metrics, trajectories, checkpoints), the evaluation after
  RL, the final checkpoint and model, the summary and the reward curve. The backend does what is its own: one
  training step, one stage's evaluation, the warm start, saving and resuming. A backend whose trainer owns its
  loop (OpenRLHF's, in a process of its own) runs its own ``fit`` instead.

Example:
    >>> from agentfly_train.config import Config
    >>> config = Config.from_dict({"sft": {"expert_episodes": 8}, "eval": {"stages": True}})
    >>> stages(config)
    ['base', 'warm start', 'rl']
    >>> config.eval.stages = False
    >>> stages(config)
    []
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from agentfly_env.core.recording import TrajectoryWriter
from agentfly_env.resources.files import atomic_path
from agentfly_train.metrics import MetricsLogger, plot_reward_curve, read_metrics
from agentfly_train.run_files import (
    CONFIG_FILE,
    FINAL_MODEL_DIR,
    METRICS_FILE,
    REWARD_CURVE_FILE,
    TENSORBOARD_DIR,
    TOKENS_FILE,
    TRAJECTORIES_FILE,
)

if TYPE_CHECKING:
    from agentfly_env.resources.distributed import EnvHandle
    from agentfly_env.resources.pool import ResourcePool
    from agentfly_train.agents import AgentRollout
    from agentfly_train.backends import OnStep
    from agentfly_train.config import Config, RolloutConfig
    from agentfly_train.generation import Generator
    from agentfly_train.rollout import Rollout


def load_policy(config: Config, model: Any = None, tokenizer: Any = None) -> tuple[Any, Any]:
    """``model`` and ``tokenizer`` as given, else the ones ``config.model`` names, loaded on its device.

    Raises:
        ValueError: a model given without its tokenizer.
    """
    if model is not None:
        if tokenizer is None:
            raise ValueError("pass the tokenizer with the model")
        return model, tokenizer
    from agentfly_train.models import load_causal_lm, load_tokenizer, pick_device, resolve_model_path

    path = resolve_model_path(config.model.path, config.model.cache_dir or None)
    return load_causal_lm(path, dtype=config.model.dtype, device=str(pick_device(config.model.device))), load_tokenizer(
        path
    )


def make_rollout(
    config: Config,
    envs: ResourcePool[EnvHandle],
    generator: Generator,
    tokenizer: Any,
    rollout_config: RolloutConfig,
    *,
    temperature: float | None = None,
) -> Rollout | AgentRollout:
    """What plays episodes with ``generator``: the user's agent program when the config has one (its calls
    answered by the gateway), else the env loop; at ``temperature`` instead of the rollout's (an evaluation's)."""
    from agentfly_train.agents import AgentRollout, gateway_for, load_agent
    from agentfly_train.chat import ChatFormat
    from agentfly_train.generation import SamplingParams
    from agentfly_train.rollout import Rollout

    if config.agent.plays:
        gateway = gateway_for(config, generator, tokenizer, temperature=temperature)
        return AgentRollout(envs, load_agent(config.agent), gateway, rollout_config, config.agent)
    chat = ChatFormat(tokenizer, config.rollout.observation_role)
    params = SamplingParams.from_rollout(rollout_config, stop_token_ids=chat.end_of_turn_ids, temperature=temperature)
    return Rollout(envs, chat, generator, rollout_config, params=params)


def stages(config: Config) -> list[str]:
    """The held-out evaluations a run makes (``eval.stages``): before training, after the warm start (when
    there is one), after RL."""
    if not config.eval.stages:
        return []
    return ["base", *(["warm start"] if config.sft.enabled else []), "rl"]


class SteppedBackend(Protocol):
    """A backend whose training :func:`run` drives step by step (the local one)."""

    config: Config
    run_dir: Path
    step: int
    #: Where :meth:`train_step` writes its episodes' trajectories while a run is on (None: not written).
    trajectories: TrajectoryWriter | None

    def resume(self, where: str) -> bool:
        """Load a checkpoint (``auto``: the latest in the run dir, if any); True when one was loaded."""
        ...

    def evaluate_stage(self, name: str) -> dict[str, float]:
        """The model as it is now on held-out tasks; results under ``stages/<name>``."""
        ...

    def warm_start(self) -> dict[str, float]:
        """The ``[sft]`` stage; its metrics."""
        ...

    def train_step(self) -> dict[str, Any]:
        """One rollout batch and update; the step's metrics (``self.step`` counts it)."""
        ...

    def save_checkpoint(self) -> Path: ...

    def save_model(self, path: Path) -> Path: ...

    def close(self) -> None: ...


def run(backend: SteppedBackend, *, on_step: OnStep | None = None) -> dict[str, Any]:
    """Train ``train.steps`` steps (from a resumed step), with the held-out evaluations, warm start, records and
    checkpoints the config asks for; close the backend.

    Returns:
        The run's summary (see :meth:`~agentfly_train.backends.TrainingBackend.fit`).
    """
    config, run_dir = backend.config, backend.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=2))
    resumed = bool(config.train.resume) and backend.resume(config.train.resume)
    keep_records_up_to(run_dir, backend.step if resumed else 0)
    logger = MetricsLogger(
        run_dir,
        tensorboard=config.log.tensorboard,
        wandb=config.log.wandb,
        wandb_project=config.log.wandb_project,
        config=config.to_dict(),
    )
    if config.log.trajectories:
        backend.trajectories = TrajectoryWriter(run_dir / TRAJECTORIES_FILE, durable=False)
    started = time.perf_counter()
    held_out: dict[str, dict[str, float]] = {}
    planned = stages(config)
    if "base" in planned and not resumed:
        held_out["base"] = backend.evaluate_stage("base")
    if config.sft.enabled and not resumed:
        logger.log(0, backend.warm_start())
        if "warm start" in planned:
            held_out["warm start"] = backend.evaluate_stage("warm-start")
    try:
        while backend.step < config.train.steps:
            metrics = backend.train_step()
            logger.log(backend.step, metrics)
            if on_step is not None:
                on_step(backend.step, metrics)
            if config.train.save_every and backend.step % config.train.save_every == 0:
                backend.save_checkpoint()
    finally:
        logger.close()
        if backend.trajectories is not None:
            backend.trajectories.close()
            backend.trajectories = None
    if "rl" in planned:
        held_out["rl"] = backend.evaluate_stage("rl")
    summary: dict[str, Any] = {"steps": backend.step, "wall_s": time.perf_counter() - started}
    if held_out:
        summary["stages"] = held_out
    summary["checkpoint"] = str(backend.save_checkpoint())
    summary["final_model"] = str(backend.save_model(run_dir / FINAL_MODEL_DIR))
    records = [r for r in read_metrics(run_dir / METRICS_FILE) if "reward_mean" in r]
    if records:
        summary["reward_first"], summary["reward_last"] = records[0]["reward_mean"], records[-1]["reward_mean"]
    summary["metrics"] = str(run_dir / METRICS_FILE)
    if config.log.trajectories:
        summary["trajectories"] = str(run_dir / TRAJECTORIES_FILE)
    if config.log.tensorboard:
        summary["tensorboard"] = str(run_dir / TENSORBOARD_DIR)
    if config.log.plot and records:
        title = f"{config.algo} on {config.env.id} ({config.model.path})"
        summary["reward_curve"] = str(plot_reward_curve(records, run_dir / REWARD_CURVE_FILE, title=title))
    backend.close()
    return summary


class _EpisodeLine(msgspec.Struct):
    """What a line of ``trajectories.jsonl`` or ``tokens.jsonl`` says about its step: ``{step}-{group}-{chain}``."""

    episode_id: str | None = None


def keep_records_up_to(run_dir: Path, step: int) -> None:
    """Drop metrics, trajectories and token records of steps after ``step`` (all of them for a fresh run).

    A run that died after its last checkpoint logged steps that the resumed run will take again. Lines are kept
    byte for byte; a damaged one (the crash cut it) is dropped.
    """
    metrics = run_dir / METRICS_FILE
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

    for path in (run_dir / TRAJECTORIES_FILE, run_dir / TOKENS_FILE):
        if not path.exists():
            continue
        kept_lines = [line for line in path.read_bytes().splitlines(keepends=True) if step and before_step(line)]
        with atomic_path(path) as scratch:
            scratch.write_bytes(b"".join(line if line.endswith(b"\n") else line + b"\n" for line in kept_lines))
