"""Where ALFWorld games come from: ALFWorld's own game files, or generated ones cached on disk.

Both sources give tasks that point at a ``game.tw-pddl`` file in ALFWorld's layout::

    json_2.1.1/<split>/<task_type>-<Object>-<MovableRecep>-<Recep>-<scene>/trial_<id>/
        traj_data.json  initial_state.pddl  game.tw-pddl

* :class:`ALFWorldGames` reads a tree that ``alfworld-download`` made (``$ALFWORLD_DATA``), keeping
  the games ALFWorld itself plays: solvable, of the chosen task types, no movable or sliced ones.
* :class:`GeneratedGames` makes games with :mod:`~agentfly_envs.alfworld.generator`, the i-th game of
  a split from a seed of its own, and writes each once to a cache directory (atomically: concurrent
  writers and a crash mid-write never leave a partial game). Each candidate game is played once by
  ALFWorld's handcoded expert, in an engine process shared by the process's sources; a candidate it
  loses is written too, marked unsolvable as ``alfworld-generate`` leaves it, so the verdict is read
  from the cache next time. Splits follow ALFWorld's: ``train`` and ``valid_seen`` draw from ALFRED's
  training floor plans, ``valid_unseen`` from the held-out ones.

Example:
    >>> import tempfile
    >>> games = GeneratedGames("valid_seen", cache_dir=tempfile.mkdtemp())
    >>> len(games), games[0]["task_type"]
    (140, 'pick_and_place_simple')
    >>> games[0]["game_file"].endswith("game.tw-pddl")
    True
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import alfworld.gen.constants as alfred

from agentfly_env.core.tasks import TaskSource
from agentfly_env.resources.cache_dir import cache_dir
from agentfly_env.resources.files import atomic_path
from agentfly_envs.alfworld.engine import Engine
from agentfly_envs.alfworld.generator import (
    GENERATOR_VERSION,
    TASK_TYPES,
    GeneratedGame,
    generate_game,
    handcoded_expert,
)

__all__ = [
    "SPLITS",
    "SPLIT_ALIASES",
    "ALFWorldGames",
    "GeneratedGames",
    "cache_root",
    "checking_engine",
    "resolve_split",
    "write_atomic",
]

#: ALFWorld's splits, with the number of games its release has in each (the generated default sizes).
SPLITS = {"train": 3553, "valid_seen": 140, "valid_unseen": 134}
#: The names ALFWorld's configs use for its evaluation splits, and the short one.
SPLIT_ALIASES = {"eval": "valid_seen", "eval_in_distribution": "valid_seen", "eval_out_of_distribution": "valid_unseen"}

_GOAL = re.compile(r"Your task is to: (.*?)\.\"")


def resolve_split(split: str) -> str:
    """ALFWorld's name of a split (``eval`` is ``valid_seen``).

    Raises:
        ValueError: an unknown split.
    """
    name = SPLIT_ALIASES.get(split, split)
    if name not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {[*SPLITS, *SPLIT_ALIASES]}")
    return name


def _check_task_types(task_types: Sequence[str] | None) -> tuple[str, ...]:
    chosen = tuple(task_types or TASK_TYPES)
    unknown = [name for name in chosen if name not in TASK_TYPES]
    if unknown or not chosen:
        raise ValueError(f"unknown task types {unknown}; known: {', '.join(TASK_TYPES)}")
    return chosen


def cache_root() -> Path:
    """Where generated games live unless the env is told: ``$AGENTFLY_ALFWORLD_CACHE_DIR``, else the
    ``alfworld`` folder of the AgentFly cache (see :func:`~agentfly_env.resources.cache_dir.cache_dir`)."""
    return cache_dir("alfworld", "AGENTFLY_ALFWORLD_CACHE_DIR")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` all at once: a temporary file beside it, then a rename over it."""
    with atomic_path(path) as scratch:
        scratch.write_text(text)


