"""The learning results of ``README.md`` and ``docs/`` (learning, agents), rendered from the learning runs' JSON.

The tables are never typed by hand. ``agentfly-bench --suite learning --json docs/results/learning.json`` runs
every env row (each preset as it ships) in one go; a second run, with ``--suite-options`` asking for the
algorithms, variants and turn budgets on one preset, writes ``docs/results/learning-comparisons.json``. This
module writes the tables from those files, each with its run's command, date, machine and commit. The suite's
tests check that the tables in the docs are the ones the JSON renders, so a table cannot drift from the run it
reports::

    python -m agentfly_bench.learning_table            # exit 1, saying which file differs, when one does
    python -m agentfly_bench.learning_table --write    # rewrite the tables from the JSON

Each rendered block (:data:`TARGETS`) sits between its :func:`markers` in its file; the text around it is the
docs' own.

Example:
    >>> stages = {"base": {"success_rate": 0.0}, "warm start": {"success_rate": 0.5}, "rl": {"success_rate": 0.25}}
    >>> row = {"env": "AgentFly/Math-v0", "steps": 6, "episodes_per_step": 32, "stages": stages, "wall_s": 300.0}
    >>> run = {"started": "2026-11-29T10:24:25+0000", "commit": "e83bfd8" + "0" * 33,
    ...        "machine": {"cpu": "AMD EPYC", "cpus": 2}, "learning": {"envs": {"math": row}}}
    >>> print(render(run, "readme"))
    | env | `agentfly-train` | base | warm start | after RL | wall |
    |---|---|---|---|---|---|
    | Math-v0, calculator | `--config calculator` | 0.00 | 0.50 | **0.25** | 5.0 min |
    <BLANKLINE>
    One `agentfly-bench --suite learning` run, 2026-11-29, AMD EPYC (2 CPUs), commit e83bfd8; **bold**: RL ended no higher than the warm start.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from agentfly_bench.suites.learning import PRESETS

#: The repository (this package is its ``benchmarks/`` folder).
ROOT = Path(__file__).resolve().parent.parent
#: The runs the tables come from, relative to the repository: every env row; the comparisons on one preset.
RESULTS = Path("docs/results/learning.json")
COMPARISONS = Path("docs/results/learning-comparisons.json")
TABLE, STEPS = "learning table", "step comparison"
ALGORITHMS, VARIANTS, BUDGETS = "algorithm table", "variant table", "turn budget table"
AGENT_STAGES, AGENT_APIS, DEMO = "agent stage table", "agent API table", "demo table"


def markers(block: str, source: Path = RESULTS) -> tuple[str, str]:
    """The lines a rendered block sits between."""
    begin = f"<!-- {block}: python -m agentfly_bench.learning_table --write renders it from {source} -->"
    return begin, f"<!-- end of the {block} -->"


#: Env row -> what the row plays, after its env id.
ROW_TITLES = {
    "math": "calculator",
    "code": "Python in the sandbox",
    "search": "retrieve",
    "webshop": "text, easy goals",
    "alfworld": "text, pick and place",
    "scienceworld": "text, life spans",
    "math-agent": "your own agent program",
    "math-agent-messages": "your own agent program, Anthropic Messages",
    "math-agent-responses": "your own agent program, Responses",
}
STAGES = ("base", "warm start", "rl")


def render(run: Mapping[str, Any], kind: Literal["readme", "docs"]) -> str:
    """The markdown table of ``run`` (an ``agentfly-bench --suite learning`` JSON) and its provenance line; the
    docs' table adds each row's RL steps and episodes per step."""
    columns = ["env", "`agentfly-train`", "base", "warm start", "after RL"]
    if kind == "docs":
        columns += ["RL steps x episodes", "of which RL steps"]
    columns.append("wall")
    lines = _header(columns)
    for name, row in run["learning"]["envs"].items():
        preset = f"`--config {PRESETS[name]}`"
        if "failed" in row:
            cells = [name, preset, *["failed"] * (len(columns) - 3), _minutes(row["wall_s"])]
        else:
            success = [row["stages"][stage]["success_rate"] for stage in STAGES]
            after = f"{success[2]:.2f}" if success[2] > success[1] else f"**{success[2]:.2f}**"
            label = f"{row['env'].removeprefix('AgentFly/')}, {ROW_TITLES.get(name, name)}"
            cells = [label, preset, f"{success[0]:.2f}", f"{success[1]:.2f}", after]
            if kind == "docs":
                cells += [f"{row['steps']} x {row['episodes_per_step']}", _minutes(sum(row["step_s"]))]
            cells.append(_minutes(row["wall_s"]))
        lines.append(_cells(cells))
    lines += ["", f"{_provenance(run)}; **bold**: RL ended no higher than the warm start."]
    return "\n".join(lines)


def _cells(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _header(columns: list[str]) -> list[str]:
    return [_cells(columns), "|" + "---|" * len(columns)]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _provenance(run: Mapping[str, Any]) -> str:
    """Which command made the run, when, on what and at which commit (its options but for where it wrote)."""
    options = {key: value for key, value in run.get("args", {}).get("suite_options", {}).items() if key != "out_dir"}
    command = "agentfly-bench --suite learning" + (f" --suite-options '{json.dumps(options)}'" if options else "")
    machine, commit = run["machine"], run.get("commit") or "unknown"
    return (
        f"One `{command}` run, {run['started'][:10]}, {machine['cpu']} ({machine['cpus']} CPUs), "
        f"commit {commit[:7]}{'+dirty' if commit.endswith('+dirty') else ''}"
    )


def _outcome(row: Mapping[str, Any]) -> list[str]:
    """A comparison row's held-out success per stage, its training reward from the first RL step to the last,
    the mean engine-trainer KL over its updates, the seconds of its RL steps and its wall time."""
    if "failed" in row:
        return [*["failed"] * 5, "", _minutes(row["wall_s"])]
    success = [f"{row['stages'][stage]['success_rate']:.2f}" for stage in STAGES]
    kl = [value for value in row.get("mismatch_kl", ()) if value is not None]
    return [
        *success,
        f"{row['rewards'][0]:.2f} -> {row['rewards'][-1]:.2f}",
        f"{statistics.fmean(kl):.4f}" if kl else "-",
        _minutes(sum(row["step_s"])),
        _minutes(row["wall_s"]),
    ]


#: Algorithm -> its name in the table.
ALGORITHM_TITLES = {"ppo": "PPO (GAE, a critic)", "reinforce++": "REINFORCE++", "grpo": "GRPO", "rloo": "RLOO"}
#: A comparison row's columns after its name.
OUTCOME_COLUMNS = [
    "base",
    "warm start",
    "after RL",
    "training reward, first -> last step",
    "mean `mismatch_kl`",
    "RL steps",
    "wall",
]


def render_algorithms(run: Mapping[str, Any]) -> str:
    """The comparison run's rows per algorithm.

    Example:
        >>> stages = {stage: {"success_rate": 0.5} for stage in STAGES}
        >>> row = {"stages": stages, "rewards": [0.25, 0.75], "mismatch_kl": [None, 0.002], "step_s": [60.0, 60.0],
        ...        "wall_s": 300.0}
        >>> run = {"started": "2026-11-29T23:00:00+0000", "commit": "0" * 40, "machine": {"cpu": "AMD EPYC", "cpus": 2},
        ...        "args": {"suite_options": {"algorithms": ["rloo"]}}, "learning": {"algorithms": {"rows": {"rloo": row}}}}
        >>> print("\\n".join(render_algorithms(run).splitlines()[2:]))
        | RLOO | 0.50 | 0.50 | 0.50 | 0.25 -> 0.75 | 0.0020 | 2.0 min | 5.0 min |
        <BLANKLINE>
        One `agentfly-bench --suite learning --suite-options '{"algorithms": ["rloo"]}'` run, 2026-11-29, AMD EPYC (2 CPUs), commit 0000000.
    """
    rows = run["learning"]["algorithms"]["rows"]
    lines = _header(["algorithm", *OUTCOME_COLUMNS])
    lines += [_cells([ALGORITHM_TITLES.get(algo, algo), *_outcome(row)]) for algo, row in rows.items()]
    return "\n".join([*lines, "", f"{_provenance(run)}."])


def render_variants(run: Mapping[str, Any]) -> str:
    """The comparison run's rows per env and variant, each with the ``--set`` overrides it adds to the preset."""
    variants = run["learning"]["variants"]
    lines = _header(["variant", "`agentfly-train`", "`--set`", *OUTCOME_COLUMNS])
    for env in variants["envs"]:
        for name, sets in variants["overrides"].items():
            if (row := variants["rows"].get(f"{env} {name}")) is None:  # the variant is not run on this env
                continue
            overrides = " ".join(f"`{override}`" for override in sets) or "the preset as it ships"
            lines.append(_cells([name, f"`--config {PRESETS[env]}`", overrides, *_outcome(row)]))
    return "\n".join([*lines, "", f"{_provenance(run)}."])


