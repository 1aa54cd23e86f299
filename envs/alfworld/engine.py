"""TextWorld's PDDL engine, the one ALFWorld plays its games with, in worker processes of a pool.

An :class:`Engine` is one worker process that holds TextWorld's ``PddlEnv`` (the Fast Downward
library under it) wrapped as ALFWorld wraps it (``AlfredDemangler``: "cabinet 3" rather than
``Cabinet_bar__plus_00_dot_38...``). It loads a ``game.tw-pddl`` file, answers commands with the
game's own feedback, and says whether the game is won and which commands are admissible; it also
gives the game's facts (for the scripted expert) and a Fast Downward plan (ALFWorld's "planner"
expert: a blind search, quick in small rooms, from seconds to over a minute in large kitchens), and
plays ALFWorld's handcoded expert on a game file as ``alfworld-generate`` does (:meth:`Engine.solve`). Unknown
commands get the engine's answer, "Nothing happens.". A process per engine gives a pool of engines
real parallelism (the engine is pure Python under the GIL), keeps a crash of the C++ planner out of
the caller, and lets a wedged engine be killed.

Two kinds of work are cached inside a worker, with identical results: translating a game's PDDL
(TextWorld translates it on every load and reset; the same text gives the same translation) and the
text grammar's parsing and context copying (TextWorld re-parses each command template and deep-copies
the whole game state for every admissible command). See :func:`_speed_up_textworld`.

Example:
    >>> import tempfile
    >>> from agentfly_envs.alfworld.games import GeneratedGames
    >>> engine = Engine.start()
    >>> state = engine.load(GeneratedGames(size=1, cache_dir=tempfile.mkdtemp())[0]["game_file"])
    >>> state.feedback.splitlines()[0]
    '-= Welcome to TextWorld, ALFRED! =-'
    >>> engine.step("dance").feedback
    'Nothing happens.'
    >>> engine.close()
"""

from __future__ import annotations

import copy
import functools
import os
import random
import select
import subprocess
import sys
import threading
import time
from typing import Any

import msgspec

from agentfly_env.resources.pool import PoolConfig, ResourceManager, ResourcePool, ResourceSpec

__all__ = ["DEFAULT_POOL_CONFIG", "ENGINE_POOL", "Engine", "EngineError", "GameState", "engine_pool"]

#: The pool name envs use unless told otherwise; size it in the manager's config under this name.
ENGINE_POOL = "alfworld_engine"

#: Defaults of an engine pool; a manager's config overrides them field by field. A worker process
#: takes about 80 MiB (150 MiB with a few games' translations cached) and 1-3 s to start.
DEFAULT_POOL_CONFIG = PoolConfig(size=4, prewarm=0, acquire_timeout_s=300.0)


class EngineError(RuntimeError):
    """The engine process failed to start, died, or missed its deadline (and was killed)."""


class GameState(msgspec.Struct, frozen=True):
    """What the game says after a load or a command.

    Attributes:
        feedback: The game's text: the intro after a load, the answer to a command after a step.
        won: Whether the goal holds now.
        admissible_commands: Every command that does something in this state, sorted.
    """

    feedback: str
    won: bool
    admissible_commands: list[str]


_REQUEST = msgspec.json.Encoder()
_REPLY = msgspec.json.Decoder(tuple[bool, Any])


