"""``agentfly-bench --suite chaos``: a soak of many episodes while a driver kills backends at random.

Three lanes play episodes at once, on loopback only:

- **serve**: ``agentfly-serve`` (its own process) serving ``AgentFly/Mix-v0`` over Math, Code (bubblewrap
  sandboxes), WebShop, ScienceWorld (JVMs), ALFWorld (TextWorld engine workers) and Search (its
  ``retrieve`` cached in a ``redis-server``), played by ``AgentFly/Remote-v0`` clients through a TCP
  relay in this process, so a connection can be cut under a live session;
- **ray**: the Ray env pool (:func:`~agentfly_env.resources.distributed.make_env_pool`, ``backend="ray"``) over
  Math and Code, in actors of a local Ray cluster;
- **train**: the trainer itself (:class:`~agentfly_train.backends.local.LocalTrainer`, GRPO) taking steps on
  Math episodes whose envs are Ray actors of its own pool, a small random model sampling: its rollout,
  failure handling, update and checkpoints under the same kills. An episode whose env actor died must end
  failed with its reason and be left out of the update, and the run must take every step.

Every few seconds the driver kills one backend, the kinds in turn: a sandbox (``bwrap``), a JVM, an
engine worker, the Redis server (restarted on its port shortly after), the server process (restarted
at once, as a supervisor would), a Ray env actor's process, or a client's connection (cut at the
relay). A process victim is the busiest of its kind, the one most likely in the middle of an episode.
The client of a served env has no expert of its own, so each env is played by a short script read off
its task (:func:`scripted_turn`): a calculator call and the answer, the reference solution run and
submitted, a search and a purchase, a few moves in the simulator or the household, a retrieval and
the answer.

What the run reports:

- episodes played, by lane and env, and the failed ones by reason: an error out of ``reset`` or
  ``step``, a truncation that is not the turn budget (``remote_disconnected``, ``engine_failure``,
  ``sandbox_failure``), a tool call whose backend broke or timed out. An episode cannot fail without a
  reason, and one of the envs whose script always solves (Math, Code, Search) that ends unsolved
  without one is counted as a *silent* failure: a broken backend scored as the model's mistake;
- trajectories: every episode that started is written with the project's
  :class:`~agentfly_env.core.recording.TrajectoryWriter` (fsynced), then the file is read back with
  :func:`~agentfly_env.core.recording.read_trajectories` (typed, validating) and each record compared with
  what was written: *lost* (written, not found) and *corrupted* (damaged, or not what was written);
- leaks: every process that started below this one during the soak (noted as they appear, so the orphans of a killed
  server count too) still running once everything was shut down, the processes left unreaped
  (zombies) before and after shutdown, and the sessions and env leases the server and the Ray pool
  still held once every client had gone;
- kills by kind and, per kill, the recovery time: from the kill to the end of the first clean
  episode that started after it on what the kill hit (the lane; the env, for the backends of one).

``run(quick, **options)`` takes the soak's size (:class:`Config`: ``duration_s``, ``episodes``,
``clients``, ``kill_every_s``, ``lanes``, ``kinds``, ``serve_envs``, ...): ``agentfly-bench --suite chaos
--suite-options '{"duration_s": 900}'`` soaks for 15 minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.table import Table

from agentfly_bench.measure import descendants
from agentfly_env.core.recording import TrajectoryWriter, read_trajectories
from agentfly_env.core.types import ToolCall, Trajectory
from agentfly_env.resources.pool import ResourceBrokenError
from agentfly_env.resources.redis_server import RedisServer, free_port
from agentfly_env.tools.parsing import get_parser

DESCRIPTION = (
    "chaos soak: Math/Code/WebShop/ScienceWorld/ALFWorld/Search episodes through agentfly-serve and the Ray pool "
    "while sandboxes, JVMs, engine workers, Redis, the server, Ray actors and connections are killed"
)

REPO_ROOT = Path(__file__).resolve().parents[2]
KINDS = ("sandbox", "jvm", "engine", "redis", "server", "connection", "ray_actor")
LANES = ("serve", "ray", "train")
#: Endings that are the episode's own (its turn budget, the simulator's move budget), not failures.
NORMAL_TRUNCATIONS = frozenset({"max_turns", "step_limit"})
#: Tool errors that mean the backend broke under the episode.
BACKEND_TOOL_ERRORS = frozenset({"resource_broken", "timeout"})
#: The envs a served episode may be played on (``serve_envs`` picks some), as Mix-v0 components.
SERVE_ENVS: dict[str, dict[str, Any]] = {
    "math": {"id": "AgentFly/Math-v0", "options": {"difficulty": 0}},
    "code": {"id": "AgentFly/Code-v0"},
    "webshop": {"id": "AgentFly/WebShop-v0"},
    "scienceworld": {"id": "AgentFly/ScienceWorld-v0", "options": {"max_turns": 3}},
    "alfworld": {"id": "AgentFly/ALFWorld-v0", "options": {"max_turns": 3}},
    "search": {"id": "AgentFly/Search-v0"},  # its cache: the soak's Redis
}
RAY_ENVS = ("math", "code")
HERMES = get_parser("hermes")
SCIENCEWORLD_MOVES = ("look around", "inventory", "look around")
ALFWORLD_MOVES = ("look", "inventory", "look")
#: The envs whose script always solves the task: an episode of theirs that ends unsolved without a
#: failure reason is a failure the env did not report.
SCRIPT_SOLVES = frozenset({"AgentFly/Math-v0", "AgentFly/Code-v0", "AgentFly/Search-v0"})
#: The env whose backend each kind of process is (kinds not here hit a whole lane).
KIND_ENVS = {"sandbox": "AgentFly/Code-v0", "jvm": "AgentFly/ScienceWorld-v0", "engine": "AgentFly/ALFWorld-v0"}
#: Most turns the driver plays in one episode; every env here ends sooner by its own budget.
MAX_TURNS = 16

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------- the policy


def scripted_turn(env_id: str, task: dict[str, Any], turn: int) -> str:
    """The driver's move in ``turn`` of an episode of ``env_id``, from its task alone.

    A client of a served env has only what crosses the wire (the task), not the env's expert, so each
    env gets a short script that reaches its backend on every turn and ends the episode.

    Example:
        >>> task = {"answer": "2", "metadata": {"expression": "4 - 2"}}
        >>> scripted_turn("AgentFly/Math-v0", task, 1)
        '<answer>2</answer>'
    """
    if env_id == "AgentFly/Math-v0":
        if turn == 0:
            return HERMES.format_call(ToolCall("calculator", {"expression": task["metadata"]["expression"]}))
        return f"<answer>{task['answer']}</answer>"
    if env_id == "AgentFly/Code-v0":
        if turn == 0:
            return HERMES.format_call(ToolCall("code_interpreter", {"code": task["solution"]}))
        return f"<answer>```python\n{task['solution']}\n```</answer>"
    if env_id == "AgentFly/Search-v0":
        if turn == 0:
            return HERMES.format_call(ToolCall("retrieve", {"query": task["question"]}))
        return f"<answer>{task['golden_answers'][0]}</answer>"
    if env_id == "AgentFly/WebShop-v0":
        goal = task["goal"]
        moves = (f"search[{goal['name']}]", f"click[{goal['asin'].lower()}]")
        return moves[turn] if turn < len(moves) else "click[buy now]"
    if env_id in ("AgentFly/ScienceWorld-v0", "AgentFly/ALFWorld-v0"):
        moves = SCIENCEWORLD_MOVES if env_id == "AgentFly/ScienceWorld-v0" else ALFWORLD_MOVES
        return HERMES.format_call(ToolCall("act", {"command": moves[turn % len(moves)]}))
    raise ValueError(f"no script for {env_id}")


def failure_reason(trajectory: Trajectory) -> tuple[str, str] | None:
    """Why a finished episode counts as failed, and the details (None: it ended on its own terms).

    Example:
        >>> from agentfly_env.core.types import Step
        >>> cut = Step(action="a", observation="o", reward=0.0, terminated=False, truncated=True, truncation_reason="engine_failed: exit -9")
        >>> failure_reason(Trajectory("AgentFly/ALFWorld-v0", "obs", steps=[cut]))
        ('truncated: engine_failed', 'engine_failed: exit -9')
    """
    for step in trajectory.steps:
        broken = [result for result in step.tool_results if result.error in BACKEND_TOOL_ERRORS]
        if broken:
            return f"tool {broken[0].error}", broken[0].output
    if not trajectory.done:
        return "not done", f"{len(trajectory.steps)} steps"
    last = trajectory.steps[-1]
    reason = last.truncation_reason
    if last.truncated and reason not in NORMAL_TRUNCATIONS:
        return f"truncated: {str(reason).partition(':')[0]}", str(reason)
    return None


def _error_reason(stage: str, error: BaseException) -> tuple[str, str]:
    code = getattr(error, "code", None)  # RemoteEnvError: OpenEnv's error code
    return f"{stage}: {type(error).__name__}" + (f" {code}" if code else ""), str(error)


# ---------------------------------------------------------------------------------------- the records


@dataclass
class Episode:
    """One episode as the driver saw it (``started``/``ended``: monotonic seconds)."""

    lane: str
    number: int
    seed: int
    started: float
    env: str | None = None  # None until its reset answered
    ended: float | None = None
    reason: str | None = None  # why it failed (None: it did not)
    detail: str | None = None  # what the error or the truncation said
    solved: bool = False


@dataclass
class Kill:
    """One kill: what, where, when (monotonic seconds) and how long until a clean episode after it."""

    kind: str
    lane: str
    at: float
    victim: str
    env: str | None = None  # the env whose backend it was (None: the whole lane)
    recovery_s: float | None = None


@dataclass
class Soak:
    """What the run has seen so far, and the writer every episode goes through."""

    writer: TrajectoryWriter
    started: float = field(default_factory=time.monotonic)
    episodes: list[Episode] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)
    seeds: Iterator[int] = field(default_factory=itertools.count)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    seen: dict[int, tuple[str, str]] = field(default_factory=dict)  # pid -> (start time, command line)
    # Processes below this one before the soak began (another caller's, e.g. an earlier test's pooled engines in the
    # same pytest worker): neither killed nor counted as the soak's leaks.
    before: frozenset[int] = field(default_factory=lambda: frozenset(descendants(os.getpid())))
    cpu: dict[int, int] = field(default_factory=dict)  # pid -> CPU ticks when last noted
    server_restarts: int = 0
    train_actor_pids: set[int] = field(default_factory=set)  # the train lane's env actors (its kills' lane)
    train_steps: list[dict[str, Any]] = field(default_factory=list)  # what each of its steps reported
    train_error: str | None = None  # why the train lane's run died, if it did

    def begin(self, lane: str) -> Episode:
        episode = Episode(lane, len(self.episodes), next(self.seeds), time.monotonic())
        self.episodes.append(episode)
        return episode

    def record(
        self, episode: Episode, trajectory: Trajectory | None, error: tuple[str, str] | None, *, judge: bool = True
    ) -> None:
        """The episode's end: its reason, and its trajectory written (it stays in memory as a digest). With
        ``judge``, a trajectory that ended short of its own terms is a failure too (:func:`failure_reason`)."""
        episode.ended = time.monotonic()
        if trajectory is not None:
            trajectory.episode_id = f"{episode.lane}-{episode.number}"
            episode.env, episode.solved = trajectory.env_id, trajectory.success
            self.writer.write(trajectory)
            self.digests[trajectory.episode_id] = _digest(trajectory)
        if error is None and not judge:
            return
        failure = error or (failure_reason(trajectory) if trajectory is not None else ("no trajectory", ""))
        if failure is not None:
            episode.reason, episode.detail = failure[0], " ".join(failure[1].split())[:300]


def _digest(trajectory: Trajectory) -> str:
    return hashlib.sha256(msgspec.json.encode(trajectory)).hexdigest()


async def play(soak: Soak, episode: Episode, env: Any) -> None:
    """One episode on ``env`` (anything with ``areset``/``astep``), recorded whatever happens.

    The trajectory is built from the typed records ``info["start"]`` and ``info["step"]``, as trainers
    build it, so an env in a Ray actor and a remote one are recorded alike.

    Raises:
        ResourceBrokenError: The env's backend (a Ray actor) broke; the episode is recorded first.
    """
    trajectory: Trajectory | None = None
    error: tuple[str, str] | None = None
    try:
        try:
            _, info = await env.areset(seed=episode.seed)
        except Exception as exception:
            error = _error_reason("reset", exception)
            raise
        trajectory = Trajectory.begin(info["start"])
        for turn in range(MAX_TURNS):
            action = scripted_turn(trajectory.env_id, trajectory.task, turn)
            started = time.perf_counter()
            try:
                _, _, terminated, truncated, info = await env.astep(action)
            except Exception as exception:
                error = _error_reason("step", exception)
                raise
            trajectory.add(info["step"], time.perf_counter() - started)
            if terminated or truncated:
                break
    except (Exception, asyncio.CancelledError) as exception:
        if error is None:  # cancelled at the end of the run
            error = f"stopped: {type(exception).__name__}", "the soak ended before the episode did"
        if isinstance(exception, ResourceBrokenError | asyncio.CancelledError):
            raise
    finally:
        soak.record(episode, trajectory, error)


# ---------------------------------------------------------------------------------------- processes


class _Process(msgspec.Struct, frozen=True):
    state: str
    start: str  # clock ticks after boot: with the pid, names one process
    cpu: int  # user + system clock ticks so far
    command: str


def _proc(pid: int) -> _Process | None:
    """What /proc says of a process, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    name = stat.split("(", 1)[1].rsplit(")", 1)[0]
    return _Process(fields[0], fields[19], int(fields[11]) + int(fields[12]), command or name)


