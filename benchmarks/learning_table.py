"""The learning results of ``README.md`` and ``docs/learning.md``, rendered from one learning run's JSON.

The tables are never typed by hand: ``agentfly-bench --suite learning --json docs/results/learning.json`` runs
every env row (each preset as it ships) in one go, and this module writes the tables from that file, with the
run's date, machine and commit. The suite's tests check that the tables in the docs are the ones the JSON
renders, so a table cannot drift from the run it reports::

    python -m agentfly_bench.learning_table            # exit 1, saying which file differs, when one does
    python -m agentfly_bench.learning_table --write    # rewrite the tables from the JSON

Each rendered block (the table; in docs/learning.md also the agent program's step against the env loop's) sits
between its :func:`markers` in its file; the text around it is the docs' own.

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
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from agentfly_bench.suites.learning import PRESETS

#: The repository (this package is its ``benchmarks/`` folder).
ROOT = Path(__file__).resolve().parent.parent
#: The run the tables come from, relative to the repository.
RESULTS = Path("docs/results/learning.json")
TABLE, STEPS = "learning table", "step comparison"


def markers(block: str) -> tuple[str, str]:
    """The lines a rendered block sits between."""
    begin = f"<!-- {block}: python -m agentfly_bench.learning_table --write renders it from {RESULTS} -->"
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
}
STAGES = ("base", "warm start", "rl")


def render(run: Mapping[str, Any], kind: Literal["readme", "docs"]) -> str:
    """The markdown table of ``run`` (an ``agentfly-bench --suite learning`` JSON) and its provenance line; the
    docs' table adds each row's RL steps and episodes per step."""
    columns = ["env", "`agentfly-train`", "base", "warm start", "after RL"]
    if kind == "docs":
        columns.append("RL steps x episodes")
    columns.append("wall")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
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
                cells.append(f"{row['steps']} x {row['episodes_per_step']}")
            cells.append(_minutes(row["wall_s"]))
        lines.append("| " + " | ".join(cells) + " |")
    machine, commit = run["machine"], run.get("commit") or "unknown"
    lines += [
        "",
        f"One `agentfly-bench --suite learning` run, {run['started'][:10]}, {machine['cpu']} ({machine['cpus']} CPUs), "
        f"commit {commit[:7]}{'+dirty' if commit.endswith('+dirty') else ''}; **bold**: RL ended no higher than the "
        "warm start.",
    ]
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


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


#: Each file, and the blocks it holds: how each renders from a run.
TARGETS: dict[Path, dict[str, Callable[[Mapping[str, Any]], str]]] = {
    Path("README.md"): {TABLE: lambda run: render(run, "readme")},
    Path("docs/learning.md"): {TABLE: lambda run: render(run, "docs"), STEPS: render_steps},
}


def replaced(text: str, block: str, rendered: str, where: Path) -> str:
    """``text`` with what lies between ``block``'s :func:`markers` replaced by ``rendered``.

    Raises:
        ValueError: ``text`` has not exactly one pair of the block's markers, in order.
    """
    begin, end = markers(block)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"{where} must hold the {block}'s markers once each, in order:\n{begin}\n{end}")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{rendered}\n{end}{tail}"


def stale(root: Path = ROOT, *, write: bool = False) -> list[Path]:
    """The files whose blocks are not the ones :data:`RESULTS` renders (rewritten first when ``write``)."""
    run = json.loads((root / RESULTS).read_text())
    differ = []
    for path, blocks in TARGETS.items():
        text = (root / path).read_text()
        expected = text
        for block, render_block in blocks.items():
            expected = replaced(expected, block, render_block(run), path)
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
            f"{path}: {'rewritten from' if args.write else 'its learning results are not the ones rendered from'} {RESULTS}"
        )
    return 0 if args.write or not differ else 1


if __name__ == "__main__":
    sys.exit(main())
