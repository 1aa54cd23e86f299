"""Do agents learn here? Held-out success before and after training, per env, per algorithm and per turn budget
(``agentfly-bench --suite learning``).

Every row is one training run, the env's training preset as it ships (``agentfly-train --config NAME``, the
TOML files in ``agentfly_train/data``) with a few ``--set`` overrides: a short warm start on the env's scripted
expert, then RL, with success, reward, tool calls and turns per episode on held-out tasks at three points
(``eval.stages``): the base model, after the warm start, after RL. The budget is the preset's own (steps,
episodes, eval tasks), so an env row is what a user gets from that command.

Env rows (``envs``, names of :data:`PRESETS`; all but the agent program's other APIs unless a comparison is
asked for):

- ``math``: ``calculator``: 3-digit multiplication with the calculator tool (Math-v0).
- ``code``: ``code``: four-term integer expressions worked out by running Python in the sandbox
  (``code_interpreter``; Math-v0).
- ``search``: ``search``: 1-hop questions of the generated encyclopedia with ``retrieve`` (Search-v0).
- ``webshop``: ``webshop``: WebShop in text mode on its easy goal set (goals without options, three products
  per results page): search the instruction, open a product, buy it (WebShop-v0, WebShop's own reward).
- ``alfworld``: ``alfworld``: ALFWorld in text mode, pick_and_place_simple in generated bathrooms, 12 turns,
  with self-imitation between the RL steps.
- ``scienceworld``: ``scienceworld``: ScienceWorld in text mode, the two lifespan task types ("focus on the
  animal with the longest life span"), easy simplifications, 10 turns, the success reward, with self-imitation
  between the RL steps.
- ``math-agent``: ``agent-calculator``: the same multiplication tasks played by an agent program of a user's
  own (``examples/calculator_agent.py``: ``openai`` only, its own prompt and tool) through the token-exact
  gateway; its warm start is the program played against a scripted model. With ``math`` in the same run,
  the suite compares a GRPO step of the program with one of the env loop (same task, batch and algorithm):
  median step, rollout and update seconds and their ratio (target: within 1.2x).
- ``math-agent-messages``, ``math-agent-responses`` (only when named): ``agent-calculator-messages`` and
  ``agent-calculator-responses``, the same agent on the Anthropic Messages API and on the OpenAI Agents SDK's
  Responses API (a command in the SDK's venv, ``make peers``).

The paper's comparisons, at small scale (``--suite-options``):

- ``{"algorithms": ["ppo", "reinforce++", "grpo", "rloo"]}``: ``algorithm_env``'s preset (default ``math``)
  once per algorithm (``algo=NAME``): a reward curve each, and held-out success base -> warm start -> RL.
  Each row warms up on its own: the rows are identical up to RL, but a row started from another's
  warm-start model would label that model's evaluation "base" and depend on the other row's directory.
- ``{"variants": {"tis": ['algorithm.is_correction_level="token"', 'algorithm.is_correction_mode="clip"']},
  "variant_envs": ["math", "alfworld"]}``: each of ``variant_envs``' presets (default ``math``) once per named
  set of ``--set`` overrides (an ablation: the preset's own settings, varied one name at a time), reported
  like the algorithms; the preset as it ships is that env's row. ``variant_envs`` may name the envs per
  variant instead: ``{"tis": ["math"], "history2": ["webshop"]}``.
- ``{"turn_budgets": [4, 8], "seeds": [0, 1, 2], "budget_env": "math"}``: ``budget_env``'s preset at each
  turn budget (``env.options.max_turns`` and ``rollout.max_turns``) for each seed: the mean reward curve per
  budget with a band of its std over seeds, held-out success after RL (mean ± std over seeds) and the reward's
  variance over seeds (mean over steps). Stds and variances are over the seeds themselves (ddof 0).

Each row runs in a process of its own (``python -m agentfly_train.cli``), so its memory is given back before
the next one starts; its output goes to ``train.log`` in its run directory, shown when it fails. A failed row
is reported as failed, and the suite goes on. Results are read back from the run directory (``config.json``,
``metrics.jsonl``, ``stages/<stage>/eval/summary.json``) and recorded in its ``row.json``, and its
checkpoints are deleted (a row is never resumed; its warm-start and final models stay): run again with
the same ``out_dir``, the suite skips the rows recorded with the config they would run now (the preset as it
is, with the same overrides) and starts every other row over from an empty directory (one killed halfway
included).

Writes under ``out_dir``: one run directory per env row (``<env>/``), per algorithm
(``algorithms/<env>-<algo>/``), per variant (``variants/<env>-<name>/``) and per turn budget and seed
(``turn-budgets/<env>-turns<N>-seed<S>/``), and a plot per kind of row. ``--quick`` shrinks every budget to a
smoke run (one step, a few tasks): it shows the plumbing, not learning.

Example:
    >>> PRESETS["math"], STEP_COMPARISON
    ('calculator', ('math-agent', 'math'))
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentfly_train.algorithm_registry import ALGORITHMS
from agentfly_train.config import Config, ConfigError, apply_overrides
from agentfly_train.metrics import read_metrics
from agentfly_train.run_files import CHECKPOINTS_DIR, CONFIG_FILE, EVAL_DIR, METRICS_FILE, STAGES_DIR, SUMMARY_FILE

DESCRIPTION = (
    "learning: base vs warm start vs RL held-out success per env (the Math, Code, Search, WebShop, ALFWorld and "
    "ScienceWorld presets, and an agent program on Math), per algorithm, per variant (named --set overrides) and per turn budget over seeds (--suite-options), and a GRPO step "
    "of the agent program vs the env loop"
)

#: Env row -> the training preset it runs (a new env row is a line here).
PRESETS = {
    "math": "calculator",
    "code": "code",
    "search": "search",
    "webshop": "webshop",
    "alfworld": "alfworld",
    "scienceworld": "scienceworld",
    "math-agent": "agent-calculator",
    "math-agent-messages": "agent-calculator-messages",
    "math-agent-responses": "agent-calculator-responses",
}
#: The agent program on the two other APIs: it learns as on Chat Completions (the gateway renders all three into
#: the same tokens), so these rows run only when named, the Responses one in the Agents SDK's venv (``make peers``).
AGENT_API_ROWS = ("math-agent-messages", "math-agent-responses")
#: The rows of a run that names none: every family once.
DEFAULT_ENVS = tuple(name for name in PRESETS if name not in AGENT_API_ROWS)
#: The agent program's row and the env loop's on the same task, whose GRPO steps are compared.
STEP_COMPARISON = ("math-agent", "math")
#: Held-out stage -> its folder under the run's ``stages/`` (the trainer's name for it).
STAGE_DIRS = {"base": "base", "warm start": "warm-start", "rl": "rl"}
STAGES = tuple(STAGE_DIRS)
#: What a row keeps of each stage's ``summary.json``.
STAGE_METRICS = ("success_rate", "reward_mean", "tool_calls_per_episode", "turns_per_episode")
#: A ``--quick`` row's overrides: a smoke run's budgets.
QUICK_OVERRIDES = (
    "train.steps=1",
    "eval.episodes=4",
    "sft.expert_episodes=4",
    "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
)
#: A variant's name: its run directory's.
VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
#: In a row's run directory: its result, written once the run finished and was read back; the run's output.
ROW_RECORD, ROW_LOG = "row.json", "train.log"
LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class Row:
    """One training run of the suite: a preset with ``--set`` overrides, in a run directory of its own.

    Example:
        >>> row = Row("math ppo", "calculator", Path("out/ppo"), ('algo="ppo"',))
        >>> row.command()[3:]
        ['--config', 'calculator', '--out', 'out/ppo', '--no-progress', '--set', 'algo="ppo"']
    """

    name: str
    preset: str
    run_dir: Path
    overrides: tuple[str, ...] = ()

    def command(self) -> list[str]:
        """``agentfly-train`` in this interpreter, so the child has the suite's environment."""
        sets = [arg for override in self.overrides for arg in ("--set", override)]
        args = ["--config", self.preset, "--out", str(self.run_dir), "--no-progress", *sets]
        return [sys.executable, "-m", "agentfly_train.cli", *args]

    def config(self) -> dict[str, Any]:
        """The config the row's process runs, but for its ``out_dir`` (so a moved ``out_dir`` keeps its finished
        rows), checked here, so a bad option stops the suite before any training.

        Raises:
            ValueError: naming the row, for what an override or :meth:`Config.validate` refuses.
        """
        try:
            config = apply_overrides(Config.load(self.preset), list(self.overrides)).validate(check_model=False)
        except ConfigError as error:
            raise ValueError(f"{self.name}: {error}") from error
        return {key: value for key, value in json.loads(json.dumps(config.to_dict())).items() if key != "out_dir"}

    def recorded(self) -> dict[str, Any] | None:
        """The result a finished run of this row recorded here, or None: none, or one of another config (other
        overrides, or a preset edited since). A config field added since the record was written, which this row
        leaves at its default, does not count as a change: a new option's default is the behaviour it had before."""
        try:
            record = json.loads((self.run_dir / ROW_RECORD).read_text())
        except (OSError, ValueError):
            return None
        default = json.loads(json.dumps(Config().to_dict()))
        return record["result"] if _runs_as(record.get("config"), self.config(), default) else None

    def record(self, result: dict[str, Any]) -> None:
        """Mark the row finished with its result (atomically: a kill leaves the row unfinished, not half-read)."""
        record = {"preset": self.preset, "overrides": list(self.overrides), "config": self.config(), "result": result}
        scratch = self.run_dir / f".{ROW_RECORD}.tmp"
        scratch.write_text(json.dumps(record))
        os.replace(scratch, self.run_dir / ROW_RECORD)