def render_turn_budgets(run: Mapping[str, Any]) -> str:
    """The comparison run's turn budgets: per budget, each seed's held-out success after RL and last training
    reward, their mean and spread, and the reward's variance over seeds."""
    budgets = run["learning"].get("turn_budgets")
    if budgets is None:
        return "The run compared no turn budgets."
    seeds = " / ".join(map(str, budgets["seeds"]))
    lines = _header(
        [
            "max turns",
            f"held-out success after RL, seeds {seeds}",
            "mean ± std",
            f"training reward at the last step, seeds {seeds}",
            "reward variance over seeds",
            "wall per run",
        ]
    )
    for budget in budgets["summary"]:
        rows = [row for row in budgets["rows"] if row["turns"] == budget["turns"]]
        finished = [row for row in rows if "failed" not in row]
        walls = [row["wall_s"] for row in rows]
        lines.append(
            _cells(
                [
                    str(budget["turns"]),
                    " / ".join(_seed_cell(row, lambda r: r["stages"]["rl"]["success_rate"]) for row in rows),
                    f"{budget['rl_success_mean']:.2f} ± {budget['rl_success_std']:.2f}",
                    " / ".join(_seed_cell(row, lambda r: r["rewards"][-1]) for row in rows),
                    f"{budget['reward_variance_across_seeds']:.3f}",
                    f"{min(walls) / 60:.1f}-{max(walls) / 60:.1f} min" if finished else "",
                ]
            )
        )
    return "\n".join([*lines, "", f"{_provenance(run)}."])


