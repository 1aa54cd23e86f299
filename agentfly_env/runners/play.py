"""``agentfly-play``: play episodes of the registered envs with a scripted policy and summarise them.

The quick start's main job until a model is trained: it shows every env working end to end (tasks,
tool calls, rewards) with a progress bar and a summary table, and writes the trajectories to JSONL.
An env that cannot be made from its registration alone (a mixture needs its components, a remote env
its server's url; an env whose extra is not installed) is skipped, with a line that says why.

Examples::

    agentfly-play                               # 32 expert episodes of every registered env that can be made
    agentfly-play AgentFly/Math-v0 --episodes 200 --policy random --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentfly_env.core.env import AgentEnv
from agentfly_env.core.episode import aplay_episode
from agentfly_env.core.policies import expert_action, random_action
from agentfly_env.core.recording import TrajectoryWriter
from agentfly_env.core.types import TOOL_METRICS, EpisodeSummary, ToolTally, summarize
from agentfly_env.extras import MissingExtraError
from agentfly_env.registration import registered_ids


def why_unplayable(env_id: str) -> str | None:
    """Why ``env_id`` cannot be played as registered, or None when it can.

    The env is made once from its registration alone: a ``TypeError`` or ``ValueError`` means it needs
    arguments (``AgentFly/Mix-v0`` its components, ``AgentFly/Remote-v0`` a server's url), a
    :class:`~agentfly_env.extras.MissingExtraError` an extra to install. Any other error is a bug and
    propagates.
    """
    try:
        gym.make(env_id).close()
    except (TypeError, ValueError) as exc:
        return f"needs arguments: {exc}"
    except MissingExtraError as exc:
        return str(exc)
    return None


async def play_episodes(
    env_id: str,
    episodes: int,
    *,
    policy: str = "expert",
    concurrency: int = 16,
    seed: int = 0,
    writer: TrajectoryWriter | None = None,
    on_episode: Any = None,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` episodes, ``concurrency`` at a time, and return their summary
    (:func:`~agentfly_env.core.types.summarize`'s means, the truncated count, episodes per second and, under
    ``tools``, each tool's :class:`~agentfly_env.core.types.ToolStats`)."""
    policy_fn = expert_action if policy == "expert" else random_action
    envs: list[AgentEnv] = [gym.make(env_id, **(env_kwargs or {})).unwrapped for _ in range(min(concurrency, episodes))]
    queue = iter(range(episodes))
    summaries: list[EpisodeSummary] = []
    tools = ToolTally()

    async def worker(env: AgentEnv) -> None:
        for episode in queue:  # the shared iterator hands each episode to exactly one worker
            trajectory = await aplay_episode(env, policy_fn, seed=seed + episode)
            summaries.append(trajectory.summary())
            tools.add(trajectory.steps)
            if writer is not None:
                writer.write(trajectory)
            if on_episode is not None:
                on_episode()

    started = time.perf_counter()
    try:
        await asyncio.gather(*(worker(env) for env in envs))
    finally:
        await asyncio.gather(*(env.aclose() for env in envs))
    return {
        **summarize(summaries),
        "truncated": sum(summary.truncated for summary in summaries),
        "episodes_per_s": len(summaries) / (time.perf_counter() - started),
        "tools": tools.stats(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="agentfly-play", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("env_ids", nargs="*", help="env ids (default: all registered)")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--policy", choices=["expert", "random"], default="expert")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/play/trajectories.jsonl"))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.env_ids) - set(registered_ids()))
    if unknown:
        parser.error(f"unknown env ids {unknown}; registered: {registered_ids()}")
    reasons = {env_id: why_unplayable(env_id) for env_id in args.env_ids or registered_ids()}
    skipped = {env_id: reason for env_id, reason in reasons.items() if reason is not None}
    if args.env_ids and skipped:  # ids asked for by name are played, or the run fails saying why not
        parser.error("cannot play " + "; ".join(f"{env_id}: {reason}" for env_id, reason in skipped.items()))
    env_ids = [env_id for env_id, reason in reasons.items() if reason is None]

    console = Console(width=None if sys.stdout.isatty() else 120)  # logs are not 80 columns wide
    summaries: dict[str, dict[str, Any]] = {}
    with (
        TrajectoryWriter(args.out) as writer,
        Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress,
    ):
        for env_id in env_ids:
            bar = progress.add_task(env_id, total=args.episodes)
            summaries[env_id] = asyncio.run(
                play_episodes(
                    env_id,
                    args.episodes,
                    policy=args.policy,
                    concurrency=args.concurrency,
                    seed=args.seed,
                    writer=writer,
                    on_episode=lambda bar=bar: progress.advance(bar),
                )
            )

    table = Table(title=f"{args.policy} policy, {args.episodes} episodes per env (per-episode means)")
    columns = {
        "reward_mean": "reward",
        "success_rate": "solved",
        "turns_per_episode": "turns",
        "tool_calls_per_episode": "calls",
        "errors_per_episode": "errors",
        "truncated": "trunc",
        "episodes_per_s": "eps/s",
    }
    table.add_column("env", no_wrap=True)
    for header in columns.values():
        table.add_column(header, justify="right")
    for env_id, summary in summaries.items():
        table.add_row(env_id, *(f"{summary[column]:.{1 if column == 'episodes_per_s' else 2}f}" for column in columns))
    console.print(table)
    console.print(tool_table(summaries))
    for env_id, reason in skipped.items():
        console.print(f"skipped {env_id}: {reason}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"trajectories: {args.out}")
    return 0


def tool_table(summaries: dict[str, dict[str, Any]]) -> Table:
    """Each env's tools, a row each: :data:`~agentfly_env.core.types.TOOL_METRICS` of its episodes."""
    table = Table(title="per tool (calls per episode, error and timeout rates, latency in ms)")
    table.add_column("env", no_wrap=True)
    table.add_column("tool", no_wrap=True)
    for header in ("calls", "errors", "timeouts", "p50 ms", "p95 ms"):
        table.add_column(header, justify="right")
    for env_id, summary in summaries.items():
        for name, stats in summary["tools"].items():
            table.add_row(
                env_id, name, *(f"{getattr(stats, field):.{3 if 'latency' in field else 2}f}" for field in TOOL_METRICS)
            )
    return table


if __name__ == "__main__":
    raise SystemExit(main())