def kind_of(command: str) -> str | None:
    """Which killable backend a command line is (None: none the driver kills).

    Example:
        >>> kind_of("bwrap --unshare-pid --die-with-parent ... python -m agentfly_envs.code.worker")
        'sandbox'
        >>> kind_of("/usr/lib/jvm/java-17-openjdk-amd64/bin/java -Xmx384m -cp scienceworld.jar ..."), kind_of("ls")
        ('jvm', None)
    """
    program = Path(command.split(" ", 1)[0]).name
    if program == "bwrap":
        return "sandbox"
    if program == "java":
        return "jvm"
    if command.startswith("ray::EnvActor"):
        return "ray_actor"
    if "agentfly_envs.alfworld.engine" in command:
        return "engine"
    return None


def note_processes(soak: Soak) -> dict[int, tuple[str, int]]:
    """Every process below this one now that the soak started (noted in ``soak.seen``), by pid: its command
    line and the CPU ticks it used since it was last noted (how busy it is)."""
    found = {}
    for pid in _started_by_soak(soak):
        info = _proc(pid)
        if info is not None:
            soak.seen.setdefault(pid, (info.start, info.command))
            found[pid] = (info.command, info.cpu - soak.cpu.get(pid, 0))
            soak.cpu[pid] = info.cpu
    return found


