"""Task sources: where an env's tasks come from.

A task is a dict with at least ``prompt`` (the first observation the model reads) and ``id``; any other
fields (``answer``, ``tests``, ...) are free and are injected into rewards by name.

Example:
    >>> import numpy as np
    >>> tasks = ListTasks([{"id": "t0", "prompt": "2+2?", "answer": "4"}])
    >>> tasks.sample(np.random.default_rng(0))["answer"]
    '4'
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np


class TaskSource(abc.ABC):
    """An indexable collection of tasks; envs draw from it with their seeded generator."""

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        """A task drawn uniformly with ``rng`` (the env's seeded generator)."""
        return self[int(rng.integers(len(self)))]

    def select(self, options: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """The task that reset ``options`` ask for: ``{"task": {...}}``, ``{"task_index": i}``, or a sample."""
        if "task" in options:
            task = dict(options["task"])
            if "prompt" not in task:
                raise ValueError("options['task'] must have a 'prompt' field")
            return task
        if "task_index" in options:
            index = int(options["task_index"])
            if not 0 <= index < len(self):
                raise IndexError(f"task_index {index} is outside 0..{len(self) - 1}")
            return self[index]
        return self.sample(rng)


class ListTasks(TaskSource):
    """Tasks held in memory.

    Args:
        tasks: Task dicts, each with at least a ``prompt``; a missing ``id`` becomes its index.
    """

    def __init__(self, tasks: Iterable[Mapping[str, Any]]):
        self.tasks: list[dict[str, Any]] = []
        for index, task in enumerate(tasks):
            if "prompt" not in task:
                raise ValueError(f"task {index} has no 'prompt' field: {dict(task)!r:.200}")
            self.tasks.append({"id": str(index), **task})
        if not self.tasks:
            raise ValueError("a task source needs at least one task")

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return dict(self.tasks[index])  # a copy: callers may keep or change it


def load_jsonl_tasks(path: str | Path) -> ListTasks:
    """Read tasks from a JSONL file, one JSON object per line.

    Raises:
        ValueError: naming the file and line of a line that is not a JSON object with a ``prompt``.
    """
    path = Path(path)
    tasks = []
    with path.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                task = msgspec.json.decode(line)
            except msgspec.DecodeError as error:
                raise ValueError(f"{path}:{number}: not valid JSON ({error})") from None
            if not isinstance(task, dict) or "prompt" not in task:
                raise ValueError(f"{path}:{number}: expected a JSON object with a 'prompt' field")
            tasks.append(task)
    return ListTasks(tasks)