class _SharedEngine:
    """One engine process for the whole Python process, started on first use and again if it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine: Engine | None = None

    def __call__(self) -> Engine:
        with self._lock:
            if self._engine is None or not self._engine.alive:
                self._engine = Engine.start()
                atexit.register(self._engine.close)
            return self._engine


#: The engine that plays the handcoded expert on new generated games (its calls are serialised).
checking_engine = _SharedEngine()


def _task(game_file: Path, split: str, traj: dict[str, Any], goal: str, root: Path) -> dict[str, Any]:
    return {
        "id": str(game_file.parent.relative_to(root)),
        "prompt": goal,
        "task_type": traj["task_type"],
        "pddl_params": traj.get("pddl_params", {}),
        "split": split,
        "game_file": str(game_file),
    }


class GeneratedGames(TaskSource):
    """Generated games of one split, made on first use and cached on disk.

    Game ``i`` has the task type ``task_types[i % len(task_types)]`` (so every type is equally
    common) and a seed derived from ``(seed, split, i)``: the same arguments give the same games.

    Args:
        split: ``train``, ``valid_seen`` or ``valid_unseen`` (or an alias, see :data:`SPLIT_ALIASES`).
        size: Games in the split; default: as many as ALFWorld's release has.
        seed: Base seed of the whole set.
        task_types: The task types to generate (default: all six).
        scenes: ALFRED scene numbers to draw floor plans from (default: the split's: ALFRED's training
            scenes for ``train`` and ``valid_seen``, its held-out ones for ``valid_unseen``).
        cache_dir: Where to write games (default: :func:`cache_root`).
    """

    def __init__(
        self,
        split: str = "train",
        *,
        size: int | None = None,
        seed: int = 0,
        task_types: Sequence[str] | None = None,
        scenes: Sequence[int] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.split = resolve_split(split)
        self.size = SPLITS[self.split] if size is None else size
        if self.size < 1:
            raise ValueError(f"size must be at least 1, got {self.size}")
        self.seed = seed
        self.task_types = _check_task_types(task_types)
        self.root = Path(cache_dir) if cache_dir is not None else cache_root()
        self.split_dir = self.root / GENERATOR_VERSION / "json_2.1.1" / self.split
        if scenes is None:
            held_out = set(alfred.TEST_SCENE_NUMBERS)
            scenes = [s for s in alfred.SCENE_NUMBERS if (s in held_out) == (self.split == "valid_unseen")]
        self.scenes = sorted(scenes)
        self._task = functools.lru_cache(maxsize=65536)(self._make)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.size:
            raise IndexError(f"game {index} is outside 0..{self.size - 1}")
        return dict(self._task(index))

    def game_seed(self, index: int) -> int:
        """The generator seed of game ``index``."""
        digest = hashlib.sha256(f"{self.seed}/{self.split}/{self.scenes}/{index}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    def game(self, index: int) -> GeneratedGame:
        """Game ``index`` itself (the household, the task, the expert's walkthrough), made and cached as
        for ``self[index]``."""
        task_type = self.task_types[index % len(self.task_types)]
        return generate_game(self.game_seed(index), task_type, scenes=self.scenes, expert=self._verdict)

    def _make(self, index: int) -> dict[str, Any]:
        game = self.game(index)
        game_file = self.split_dir / game.directory / "game.tw-pddl"
        return _task(game_file, self.split, game.traj_data(), game.goal, self.split_dir)

    def _verdict(self, game: GeneratedGame) -> list[str] | None:
        """The handcoded expert's path on a candidate (None: it lost), read from the cache or played and
        written there with the game."""
        trial = self.split_dir / game.directory
        game_file = trial / "game.tw-pddl"
        if not game_file.exists():  # game.tw-pddl goes last: its presence means the trial is complete
            game.walkthrough = handcoded_expert(checking_engine())(game)
            for name, text in game.files().items():
                write_atomic(trial / name, text)
        return json.loads(game_file.read_text())["walkthrough"]


class ALFWorldGames(TaskSource):
    """ALFWorld's own games of one split, found in the tree its download creates.

    Args:
        data_path: The folder holding ``json_2.1.1`` (ALFWorld's ``$ALFWORLD_DATA``), or
            ``json_2.1.1`` itself.
        split: ``train``, ``valid_seen`` or ``valid_unseen`` (or an alias, see :data:`SPLIT_ALIASES`).
        task_types: The task types to keep (default: all six).

    Raises:
        FileNotFoundError: the split's folder is missing, or holds no playable game.
    """

    def __init__(
        self, data_path: str | os.PathLike[str], split: str = "train", *, task_types: Sequence[str] | None = None
    ) -> None:
        self.split = resolve_split(split)
        root = Path(data_path).expanduser()
        if (root / "json_2.1.1").is_dir():
            root = root / "json_2.1.1"
        self.split_dir = root / self.split
        if not self.split_dir.is_dir():
            raise FileNotFoundError(
                f"no ALFWorld split folder {self.split_dir}; `alfworld-download` puts the games under $ALFWORLD_DATA/json_2.1.1"
            )
        kept = set(_check_task_types(task_types))
        self.tasks: list[dict[str, Any]] = []
        for traj_file in sorted(self.split_dir.rglob("traj_data.json")):
            trial = traj_file.parent
            game_file = trial / "game.tw-pddl"
            relative = str(trial.relative_to(self.split_dir))
            if "movable" in relative or "Sliced" in relative or not game_file.exists():
                continue  # the games ALFWorld itself skips
            traj = json.loads(traj_file.read_text())
            if traj.get("task_type") not in kept:
                continue
            game = json.loads(game_file.read_text())
            if not game.get("solvable"):
                continue
            match = _GOAL.search(game.get("grammar", ""))
            self.tasks.append(_task(game_file, self.split, traj, match.group(1) if match else "", self.split_dir))
        if not self.tasks:
            raise FileNotFoundError(f"no solvable ALFWorld game of types {sorted(kept)} under {self.split_dir}")

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return dict(self.tasks[index])
