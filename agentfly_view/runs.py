"""Run directories as the viewer reads them: indexed once, re-read only where they grew.

A run directory holds JSONL files that may still be growing (a run in progress) or end in a partial
line (a run killed mid-write): ``metrics.jsonl`` (one record per training step), one or more
``trajectories.jsonl`` (the training run's own, and ``eval/``, ``stages/<name>/eval/`` of its
evaluations; ``agentfly-play`` writes one too) and, beside each, the trainer's ``tokens.jsonl`` (see
:mod:`agentfly_train.tokens_log`).

Each file is indexed by the byte offsets of its complete lines, once, a chunk at a time (a caller can
give :meth:`JsonlFile.refresh` a time budget and get what is indexed so far); later refreshes read
only the bytes appended since, so a live run costs a ``stat`` per poll. An episode list needs a few
numbers per episode (reward, success, turns, ...): they are decoded with a partial msgspec type that
skips the texts, and an episode is decoded whole only when it is opened. Lines that do not decode are
skipped and counted; a last line without its newline is left for the next refresh (a writer may be
halfway through it) and reported as such.

Only files inside a run directory are ever read: the API names runs by number and files by their
place in the run, never by a path the client chose, and every read checks where the file it opened
really is (:func:`open_inside`), so a symlink to a file elsewhere, or a file swapped for one after it was
indexed, is refused. A token record is checked against its own length before its mask is expanded.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "trajectories.jsonl").write_text(
    ...     '{"env_id": "AgentFly/Math-v0", "observation": "2+2?", "episode_id": "0-0-0",'
    ...     ' "steps": [{"action": "4", "observation": "", "reward": 1.0, "terminated": true,'
    ...     ' "truncated": false, "success": true}]}\\n{"env_id": "AgentFly/Ma'
    ... )
    >>> run = RunDir(folder)
    >>> episodes = run.sources()["."].episodes
    >>> len(episodes), episodes.corrupt, episodes.partial_tail, episodes.row(0)["reward"]
    (1, 0, True, 1.0)
"""

from __future__ import annotations

import bisect
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np

from agentfly_env.core.types import EpisodeSummary, ToolStats, ToolTally, Trajectory
from agentfly_train.run_files import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    EVAL_DIR,
    FINAL_MODEL_DIR,
    METRICS_FILE,
    SUMMARY_FILE,
    TENSORBOARD_DIR,
    TOKENS_FILE,
    TRAJECTORIES_FILE,
    WARM_START_DIR,
)
from agentfly_train.tokens_log import TokenRecord, TokenRow, mask_from_runs

#: Bytes read per step of indexing: a reader waits for one step at most.
CHUNK_BYTES = 1 << 20
#: How deep under a run directory trajectory files are looked for (``stages/<name>/eval/`` is 3 deep).
SEARCH_DEPTH = 4
#: Folders of a run that hold no records (model weights), not walked.
SKIPPED_FOLDERS = {CHECKPOINTS_DIR, FINAL_MODEL_DIR, WARM_START_DIR, TENSORBOARD_DIR, "wandb"}
#: Where Linux shows what an open file descriptor really is.
_FD_LINKS = Path("/proc/self/fd")


class OutsideRunError(PermissionError):
    """A file of a run that is really somewhere else (a symlink out of the run)."""


def open_inside(path: Path, root: Path) -> BinaryIO:
    """``path`` opened for reading, if the file opened is inside ``root`` (a resolved folder).

    Where the file is comes from the open descriptor itself on Linux, so a link swapped in between a check
    and the open cannot slip through; elsewhere from the path resolved just after the open.

    Raises:
        OutsideRunError: The file is outside ``root``.
        OSError: It cannot be opened (``FileNotFoundError`` when it does not exist).
    """
    handle = open(path, "rb")  # noqa: SIM115 - returned open, or closed below
    try:
        descriptor = _FD_LINKS / str(handle.fileno())
        where = Path(os.readlink(descriptor)) if _FD_LINKS.is_dir() else path.resolve()
        if not where.is_relative_to(root):
            raise OutsideRunError(f"{path.name} is outside the run ({path} leads elsewhere): not read")
    except BaseException:
        handle.close()
        raise
    return handle