def still_alive(soak: Soak) -> list[dict[str, Any]]:
    """The processes ever noted below this one that are still alive (the same process: same start time)."""
    alive = []
    for pid, (start, command) in soak.seen.items():
        info = _proc(pid)
        if info is not None and info.start == start:
            alive.append({"pid": pid, "state": info.state, "command": command[:160]})
    return alive


def zombies_below(soak: Soak) -> list[str]:
    """Command names of the processes the soak started below this one that died and nobody reaped."""
    return [info.command[:80] for pid in _started_by_soak(soak) if (info := _proc(pid)) and info.state == "Z"]


def _started_by_soak(soak: Soak) -> list[int]:
    return [pid for pid in descendants(os.getpid()) if pid not in soak.before]


# ---------------------------------------------------------------------------------------- the serve lane


class Relay:
    """A TCP relay on loopback between the clients and the server, so the driver can cut a connection."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        link = (writer, up_writer)
        self.links.add(link)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self.links.discard(link)
            for end in link:
                end.transport.abort()

    def cut(self, rng: random.Random) -> bool:
        """Abort a random live connection at both ends (no close handshake); False when there is none."""
        if not self.links:
            return False
        for end in rng.choice(sorted(self.links, key=id)):
            end.transport.abort()
        return True

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self.links):
            for end in link:
                end.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            await writer.drain()
    writer.transport.abort()  # one side gone: the other goes too, as a dropped TCP connection would


class Supervised:
    """``agentfly-serve`` in a child process, restarted on its port whenever it dies (as systemd would)."""

    def __init__(self, env_kwargs: dict[str, Any], max_sessions: int, log: Path) -> None:
        self.port = free_port()
        self.command = [sys.executable, "-m", "agentfly_env.serve.cli", "AgentFly/Mix-v0", "--port", str(self.port)]
        self.command += ["--env-kwargs", json.dumps(env_kwargs), "--max-sessions", str(max_sessions)]
        # --send-gold: the soak's client plays each task's known solution (it reads the answer from the reset).
        self.command += ["--idle-timeout", "60", "--queue-timeout", "60", "--send-gold"]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.ready = asyncio.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.ready.clear()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=log, cwd=REPO_ROOT)
        deadline = time.monotonic() + 120
        while not await asyncio.to_thread(self._healthy):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"agentfly-serve did not start (exit {self.process.poll()}); see {self.log}")
            await asyncio.sleep(0.2)
        self.ready.set()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2):
                return True
        except OSError:
            return False

    def sessions(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/sessions", timeout=10) as reply:
            return json.loads(reply.read())

    async def supervise(self, soak: Soak) -> None:
        """Restart the server whenever it dies (until cancelled)."""
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                soak.server_restarts += 1
                await self.start()
            await asyncio.sleep(0.1)

    def kill(self) -> int | None:
        process = self.process
        if process is None or process.poll() is not None or not self.ready.is_set():
            return None
        self.ready.clear()
        process.kill()
        process.wait()
        return process.pid

    async def stop(self) -> None:
        """SIGTERM: uvicorn shuts down and the env pool closes, every sandbox and JVM with it."""
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, 60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def serve_client(soak: Soak, url: str, server: Supervised) -> None:
    """One client: Remote-v0 episodes, one after another, until the soak stops."""
    import gymnasium as gym

    env = gym.make("AgentFly/Remote-v0", url=url, message_timeout_s=120.0).unwrapped
    try:
        while not soak.stopping.is_set():
            await server.ready.wait()
            episode = soak.begin("serve")
            await play(soak, episode, env)
            if episode.reason is not None and episode.reason.startswith("reset"):
                await asyncio.sleep(0.5)  # the server is restarting: give it a moment
    finally:
        await env.aclose()


# ---------------------------------------------------------------------------------------- the ray lane


async def ray_worker(soak: Soak, pool: Any) -> None:
    """Episodes on leased Ray env actors; a lease whose actor died goes back broken (the pool replaces it)."""
    while not soak.stopping.is_set():
        lease = await pool.acquire(timeout=180)
        broken = False
        try:
            await play(soak, soak.begin("ray"), lease.resource)
        except ResourceBrokenError:
            broken = True
        finally:
            await lease.release(broken=broken)


# ---------------------------------------------------------------------------------------- the train lane

#: What the train lane reports of each training step.
TRAIN_STEP_METRICS = ("episodes", "failed_episodes", "left_out_episodes", "reward_mean", "step_s")


async def train_lane(soak: Soak, out_dir: Path, actors: int) -> None:
    """Training steps until the soak stops, in one thread of their own (the trainer is sync and keeps its
    env pool on that thread's event loop); each step's episodes are recorded here, on the soak's loop."""
    loop = asyncio.get_running_loop()
    try:
        await asyncio.to_thread(_train, soak, out_dir, actors, loop)
    except Exception as error:  # the run died: what the lane exists to catch, so it is reported, not raised
        soak.train_error = f"{type(error).__name__}: {error}"
        logger.exception("the train lane's run died")


def _record_step(soak: Soak, started: float, episodes: list[Any]) -> None:
    """A training step's episodes as the lane's: one fails only when its env died or raised (the trainer's own
    ending, a turn or token budget, is normal for a model that has learned nothing)."""
    for played in episodes:
        episode = Episode("train", len(soak.episodes), played.seed, started)
        soak.episodes.append(episode)
        error = ("env failed", played.failure) if played.failure is not None else None
        soak.record(episode, played.trajectory, error, judge=False)


def _train(soak: Soak, out_dir: Path, actors: int, loop: asyncio.AbstractEventLoop) -> None:
    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.config import Config
    from agentfly_train.models import load_tokenizer, random_model, resolve_model_path

    tokenizer = load_tokenizer(resolve_model_path("smollm2-135m"))
    config = Config.from_dict(
        {
            "algo": "grpo",
            "out_dir": str(out_dir),
            "env": {"id": "AgentFly/Math-v0", "options": {"difficulty": 0}, "pool": "ray"},
            "model": {"threads": 1},
            "rollout": {
                "generator": "transformers",
                "prompts_per_step": max(1, actors // 2),
                "samples_per_prompt": 2,
                "max_turns": 2,
                "max_new_tokens": 8,
                "max_episode_tokens": 512,
            },
            "train": {"steps": 1_000_000, "save_every": 1, "micro_batch_size": 8},
            "eval": {"stages": False},
            "log": {"tensorboard": False, "plot": False, "progress": False},
        }
    )
    trainer = LocalTrainer(config, model=random_model(tokenizer), tokenizer=tokenizer)
    acquire = trainer.envs.acquire

    async def noting_acquire(*args: Any, **kwargs: Any) -> Any:  # whose actor a killed process was
        lease = await acquire(*args, **kwargs)
        soak.train_actor_pids.add(lease.resource.location["pid"])
        return lease

    trainer.envs.acquire = noting_acquire  # type: ignore[method-assign]
    try:
        while not soak.stopping.is_set():
            started = time.monotonic()
            metrics = trainer.train_step()
            trainer.save_checkpoint()
            steps = {key: metrics[key] for key in TRAIN_STEP_METRICS}
            loop.call_soon_threadsafe(soak.train_steps.append, steps)
            loop.call_soon_threadsafe(_record_step, soak, started, list(trainer.last_episodes))
    finally:
        trainer.close()


# ---------------------------------------------------------------------------------------- the driver


class Driver:
    """Kills one backend every ``every_s`` seconds, the kinds in turn.

    A kind is skipped while it has no victim, or while its last kill has not been recovered from (no
    clean episode has started and ended since on what it hit): a starved machine then sees fewer
    kills rather than a server killed each time it comes up, before any client got to play.
    """

    def __init__(self, soak: Soak, kinds: Sequence[str], every_s: float, rng: random.Random, **targets: Any) -> None:
        self.soak, self.kinds, self.every_s, self.rng = soak, list(kinds), every_s, rng
        self.server: Supervised | None = targets.get("server")
        self.relay: Relay | None = targets.get("relay")
        self.redis: RedisServer | None = targets.get("redis")
        #: The lane a Ray actor that no lane has leased yet belongs to (killed while it started).
        self.new_actor_lane: str = targets.get("new_actor_lane", "ray")
        self.redis_down_s = 2.0
        self._redis_down = False
        self._restarts: set[asyncio.Task[None]] = set()

    async def run(self, until: float) -> None:
        turn = 0
        while time.monotonic() < until and not self.soak.stopping.is_set():
            await asyncio.sleep(self.every_s * self.rng.uniform(0.5, 1.5))
            for offset in range(len(self.kinds)):
                kind = self.kinds[(turn + offset) % len(self.kinds)]
                if await self.kill(kind):
                    turn += offset + 1
                    break

    async def kill(self, kind: str) -> bool:
        now = time.monotonic()
        last = next((kill for kill in reversed(self.soak.kills) if kill.kind == kind), None)
        if last is not None and _recovery(last, self.soak.episodes) is None:
            return False
        if kind == "connection":
            if self.relay is None or not self.relay.cut(self.rng):
                return False
            self.soak.kills.append(Kill(kind, "serve", now, "a client's connection"))
            return True
        if kind == "server":
            pid = self.server.kill() if self.server is not None else None
            if pid is None:
                return False
            self.soak.kills.append(Kill(kind, "serve", now, f"agentfly-serve pid {pid}"))
            return True
        if kind == "redis":
            if self.redis is None or self._redis_down:
                return False
            self._redis_down = True
            self.redis.kill()
            self.soak.kills.append(Kill(kind, "serve", now, f"redis-server :{self.redis.port}", "AgentFly/Search-v0"))
            task = asyncio.create_task(self._restart_redis())
            self._restarts.add(task)
            task.add_done_callback(self._restarts.discard)
            return True
        processes = note_processes(self.soak)
        victims = [pid for pid, (command, _) in processes.items() if kind_of(command) == kind]
        if not victims:
            return False
        # The busiest one (a random one among the idle): most likely in the middle of an episode.
        pid = max(self.rng.sample(victims, len(victims)), key=lambda pid: processes[pid][1])
        if self.server is not None and self.server.process and _below(pid, self.server.process.pid):
            lane = "serve"
        elif pid in self.soak.train_actor_pids:
            lane = "train"
        else:
            lane = self.new_actor_lane
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        env = KIND_ENVS.get(kind)
        self.soak.kills.append(Kill(kind, lane, now, f"{processes[pid][0][:60]} (pid {pid})", env))
        return True

    async def _restart_redis(self) -> None:
        """Start Redis again on its port (an empty cache: it persists nothing) after ``redis_down_s``."""
        await asyncio.sleep(self.redis_down_s)
        assert self.redis is not None
        self.redis.stop()
        await asyncio.to_thread(self.redis.start)
        self._redis_down = False

    async def settle(self) -> None:
        """Let a pending Redis restart finish."""
        await asyncio.gather(*self._restarts, return_exceptions=True)


def _below(pid: int, root: int) -> bool:
    return pid in descendants(root)


# ---------------------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class Config:
    """The soak's size.

    Attributes:
        duration_s: Most seconds of play. Kills stop at 85% of it, or once there are ``episodes``
            episodes and ``min_kills`` kills of each kind; the soak then ends as soon as every kill has
            been recovered from (a clean episode after it), at the latest at ``duration_s``.
        episodes: Episodes wanted before the killing may stop early (see above).
        min_kills: Kills of each kind wanted before the killing may stop early.
        clients: Remote-v0 clients playing at once (the server's ``--max-sessions``).
        ray_actors: Env actors in the Ray pool, each played by one worker.
        kill_every_s: Mean seconds between kills (each wait drawn from 0.5x to 1.5x).
        lanes: Any of ``serve``, ``ray`` and ``train``.
        train_actors: Env actors of the train lane's pool (its episodes per step).
        kinds: What the driver kills (:data:`KINDS`); those the lanes and envs lack are skipped.
        serve_envs: Which of :data:`SERVE_ENVS` the server mixes.
        drain_s: How long the episodes in flight at the end may take before they are stopped.
        seed: Seeds the driver's choices (the envs' seeds count up from 0).
        out_dir: Where the trajectories and the server's log go.
    """

    duration_s: float = 120.0
    episodes: int = 100_000
    min_kills: int = 0
    clients: int = 4
    ray_actors: int = 2
    train_actors: int = 4
    kill_every_s: float = 4.0
    lanes: tuple[str, ...] = LANES
    kinds: tuple[str, ...] = KINDS
    serve_envs: tuple[str, ...] = tuple(SERVE_ENVS)
    drain_s: float = 60.0
    seed: int = 0
    out_dir: str = "bench-results/chaos"


def run(quick: bool, **options: Any) -> dict[str, Any]:
    """The soak; ``options`` are :class:`Config` fields (``quick`` shortens it to 45 s)."""
    for name in ("lanes", "kinds", "serve_envs"):
        if name in options:
            options[name] = tuple(options[name])
    config = Config(**{**({"duration_s": 45.0} if quick else {}), **options})
    unknown = (
        (set(config.lanes) - set(LANES)) | (set(config.kinds) - set(KINDS)) | (set(config.serve_envs) - set(SERVE_ENVS))
    )
    if unknown:
        raise ValueError(f"unknown lanes, kinds or envs: {sorted(unknown)}")
    ray_started = False
    if {"ray", "train"} & set(config.lanes):
        import ray

        if not ray.is_initialized():
            os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
            ray_started = True
    try:
        results = asyncio.run(_soak(config))
    finally:
        if ray_started:
            import ray

            ray.shutdown()
    left = _wait_gone(results.pop("_soak"))
    # A zombie holds no memory, socket or file, only its pid; Ray's shutdown leaves one of its own children so.
    results["leaks"]["processes"] = [process for process in left if process["state"] != "Z"]
    results["leaks"]["zombies_after_shutdown"] = [process["command"] for process in left if process["state"] == "Z"]
    return results


def _wait_gone(soak: Soak, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """The processes noted during the soak that are still there after shutdown: running ones are waited
    for up to ``timeout_s`` (Ray's take a few seconds to go), zombies 5 s more (init reaps the orphans
    of a killed server, in its own time)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = still_alive(soak)
        if not alive or time.monotonic() > deadline:
            return alive
        if all(process["state"] == "Z" for process in alive):  # reaped by their parent or init, or never
            deadline = min(deadline, time.monotonic() + 5.0)
        time.sleep(0.5)


async def _soak(config: Config) -> dict[str, Any]:
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "trajectories.jsonl"
    path.unlink(missing_ok=True)
    rng = random.Random(config.seed)
    soak = Soak(TrajectoryWriter(path))
    serving = "serve" in config.lanes
    redis = server = relay = pool = None
    tasks: list[asyncio.Task[Any]] = []
    leaks: dict[str, Any] = {}
    driver: Driver | None = None
    try:
        if serving:
            envs = [dict(SERVE_ENVS[name]) for name in config.serve_envs]
            if "search" in config.serve_envs:
                redis = await asyncio.to_thread(RedisServer().start)
                envs[config.serve_envs.index("search")]["options"] = {"cache": redis.url}
            server = Supervised({"envs": envs}, max_sessions=config.clients, log=out / "server.log")
            await server.start()
            relay = Relay(server.port)
            await relay.start()
        if "ray" in config.lanes:
            from agentfly_env.resources.distributed import make_env_pool

            ray_envs = [dict(SERVE_ENVS[name]) for name in RAY_ENVS]
            pool = make_env_pool(
                "AgentFly/Mix-v0",
                {"envs": ray_envs},
                backend="ray",
                size=config.ray_actors,
                ray_options={"call_timeout_s": 120.0, "placement_timeout_s": 180.0},
            )
        soak.started = time.monotonic()
        until = soak.started + config.duration_s
        if serving:
            assert server is not None and relay is not None
            tasks.append(asyncio.create_task(server.supervise(soak)))
            url = f"http://127.0.0.1:{relay.port}"
            tasks += [asyncio.create_task(serve_client(soak, url, server)) for _ in range(config.clients)]
        if pool is not None:
            tasks += [asyncio.create_task(ray_worker(soak, pool)) for _ in range(config.ray_actors)]
        if "train" in config.lanes:
            tasks.append(asyncio.create_task(train_lane(soak, out / "train", config.train_actors)))
        driver = Driver(
            soak,
            [k for k in config.kinds if _kind_applies(k, config)],
            config.kill_every_s,
            rng,
            server=server,
            relay=relay,
            redis=redis,
            new_actor_lane="ray" if "ray" in config.lanes else "train",
        )
        killing = asyncio.create_task(driver.run(soak.started + 0.85 * config.duration_s))
        await _watch(soak, config, until, killing)
        killing.cancel()
        await asyncio.gather(killing, return_exceptions=True)
        await driver.settle()
        # Let the episodes in flight finish (each is bounded by its env's timeouts), then stop the rest.
        workers = tasks[1:] if serving else tasks
        _, late = await asyncio.wait(workers, timeout=config.drain_s) if workers else (set(), set())
        for task in late:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        soak.writer.close()
        if server is not None:  # a server killed last is back (its supervisor still runs) to be asked
            async with asyncio.timeout(180):
                await server.ready.wait()
            leaks["server_sessions"] = await asyncio.to_thread(_quiet_sessions, server)
        note_processes(soak)
        leaks["zombies_before_shutdown"] = zombies_below(soak)
        if pool is not None:
            stats = pool.stats()
            leaks["ray_pool_in_use"] = stats.in_use
    finally:
        soak.stopping.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        soak.writer.close()
        if relay is not None:
            await relay.close()
        if pool is not None:
            await pool.close()
        if server is not None:
            await server.stop()
        if driver is not None:
            await driver.settle()  # a Redis restart under way ends before Redis stops for good
        if redis is not None:
            redis.stop()
    results = summarize(soak, config, path)
    results["leaks"] = leaks
    results["_soak"] = soak
    return results


def _kind_applies(kind: str, config: Config) -> bool:
    """Whether this run has a backend of ``kind`` to kill."""
    serving, envs = "serve" in config.lanes, set(config.serve_envs)
    return {
        "sandbox": (serving and "code" in envs) or "ray" in config.lanes,
        "jvm": serving and "scienceworld" in envs,
        "engine": serving and "alfworld" in envs,
        "redis": serving and "search" in envs,
        "server": serving,
        "connection": serving,
        "ray_actor": bool({"ray", "train"} & set(config.lanes)),
    }[kind]


async def _watch(soak: Soak, config: Config, until: float, killing: asyncio.Task[None]) -> None:
    """Note new processes as they appear; end the soak when its time is up, or once it has its episodes
    and its kills: then the killing stops and the soak ends when every kill has been recovered from."""
    while time.monotonic() < until:
        await asyncio.to_thread(note_processes, soak)
        if not killing.done():
            kinds = Counter(kill.kind for kill in soak.kills)
            if len(soak.episodes) >= config.episodes and all(
                kinds[kind] >= config.min_kills for kind in config.kinds if _kind_applies(kind, config)
            ):
                killing.cancel()
        else:
            ended = [episode for episode in soak.episodes if episode.ended is not None]
            if all(_recovery(kill, ended) is not None for kill in soak.kills):
                break
        await asyncio.sleep(0.25)
    soak.stopping.set()


def _quiet_sessions(server: Supervised, timeout_s: float = 30.0) -> int:
    """Sessions the server still holds once every client has gone (it may take a moment to notice)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            stats = server.sessions()
            held = max(stats["active_sessions"], stats["pool"]["in_use"])
        except OSError:  # a moment's refusal; -1 if it lasts
            held = -1
        if held == 0 or time.monotonic() > deadline:
            return held
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------- the figures


def verify(path: Path, digests: dict[str, str]) -> dict[str, Any]:
    """Read the trajectories back (typed: each line must decode and validate) and compare each with
    what was written."""
    found: dict[str, str] = {}
    damaged = 0
    try:
        for trajectory in read_trajectories(path):
            found[trajectory.episode_id or ""] = _digest(trajectory)
    except ValueError:
        damaged += 1
    intact = sum(found.get(episode_id) == digest for episode_id, digest in digests.items())
    return {
        "file": str(path),
        "written": len(digests),
        "on_disk": len(found),
        "verified_intact": intact,
        "lost": sum(episode_id not in found for episode_id in digests),
        "corrupted": damaged + sum(episode_id in found and found[episode_id] != d for episode_id, d in digests.items()),
        "unexpected": len(set(found) - set(digests)),
    }


def summarize(soak: Soak, config: Config, path: Path) -> dict[str, Any]:
    ended = [episode for episode in soak.episodes if episode.ended is not None]
    failed = [episode for episode in ended if episode.reason is not None]
    for kill in soak.kills:
        kill.recovery_s = _recovery(kill, ended)
    recovery = {}
    for kind in KINDS:
        times = sorted(kill.recovery_s for kill in soak.kills if kill.kind == kind and kill.recovery_s is not None)
        count = sum(kill.kind == kind for kill in soak.kills)
        if count:
            recovery[kind] = {
                "kills": count,
                "recovered": len(times),
                "p50_s": times[len(times) // 2] if times else None,
                "max_s": times[-1] if times else None,
            }
    by_env: dict[str, Counter[str]] = {}
    for episode in ended:
        row = by_env.setdefault(f"{episode.lane} {episode.env or '(no reset)'}", Counter())
        row["episodes"] += 1
        row["failed"] += episode.reason is not None
        row["solved"] += episode.solved
    return {
        "config": asdict(config),
        "soak_s": (max((e.ended for e in ended), default=soak.started) - soak.started),
        "episodes": {
            "run": len(ended),
            "clean": len(ended) - len(failed),
            "failed": len(failed),
            "unexplained": sum(not episode.reason for episode in failed),
            "silent_failures": sum(  # the train lane's model is no script: it solves nothing
                episode.reason is None
                and not episode.solved
                and episode.env in SCRIPT_SOLVES
                and episode.lane != "train"
                for episode in ended
            ),
            "by_env": {name: dict(row) for name, row in sorted(by_env.items())},
        },
        "failures_by_reason": dict(Counter(episode.reason for episode in failed).most_common()),
        "failure_examples": {episode.reason: episode.detail for episode in reversed(failed)},
        "kills": dict(Counter(kill.kind for kill in soak.kills)),
        "server_restarts": soak.server_restarts,
        "recovery_s": recovery,
        "kill_log": [asdict(kill) | {"at": kill.at - soak.started} for kill in soak.kills],
        "trajectories": verify(path, soak.digests),
        "processes_seen": len(soak.seen),
        "train": {
            "steps": len(soak.train_steps),
            "failed_episodes": sum(step["failed_episodes"] for step in soak.train_steps),
            "left_out_episodes": sum(step["left_out_episodes"] for step in soak.train_steps),
            "per_step": soak.train_steps,
            "run_died": soak.train_error,
        },
    }


def _recovery(kill: Kill, episodes: list[Episode]) -> float | None:
    """Seconds from the kill to the end of the first clean episode started after it on what it hit."""
    ends = [
        episode.ended
        for episode in episodes
        if episode.ended is not None
        and episode.reason is None
        and episode.lane == kill.lane
        and episode.started >= kill.at
        and (kill.env is None or episode.env == kill.env)
    ]
    return min(ends) - kill.at if ends else None


def render(results: dict[str, Any], console: Console) -> None:
    config, episodes, trajectories, leaks = (
        results["config"],
        results["episodes"],
        results["trajectories"],
        results["leaks"],
    )
    table = Table(
        title=f"Chaos soak: {results['soak_s']:.0f} s, lanes {', '.join(config['lanes'])}, "
        f"a kill every ~{config['kill_every_s']:g} s"
    )
    table.add_column("lane and env")
    for column in ("episodes", "solved", "failed"):
        table.add_column(column, justify="right")
    for name, row in episodes["by_env"].items():
        table.add_row(name, *(str(row.get(column, 0)) for column in ("episodes", "solved", "failed")))
    table.add_row(
        "all",
        str(episodes["run"]),
        f"{episodes['silent_failures']} silent",
        f"{episodes['failed']} ({episodes['unexplained']} without a reason)",
    )
    console.print(table)
    table = Table(title="Kills and recovery (kill -> end of the next clean episode on what it hit)")
    for column in ("kind", "kills", "recovered", "p50 s", "max s"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind, row in results["recovery_s"].items():
        table.add_row(kind, str(row["kills"]), str(row["recovered"]), _fmt(row["p50_s"]), _fmt(row["max_s"]))
    console.print(table)
    table = Table(title="Failed episodes by reason")
    table.add_column("reason")
    table.add_column("episodes", justify="right")
    table.add_column("for example", max_width=70, overflow="ellipsis", no_wrap=True)
    for reason, count in results["failures_by_reason"].items():
        table.add_row(reason, str(count), results["failure_examples"].get(reason) or "")
    console.print(table)
    train = results["train"]
    if "train" in config["lanes"]:
        console.print(
            f"train lane: {train['steps']} training steps taken and checkpointed, {train['failed_episodes']} episodes "
            f"whose env died, {train['left_out_episodes']} episodes left out of the updates"
            + (f"; the run died: {train['run_died']}" if train["run_died"] else "")
        )
    console.print(
        f"trajectories: {trajectories['written']} written, {trajectories['verified_intact']} read back intact, "
        f"{trajectories['lost']} lost, {trajectories['corrupted']} corrupted ({trajectories['file']})"
    )
    console.print(
        f"leaks: {len(leaks['processes'])} processes running after shutdown (of {results['processes_seen']} seen); "
        f"zombies before shutdown {len(leaks.get('zombies_before_shutdown', []))}, after it "
        f"{len(leaks['zombies_after_shutdown'])} {leaks['zombies_after_shutdown'] or ''}; server sessions held "
        f"after the clients left: {leaks.get('server_sessions', '-')}; Ray pool leases held: "
        f"{leaks.get('ray_pool_in_use', '-')}; server restarts: {results['server_restarts']}"
    )
    for process in leaks["processes"]:
        console.print(f"  [red]leaked[/red] pid {process['pid']} ({process['state']}): {process['command']}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
