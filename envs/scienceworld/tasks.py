"""ScienceWorld's 30 task types, their variations and the train/dev/test splits, as a task source.

Task types come from the ``scienceworld`` package's own table (ids such as ``"1-1"``, names such as
``"boil"``, and the paper's titles). The JAR splits each task's variations into three contiguous
ranges (train, then dev, then test); ``data/variations.json`` records, per task, the number of
variations and where dev and test start, so tasks are listed and sampled without starting a JVM.
:func:`read_variations` reads the same table from a live simulator (the tests compare the two).

Sampling is two-level: a task type uniformly, then one of its variations in the split uniformly,
so task types with hundreds of variations do not crowd out the ones with a handful.

Example:
    >>> resolve_task("1-1"), resolve_task("Matter Changes of State (Boiling)"), resolve_task("boil")
    ('boil', 'boil', 'boil')
    >>> tasks = ScienceWorldTasks(["find-animal", "4-3"], split="dev")
    >>> len(tasks), tasks[0]["id"], tasks[0]["variation"]
    (150, 'find-animal/150', 150)
    >>> sum(len(variations(name).split(split)) for name in task_names() for split in SPLITS)
    7207
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scienceworld.constants import TASKS
from scienceworld.utils import infer_task

from agentfly_env.core.env import OptionsError
from agentfly_env.core.tasks import TaskSource

__all__ = [
    "SIMPLIFICATIONS",
    "SPLITS",
    "ScienceWorldTasks",
    "TaskVariations",
    "check_simplifications",
    "read_variations",
    "resolve_task",
    "task_names",
    "variations",
]

Split = Literal["train", "dev", "test"]
SPLITS: tuple[Split, ...] = ("train", "dev", "test")

#: The JAR's simplifications; ``"easy"`` turns on all that fit the task.
SIMPLIFICATIONS = ("teleportAction", "selfWateringFlowerPots", "openContainers", "openDoors", "noElectricalAction")

DATA_FILE = Path(__file__).with_name("data") / "variations.json"

_BY_NAME: dict[str, dict[str, str]] = {task["task_name"]: task for task in TASKS}


def task_names() -> list[str]:
    """The 30 task names, in the package's (paper's) order."""
    return list(_BY_NAME)


def resolve_task(name_or_id: str) -> str:
    """The task name for a name, an id (``"4-1"``) or a paper title (``"Life Find living thing"``).

    Raises:
        ValueError: no such task; the message lists the names.
    """
    name = infer_task(str(name_or_id).strip())
    if name not in _BY_NAME:
        raise ValueError(f"unknown ScienceWorld task {name_or_id!r}; known: {', '.join(task_names())}")
    return name


@dataclass(frozen=True)
class TaskVariations:
    """How many variations a task has and where the JAR's dev and test ranges start."""

    name: str
    count: int
    dev_start: int
    test_start: int

    def split(self, split: Split) -> range:
        """The variation indices of one split."""
        bounds = {
            "train": (0, self.dev_start),
            "dev": (self.dev_start, self.test_start),
            "test": (self.test_start, self.count),
        }
        if split not in bounds:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        return range(*bounds[split])


@functools.cache
def _table() -> dict[str, TaskVariations]:
    raw = json.loads(DATA_FILE.read_text())
    return {name: TaskVariations(name, *raw[name]) for name in task_names()}


def variations(task: str) -> TaskVariations:
    """The variations of a task (by name, id or title)."""
    return _table()[resolve_task(task)]


def read_variations(engine: Any) -> dict[str, list[int]]:
    """The table of ``data/variations.json`` read from a live simulator: name -> [count, dev, test].

    Args:
        engine: A started :class:`~agentfly_envs.scienceworld.engine.ScienceWorldEngine`.
    """
    return {name: list(engine.variation_splits(name)) for name in task_names()}


def check_simplifications(simplifications: str, tasks: Sequence[str] = ()) -> str:
    """Validates a comma-separated simplification string (or ``"easy"``) and returns it normalized.

    Raises:
        ValueError: an unknown simplification, or ``noElectricalAction`` for a task that needs
            electrical actions (the package refuses that combination too).
    """
    chosen = [part.strip() for part in simplifications.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in (*SIMPLIFICATIONS, "easy")]
    if unknown:
        raise ValueError(f"unknown simplifications {unknown}; known: easy, {', '.join(SIMPLIFICATIONS)}")
    electrical = [name for name in tasks if "power-component" in name or "conductivity" in name]
    if "noElectricalAction" in chosen and electrical:
        raise ValueError(f"noElectricalAction cannot be used with tasks that need electrical actions: {electrical}")
    return ",".join(chosen)


