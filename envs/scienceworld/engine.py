"""One ScienceWorld simulator: a JVM running the ``scienceworld`` package's JAR, driven through py4j.

The stock ``scienceworld.ScienceWorldEnv.step`` asks the JVM for the look-around text, the inventory,
the task description and the whole list of valid action-object combinations after every action, and
brings that list across py4j one element per round trip: a few steps per second. Even the server's own
``PythonInterface.step`` renders the look-around and the inventory for its run history and prints a
debug listing of every possible referent before it answers. The engine here steps the world's
``AgentInterface`` directly (what that server method calls at its core) and reads the observation,
score and completion from its answer (four short round trips in all); the valid actions, the look and
the inventory are computed only when asked. The simulator's own step then takes nearly all the time,
most of it in its input parser.

The JVM is started by this module rather than by the package, because the package offers no way to
pass JVM options: the heap is bounded with ``-Xmx``, and identity hash codes are pinned (see
:attr:`JvmConfig.deterministic`). ``--die-on-broken-pipe`` makes the JVM exit when its stdin closes,
so no JVM outlives the Python process that started it, even one killed with SIGKILL; at a normal exit
the JVMs still running are killed at once.

Blocking py4j calls run in worker threads under a deadline (:meth:`ScienceWorldEngine.call`); a JVM
that dies, hangs past the deadline or drops its connection is killed and marked failed, and every
later call raises :class:`EngineFailure` at once.

Example:
    >>> config = JvmConfig(heap_mb=256)
    >>> config.command()[1:4]
    ['-Xmx256m', '-XX:+UnlockExperimentalVMOptions', '-XX:hashCode=2']
    >>> JvmConfig.from_value({"heap_mb": 512, "deterministic": False}).command()[1:3]
    ['-Xmx512m', '-XX:+UseSerialGC']
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import dataclasses
import json
import os
import select
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from py4j.java_gateway import GatewayParameters, JavaGateway, find_jar_path
from py4j.protocol import Py4JError, Py4JJavaError
from scienceworld.constants import BASEPATH, JAR_PATH

__all__ = ["EngineFailure", "GameState", "JvmConfig", "Loaded", "ScienceWorldEngine", "SimulatorError"]

T = TypeVar("T")

#: Inputs the server answers itself, before any time step (help texts and the task description).
_SERVER_COMMANDS = frozenset({"help", "objects", "task"})
#: The server's answer to an action the simulator answered with nothing.
_EMPTY_ANSWER = (
    "Unknown action.  Type 'help' for a list of actions, and 'objects' for a list of possible object referents. "
)


@dataclass(frozen=True)
class JvmConfig:
    """How each simulator JVM is started and how long its calls may take.

    Example:
        >>> JvmConfig().heap_mb
        384
    """

    heap_mb: int = 384
    """Java heap limit (``-Xmx``). The JVM's resident memory is about this plus 60-100 MB; 256 is
    enough for the gold paths of all 30 task types."""
    deterministic: bool = True
    """Pin identity hash codes (``-XX:hashCode=2``). ScienceWorld iterates sets of objects hashed by
    identity when it updates the world (heat flow, room listings) and when it plans gold paths, so
    without this the same action sequence can give different observations in different JVMs.
    Seeded determinism needs it. It costs throughput, since every identity-hashed set degrades to one
    bucket: ``agentfly-bench --suite scienceworld`` measured about 160-175 against 265 gold-path steps/s
    per JVM on the quiet 2-core development machine. Turn it off where exact replay does not matter."""
    java_options: tuple[str, ...] = ("-XX:+UseSerialGC",)
    """Further JVM options. The serial collector keeps a small heap small and the JVM lean on threads."""
    java_path: str = "java"
    """The ``java`` executable (Java 17 or newer)."""
    start_timeout_s: float = 60.0
    """How long a JVM may take to start and announce its port."""
    call_timeout_s: float = 30.0
    """Longest one call may take (a load with gold-path generation is the slowest, about a second);
    past it the JVM is killed and the engine fails."""

    def __post_init__(self) -> None:
        if self.heap_mb < 64:
            raise ValueError(f"heap_mb must be at least 64, got {self.heap_mb}")
        if self.start_timeout_s <= 0 or self.call_timeout_s <= 0:
            raise ValueError("start_timeout_s and call_timeout_s must be positive")

    @classmethod
    def from_value(cls, value: JvmConfig | Mapping[str, Any] | None) -> JvmConfig:
        """A config from itself, a mapping of its fields (e.g. a YAML section) or None (the defaults).

        Raises:
            ValueError: a key is not a field, or a value has the wrong type or is out of range.
        """
        if value is None or isinstance(value, JvmConfig):
            return value or cls()
        unknown = sorted(set(value) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"invalid JVM config: unknown keys {unknown}")
        try:
            return msgspec.convert(dict(value), cls)
        except msgspec.ValidationError as error:
            raise ValueError(f"invalid JVM config: {error}") from None

    def command(self) -> list[str]:
        """The command line that starts one simulator JVM as a py4j gateway on a free port."""
        pinned = ["-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2"] if self.deterministic else []
        classpath = os.pathsep.join((find_jar_path(), JAR_PATH))
        return [
            self.java_path,
            f"-Xmx{self.heap_mb}m",
            *pinned,
            *self.java_options,
            "-classpath",
            classpath,
            "py4j.GatewayServer",
            "--die-on-broken-pipe",
            "0",
        ]


class EngineFailure(RuntimeError):
    """The simulator's JVM died, hung past its deadline, or could not be started; it is unusable."""