def _runs_as(recorded: Any, now: Any, default: Any) -> bool:
    """Whether a recorded config is ``now``, but for fields it lacks that ``now`` has at their ``default``.

    Example:
        >>> default = {"rollout": {"max_turns": 4, "history_turns": 0}}
        >>> _runs_as({"rollout": {"max_turns": 4}}, {"rollout": {"max_turns": 4, "history_turns": 0}}, default)
        True
        >>> _runs_as({"rollout": {"max_turns": 4}}, {"rollout": {"max_turns": 4, "history_turns": 2}}, default)
        False
    """
    if not (isinstance(recorded, dict) and isinstance(now, dict)):
        return recorded == now
    default = default if isinstance(default, dict) else {}
    return set(recorded) <= set(now) and all(
        _runs_as(recorded[key], value, default.get(key))
        if key in recorded
        else key in default and value == default[key]
        for key, value in now.items()
    )


@dataclass(frozen=True)
class Plan:
    """The rows of one run of the suite, by kind (see :func:`plan`)."""

    out_dir: Path
    envs: dict[str, Row]
    algorithms: dict[str, Row]
    algorithm_env: str
    variants: dict[tuple[str, str], Row]
    turn_budgets: dict[tuple[int, int], Row]
    budget_env: str
    seeds: tuple[int, ...]