def _seed_cell(row: Mapping[str, Any], value: Callable[[Mapping[str, Any]], float]) -> str:
    return "failed" if "failed" in row else f"{value(row):.2f}"


def render_steps(run: Mapping[str, Any]) -> str:
    """The agent program's median GRPO step against the env loop's on the same task, from the run's comparison
    (none when a row of the two failed).

    Example:
        >>> parts = {"step_s": (48.7, 59.8), "rollout_s": (18.0, 20.9), "update_s": (31.4, 38.6)}
        >>> run = {"learning": {"step_comparison": {
        ...     part: {"agent": a, "env_loop": b, "ratio": a / b} for part, (a, b) in parts.items()}}}
        >>> print(render_steps(run))
        The agent program's median GRPO step took 48.7 s against the env loop's 59.8 s (0.81x: rollout 18.0 vs 20.9 s, update 31.4 vs 38.6 s).
    """
    comparison = run["learning"].get("step_comparison")
    if not comparison:
        return "The run has no step comparison: a row of the two failed."
    step, rollout, update = (comparison[part] for part in ("step_s", "rollout_s", "update_s"))
    return (
        f"The agent program's median GRPO step took {step['agent']:.1f} s against the env loop's "
        f"{step['env_loop']:.1f} s ({step['ratio']:.2f}x: rollout {rollout['agent']:.1f} vs {rollout['env_loop']:.1f} s, "
        f"update {update['agent']:.1f} vs {update['env_loop']:.1f} s)."
    )


#: Agent row -> the example it trains and the API that example calls.
AGENT_EXAMPLES = {
    "math-agent": ("calculator_agent.py", "Chat Completions (`openai`)"),
    "math-agent-messages": ("calculator_agent_messages.py", "Anthropic Messages (`anthropic`)"),
    "math-agent-responses": (
        "calculator_agent_responses.py",
        "Responses (the Agents SDK's default model, run as a command in its own venv)",
    ),
}
#: A stage's name in the agent's stage table.
STAGE_TITLES = {"base": "base SmolLM2-135M-Instruct", "warm start": "after the warm start", "rl": "after RL"}


def _stage_table(run: Mapping[str, Any], name: str, first: str, turns: str, reward: bool) -> str:
    """Row ``name``'s held-out numbers per stage, then where they come from and its training reward curve's ends."""
    row = run["learning"].get("envs", {}).get(name)
    if row is None or "failed" in row:
        return f"The `{name}` row {'failed in the run: ' + row['failed'] if row else 'is not in the run'}."
    columns = [first, "success", *(["reward"] if reward else []), "tool calls / episode", turns]
    lines = _header(columns)
    for stage, title in STAGE_TITLES.items():
        numbers = row["stages"][stage]
        cells = [title, f"{numbers['success_rate']:.3f}"]
        cells += [f"{numbers['reward_mean']:.3f}"] if reward else []
        cells += [f"{numbers['tool_calls_per_episode']:.2f}", f"{numbers['turns_per_episode']:.2f}"]
        lines.append(_cells(cells))
    lines += [
        "",
        f"{_provenance(run)}, its `{name}` row: {row['steps']} RL steps of {row['episodes_per_step']} episodes, "
        f"training reward {row['rewards'][0]:.2f} at the first and {row['rewards'][-1]:.2f} at the last, "
        f"{_minutes(row['wall_s'])} in all.",
    ]
    return "\n".join(lines)