class Engine:
    """One engine process. Calls are blocking and thread-safe; run them off the event loop.

    Build one with :meth:`start`.

    Attributes:
        state: The state after the last load or step (None before the first load).
        game_file: The game loaded last.
        walkthrough: The solution the game file carries (``[]`` if none): the path of ALFWorld's
            handcoded expert, in released and in generated games alike.
    """

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._lock = threading.Lock()
        self._buffer = b""
        self.state: GameState | None = None
        self.game_file: str | None = None
        self.walkthrough: list[str] = []

    @classmethod
    def start(cls, timeout_s: float = 120.0) -> Engine:
        """Start a worker process and wait until its engine is ready.

        Raises:
            EngineError: it did not come up within ``timeout_s``.
        """
        process = subprocess.Popen(
            [sys.executable, "-m", "agentfly_envs.alfworld.engine"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        engine = cls(process)
        try:
            engine.call("ping", timeout_s=timeout_s)
        except RuntimeError as error:  # the worker is up but its engine is not (a missing dependency)
            engine.close()
            raise EngineError(str(error)) from None
        return engine

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def call(self, operation: str, *args: Any, timeout_s: float | None = None) -> Any:
        """Run ``operation`` in the worker and return its result.

        Raises:
            EngineError: the worker died or exceeded ``timeout_s`` (it is killed then).
            RuntimeError: the operation raised inside the worker (the engine stays usable).
        """
        with self._lock:
            if not self.alive:
                raise EngineError(f"the engine process has exited (code {self._process.returncode})")
            assert self._process.stdin is not None
            try:
                self._process.stdin.write(_REQUEST.encode((operation, args)) + b"\n")
            except OSError as error:
                self.kill()
                raise EngineError(f"the engine process is gone ({error})") from None
            ok, value = _REPLY.decode(self._read_line(timeout_s))
        if not ok:
            raise RuntimeError(value)
        return value

    def _read_line(self, timeout_s: float | None) -> bytes:
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], remaining)[0]:
                self.kill()
                raise EngineError(f"the engine did not answer within {timeout_s:g} s and was stopped")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                code = self._process.wait()
                raise EngineError(f"the engine process died (exit code {code})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def load(self, game_file: str, timeout_s: float | None = 300.0) -> GameState:
        """Load a ``game.tw-pddl`` file (or restart it if it is the one loaded) and return the intro."""
        state, walkthrough = self.call("load", game_file, timeout_s=timeout_s)
        self.state = msgspec.convert(state, GameState)
        self.game_file = game_file
        self.walkthrough = list(walkthrough or [])
        return self.state

    def step(self, command: str, timeout_s: float | None = 60.0) -> GameState:
        """Play one command; anything the game does not know gets "Nothing happens."."""
        command = command.encode("utf-8", "replace").decode()  # lone surrogates cannot be sent (or be commands)
        self.state = msgspec.convert(self.call("step", command, timeout_s=timeout_s), GameState)
        return self.state

    def facts(self, timeout_s: float | None = 60.0) -> tuple[list[list[str]], dict[str, str]]:
        """The game's true facts now, each ``[predicate, *arguments]`` in the engine's lowercase PDDL
        names, and the name the game shows for each entity ("cabinet 3")."""
        facts, names = self.call("facts", timeout_s=timeout_s)
        return facts, names

    def plan(self, timeout_s: float | None = 120.0) -> list[str]:
        """A shortest solution from the current state, by the Fast Downward planner (empty if none)."""
        return list(self.call("plan", timeout_s=timeout_s))

    def solve(self, game_file: str, seed: int = 0, timeout_s: float | None = 300.0) -> list[str] | None:
        """Play ALFWorld's handcoded expert on a game as ``alfworld-generate`` checks a game: ``AlfredExpert``
        over the demangled engine, its next command played until the game is done; the path if it won,
        None if it failed or ran past its 200 steps. ``traj_data.json`` must lie beside the game file (the
        expert reads its targets there); ``seed`` seeds the expert's random choices."""
        path = self.call("solve", game_file, seed, timeout_s=timeout_s)
        return None if path is None else list(path)

    def kill(self) -> None:
        """Stop the process at once (a stuck or unwanted engine)."""
        if self.alive:
            self._process.kill()
        self._process.wait()

    def close(self) -> None:
        """Stop the worker: it exits when its input closes; killed if it does not within a few seconds."""
        if self.alive:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()


def engine_spec(start_timeout_s: float = 120.0) -> ResourceSpec[Engine]:
    """Pool hooks: start a worker, check it is alive before reuse, stop it when evicted."""
    return ResourceSpec(
        create=functools.partial(Engine.start, start_timeout_s),
        check=lambda engine: engine.alive,
        destroy=Engine.close,
        blocking=True,
    )


def engine_pool(manager: ResourceManager, *, name: str = ENGINE_POOL) -> ResourcePool[Engine]:
    """The manager's engine pool called ``name``, registered on first use (over :data:`DEFAULT_POOL_CONFIG`)."""
    return manager.shared_pool(name, lambda _: engine_spec(), default=DEFAULT_POOL_CONFIG, kind="game engines")


# ----------------------------------------------------------------------------------------- the worker


def _speed_up_textworld() -> None:
    """Cache what TextWorld's PDDL engine recomputes, without changing any result.

    * ``fast_downward.pddl2sas``: TextWorld translates a game's PDDL twice on load and twice on every
      reset; the translation depends on the text only (the task it returns is only read afterwards).
    * The grammar's parses (``textgen._parse_and_convert``, ``Rule.parse_conjunctive_query``): every
      admissible command's template and every feedback rule is re-parsed at each step. Parses are
      cached and a fresh copy of the parsed symbols handed out, since a derivation sets their context.
    * ``Symbol.copy`` deep-copies a symbol together with its context, which holds the whole game
      state; the copy now shares the state, the facts and the entity infos (which derivation only
      reads) and copies the variable and mapping dicts (which it updates), as ``copy_context`` does.
    """
    import fast_downward
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    fast_downward.pddl2sas = functools.lru_cache(maxsize=8)(fast_downward.pddl2sas)

    parse = textgen._parse_and_convert
    cached_parse = functools.lru_cache(maxsize=4096)(
        lambda text, rule_name, trace: parse(text, rule_name=rule_name, trace=trace)
    )

    def parse_and_convert(text: str, rule_name: str, trace: bool = False) -> Any:
        return copy.deepcopy(cached_parse(text, rule_name, trace))

    textgen._parse_and_convert = parse_and_convert
    Rule.parse_conjunctive_query = classmethod(functools.lru_cache(maxsize=4096)(Rule.parse_conjunctive_query.__func__))

    def copy_symbol(self: textgen.Symbol, context: dict[str, Any]) -> textgen.Symbol:
        shared = [value for ctx in (self.context, context) for key, value in ctx.items() if key in _SHARED]
        clone = copy.deepcopy(self, {id(value): value for value in shared})
        clone.context = textgen.copy_context(context)
        return clone

    def copy_context(context: dict[str, Any]) -> dict[str, Any]:
        return {
            "state": context["state"],
            "facts": context["facts"],
            "variables": dict(context["variables"]),
            "mapping": dict(context["mapping"]),
            "entity_infos": context["entity_infos"],
        }

    textgen.Symbol.copy = copy_symbol
    textgen.copy_context = copy_context


#: Context entries a grammar derivation reads but never changes.
_SHARED = frozenset({"state", "facts", "entity_infos"})


_OPERATIONS = frozenset({"ping", "load", "step", "facts", "plan", "solve"})


class _Player:
    """The worker's side: one ALFWorld game in TextWorld's PDDL engine."""

    def __init__(self) -> None:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
        from textworld.envs import PddlEnv

        _speed_up_textworld()
        self.env = AlfredDemangler(PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True)))
        self.game_file: str | None = None
        self._expert_env: Any = None  # built on the first solve

    @staticmethod
    def _state(state: Any) -> dict[str, Any]:
        return {
            "feedback": state.feedback,
            "won": bool(state["won"]),
            "admissible_commands": state["admissible_commands"],
        }

    def ping(self) -> int:
        return os.getpid()

    def load(self, game_file: str) -> tuple[dict[str, Any], list[str] | None]:
        if game_file != self.game_file:
            self.game_file = None  # a load that fails leaves no game behind
            self.env.load(game_file)
            self.game_file = game_file
        return self._state(self.env.reset()), self.env.unwrapped.walkthrough

    def step(self, command: str) -> dict[str, Any]:
        if self.game_file is None:
            raise RuntimeError("no game is loaded")
        state, _, _ = self.env.step(command)
        return self._state(state)

    def facts(self) -> tuple[list[list[str]], dict[str, str]]:
        if self.game_file is None:
            raise RuntimeError("no game is loaded")
        pddl = self.env.unwrapped
        facts = [[fact.name, *(variable.name for variable in fact.arguments)] for fact in pddl._pddl_state.facts]
        return facts, {key: info.name for key, info in pddl._entity_infos.items()}

    def plan(self) -> list[str]:
        if self.game_file is None:
            raise RuntimeError("no game is loaded")
        pddl = self.env.unwrapped
        return list(pddl._pddl_state.replan(pddl._entity_infos))

    def solve(self, game_file: str, seed: int) -> list[str] | None:
        if self._expert_env is None:  # the wrappers alfworld-generate plays its expert through
            import textworld
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos
            from textworld.envs import PddlEnv

            infos = textworld.EnvInfos(admissible_commands=True, extras=["gamefile"])
            self._expert_env = AlfredExpert(AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False)))
        env = self._expert_env
        random.seed(seed)  # the handcoded expert draws from the module-level generator
        env.load(game_file)  # a game that does not load is an error, not a game the expert lost
        state, done, path = env.reset(), False, []
        try:
            while not done:  # the expert raises once past its 200 steps, or when it runs out of subgoals
                command = state["extra.expert_plan"][0]
                state, _, done = env.step(command)
                path.append(command)
        except Exception:  # noqa: BLE001 - as alfworld-generate's is_solvable: any failure means unsolved
            return None
        return path


def _serve() -> None:
    """Answer requests, one JSON line each, until the input closes."""
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    # Whatever the engine prints (Fast Downward's C++ writes to fd 1) must not reach the reply stream.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the worker
    try:
        player: _Player | None = _Player()
        broken = ""
    except Exception as error:  # noqa: BLE001 - said in answer to every request, so the caller learns why
        player, broken = None, f"the engine could not start: {type(error).__name__}: {error}"
    for line in sys.stdin.buffer:
        try:
            operation, args = msgspec.json.decode(line)
            if player is None:
                raise RuntimeError(broken)
            if operation not in _OPERATIONS:
                raise ValueError(f"unknown operation {operation!r}")
            reply: tuple[bool, Any] = (True, getattr(player, operation)(*args))
        except Exception as error:  # noqa: BLE001 - reported to the caller; the worker carries on
            reply = (False, f"{type(error).__name__}: {error}")
        replies.write(_REQUEST.encode(reply) + b"\n")


if __name__ == "__main__":
    _serve()