def plan(
    quick: bool,
    out_dir: str = "bench-results/learning",
    envs: Sequence[str] | None = None,
    algorithms: Sequence[str] = (),
    algorithm_env: str = "math",
    variants: Mapping[str, Sequence[str]] | None = None,
    variant_envs: Sequence[str] | Mapping[str, Sequence[str]] = ("math",),
    turn_budgets: Sequence[int] = (),
    seeds: Sequence[int] = (0,),
    budget_env: str = "math",
    overrides: Sequence[str] = (),
) -> Plan:
    """The rows the options ask for, each one's config checked (nothing runs).

    Args:
        quick: Smoke-run budgets (:data:`QUICK_OVERRIDES`).
        out_dir: Where the run directories and plots go, and where finished rows are found.
        envs: Env rows (names of :data:`PRESETS`); default: :data:`DEFAULT_ENVS`, or none when a comparison is
            asked for.
        algorithms: Run ``algorithm_env``'s preset once per algorithm (names of ``ALGORITHMS``).
        algorithm_env: The env family of the algorithm rows.
        variants: Run each of ``variant_envs``' presets once per name, with that name's ``--set`` overrides (the
            name is in its run directory's, so letters, digits and ``._+-`` only).
        variant_envs: The env families of the variant rows: of every variant, or per variant name (a mapping
            that names each variant).
        turn_budgets: Run ``budget_env``'s preset at each of these ``max_turns``, once per seed of ``seeds``.
        seeds: The seeds of each turn budget.
        budget_env: The env family of the turn-budget rows.
        overrides: More ``--set`` overrides for every row (the suite's tests give a tiny model:
            ``'model.path="/tmp/tiny"'``).

    Raises:
        ValueError: for an unknown env or algorithm, a bad variant name, turn budget or seed, or a row's config
            that cannot work.

    Example:
        >>> rows = plan(quick=False, out_dir="out", algorithms=["ppo"], turn_budgets=[4], seeds=[0, 1])
        >>> rows.envs, rows.algorithms["ppo"].overrides, rows.turn_budgets[4, 1].run_dir
        ({}, ('algo="ppo"',), PosixPath('out/turn-budgets/math-turns4-seed1'))
    """
    variants = dict(variants or {})
    if envs is None:
        envs = () if algorithms or variants or turn_budgets else DEFAULT_ENVS
    _check_names("envs", envs, PRESETS)
    _check_names("algorithm_env", [algorithm_env], PRESETS)
    if isinstance(variant_envs, Mapping):
        if set(variant_envs) != set(variants):
            raise ValueError(
                f"variant_envs by name must name each variant once: variants {sorted(variants)}, "
                f"variant_envs {sorted(variant_envs)}"
            )
        for names in variant_envs.values():
            _check_names("variant_envs", names, PRESETS)
        envs_of = {name: list(variant_envs[name]) for name in variants}
    else:
        _check_names("variant_envs", variant_envs, PRESETS)  # checked even with no variant to run
        envs_of = {name: list(variant_envs) for name in variants}
    for name, sets in variants.items():
        if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
            raise ValueError(f"variant names are directory names (letters, digits and ._+-), got {name!r}")
        if isinstance(sets, str) or not all(isinstance(override, str) for override in sets):
            raise ValueError(f"variant {name!r} takes a list of --set overrides, got {sets!r}")
    _check_names("budget_env", [budget_env], PRESETS)
    _check_names("algorithms", algorithms, ALGORITHMS)
    if any(type(turns) is not int or turns < 1 for turns in turn_budgets):
        raise ValueError(f"turn_budgets must be whole numbers of turns, 1 or more; got {list(turn_budgets)}")
    if turn_budgets and (not seeds or any(type(seed) is not int or seed < 0 for seed in seeds)):
        raise ValueError(f"seeds must be one or more whole numbers, 0 or more; got {list(seeds)}")

    out, quick_sets = Path(out_dir), (*(QUICK_OVERRIDES if quick else ()), *overrides)
    rows = Plan(
        out_dir=out,
        envs={name: Row(name, PRESETS[name], out / name, quick_sets) for name in envs},
        algorithms={
            algo: Row(
                f"{algorithm_env} {algo}",
                PRESETS[algorithm_env],
                out / "algorithms" / f"{algorithm_env}-{algo}",
                (f"algo={json.dumps(algo)}", *quick_sets),
            )
            for algo in algorithms
        },
        algorithm_env=algorithm_env,
        variants={
            (env, name): Row(
                f"{env} {name}", PRESETS[env], out / "variants" / f"{env}-{name}", (*variants[name], *quick_sets)
            )
            for env in dict.fromkeys(env for names in envs_of.values() for env in names)
            for name in variants
            if env in envs_of[name]
        },
        turn_budgets={
            (turns, seed): Row(
                f"{budget_env} {turns} turns seed {seed}",
                PRESETS[budget_env],
                out / "turn-budgets" / f"{budget_env}-turns{turns}-seed{seed}",
                (f"env.options.max_turns={turns}", f"rollout.max_turns={turns}", f"seed={seed}", *quick_sets),
            )
            for turns in turn_budgets
            for seed in seeds
        },
        budget_env=budget_env,
        seeds=tuple(seeds),
    )
    for row in (*rows.envs.values(), *rows.algorithms.values(), *rows.variants.values(), *rows.turn_budgets.values()):
        row.config()
    return rows