def render_demo(run: Mapping[str, Any]) -> str:
    """What ``make demo`` (the calculator preset, the run's ``math`` row) does, stage by stage."""
    return _stage_table(run, "math", "held-out (64 tasks, greedy)", "turns / episode", reward=True)


def render_agent_stages(run: Mapping[str, Any]) -> str:
    """The agent program's held-out success, tool calls and model calls per episode at each stage (the run's
    ``math-agent`` row; an agent's turn is a model call)."""
    return _stage_table(run, "math-agent", "stage", "model calls / episode", reward=False)


def render_agent_apis(run: Mapping[str, Any]) -> str:
    """The agent program on each API the run trained it through: held-out success per stage, the highest
    prefix-mismatch rate of its RL steps (0: every call continued its episode's row) and its wall time."""
    columns = ["agent", "API", "run", "base", "warm start", "after RL", "highest prefix-mismatch rate", "wall"]
    lines = _header(columns)
    for name, (example, api) in AGENT_EXAMPLES.items():
        row = run["learning"]["envs"].get(name)
        if row is None:
            continue
        cells = [f"[`{example}`](../examples/{example})", api, f"`agentfly-train --config {PRESETS[name]}`"]
        if "failed" in row:
            cells += [*["failed"] * 4, _minutes(row["wall_s"])]
        else:
            rates = [rate for rate in row["prefix_mismatch_rate"] if rate is not None]
            success = [f"{row['stages'][stage]['success_rate']:.3f}" for stage in STAGES]
            cells += [*success, f"{max(rates):.3f}" if rates else "-", _minutes(row["wall_s"])]
        lines.append(_cells(cells))
    return "\n".join([*lines, "", f"{_provenance(run)}."])


Renderer = Callable[[Mapping[str, Any]], str]
#: Each file, and the blocks it holds: the run each renders from, and how.
TARGETS: dict[Path, dict[str, tuple[Path, Renderer]]] = {
    Path("README.md"): {DEMO: (RESULTS, render_demo), TABLE: (RESULTS, lambda run: render(run, "readme"))},
    Path("docs/learning.md"): {
        TABLE: (RESULTS, lambda run: render(run, "docs")),
        STEPS: (RESULTS, render_steps),
        ALGORITHMS: (COMPARISONS, render_algorithms),
        VARIANTS: (COMPARISONS, render_variants),
        BUDGETS: (COMPARISONS, render_turn_budgets),
    },
    Path("docs/agents.md"): {
        AGENT_STAGES: (COMPARISONS, render_agent_stages),
        AGENT_APIS: (COMPARISONS, render_agent_apis),
    },
}


def replaced(text: str, block: str, rendered: str, where: Path, source: Path = RESULTS) -> str:
    """``text`` with what lies between ``block``'s :func:`markers` replaced by ``rendered``.

    Raises:
        ValueError: ``text`` has not exactly one pair of the block's markers, in order.
    """
    begin, end = markers(block, source)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"{where} must hold the {block}'s markers once each, in order:\n{begin}\n{end}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{rendered}\n{end}{tail}"


def stale(root: Path = ROOT, *, write: bool = False) -> list[Path]:
    """The files whose blocks are not the ones their runs render (rewritten first when ``write``)."""
    runs = {source: json.loads((root / source).read_text()) for source in {RESULTS, COMPARISONS}}
    differ = []
    for path, blocks in TARGETS.items():
        text = (root / path).read_text()
        expected = text
        for block, (source, render_block) in blocks.items():
            expected = replaced(expected, block, render_block(runs[source]), path, source)
        if expected != text:
            differ.append(path)
            if write:
                (root / path).write_text(expected)
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentfly_bench.learning_table", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the tables from the JSON")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this checkout)")
    args = parser.parse_args(argv)
    differ = stale(args.root, write=args.write)
    for path in differ:
        print(
            f"{path}: {'rewritten from' if args.write else 'its learning results are not the ones rendered from'} its runs"
        )
    return 0 if args.write or not differ else 1


if __name__ == "__main__":
    sys.exit(main())
