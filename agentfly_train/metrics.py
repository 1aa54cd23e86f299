"""Training metrics: what each step's episodes say, where the numbers go, and the reward curve.

Every step writes one JSON line to ``metrics.jsonl`` (flushed, so a crash loses nothing written), the
same scalars to TensorBoard, and to Weights & Biases when asked. :func:`plot_reward_curve` draws the
run's reward from ``metrics.jsonl`` into a PNG at the end (or any time later).

Example:
    >>> from agentfly_env.core.types import Step, Trajectory
    >>> def played(reward, **ending):
    ...     step = Step(observation="", reward=reward, success=reward > 0, **ending)
    ...     return Episode(0, 0, 0, trajectory=Trajectory(env_id="math", observation="", steps=[step]))
    >>> stats = episode_metrics([played(1.0, terminated=True), played(0.0, truncated=True, truncation_reason="max_turns")])
    >>> stats["reward_mean"], stats["success_rate"], stats["truncated_rate"], stats["truncated_max_turns"]
    (0.5, 0.5, 0.5, 1)
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from agentfly_env.core.types import EpisodeSummary, summarize, tool_metrics, tool_stats
from agentfly_train.rollout import Episode, EpisodeStats
from agentfly_train.run_files import METRICS_FILE, TENSORBOARD_DIR


def episode_metrics(episodes: Sequence[EpisodeStats]) -> dict[str, Any]:
    """Per-episode means over a batch (:func:`~agentfly_env.core.types.summarize`'s reward, success, turns,
    tool calls, errors, truncations), each tool's calls per episode, error and timeout rates and latency
    (``tool/<name>/...``, :func:`~agentfly_env.core.types.tool_metrics`), and the trainer's own: the reward's
    spread, budget cuts, env latency, failed episodes (and, where any failed, ``failure_reasons``: a count per
    reason) and each truncation reason."""
    count = max(len(episodes), 1)
    rewards = [e.reward for e in episodes]
    mean = sum(rewards) / count
    turns = sum(e.model_turns for e in episodes)
    metrics: dict[str, Any] = summarize(_with_driver_cut(e) for e in episodes)
    metrics.update(
        reward_std=math.sqrt(sum((r - mean) ** 2 for r in rewards) / count),
        reward_max=max(rewards, default=0.0),
        turns_per_episode=turns / count,  # the model's turns: an episode the driver cut has one unstepped
        turns_cut_by_budget=sum(e.turns_cut for e in episodes) / max(turns, 1),
        env_latency_ms=1000 * sum(e.env_seconds for e in episodes) / max(turns + len(episodes), 1),
        # Episodes whose env died or raised: reported here, left out of the loss.
        failed_episodes=sum(e.failure is not None for e in episodes),
    )
    # An agent program's tool steps are in its trajectory too (copied from its MCP tools' env).
    metrics.update(tool_metrics(tool_stats(e.trajectory.steps if e.trajectory else [] for e in episodes)))
    if reasons := failure_reasons(episodes):  # JSONL and summary.json only: not a scalar
        metrics["failure_reasons"] = reasons
    for reason, number in Counter(e.truncation_reason for e in episodes if e.truncated).items():
        metrics[f"truncated_{reason}"] = number
    return metrics


def failure_reasons(episodes: Sequence[EpisodeStats]) -> dict[str, int]:
    """How many episodes failed for each reason (the commonest first)."""
    return dict(Counter(e.failure for e in episodes if e.failure is not None).most_common())


def _with_driver_cut(episode: EpisodeStats) -> EpisodeSummary:
    """The env's summary of an episode with the driver's cut on top (a cut episode counts as truncated)."""
    return msgspec.structs.replace(
        episode.summary,
        truncated=episode.truncated,
        truncation_reason=episode.truncation_reason,
        tool_calls=episode.tool_calls,
    )


#: The numbers :func:`per_env_metrics` reports for each env of a mixed batch.
PER_ENV_METRICS = ("episodes", "reward_mean", "success_rate", "turns_per_episode", "tool_calls_per_episode")


def per_env_metrics(episodes: Sequence[EpisodeStats]) -> dict[str, float]:
    """The main :func:`episode_metrics` of each env the episodes were played on, as ``<env>/<metric>``; the env is
    the one the trajectory names (in a mixed run, the component's name).

    Example:
        >>> from agentfly_env.core.types import Step, Trajectory
        >>> played = [Episode(0, c, 0, trajectory=Trajectory(env_id=env, observation="", steps=[Step(observation="", reward=c)]))
        ...           for c, env in enumerate(["math", "search", "search"])]
        >>> per_env_metrics(played)["search/reward_mean"], per_env_metrics(played)["math/episodes"]
        (1.5, 1)
    """
    groups: dict[str, list[EpisodeStats]] = {}
    for episode in episodes:
        groups.setdefault(episode.trajectory.env_id if episode.trajectory else "unknown", []).append(episode)
    return {
        f"{env}/{key}": value
        for env, group in sorted(groups.items())
        for key, value in episode_metrics(group).items()
        if key in PER_ENV_METRICS
    }


def sequence_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Per-episode token counts of episodes played as token sequences: generated and in all."""
    count = max(len(episodes), 1)
    return {
        "generated_tokens_per_episode": sum(e.generated_tokens for e in episodes) / count,
        "sequence_tokens_per_episode": sum(len(s.token_ids) for e in episodes for s in e.sequences) / count,
    }


def uniform_group_rate(episodes: Sequence[Episode]) -> float:
    """The share of a training batch's groups (a task's chains, two or more) whose finished episodes all earned the
    same reward: a group baseline gives them no advantage, so they teach nothing. High: more chains per task, a
    higher temperature or an easier start give the update more to learn from.

    Example:
        >>> played = [Episode(group=g, chain=c, seed=g, verdict=r) for g, rs in enumerate([[1, 1], [0, 1], [0, 0]])
        ...           for c, r in enumerate(rs)]
        >>> round(uniform_group_rate(played), 3)
        0.667
    """
    groups: dict[int, set[float]] = {}
    sizes: Counter[int] = Counter()
    for episode in episodes:
        if episode.failure is None:  # left out of the update: no part of its group's baseline
            groups.setdefault(episode.group, set()).add(episode.reward)
            sizes[episode.group] += 1
    chained = [group for group, size in sizes.items() if size > 1]
    return sum(len(groups[group]) == 1 for group in chained) / len(chained) if chained else 0.0


def gateway_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """What an agent program's model calls came to (none for episodes the env loop played): calls and rows per
    episode, the prefix-mismatch rate (rows started because a conversation did not go on as the model wrote
    it, per call), prompt and completion tokens per call that sampled (a call cut by the context window samples
    nothing), and the gateway's own added latency per call, p50 and p99 in milliseconds.

    Example:
        >>> from agentfly_train.gateway import EpisodeCounters
        >>> counters = EpisodeCounters(calls=4, sampled_calls=2, rows=2, prefix_mismatches=1, prompt_tokens=300,
        ...                            added_latency_s=[0.001] * 4)
        >>> played = Episode(0, 0, 0, calls=counters)
        >>> metrics = gateway_metrics([played])
        >>> metrics["prefix_mismatch_rate"], metrics["prompt_tokens_per_call"], metrics["gateway_latency_ms_p50"]
        (0.25, 150.0, 1.0)
    """
    counters = [e.calls for e in episodes if e.calls is not None]
    if not counters:
        return {}
    count, calls, sampled = len(counters), sum(c.calls for c in counters), sum(c.sampled_calls for c in counters)
    latency = [1000 * seconds for c in counters for seconds in c.added_latency_s] or [0.0]
    return {
        "llm_calls_per_episode": calls / count,
        "rows_per_episode": sum(c.rows for c in counters) / count,
        "prefix_mismatch_rate": sum(c.prefix_mismatches for c in counters) / max(calls, 1),
        "prompt_tokens_per_call": sum(c.prompt_tokens for c in counters) / max(sampled, 1),
        "completion_tokens_per_call": sum(c.completion_tokens for c in counters) / max(sampled, 1),
        "gateway_latency_ms_p50": float(np.percentile(latency, 50)),
        "gateway_latency_ms_p99": float(np.percentile(latency, 99)),
    }


class MetricsLogger:
    """Writes step metrics to JSONL, TensorBoard and (optionally) W&B.

    Args:
        run_dir: The run directory; ``metrics.jsonl`` and ``tensorboard/`` go there.
        tensorboard: Write TensorBoard event files.
        wandb: Log to Weights & Biases too.
        wandb_project: The W&B project.
        config: The run's config, recorded by W&B.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        tensorboard: bool = True,
        wandb: bool = False,
        wandb_project: str = "agentfly",
        config: dict[str, Any] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / METRICS_FILE
        self._file = open(self.path, "a", buffering=1)  # noqa: SIM115 - line-buffered, closed in close()
        self._tensorboard = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tensorboard = SummaryWriter(str(self.run_dir / TENSORBOARD_DIR))
        self._wandb = None
        if wandb:
            try:
                import wandb as wandb_module
            except ImportError as error:
                raise RuntimeError("log.wandb is on but wandb is not installed: pip install wandb") from error
            self._wandb = wandb_module.init(project=wandb_project, config=config, dir=str(self.run_dir))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Record one step's metrics (non-numeric values go to the JSONL only)."""
        self._file.write(json.dumps({"step": step, **metrics}) + "\n")
        scalars = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if self._tensorboard is not None:
            for key, value in scalars.items():
                self._tensorboard.add_scalar(key, value, step)
            self._tensorboard.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The step records of a ``metrics.jsonl`` (a partial last line from a crash is skipped)."""
    records = []
    for line in Path(path).read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def plot_reward_curve(records: Iterable[dict[str, Any]], path: str | os.PathLike[str], *, title: str = "") -> Path:
    """Draw reward and success rate per step (and a moving average) into a PNG; a mixed run's envs get a reward
    line each."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    rows = [r for r in records if "reward_mean" in r]
    steps = [r["step"] for r in rows]
    rewards = [r["reward_mean"] for r in rows]
    figure, axis = plt.subplots(figsize=(7, 4), dpi=120)
    axis.plot(steps, rewards, marker="o", markersize=3, label="mean reward")
    if len(rewards) >= 4:
        window = max(2, len(rewards) // 5)
        smooth = [
            sum(rewards[max(0, i - window + 1) : i + 1]) / len(rewards[max(0, i - window + 1) : i + 1])
            for i in range(len(rewards))
        ]
        axis.plot(steps, smooth, linewidth=2, label=f"moving average ({window})")
    if rows and "success_rate" in rows[0]:
        axis.plot(steps, [r["success_rate"] for r in rows], linestyle="--", label="success rate")
    envs = sorted({key.rpartition("/")[0] for row in rows for key in row if key.endswith("/reward_mean")})
    for env in envs:  # a mixed run: each env's own reward, at the steps that played it
        played = [r for r in rows if f"{env}/reward_mean" in r]
        rewards_here = [r[f"{env}/reward_mean"] for r in played]
        axis.plot([r["step"] for r in played], rewards_here, linestyle=":", marker=".", label=f"{env} reward")
    axis.set_xlabel("step")
    axis.set_ylabel("reward")
    axis.set_title(title or "reward per training step")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