def run(quick: bool, out_dir: str = "bench-results/learning", **options: Any) -> dict[str, Any]:
    """Run the rows :func:`plan` makes of the options, one process each, skipping those ``out_dir`` holds finished.

    Raises:
        ValueError: for a bad option, before anything runs.
    """
    planned = plan(quick, out_dir, **options)
    out = planned.out_dir
    results: dict[str, Any] = {"quick": quick}
    if planned.envs:
        rows = {name: _run_row(row) for name, row in planned.envs.items()}
        title = "Learning suite: SmolLM2-135M after its warm start, per env"
        results["envs"], results["plot"] = rows, _plot(_success_curves(rows), title, out / "learning.png")
        if all(name in dict(_finished(rows)) for name in STEP_COMPARISON):
            results["step_comparison"] = _step_comparison(*(rows[name] for name in STEP_COMPARISON))
    if planned.algorithms:
        env = planned.algorithm_env
        title = f"Learning suite: {env} ({PRESETS[env]}) per algorithm"
        results["algorithms"] = {"env": env, **_compare(planned.algorithms, title, out / "algorithms.png")}
    if planned.variants:
        variant_rows = {row.name: row for row in planned.variants.values()}
        results["variants"] = {
            "envs": list(dict.fromkeys(env for env, _ in planned.variants)),
            "overrides": {name: list(row.overrides) for (_, name), row in planned.variants.items()},
            **_compare(variant_rows, "Learning suite: per variant", out / "variants.png"),
        }
    if planned.turn_budgets:
        env = planned.budget_env
        budget_rows = {key: _run_row(row) for key, row in planned.turn_budgets.items()}
        summary = _turn_budget_summary(budget_rows)
        curves = {
            f"{budget['turns']} turns (held-out success {budget['rl_success_mean']:.2f})": (
                budget["reward_mean_curve"],
                budget["reward_std_curve"],
            )
            for budget in summary
        }
        title = f"Learning suite: {env} ({PRESETS[env]}) per turn budget, mean ± std over seeds"
        results["turn_budgets"] = {
            "env": env,
            "seeds": list(planned.seeds),
            "rows": [{"turns": turns, "seed": seed, **row} for (turns, seed), row in budget_rows.items()],
            "summary": summary,
            "plot": _plot(curves, title, out / "turn-budgets.png"),
        }
    return results


