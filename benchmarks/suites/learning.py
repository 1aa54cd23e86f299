"""Do agents learn here? Held-out success before and after training, per env (``agentfly-bench --suite learning``).

For each env family where the bundled SmolLM2-135M-Instruct can learn on this CPU in minutes, the suite runs
the env's training preset as it ships (``agentfly-train --config NAME``, the TOML files in
``agentfly_train/data``): a short warm start on the env's scripted expert, then RL, with success, reward, tool
calls and turns per episode on held-out tasks at three points (``eval.stages``): the base model, after the
warm start, after RL. The budget is the preset's own (steps, episodes, eval tasks), so a row is what a user
gets from that command.

- ``math``: ``calculator``: 3-digit multiplication with the calculator tool (Math-v0).
- ``search``: ``search``: 1-hop questions of the generated encyclopedia with ``retrieve`` (Search-v0).
- ``webshop``: ``webshop``: WebShop in text mode on its easy goal set (goals without options, three products
  per results page): search the instruction, open a product, buy it (WebShop-v0, WebShop's own reward).
- ``math-agent``: ``agent-calculator``: the same multiplication tasks played by an agent program of a user's
  own (``examples/calculator_agent.py``: ``openai`` only, its own prompt and tool) through the token-exact
  gateway; its warm start is the program played against a scripted model. With ``math`` in the same run,
  the suite compares a GRPO step of the program with one of the env loop (same task, batch and algorithm):
  median step, rollout and update seconds and their ratio (issue 24's target: within 1.2x).

Writes one run directory per env and a plot with a reward curve per env under ``out_dir``. ``--quick`` shrinks
every budget to a smoke run (one step, a few tasks): it shows the plumbing, not learning.

Example:
    >>> sorted(PRESETS)
    ['math', 'math-agent', 'search', 'webshop']
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

DESCRIPTION = (
    "learning: base vs warm start vs RL held-out success per env (the Math, Search and WebShop presets, and an "
    "agent program on Math), and a GRPO step of the agent program vs the env loop"
)

#: Env family -> the training preset it runs.
PRESETS = {"math": "calculator", "search": "search", "webshop": "webshop", "math-agent": "agent-calculator"}
#: The agent program's row and the env loop's on the same task, whose GRPO steps are compared.
STEP_COMPARISON = ("math-agent", "math")
STAGES = ("base", "warm start", "rl")


def run(quick: bool, envs: Sequence[str] = tuple(PRESETS), out_dir: str = "bench-results/learning") -> dict[str, Any]:
    """Run each env's preset; ``envs`` picks families (names of :data:`PRESETS`)."""
    unknown = [name for name in envs if name not in PRESETS]
    if unknown:
        raise ValueError(f"unknown envs {unknown}; choose from {sorted(PRESETS)}")
    rows = {name: _train(name, Path(out_dir) / name, quick) for name in envs}
    results: dict[str, Any] = {"quick": quick, "envs": rows, "plot": str(_plot(rows, Path(out_dir) / "learning.png"))}
    if all(name in rows for name in STEP_COMPARISON):
        results["step_comparison"] = _step_comparison(*(rows[name] for name in STEP_COMPARISON))
    return results


def _step_comparison(agent: dict[str, Any], env_loop: dict[str, Any]) -> dict[str, Any]:
    """Median seconds of the RL steps' parts, the agent program's and the env loop's, and their ratios."""
    out: dict[str, Any] = {}
    for part in ("step_s", "rollout_s", "update_s"):
        ours, theirs = statistics.median(agent[part]), statistics.median(env_loop[part])
        out[part] = {"agent": ours, "env_loop": theirs, "ratio": ours / theirs}
    return out


def _train(name: str, run_dir: Path, quick: bool) -> dict[str, Any]:
    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.config import Config
    from agentfly_train.metrics import read_metrics

    config = Config.load(PRESETS[name])
    config.out_dir = str(run_dir)
    if quick:
        config.train.steps, config.eval.episodes, config.sft.expert_episodes = 1, 4, 4
        config.rollout.prompts_per_step, config.rollout.samples_per_prompt = 2, 2
    started = time.perf_counter()
    summary = LocalTrainer(config).fit()
    wall_s = time.perf_counter() - started
    records = [r for r in read_metrics(run_dir / "metrics.jsonl") if "reward_mean" in r]
    return {
        "preset": PRESETS[name],
        "env": config.env.id,
        "algo": config.algo,
        "steps": summary["steps"],
        "episodes_per_step": config.episodes_per_step,
        "eval_episodes": config.eval.episodes,
        "stages": summary["stages"],
        "rewards": [r["reward_mean"] for r in records],
        "step_s": [r["step_s"] for r in records],
        "rollout_s": [r["rollout_wall_s"] for r in records],
        "update_s": [r["update_s"] for r in records],
        "wall_s": wall_s,
        "run_dir": str(run_dir),
    }


def _plot(rows: dict[str, dict[str, Any]], path: Path) -> Path:
    """Mean training reward per step, one curve per env, with each env's held-out success after RL."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4), dpi=120)
    for name, row in rows.items():
        rl = row["stages"]["rl"]["success_rate"]
        steps = range(1, len(row["rewards"]) + 1)
        axis.plot(steps, row["rewards"], marker="o", markersize=3, label=f"{name} (held-out success {rl:.2f})")
    axis.set_xlabel("RL step")
    axis.set_ylabel("mean training reward")
    axis.set_title("Learning suite: SmolLM2-135M after its warm start, per env")
    axis.set_ylim(-0.05, 1.05)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def render(results: dict[str, Any], console: Console) -> None:
    title = "Held-out success (tool calls per episode): base -> warm start -> RL"
    table = Table(title=title + (" [--quick: plumbing only]" if results["quick"] else ""))
    for column in ("env", "agentfly-train", *STAGES, "RL - warm", "steps x episodes", "wall"):
        table.add_column(column, justify="left" if column in ("env", "agentfly-train") else "right")
    for name, row in results["envs"].items():
        stages = row["stages"]
        cells = [f"{s['success_rate']:.2f} ({s['tool_calls_per_episode']:.1f})" for s in map(stages.get, STAGES)]
        gain = stages["rl"]["success_rate"] - stages["warm start"]["success_rate"]
        table.add_row(
            name,
            f"--config {row['preset']}",
            *cells,
            f"{gain:+.2f}",
            f"{row['steps']} x {row['episodes_per_step']}",
            f"{row['wall_s'] / 60:.1f} min",
        )
    console.print(table)
    for name, row in results["envs"].items():
        console.print(f"{name}: {row['env']}, {row['algo']}, {row['eval_episodes']} held-out tasks per stage")
    console.print(f"reward curves: {results['plot']}")
    comparison = results.get("step_comparison")
    if comparison:
        agent, env_loop = STEP_COMPARISON
        steps = Table(title=f"A GRPO step, median: the agent program ({agent}) vs the env loop ({env_loop})")
        for column in ("part", agent, env_loop, "ratio"):
            steps.add_column(column, justify="left" if column == "part" else "right")
        for part, row in comparison.items():
            steps.add_row(
                part.removesuffix("_s"), f"{row['agent']:.1f} s", f"{row['env_loop']:.1f} s", f"{row['ratio']:.2f}x"
            )
        console.print(steps)