class SimulatorError(RuntimeError):
    """The simulator raised a Java exception for one call; the JVM itself is still running."""


class GameState(msgspec.Struct, frozen=True):
    """The game after an action.

    Attributes:
        observation: What the simulator answered.
        score: The task score, 0..1; negative when the task has failed (e.g. focus on the wrong thing).
        completed: The task is done and won.
        moves: Actions taken since the task was loaded.
    """

    observation: str
    score: float
    completed: bool
    moves: int

    @property
    def failed(self) -> bool:
        """The task can no longer be won."""
        return self.score < 0

    @property
    def progress(self) -> float:
        """The score as reward progress: clipped to 0..1, so a failed task counts as 0."""
        return min(max(self.score, 0.0), 1.0)


class Loaded(msgspec.Struct, frozen=True):
    """A freshly loaded task: its description, the first look around, and the gold path if asked."""

    description: str
    state: GameState
    gold: tuple[str, ...] | None = None


_running: weakref.WeakSet[ScienceWorldEngine] = weakref.WeakSet()


@atexit.register
def _kill_running_engines() -> None:
    """Kills the JVMs still running when Python exits, rather than leave them to notice their closed stdin."""
    for engine in list(_running):
        engine._reap()


class ScienceWorldEngine:
    """One simulator JVM and the calls an episode makes on it.

    The sync methods block (use them from worker threads, or where blocking is fine); :meth:`call`
    runs any of them off the event loop under the deadline.

    Args:
        config: How to start the JVM and how long calls may take.

    Raises:
        EngineFailure: the JVM did not start within ``config.start_timeout_s``.
    """

    def __init__(self, config: JvmConfig | None = None) -> None:
        self.config = config or JvmConfig()
        self.failure: str | None = None
        self._output: collections.deque[str] = collections.deque(maxlen=20)  # the JVM's last lines
        self._lock = threading.Lock()  # one py4j conversation at a time
        self._agent: Any = None  # the loaded world's AgentInterface (a py4j reference), for the fast step
        self._last = GameState("", 0.0, False, 0)
        self._process = subprocess.Popen(
            self.config.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=BASEPATH,
        )
        try:
            port = self._read_port()
            # No memory management: py4j's finalizers would message a JVM that may be dead by then;
            # the few Java objects handed over (lists) are detached by hand.
            parameters = GatewayParameters(
                port=port, read_timeout=self.config.start_timeout_s, enable_memory_management=False
            )
            self._gateway = JavaGateway(gateway_parameters=parameters)
            self._server = self._gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()  # loads classes: slow
            # Later calls get the call deadline: py4j opens new connections with the parameters' timeout.
            parameters.read_timeout = self.config.call_timeout_s
            self._gateway.close()
        except BaseException:
            self._reap()
            raise
        # Drain the JVM's output for its whole life (loads print a lot; a full pipe would stall it).
        self._drainer = threading.Thread(target=self._drain, name=f"scienceworld-jvm-{self.pid}", daemon=True)
        self._drainer.start()
        _running.add(self)

    def _read_port(self) -> int:
        """Waits for the line where the gateway announces its port; JVM warnings may come first.

        Reads the raw pipe (not the buffered file) so that ``select`` never misses buffered lines.
        """
        stdout = self._process.stdout
        assert stdout is not None
        end = time.monotonic() + self.config.start_timeout_s
        pending = b""
        while True:
            ready, _, _ = select.select([stdout], [], [], max(end - time.monotonic(), 0.0))
            if not ready:
                raise EngineFailure(f"the JVM did not start within {self.config.start_timeout_s:g} s")
            chunk = os.read(stdout.fileno(), 4096)
            if not chunk:
                self._process.wait()
                raise EngineFailure(f"the JVM exited at start ({self._exit_text()}): {self.last_output()}")
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for number, line in enumerate(lines):
                text = line.decode(errors="replace").strip()
                if text.isdigit():
                    self._output.extend(item.decode(errors="replace") for item in [*lines[number + 1 :], pending])
                    return int(text)
                self._output.append(text)

    def _drain(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        for raw in iter(stdout.readline, b""):
            self._output.append(raw.decode(errors="replace").rstrip())

    # ------------------------------------------------------------------ state

    @property
    def pid(self) -> int:
        """The JVM's process id."""
        return self._process.pid

    @property
    def alive(self) -> bool:
        """The JVM runs and no call has failed."""
        return self.failure is None and self._process.poll() is None

    def last_output(self) -> str:
        """The JVM's last lines of output (for error messages); empty when it printed nothing."""
        return " | ".join(line for line in self._output if line)[-500:]

    def _exit_text(self) -> str:
        code = self._process.poll()
        if code is None:
            return "still running"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    # ------------------------------------------------------------------ blocking calls

    def _run(self, function: Callable[[], T]) -> T:
        """Runs py4j calls; a broken connection or deadline fails the engine and kills the JVM."""
        with self._lock:
            if self.failure is not None:
                raise EngineFailure(self.failure)
            started = time.monotonic()
            try:
                return function()
            except Py4JJavaError as error:
                message = str(error.java_exception)
                if "OutOfMemoryError" in message:  # the JVM cannot be trusted after this
                    raise self._fail(f"ran out of heap ({self.config.heap_mb} MB)") from None
                raise SimulatorError(message) from None
            except (Py4JError, OSError) as error:
                # py4j logs a read timeout and raises a bare Py4JError: tell the two apart by the clock.
                if time.monotonic() - started >= self.config.call_timeout_s:
                    raise self._fail(f"gave no answer within {self.config.call_timeout_s:g} s") from None
                raise self._fail(f"lost the connection ({type(error).__name__})", settle_s=1.0) from None

    def _fail(self, reason: str, *, settle_s: float = 0.0) -> EngineFailure:
        """Marks the engine failed, kills the JVM, and returns the error to raise.

        Args:
            reason: What went wrong, completing "the JVM ... it <reason>".
            settle_s: How long to let a JVM that dropped its connection finish dying, so the error
                can say how it ended.
        """
        if self.failure is None:
            try:
                if settle_s:
                    self._process.wait(timeout=settle_s)
            except subprocess.TimeoutExpired:
                pass
            running = self._process.poll() is None
            detail = "the JVM was killed after it" if running else f"the JVM died ({self._exit_text()}); it"
            self.failure = f"{detail} {reason}"
            output = self.last_output()
            if not running and output:
                self.failure += f"; its last output: {output}"
            self._process.kill()
        return EngineFailure(self.failure)

    def load(self, task: str, variation: int, simplifications: str = "", gold: bool = False) -> Loaded:
        """Loads a task variation and looks around, as the stock ``reset`` does.

        Args:
            task: A task name the JAR knows (see :mod:`agentfly_envs.scienceworld.tasks`).
            variation: The variation index.
            simplifications: Comma-separated simplifications, or ``"easy"`` for all of them.
            gold: Also plan the gold action sequence (about a second); the world is rebuilt afterwards,
                so the state is the same as without it.

        Raises:
            ValueError: the simulator refused the task or variation.
        """

        def run() -> Loaded:
            error = self._load_world(task, variation, simplifications, gold)
            if error:
                raise ValueError(f"ScienceWorld refused {task!r} variation {variation}: {error}")
            plan = tuple(self._java_list(self._server.getGoldActionSequence())) if gold else None
            description = self._server.getTaskDescription()
            return Loaded(description, self._act("look around"), plan)

        return self._run(run)

    def _load_world(self, task: str, variation: int, simplifications: str, gold: bool) -> str:
        """The server's ``load``; holds the new world's ``AgentInterface`` unless the load was refused.

        Returns:
            The server's error text, empty when the world loaded.
        """
        if self._agent is not None:  # forgotten first: a load that raises leaves no stale world behind
            self._gateway.detach(self._agent)
            self._agent = None
        self._last = GameState("", 0.0, False, 0)
        error = self._server.load(task, variation, simplifications, gold)
        if not error:
            option = self._server.agentInterface()
            self._agent = option.get()
            self._gateway.detach(option)
        return error

    def _java_list(self, java_list: Any) -> list[Any]:
        """A Java list's items, copied; the JVM then forgets the list."""
        items = list(java_list)
        self._gateway.detach(java_list)
        return items

    def _act(self, command: str) -> GameState:
        """One action through the world's ``AgentInterface.step``, as the server's ``step`` does it.

        The server's extras are left out: the look-around and inventory it renders for its run history
        (never read here) and its debug printing. Its three special inputs, and any input before a
        world is loaded (it answers with an error), still go to the server, which answers them without
        a time step: the state stays as it was.
        """
        if self._agent is None or command.strip().lower() in _SERVER_COMMANDS:
            self._last = msgspec.structs.replace(self._last, observation=self._server.step(command))
            return self._last
        answer = self._agent.step(command)  # a Scala (observation, score, completed)
        # One transfer for all three: Tuple3's text is "(<observation>,<score>,<completed>)", and only
        # the observation can hold a comma.
        observation, score, completed = answer.toString()[1:-1].rsplit(",", 2)
        self._gateway.detach(answer)
        moves = int(self._agent.getCurIterations())
        self._last = GameState(observation or _EMPTY_ANSWER, float(score), completed == "true", moves)
        return self._last

    def step(self, command: str) -> GameState:
        """Does one action; the fast path: no valid-action list, no look or inventory."""
        return self._run(lambda: self._act(command))

    def look(self) -> str:
        """Looks around without spending a move."""
        return self._run(self._server.freeActionLook)

    def inventory(self) -> str:
        """Lists the inventory without spending a move."""
        return self._run(self._server.freeActionInventory)

    def valid_actions(self) -> list[str]:
        """Every valid action-object combination in the current state, sorted (one JSON transfer)."""
        payload = self._run(self._server.getValidActionObjectCombinationsJSON)
        return sorted({item["action"] for item in json.loads(payload)["validActions"]})

    def variation_splits(self, task: str) -> tuple[int, int, int]:
        """``(variations, first dev variation, first test variation)`` of a task, as the JAR splits them."""

        def run() -> tuple[int, int, int]:
            self._load_world(task, 0, "", False)
            count = int(self._server.getTaskMaxVariations(task))
            dev, test = (
                self._java_list(self._server.getVariationsDev()),
                self._java_list(self._server.getVariationsTest()),
            )
            return count, min(dev), min(test)

        return self._run(run)

    def simplification_names(self) -> list[str]:
        """The simplifications the JAR offers."""
        return self._run(lambda: self._server.getPossibleSimplifications().split(", "))

    def healthy(self) -> bool:
        """The pool's health check: the JVM runs and answers a trivial call."""
        if not self.alive:
            return False
        try:
            self._run(self._server.getNumMoves)
        except (EngineFailure, SimulatorError):
            return False
        return True

    # ------------------------------------------------------------------ async

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """Runs a blocking method of this engine in a worker thread, under the deadline.

        Calls are not queued here: the episode that leases the engine makes them one at a time.

        Raises:
            EngineFailure: the engine failed now or before (the JVM is killed).
            SimulatorError: the simulator raised for this call; the engine stays usable.
            ValueError: from :meth:`load`.
        """
        if self.failure is not None:
            raise EngineFailure(self.failure)
        try:
            # py4j's own read timeout normally fires first; this one also covers a stuck connect.
            async with asyncio.timeout(self.config.call_timeout_s + 5.0):
                return await asyncio.to_thread(function, *args)
        except TimeoutError:
            raise self._fail(f"gave no answer within {self.config.call_timeout_s:g} s") from None

    def close(self) -> None:
        """Kills the JVM and waits for it; idempotent."""
        with contextlib.suppress(Py4JError, OSError):  # a dead JVM's sockets may already be gone
            self._gateway.close()
        self._reap()

    def _reap(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        drainer = getattr(self, "_drainer", None)  # none yet when the start failed
        if drainer is not None:
            drainer.join(timeout=5)  # it stops at the pipe's end; closing the pipe under it would raise
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