def _compare(rows: Mapping[str, Row], title: str, plot: Path) -> dict[str, Any]:
    """One comparison's rows run (or read back), with their reward curves plotted together."""
    results = {name: _run_row(row) for name, row in rows.items()}
    return {"rows": results, "plot": _plot(_success_curves(results), title, plot)}


def _success_curves(rows: Mapping[str, dict[str, Any]]) -> dict[str, tuple[list[float], None]]:
    """The finished rows' reward curves, labelled with their held-out success after RL."""
    return {
        f"{name} (held-out success {row['stages']['rl']['success_rate']:.2f})": (row["rewards"], None)
        for name, row in _finished(rows)
    }


def _check_names(what: str, names: Sequence[str], choices: Mapping[str, Any]) -> None:
    unknown = [name for name in names if name not in choices]
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; choose from {sorted(choices)}")


def _run_row(row: Row) -> dict[str, Any]:
    """The row's result: recorded by an earlier run of the suite, else trained now in a process of its own.

    A run that fails (or whose results cannot be read back) is returned as ``{"failed": why, "log_tail": [...],
    ...}`` and left unrecorded, so the next run of the suite tries it again.
    """
    result = row.recorded()
    if result is not None:
        _say(f"{row.name}: finished in an earlier run ({row.run_dir}), skipped")
        try:  # read back again: this suite may keep more of a run than the one that recorded it
            return {**result, **_read_run(row.run_dir)}
        except (OSError, ValueError, KeyError):
            return result
    if row.run_dir.exists():  # killed halfway, or run with other settings: start it over
        _say(f"{row.name}: {row.run_dir} holds no finished run of this row; cleared, run again")
        shutil.rmtree(row.run_dir)
    row.run_dir.mkdir(parents=True)
    log_path = row.run_dir / ROW_LOG
    _say(f"{row.name}: agentfly-train --config {row.preset} {' '.join(row.overrides)}; output: {log_path}")
    started = time.perf_counter()
    with log_path.open("w") as log:
        code = subprocess.run(row.command(), stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    wall_s = time.perf_counter() - started
    failure = f"exited with code {code}"
    if code == 0:
        try:
            result = {"name": row.name, **_read_run(row.run_dir), "wall_s": wall_s}
        except (OSError, ValueError, KeyError) as error:
            failure = f"finished, but its results cannot be read back ({type(error).__name__}: {error})"
        else:
            row.record(result)
            # A row is never resumed (a killed one starts over), and its checkpoints (optimiser state included)
            # are most of its disk: a dozen rows kept would fill tens of GB. Its models stay.
            shutil.rmtree(row.run_dir / CHECKPOINTS_DIR, ignore_errors=True)
            return result
    tail = log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
    _say(f"{row.name}: FAILED, {failure}; the end of {log_path}:\n" + "\n".join(tail))
    return {"name": row.name, "failed": failure, "log": str(log_path), "log_tail": tail, "wall_s": wall_s}


def _say(message: str) -> None:
    print(message, flush=True)  # under the CLI's spinner, which shows what is printed above it


def _read_run(run_dir: Path) -> dict[str, Any]:
    """A finished training run's row, from its directory alone."""
    config = Config.from_dict(json.loads((run_dir / CONFIG_FILE).read_text()))
    records = [r for r in read_metrics(run_dir / METRICS_FILE) if "reward_mean" in r]
    stages = {}
    for stage, folder in STAGE_DIRS.items():
        summary = json.loads((run_dir / STAGES_DIR / folder / EVAL_DIR / SUMMARY_FILE).read_text())
        stages[stage] = {key: summary[key] for key in STAGE_METRICS}
    return {
        "env": config.env.id,
        "algo": config.algo,
        "seed": config.seed,
        "max_turns": config.rollout.max_turns,
        "steps": len(records),
        "episodes_per_step": config.episodes_per_step,
        "eval_episodes": config.eval.episodes,
        "stages": stages,
        "rewards": [r["reward_mean"] for r in records],
        "step_s": [r["step_s"] for r in records],
        "rollout_s": [r["rollout_wall_s"] for r in records],
        "update_s": [r["update_s"] for r in records],
        # KL(engine || trainer) per sampled token at each step; None where the step's update was skipped.
        "mismatch_kl": [r.get("mismatch_kl") for r in records],
        # An agent program's calls that did not continue their episode's row, per call; None for the env loop.
        "prefix_mismatch_rate": [r.get("prefix_mismatch_rate") for r in records],
        "run_dir": str(run_dir),
    }


def _finished(rows: Mapping[Any, dict[str, Any]]) -> list[tuple[Any, dict[str, Any]]]:
    return [(key, row) for key, row in rows.items() if "failed" not in row]


def _step_comparison(agent: dict[str, Any], env_loop: dict[str, Any]) -> dict[str, Any]:
    """Median seconds of the RL steps' parts, the agent program's and the env loop's, and their ratios."""
    out: dict[str, Any] = {}
    for part in ("step_s", "rollout_s", "update_s"):
        ours, theirs = statistics.median(agent[part]), statistics.median(env_loop[part])
        out[part] = {"agent": ours, "env_loop": theirs, "ratio": ours / theirs}
    return out


def _turn_budget_summary(rows: Mapping[tuple[int, int], dict[str, Any]]) -> list[dict[str, Any]]:
    """Per turn budget, over its finished seeds: held-out success after RL (mean, std), the reward curve's mean
    and std per step, and the reward's variance over seeds, averaged over steps (budgets with none finished
    are left out).

    Example:
        >>> row = lambda success, rewards: {"stages": {"rl": {"success_rate": success}}, "rewards": rewards}
        >>> [budget] = _turn_budget_summary({(4, 0): row(0.5, [0.0, 1.0]), (4, 1): row(1.0, [1.0, 1.0, 0.5])})
        >>> budget["seeds"], budget["rl_success_mean"], budget["rl_success_std"], budget["reward_mean_curve"]
        (2, 0.75, 0.25, [0.5, 1.0])
        >>> budget["reward_variance_across_seeds"]  # 0.25 at the first step, 0 at the second
        0.125
    """
    summary = []
    for turns in dict.fromkeys(turns for turns, _ in rows):
        finished = [row for (budget, _), row in _finished(rows) if budget == turns]
        if not finished:
            continue
        successes = [row["stages"]["rl"]["success_rate"] for row in finished]
        # Steps every seed reached (a shorter curve is a run with fewer steps, not a failed one).
        by_step = list(zip(*(row["rewards"] for row in finished), strict=False))
        summary.append(
            {
                "turns": turns,
                "seeds": len(finished),
                "rl_success_mean": statistics.fmean(successes),
                "rl_success_std": statistics.pstdev(successes),
                "reward_mean_curve": [statistics.fmean(step) for step in by_step],
                "reward_std_curve": [statistics.pstdev(step) for step in by_step],
                "reward_variance_across_seeds": statistics.fmean(map(statistics.pvariance, by_step))
                if by_step
                else 0.0,
            }
        )
    return summary


def _plot(curves: Mapping[str, tuple[Sequence[float], Sequence[float] | None]], title: str, path: Path) -> str:
    """Mean training reward per RL step, a curve per label, with a band of ± its std where one is given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axis = plt.subplots(figsize=(7, 4), dpi=120)
    for label, (rewards, std) in curves.items():
        steps = range(1, len(rewards) + 1)
        (line,) = axis.plot(steps, rewards, marker="o", markersize=3, label=label)
        if std is not None:
            low = [mean - spread for mean, spread in zip(rewards, std, strict=True)]
            high = [mean + spread for mean, spread in zip(rewards, std, strict=True)]
            axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.2)
    axis.set_xlabel("RL step")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_ylabel("mean training reward")
    axis.set_title(title, fontsize=10)
    axis.set_ylim(-0.05, 1.05)
    axis.grid(alpha=0.3)
    if curves:
        axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return str(path)


def _outcome_cells(row: dict[str, Any]) -> list[str]:
    """Held-out success (tool calls per episode) per stage, RL's gain over the warm start, the budget, wall time."""
    if "failed" in row:
        return ["failed", *[""] * (len(STAGES) + 2), f"{row['wall_s'] / 60:.1f} min"]
    stages = row["stages"]
    gain = stages["rl"]["success_rate"] - stages["warm start"]["success_rate"]
    return [
        *(f"{s['success_rate']:.2f} ({s['tool_calls_per_episode']:.1f})" for s in map(stages.get, STAGES)),
        f"{gain:+.2f}",
        f"{row['steps']} x {row['episodes_per_step']}",
        f"{row['wall_s'] / 60:.1f} min",
    ]


def _outcome_table(title: str, first_columns: Sequence[str], quick: bool) -> Table:
    table = Table(title=title + (" [--quick: plumbing only]" if quick else ""))
    for column in first_columns:
        table.add_column(column)
    for column in (*STAGES, "RL - warm", "steps x episodes", "wall"):
        table.add_column(column, justify="right")
    return table


def render(results: dict[str, Any], console: Console) -> None:
    quick = results["quick"]
    every_row: list[dict[str, Any]] = []
    if "envs" in results:
        title = "Held-out success (tool calls per episode): base -> warm start -> RL"
        table = _outcome_table(title, ("env", "agentfly-train"), quick)
        for name, row in results["envs"].items():
            table.add_row(name, f"--config {PRESETS[name]}", *_outcome_cells(row))
        console.print(table)
        for name, row in _finished(results["envs"]):
            console.print(f"{name}: {row['env']}, {row['algo']}, {row['eval_episodes']} held-out tasks per stage")
        console.print(f"reward curves: {results['plot']}")
        every_row += results["envs"].values()
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
    for kind, what in (("algorithms", "algorithm"), ("variants", "variant")):
        if kind not in results:
            continue
        compared = results[kind]
        envs = [compared["env"]] if "env" in compared else compared["envs"]
        presets = ", ".join(f"{env} (--config {PRESETS[env]})" for env in envs)
        title = f"{presets} per {what}: held-out success, base -> warm start -> RL"
        table = _outcome_table(title, (what,), quick)
        for name, row in compared["rows"].items():
            table.add_row(name, *_outcome_cells(row))
        console.print(table)
        for name, sets in compared.get("overrides", {}).items():
            console.print(f"{name}: {' '.join(sets) or 'the preset as it ships'}", markup=False, highlight=False)
        console.print(f"reward curves: {compared['plot']}")
        every_row += compared["rows"].values()
    if "turn_budgets" in results:
        budgets = results["turn_budgets"]
        env, seeds = budgets["env"], budgets["seeds"]
        title = f"{env} (--config {PRESETS[env]}) per turn budget, over seeds {seeds}"
        table = Table(title=title + (" [--quick: plumbing only]" if quick else ""))
        for column in ("max turns", "seeds finished", "held-out success after RL", "reward variance over seeds"):
            table.add_column(column, justify="right")
        for budget in budgets["summary"]:
            table.add_row(
                str(budget["turns"]),
                f"{budget['seeds']} of {len(seeds)}",
                f"{budget['rl_success_mean']:.2f} ± {budget['rl_success_std']:.2f}",
                f"{budget['reward_variance_across_seeds']:.4f}",
            )
        console.print(table)
        console.print(
            "reward variance over seeds: per RL step, the variance of the mean training reward over the seeds, "
            f"averaged over the steps; mean reward curves (band: ± std over seeds): {budgets['plot']}"
        )
        every_row += budgets["rows"]
    for row in every_row:
        if "failed" in row:
            console.print(f"[bold red]{row['name']} failed[/]: {row['failed']}; the end of {row['log']}:")
            console.print("\n".join(row["log_tail"]), markup=False, highlight=False)
