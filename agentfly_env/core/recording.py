"""Trajectories to JSONL, so that nothing already written is lost when a process dies.

Each trajectory is encoded whole and written as one line with a single ``write`` on a file opened in
append mode, then flushed (and fsynced, unless ``durable=False``). A crash can therefore at worst leave
one partial line at the end; :func:`read_trajectories` skips such a tail with a warning and reads every
complete line before it. A full disk raises :class:`RecordingError` naming the file, after which the
lines already written are still intact.

Example:
    >>> import tempfile, os
    >>> from agentfly_env.core.types import Trajectory
    >>> path = os.path.join(tempfile.mkdtemp(), "runs.jsonl")
    >>> with TrajectoryWriter(path) as writer:
    ...     writer.write(Trajectory(env_id="AgentFly/Math-v0", observation="2+2?"))
    >>> [t.observation for t in read_trajectories(path)]
    ['2+2?']
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import msgspec

from agentfly_env.core.types import Trajectory


class RecordingError(OSError):
    """A trajectory could not be written (disk full, file gone); earlier lines are intact."""


class TrajectoryWriter:
    """Appends trajectories to a JSONL file, one line each.

    Args:
        path: The file; created with its parent folders if missing, appended to if present.
        durable: fsync after every trajectory, so a power loss keeps them too (a few ms each).
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = True) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self._encoder = msgspec.json.Encoder()
        # Unbuffered: each line goes to the OS in one write call, never half-held in a Python buffer.
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self.count = 0
        self._repair_tail()

    def _repair_tail(self) -> None:
        """Start on a fresh line if a previous writer died mid-line, so the new lines stay readable."""
        size = self.path.stat().st_size
        if size:
            with open(self.path, "rb") as handle:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":
                    self._file.write(b"\n")

    def write(self, trajectory: Trajectory) -> None:
        """Append one trajectory.

        Raises:
            RecordingError: when the OS refuses the write (e.g. no space left).
        """
        line = self._encoder.encode(trajectory) + b"\n"
        try:
            written = self._file.write(line)
            if written != len(line):  # a short write on a full disk; finish the line or fail loudly
                raise OSError(28, "short write (disk full?)")
            if self.durable:
                os.fsync(self._file.fileno())
        except OSError as error:
            raise RecordingError(
                error.errno, f"cannot write trajectory to {self.path}: {error.strerror or error}"
            ) from error
        self.count += 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def read_trajectories(path: str | os.PathLike[str]) -> Iterator[Trajectory]:
    """Read trajectories back; a partial line (from a crash mid-write) is skipped with a warning.

    Raises:
        ValueError: for a damaged line that is not the file's last or a crash-repaired one.
    """
    decoder = msgspec.json.Decoder(Trajectory)
    with open(path, "rb") as handle:
        lines = handle.read().split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield decoder.decode(line)
        except msgspec.DecodeError as error:
            # A writer that dies mid-line leaves a fragment; the next writer starts a new line after it.
            is_fragment = number == len(lines) or not line.endswith(b"}")
            if not is_fragment:
                raise ValueError(f"{path}:{number}: damaged trajectory line ({error})") from None
            warnings.warn(f"{path}:{number}: skipping a partial line left by an interrupted write", stacklevel=2)