class ScienceWorldTasks(TaskSource):
    """Task variations of one split; a task is one (task type, variation) pair.

    Reset options it understands (besides the base ``task_index`` and ``task``):
    ``task_name`` (a name, id or title) with an optional ``variation`` (default: sampled from the split).

    Args:
        tasks: Task names, ids or titles to draw from (default: all 30).
        split: ``"train"``, ``"dev"`` or ``"test"``.
        simplifications: Comma-separated simplifications or ``"easy"`` (see :data:`SIMPLIFICATIONS`).
    """

    def __init__(
        self, tasks: str | Sequence[str] | None = None, *, split: Split = "train", simplifications: str = ""
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        chosen = [tasks] if isinstance(tasks, str) else list(tasks) if tasks is not None else task_names()
        if not chosen:
            raise ValueError("choose at least one task")
        self.names = list(dict.fromkeys(resolve_task(name) for name in chosen))
        self.split: Split = split
        self.simplifications = check_simplifications(simplifications, self.names)
        self.ranges = [variations(name).split(split) for name in self.names]
        self._offsets = np.cumsum([0, *(len(r) for r in self.ranges)])

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self):
            raise IndexError(f"task index {index} is outside 0..{len(self) - 1}")
        which = int(np.searchsorted(self._offsets, index, side="right")) - 1
        return self.task(self.names[which], self.ranges[which][index - int(self._offsets[which])])

    def task(self, name: str, variation: int) -> dict[str, Any]:
        """The task dict of one variation; its ``prompt`` becomes the game's description at reset.

        Raises:
            ValueError: unknown task, or a variation outside the task's range.
        """
        name = resolve_task(name)
        check_simplifications(self.simplifications, [name])
        count = variations(name).count
        if not 0 <= variation < count:
            raise ValueError(f"task {name!r} has variations 0..{count - 1}, got {variation}")
        info = _BY_NAME[name]
        split = next(s for s in SPLITS if variation in variations(name).split(s))
        return {
            "id": f"{name}/{variation}",
            "prompt": f"ScienceWorld task {info['task_id']} ({info['topic']}: {info['task']}), variation {variation}",
            "task_name": name,
            "task_id": info["task_id"],
            "topic": info["topic"],
            "title": info["task"],
            "variation": variation,
            "split": split,
            "simplifications": self.simplifications,
        }

    def sample(self, rng: np.random.Generator) -> dict[str, Any]:
        """A task type uniformly, then a variation of it in the split uniformly."""
        which = int(rng.integers(len(self.names)))
        choices = self.ranges[which]
        return self.task(self.names[which], choices[int(rng.integers(len(choices)))])

    def select(self, options: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """As :meth:`TaskSource.select`, and ``{"task_name": ..., "variation": ...}`` (a variation of the split
        drawn when none is given); ``options["task"]`` is a task dict as in ``info["task"]``.

        Raises:
            OptionsError: An unknown task, a variation that is not an integer of the task's range.
        """
        if "task_name" in options:
            try:
                name = resolve_task(options["task_name"])
            except ValueError as error:
                raise OptionsError("task_name", str(error)) from None
            if "variation" not in options:
                choices = variations(name).split(self.split)
                return self.task(name, choices[int(rng.integers(len(choices)))])
            return self._variation(name, options["variation"], "variation")
        if "task" in options:
            given = options["task"]
            if not isinstance(given, Mapping) or "task_name" not in given:
                raise OptionsError("task", "must be a task object with 'task_name' and 'variation', as info['task']")
            try:
                name = resolve_task(given["task_name"])
            except ValueError as error:
                raise OptionsError("task", str(error)) from None
            return self._variation(name, given.get("variation"), "task")
        return super().select(options, rng)

    def _variation(self, name: str, variation: Any, option: str) -> dict[str, Any]:
        if isinstance(variation, bool) or not isinstance(variation, (int, np.integer)):
            raise OptionsError(option, f"the variation must be an integer, got {variation!r}")
        try:
            return self.task(name, int(variation))
        except ValueError as error:
            raise OptionsError(option, str(error)) from None