class JsonlFile:
    """A JSONL file read incrementally: offsets of its good lines, a count of the bad ones.

    Subclasses say what a line decodes to (``brief``, a msgspec type) and keep what they need of it
    (:meth:`_add`). Thread-safe: the web server refreshes from its worker threads.

    Args:
        path: The file (it may not exist yet).
        root: The run's folder, resolved: a file found outside it is read as missing (default: the
            file's own folder).
    """

    brief: Any = dict

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        self.root = root or path.parent.resolve()
        self._lock = threading.RLock()
        self._decoder = msgspec.json.Decoder(self.brief)
        self._reset()

    def _reset(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.corrupt = 0
        self.consumed = 0  # bytes indexed, up to and including the last newline
        self.size = 0  # the file's size when last looked at
        self._identity: tuple[int, int] | None = None
        self._tail_only = True  # what is left after ``consumed`` is at most one line without its newline

    @property
    def caught_up(self) -> bool:
        """Every complete line the file had when last looked at is indexed."""
        return self.size == self.consumed or self._tail_only

    @property
    def partial_tail(self) -> bool:
        """The file ends in a line without its newline (being written now, or cut by a crash)."""
        return self.size > self.consumed and self._tail_only

    def __len__(self) -> int:
        return len(self.starts)

    def refresh(self, budget_s: float | None = None) -> bool:
        """Index the lines appended since the last call, a chunk at a time; True when anything changed.

        Args:
            budget_s: Stop after the chunk that passes this many seconds, caught up or not (the rest is
                indexed by later calls; :attr:`caught_up` says which). None: until caught up.

        A file that shrank or was replaced (a fresh run in the same folder) is indexed from the start.
        The lock is held a chunk at a time, so readers wait for one chunk at most.
        """
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        changed = False
        while True:
            with self._lock:
                step = self._next_chunk()
            changed |= step
            if not step or self.caught_up or (deadline is not None and time.perf_counter() > deadline):
                return changed

    def _next_chunk(self) -> bool:
        try:
            handle = open_inside(self.path, self.root)
        except (FileNotFoundError, OutsideRunError):
            changed = self.size > 0 or len(self) > 0
            self._reset()
            return changed
        with handle:
            stat = os.fstat(handle.fileno())
            identity = (stat.st_dev, stat.st_ino)
            if identity != self._identity or stat.st_size < self.consumed:
                self._reset()
                self._identity = identity
            grown = stat.st_size != self.size
            self.size = stat.st_size
            if self.caught_up and not grown:
                return False
            handle.seek(self.consumed)
            data = handle.read(min(CHUNK_BYTES, self.size - self.consumed))
            while b"\n" not in data and self.consumed + len(data) < self.size:  # a line longer than a chunk
                data += handle.read(min(CHUNK_BYTES, self.size - self.consumed - len(data)))
        end = data.rfind(b"\n") + 1
        self._tail_only = self.consumed + len(data) >= self.size  # the read reached the end
        if end:
            self._index(data[:end], self.consumed)
            self.consumed += end
        return bool(end) or grown

    def _index(self, data: bytes, base: int) -> None:
        decode = self._decode
        good = []
        position = base
        for line in data.split(b"\n")[:-1]:
            try:
                good.append(decode(line))
            except (msgspec.DecodeError, UnicodeDecodeError):  # not JSON, not a record, or not UTF-8
                self.corrupt += bool(line.strip())  # an empty line is no damage
            else:
                self.starts.append(position)
                self.ends.append(position + len(line))
            position += len(line) + 1
        self._add(good)

    def _decode(self, line: bytes) -> Any:
        """What is kept of a line; raises :class:`msgspec.DecodeError` for a line that is not a record."""
        return self._decoder.decode(line)

    def _add(self, briefs: list[Any]) -> None:
        """Keep what is needed of good lines, in order (their offsets are already kept)."""

    def line(self, number: int) -> bytes:
        """The raw bytes of good line ``number``.

        Raises:
            OutsideRunError: The file was swapped for a link out of the run since it was indexed.
        """
        with self._lock, open_inside(self.path, self.root) as handle:
            handle.seek(self.starts[number])
            return handle.read(self.ends[number] - self.starts[number])

    def status(self) -> dict[str, Any]:
        return {
            "lines": len(self),
            "corrupt": self.corrupt,
            "partial_tail": self.partial_tail,
            "bytes": self.size,
            "indexed_bytes": self.consumed,
        }


class MetricsFile(JsonlFile):
    """``metrics.jsonl``: one record per training step."""

    def _reset(self) -> None:
        super()._reset()
        self.records: list[dict[str, Any]] = []

    def _add(self, briefs: list[dict[str, Any]]) -> None:
        self.records += briefs

    def series(self) -> dict[str, dict[str, list[float]]]:
        """Every numeric metric as ``{name: {"x": steps, "y": values}}``."""
        with self._lock:
            out: dict[str, dict[str, list[float]]] = {}
            for record in self.records:
                step = record.get("step")
                if not isinstance(step, (int, float)):
                    continue
                for key, value in record.items():
                    if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                        series = out.setdefault(key, {"x": [], "y": []})
                        series["x"].append(step)
                        series["y"].append(value)
            return out


class _ResultBrief(msgspec.Struct):
    """What per-tool stats read of a tool result (its output is skipped unread)."""

    name: str
    error: str | None = None
    duration_s: float = 0.0


class _StepBrief(msgspec.Struct):
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    success: bool = False
    truncation_reason: str | None = None
    tool_calls: list[msgspec.Raw] = []
    tool_results: list[_ResultBrief] = []
    errors: dict[str, int] = {}


class _TrajectoryBrief(msgspec.Struct):
    """What the episode list needs of a trajectory line; msgspec skips the rest (the texts) unread.

    The fields a :class:`~agentfly_env.core.types.Trajectory` requires are required here too, so a line that
    lists is a line that opens.
    """

    env_id: str
    observation: msgspec.Raw
    episode_id: str | None = None
    steps: list[_StepBrief] = []
    failure: str | None = None


#: Training episode ids are ``{step}-{group}-{chain}``, the step counted from 0 (metrics count from 1).
_TRAINING_ID = re.compile(r"^(\d+)-")
#: The outcome of an episode that ended normally (no truncation).
ENDED = "ended"
#: The outcome of an episode a driver ended failed (``Trajectory.failure`` says why).
FAILED = "failed"


@dataclass(frozen=True)
class EpisodeFilter:
    """Which episodes to list; None or "" means any.

    Attributes:
        env: The trajectory's env id.
        success: True for solved episodes, False for failed ones.
        min_reward: Total reward at least this.
        max_reward: Total reward at most this.
        outcome: :data:`ENDED`, or the truncation reason (``max_turns``, ``max_tokens``, the env's own).
        step: The training step (as in metrics.jsonl, from 1).
        text: Text anywhere in the episode's record (case-insensitive).
    """

    env: str | None = None
    success: bool | None = None
    min_reward: float | None = None
    max_reward: float | None = None
    outcome: str | None = None
    step: int | None = None
    text: str | None = None


class EpisodeIndex(JsonlFile):
    """``trajectories.jsonl``: per-episode numbers for listing, filtering and curves; episodes on demand.

    Args:
        path: The file.
        max_turns: The run's ``rollout.max_turns``, to name the reason of an episode the trainer cut:
            a trajectory that did not end was cut at the turn limit or by the token budget.
    """

    brief = _TrajectoryBrief

    def __init__(self, path: Path, max_turns: int | None = None, root: Path | None = None) -> None:
        self.max_turns = max_turns
        super().__init__(path, root)

    def _reset(self) -> None:
        super()._reset()
        self.envs: list[str] = []
        self.outcomes: list[str] = []
        self._codes: dict[tuple[int, str], int] = {}
        self.episode_ids: list[str | None] = []
        self._columns: dict[str, list[Any]] = {
            name: [] for name in ("env", "reward", "success", "outcome", "step", "turns", "tool_calls", "parse_errors")
        }
        self._arrays: dict[str, np.ndarray] | None = None
        self._search: tuple[str, int, np.ndarray] | None = None
        self._tools = ToolTally()
        self._tool_stats: tuple[int, dict[str, ToolStats]] = (0, {})

    def _code(self, table: list[str], kind: int, value: str) -> int:
        code = self._codes.get((kind, value))
        if code is None:
            code = self._codes[(kind, value)] = len(table)
            table.append(value)
        return code

    def _add(self, briefs: list[_TrajectoryBrief]) -> None:
        # One tight loop: at 100k episodes this, not the decoding, is most of the indexing time.
        c = self._columns
        envs, rewards, successes, outcomes, steps_of = c["env"], c["reward"], c["success"], c["outcome"], c["step"]
        turns, tool_calls, parse_errors = c["turns"], c["tool_calls"], c["parse_errors"]
        codes, max_turns = self._codes, self.max_turns
        for brief in briefs:
            steps = brief.steps
            summary = EpisodeSummary.of(steps)  # what every report says of an episode, from its steps
            if brief.failure is not None:  # the driver ended it failed: its env died, a program raised
                outcome = FAILED
            elif not steps:
                outcome = "unfinished"
            elif summary.terminated:
                outcome = ENDED
            elif summary.truncated:
                outcome = summary.truncation_reason or "truncated"
            elif max_turns is not None:  # the trainer cut it: turns or tokens ran out
                outcome = "max_turns" if len(steps) >= max_turns else "max_tokens"
            else:
                outcome = "unfinished"
            env = codes.get((0, brief.env_id))
            envs.append(env if env is not None else self._code(self.envs, 0, brief.env_id))
            code = codes.get((1, outcome))
            outcomes.append(code if code is not None else self._code(self.outcomes, 1, outcome))
            episode_id = brief.episode_id
            match = _TRAINING_ID.match(episode_id) if episode_id else None
            steps_of.append(int(match.group(1)) + 1 if match else -1)
            rewards.append(summary.reward)
            successes.append(summary.success)
            turns.append(summary.turns)
            tool_calls.append(summary.tool_calls)
            parse_errors.append(summary.parse_errors)
            self.episode_ids.append(episode_id)
            self._tools.add(steps)
        self._arrays = None

    def tool_stats(self) -> dict[str, ToolStats]:
        """Each tool's calls per episode, error and timeout rates and latency over the file's episodes (the
        last answer kept while the file has not grown)."""
        with self._lock:
            if self._tool_stats[0] != len(self):
                self._tool_stats = (len(self), self._tools.stats())
            return self._tool_stats[1]

    def arrays(self) -> dict[str, np.ndarray]:
        """The columns as numpy arrays (rebuilt after the file grew)."""
        with self._lock:
            if self._arrays is None:
                self._arrays = {name: np.asarray(values) for name, values in self._columns.items()}
            return self._arrays

    def row(self, number: int) -> dict[str, Any]:
        """Episode ``number``'s line in the episode list."""
        with self._lock:
            c = self._columns
            step = c["step"][number]
            return {
                "index": number,
                "episode_id": self.episode_ids[number],
                "env": self.envs[c["env"][number]],
                "reward": c["reward"][number],
                "success": c["success"][number],
                "outcome": self.outcomes[c["outcome"][number]],
                "step": step if step >= 0 else None,
                "turns": c["turns"][number],
                "tool_calls": c["tool_calls"][number],
                "parse_errors": c["parse_errors"][number],
            }

    def select(self, where: EpisodeFilter) -> np.ndarray:
        """The numbers of the episodes that pass the filter, in file order."""
        with self._lock:
            a = self.arrays()
            keep = np.ones(len(self), dtype=bool)
            if where.env:
                keep &= a["env"] == (self.envs.index(where.env) if where.env in self.envs else -1)
            if where.success is not None:
                keep &= a["success"] == where.success
            if where.min_reward is not None:
                keep &= a["reward"] >= where.min_reward
            if where.max_reward is not None:
                keep &= a["reward"] <= where.max_reward
            if where.outcome:
                keep &= a["outcome"] == (self.outcomes.index(where.outcome) if where.outcome in self.outcomes else -1)
            if where.step is not None:
                keep &= a["step"] == where.step
            if where.text:
                keep &= self._matching(where.text)
            return np.flatnonzero(keep)

    def _matching(self, text: str) -> np.ndarray:
        """A mask of the episodes whose line holds ``text`` (as JSON writes it; ASCII letters in any case).

        One scan of the file's bytes, skipping to the next line after each hit; the last query's answer
        is kept while the file has not grown.
        """
        if self._search is not None and self._search[:2] == (text, len(self)):
            return self._search[2]
        found = np.zeros(len(self), dtype=bool)
        needle = msgspec.json.encode(text)[1:-1].lower()
        if self.consumed and needle:
            with open_inside(self.path, self.root) as handle:
                data = handle.read(self.consumed).lower()
            starts, ends = self.starts, self.ends
            position = data.find(needle)
            while position != -1:
                number = bisect.bisect_right(starts, position) - 1
                if number >= 0 and position < ends[number]:
                    found[number] = True
                    position = data.find(needle, ends[number])
                else:  # in a damaged line
                    position = data.find(needle, position + 1)
        self._search = (text, len(self), found)
        return found

    def facets(self) -> dict[str, Any]:
        """What the filters can choose from: env ids, outcomes, the range of steps."""
        with self._lock:
            steps = [s for s in set(self._columns["step"]) if s >= 0]
            return {
                "envs": sorted(self.envs),
                "outcomes": sorted(self.outcomes),
                "steps": [min(steps), max(steps)] if steps else None,
            }

    def curves(self, buckets: int = 50) -> dict[str, Any]:
        """Per-env means by training step (or, for runs without steps, by consecutive bucket of episodes).

        Returns:
            ``{"x_label": ..., "envs": {env: {"x": [...], "reward": [...], "success": [...], "turns": [...],
            "tool_calls": [...]}}}``.
        """
        with self._lock:
            a = self.arrays()
            n = len(self)
            if not n:
                return {"x_label": "step", "envs": {}}
            if (a["step"] >= 0).any():
                x, label, valid = a["step"], "step", a["step"] >= 0
            else:
                size = max(1, -(-n // buckets))
                x, label, valid = np.arange(n) // size, f"episodes (groups of {size})", np.ones(n, dtype=bool)
            out: dict[str, dict[str, list[float]]] = {}
            for code, env in enumerate(self.envs):
                rows = valid & (a["env"] == code)
                if not rows.any():
                    continue
                keys, inverse, counts = np.unique(x[rows], return_inverse=True, return_counts=True)
                series: dict[str, list[float]] = {"x": keys.tolist()}
                for name in ("reward", "success", "turns", "tool_calls"):
                    sums = np.bincount(inverse, weights=a[name][rows].astype(float), minlength=len(keys))
                    series[name] = (sums / counts).tolist()
                out[env] = series
            return {"x_label": label, "envs": out}

    def trajectory(self, number: int) -> dict[str, Any]:
        """Episode ``number`` decoded whole (as the :class:`~agentfly_env.core.types.Trajectory` it was written as)."""
        return msgspec.to_builtins(msgspec.json.decode(self.line(number), type=Trajectory))


class _TokenBrief(msgspec.Struct):
    episode_id: str


#: How the trainer's encoder starts a token record (its first field).
_TOKEN_PREFIX = b'{"episode_id":"'


class TokenIndex(JsonlFile):
    """``tokens.jsonl``: where each episode's token record is.

    An id can have several records: a resumed run plays again the steps after its checkpoint (the
    trainer trims trajectories.jsonl to the checkpoint, not this file), a fresh run in a used folder
    starts trajectories.jsonl anew, and evaluations append to theirs. In each case the extra records are
    the earlier ones, so trajectories and records of an id are paired from the last backwards.

    Indexing reads each line's episode id from its start, where the trainer's encoder writes it, rather
    than parsing the token lists; a line that starts otherwise is decoded. A damaged record is found
    when its episode is opened (:meth:`tokens` says so).
    """

    brief = _TokenBrief

    def _reset(self) -> None:
        super()._reset()
        self.by_id: dict[str, list[int]] = {}

    def _decode(self, line: bytes) -> str:
        start = len(_TOKEN_PREFIX)
        end = line.find(b'"', start)
        if line.startswith(_TOKEN_PREFIX) and end > 0 and b"\\" not in line[start:end] and line.endswith(b"}"):
            return line[start:end].decode()
        return self._decoder.decode(line).episode_id

    def _add(self, briefs: list[str]) -> None:
        first = len(self.starts) - len(briefs)
        for number, episode_id in enumerate(briefs, first):
            self.by_id.setdefault(episode_id, []).append(number)

    def tokens(self, episode_id: str, later: int = 0) -> dict[str, Any] | None:
        """The episode's tokens for display: text pieces, mask, and log-probs aligned with the tokens
        (``{"damaged": why}`` when its record does not decode; None when there is none).

        An agent program's episode (a record with rows) has its own sequence empty and, under ``"rows"``,
        each row's display in order, with ``"mismatch"``: whether the row began because the conversation
        did not go on as the model wrote it.

        Args:
            episode_id: The trajectory's id.
            later: How many trajectories of the same id come after this one.
        """
        with self._lock:
            numbers = self.by_id.get(episode_id, [])
            if later >= len(numbers):
                return None
            number = numbers[-1 - later]
            try:
                record = msgspec.json.decode(self.line(number), type=TokenRecord)
                shown = _display(record)
                if record.rows:
                    shown["rows"] = [{**_display(row), "mismatch": row.mismatch} for row in record.rows]
            except (msgspec.DecodeError, UnicodeDecodeError, ValueError) as error:
                return {"damaged": f"{self.path.name}, line of {episode_id}: {error}"}
        return shown


def _display(sequence: TokenRecord | TokenRow) -> dict[str, Any]:
    """One stored token sequence for display: the mask expanded, log-probs put beside the tokens they scored.

    Raises:
        ValueError: The mask's runs do not cover the tokens exactly (a damaged record: expanding runs that
            add up to more would build a mask of any size the file asks for).
    """
    runs = sequence.mask_runs
    if any(length < 0 for length in runs) or sum(runs) != len(sequence.token_ids):
        raise ValueError(f"the mask's runs add up to {sum(runs)}, for {len(sequence.token_ids)} tokens")
    mask = mask_from_runs(runs)
    generated = iter(sequence.logprobs)
    return {
        "token_ids": sequence.token_ids,
        "pieces": sequence.pieces,
        "mask": mask,
        "logprobs": [next(generated, None) if bit else None for bit in mask],
    }


@dataclass
class EpisodeSource:
    """One folder of a run with a ``trajectories.jsonl`` and maybe its ``tokens.jsonl`` (the list does not
    need the tokens: they are indexed after the episodes, and when an episode is opened)."""

    episodes: EpisodeIndex
    tokens: TokenIndex

    def refresh(self, budget_s: float | None = None) -> bool:
        return self.episodes.refresh(budget_s)

    def episode(self, number: int) -> dict[str, Any]:
        """Episode ``number``: its trajectory, its line in the list, and its tokens when the run kept them."""
        trajectory = self.episodes.trajectory(number)
        self.tokens.refresh()  # whole: the episode's record may be anywhere in the file
        episode_id = trajectory.get("episode_id")
        later = self.episodes.episode_ids[number + 1 :].count(episode_id)
        return {
            "row": self.episodes.row(number),
            "trajectory": trajectory,
            "tokens": self.tokens.tokens(episode_id, later) if episode_id is not None else None,
        }

    def status(self) -> dict[str, Any]:
        return {
            "episodes": len(self.episodes),
            "corrupt": self.episodes.corrupt,
            "partial_tail": self.episodes.partial_tail,
            "has_tokens": self.tokens.path.exists(),
            "bytes": self.episodes.size,
            "indexed_bytes": self.episodes.consumed,
            "indexing": not self.episodes.caught_up,
        }


class RunDir:
    """One run directory: its config, metrics and episode sources.

    Args:
        root: The folder (a ``trajectories.jsonl`` given instead stands for its folder).
        name: How the page names it (default: the path as given).
    """

    def __init__(self, root: str | os.PathLike[str], name: str | None = None) -> None:
        given = Path(root)
        if given.is_file():
            given = given.parent
        self.name = name or str(given)
        self.root = given.resolve()
        self.config = self._read_json(CONFIG_FILE)
        self.metrics = MetricsFile(self.root / METRICS_FILE, self.root)
        self._sources: dict[str, EpisodeSource] = {}
        self._lock = threading.Lock()
        self._tensorboard: tuple[tuple[tuple[str, int], ...], dict[str, dict[str, list[float]]]] = ((), {})

    def _read_json(self, relative: str) -> dict[str, Any] | None:
        try:
            with open_inside(self.root / relative, self.root) as handle:
                value = json.loads(handle.read())
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def inside(self, relative: str) -> Path | None:
        """``relative`` under the run's folder, or None when it resolves (``..``, a symlink) elsewhere."""
        path = (self.root / relative).resolve()
        return path if path.is_relative_to(self.root) else None

    def metric_series(self) -> dict[str, dict[str, list[float]]]:
        """Every metric by step: ``metrics.jsonl``'s, or the TensorBoard scalars of a run that logged only
        there (the OpenRLHF backend)."""
        self.metrics.refresh()
        return self.metrics.series() if len(self.metrics) else self._tensorboard_series()

    def _tensorboard_series(self) -> dict[str, dict[str, list[float]]]:
        """Scalars of ``tensorboard/`` and its subfolders (``train/`` dropped from tags), read with
        TensorBoard's own reader where it is installed (the ``train`` extra), again when a file grew."""
        top = self.inside(TENSORBOARD_DIR)
        if top is None or not top.is_dir():
            return {}
        folders = [
            f for f in (top, *sorted(top.iterdir())) if f.is_dir() and self.inside(str(f.relative_to(self.root)))
        ]
        files = {
            f: [path for path in sorted(f.glob("events.out.tfevents.*")) if path.resolve().is_relative_to(self.root)]
            for f in folders
        }
        folders = [f for f in folders if files[f]]
        signature = tuple((str(path), path.stat().st_size) for f in folders for path in files[f])
        if signature == self._tensorboard[0]:
            return self._tensorboard[1]
        try:
            from tensorboard.backend.event_processing import event_accumulator
        except ImportError:
            return {}
        series: dict[str, dict[str, list[float]]] = {}
        for folder in folders:
            events = event_accumulator.EventAccumulator(str(folder), size_guidance={event_accumulator.SCALARS: 0})
            events.Reload()
            prefix = "" if len(folders) == 1 else f"{folder.relative_to(top).as_posix()}/"
            for tag in events.Tags()["scalars"]:
                scalars = events.Scalars(tag)
                series[prefix + tag.removeprefix("train/")] = {
                    "x": [e.step for e in scalars],
                    "y": [e.value for e in scalars],
                }
        self._tensorboard = (signature, series)
        return series

    def _discover(self) -> list[str]:
        """Folders (relative, POSIX) that hold a trajectories.jsonl inside the run."""
        found = []
        for folder, subfolders, files in os.walk(self.root):
            depth = len(Path(folder).relative_to(self.root).parts)
            subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_FOLDERS and depth < SEARCH_DEPTH)
            if TRAJECTORIES_FILE in files:
                relative = Path(folder).relative_to(self.root).as_posix()
                if self.inside(f"{relative}/{TRAJECTORIES_FILE}") is not None:
                    found.append(relative)
        return found

    def sources(self, budget_s: float | None = None) -> dict[str, EpisodeSource]:
        """Every episode source, refreshed: new ones found, appended lines indexed (for ``budget_s`` seconds
        at most, when given: a large run's index then grows over several calls)."""
        deadline = None if budget_s is None else time.perf_counter() + budget_s
        with self._lock:
            rollout = (self.config or {}).get("rollout", {})
            max_turns = rollout.get("max_turns") if isinstance(rollout, dict) else None
            for relative in self._discover():
                if relative not in self._sources:
                    folder = self.root / relative
                    self._sources[relative] = EpisodeSource(
                        EpisodeIndex(folder / TRAJECTORIES_FILE, max_turns, self.root),  # evaluations: rollout's too
                        TokenIndex(folder / TOKENS_FILE, self.root),
                    )
            sources = dict(self._sources)
        for source in sources.values():
            source.refresh(None if deadline is None else max(0.0, deadline - time.perf_counter()))
        return sources

    def describe(self, budget_s: float | None = None) -> dict[str, Any]:
        """The run for the page: its name, what it trained, its sources and metrics (``budget_s``: as
        :meth:`sources`)."""
        self.metrics.refresh()
        if self.config is None:  # the viewer may have started before the run wrote it
            self.config = self._read_json(CONFIG_FILE)
        config = self.config or {}
        summary = self._read_json(f"{EVAL_DIR}/{SUMMARY_FILE}")
        return {
            "name": self.name,
            "path": str(self.root),
            "algo": config.get("algo"),
            "env": (config.get("env") or {}).get("id"),
            "model": (config.get("model") or {}).get("path"),
            "metrics": self.metrics.status(),
            "sources": {name: source.status() for name, source in self.sources(budget_s).items()},
            "eval_summary": summary,
        }
