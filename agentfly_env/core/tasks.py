"""Task sources: where an env's tasks come from.

A task is a dict with at least ``prompt`` (the first observation the model reads) and ``id``; any other
fields (``answer``, ``tests``, ...) are free and are injected into rewards by name.

Tasks are read-only and shared (:func:`~agentfly_env.core.readonly.read_only`): a source freezes each once,
and the env puts that same object in ``info["task"]``, ``EpisodeStart.task`` and the trajectory, with no
copy per episode. Changing one raises ``TypeError``; ``dict(task)`` or ``copy.deepcopy(task)`` is yours to
change.

A seed picks the same task on every machine: :meth:`TaskSource.sample` draws the index with
``rng.integers`` on the env's generator (``env.np_random``, numpy's PCG64, which Gymnasium seeds from the
reset seed).

Example:
    >>> import numpy as np
    >>> tasks = ListTasks([{"prompt": f"{n}+{n}?", "answer": str(2 * n)} for n in range(100)])
    >>> [tasks.sample(np.random.default_rng(seed))["id"] for seed in range(4)]
    ['85', '47', '83', '81']
    >>> tasks[0]["answer"] = "1"
    Traceback (most recent call last):
    ...
    TypeError: this ReadOnlyDict is read-only (a task is shared by the env, its records and other episodes); change a copy: dict(task), or copy.deepcopy(task) for nested data
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from agentfly_env.core.env import OptionsError
from agentfly_env.core.readonly import read_only

#: The task fields that give its solution away, in every env: the gold answer (Math's ``answer``, Search's
#: ``golden_answers``), a reference program and the hidden tests (Code's ``solution``, ``tests``), the target
#: product (WebShop's ``goal``), and how the answer was made (``metadata``: Math's expression, Search's hops;
#: ALFWorld's ``pddl_params``). The env's reward reads them; ``agentfly-serve`` keeps them on the server
#: unless started with ``--send-gold``. A task that holds its solution in another field names it here.
GOLD_FIELDS = frozenset({"answer", "golden_answers", "solution", "tests", "goal", "metadata", "pddl_params"})


class TaskSource(abc.ABC):
    """An indexable collection of tasks; envs draw from it with their seeded generator."""

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def __getitem__(self, index: int) -> dict[str, Any]:
        """The task at ``index``: read-only (:func:`~agentfly_env.core.readonly.read_only`) where the source
        shares its tasks between episodes, as the sources here do."""

    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        """A task drawn uniformly with ``rng`` (the env's seeded generator)."""
        return self[int(rng.integers(len(self)))]

    def select(self, options: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """The task that reset ``options`` ask for: ``{"task": {...}}``, ``{"task_index": i}``, or a sample.

        Raises:
            OptionsError: A ``task`` that is not a task object with a ``prompt``, a ``task_index`` that is not
                an integer of the source's range.
        """
        if "task" in options:
            task = options["task"]
            if not isinstance(task, Mapping) or not isinstance(task.get("prompt"), str):
                raise OptionsError("task", "must be a task object with a 'prompt' string")
            return read_only(task)  # a frozen copy: the caller's dict stays theirs
        if "task_index" in options:
            index = options["task_index"]
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
                raise OptionsError("task_index", f"must be an integer, got {index!r}")
            if not 0 <= index < len(self):
                raise OptionsError("task_index", f"{index} is outside 0..{len(self) - 1}")
            return self[int(index)]
        return self.sample(rng)


class ListTasks(TaskSource):
    """Tasks held in memory, read-only (each is frozen once and shared by the episodes that draw it).

    Args:
        tasks: Task dicts, each with at least a ``prompt``; a missing ``id`` becomes its index.
    """

    def __init__(self, tasks: Iterable[Mapping[str, Any]]):
        self.tasks: list[dict[str, Any]] = []
        for index, task in enumerate(tasks):
            if "prompt" not in task:
                raise ValueError(f"task {index} has no 'prompt' field: {dict(task)!r:.200}")
            self.tasks.append(read_only({"id": str(index), **task}))
        if not self.tasks:
            raise ValueError("a task source needs at least one task")

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.tasks[index]


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
