"""Agent programs as they are: a function that calls an OpenAI-compatible API, played and trained on an env.

The contract (``agentfly-train --agent PATH.py:FUNC``)::

    def FUNC(task, llm) -> str | float          # or: async def FUNC(task, llm)
        client = openai.OpenAI(base_url=llm.base_url, api_key=llm.api_key)
        reply = client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task.prompt}])
        return reply.choices[0].message.content

An agent may also be any executable (``agentfly-train --agent-command "CMD ARGS"``, :class:`AgentCommand`):
run once per episode in a process group of its own, with the endpoints in its environment
(``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ...) and the task on stdin; the last line it prints is its answer.

``task`` is an :class:`AgentTask` (the task's text, id and seed, and ``tools_url``: an MCP endpoint with the
env's tools for this episode, or None); ``llm`` an :class:`LLMEndpoint`, what ``openai.OpenAI(...)`` takes.
The program's prompts, tools and control flow are its own. It returns its final answer as text, which the
env scores with its own reward (the answer goes to the env as its final-answer action, e.g.
``<answer>...</answer>``; the gold answer never reaches the program), or a float: a reward for a program
that verifies itself.

:class:`AgentRollout` plays a batch: for each episode it resets a leased env (the task), opens an episode
on the :class:`~agentfly_train.gateway.Gateway` (the program's model calls are answered by the trainer's
generator and recorded token-exact as rows), runs the program, then scores its answer. The chains of a
group run concurrently. A program that raises, runs past ``agent.timeout_s`` or never calls the model ends
its episode failed (``failure`` says why) and the group goes on; a failed episode is left out of the loss.
Every algorithm takes the episodes as they are: an episode's rows share its reward, and group baselines
are taken over episodes (:attr:`~agentfly_train.rollout.Episode.sequences`).

Example:
    >>> program = AgentProgram.load("examples/calculator_agent.py:solve")  # doctest: +SKIP
    >>> rollout = AgentRollout(envs, program, gateway, config.rollout, config.agent)  # doctest: +SKIP
    >>> result = rollout.run(task_seeds=[0, 1], sample_seed=0)  # doctest: +SKIP
    >>> [len(e.rows) for e in result.episodes]  # doctest: +SKIP
    [1, 1, 1, 1, 1, 1, 1, 1]
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import importlib
import importlib.util
import inspect
import os
import shlex
import signal
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from agentfly_env.core.aio import run_sync
from agentfly_env.resources.distributed import EnvHandle
from agentfly_env.resources.pool import ResourcePool
from agentfly_env.serve.mcp import StartedEpisode
from agentfly_env.tools.tool_env import answer_action
from agentfly_train.config import AgentConfig, Config, RolloutConfig
from agentfly_train.gateway import Gateway, GatewaySettings
from agentfly_train.generation import Generator, SamplingParams
from agentfly_train.rollout import Episode, RolloutResult, RolloutStats, lease_envs, reset_episode, step_episode


def load_function(spec: str) -> Callable[..., Any]:
    """The function ``spec`` names: ``PATH.py:FUNC`` (a file, imported as a module of its own) or ``MODULE:FUNC``.

    Raises:
        ValueError: ``spec`` has no ``:FUNC``, the file or module is missing, or it has no such callable.
    """
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ValueError(f"{spec!r}: write it as PATH.py:FUNC or MODULE:FUNC")
    if where.endswith(".py"):
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"{spec!r}: no file {where}")
        module_name = f"agentfly_agent_{zlib.crc32(str(path).encode()):08x}"
        module = sys.modules.get(module_name)
        if module is None:
            module_spec = importlib.util.spec_from_file_location(module_name, path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_name] = module  # dataclasses and pickling look their module up by name
            module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as error:
            raise ValueError(f"{spec!r}: cannot import {where}: {error}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"{spec!r}: {where} has no function {name}")
    return function


@dataclass(frozen=True)
class AgentTask:
    """What a program is given about its episode's task.

    Attributes:
        prompt: The task's text (the env's first observation).
        id: The task's id (the env's own when it has one, else its seed); chains of a group share it.
        seed: The env seed the task was drawn with.
        tools_url: An MCP endpoint (streamable HTTP) serving the env's tools for this episode, each call one
            step of it; None when the env has no tools or ``agent.tools`` is off.
    """

    prompt: str
    id: str
    seed: int
    tools_url: str | None = None


@dataclass(frozen=True)
class LLMEndpoint:
    """Where a program calls the model: ``openai.OpenAI(base_url=llm.base_url, api_key=llm.api_key)`` (chat
    completions or the Responses API), or ``anthropic.Anthropic(base_url=llm.anthropic_base_url,
    api_key=llm.api_key)`` (Messages); ``model=llm.model`` in each request."""

    base_url: str
    api_key: str
    model: str

    @property
    def anthropic_base_url(self) -> str:
        """The base URL Anthropic's clients take: they add ``/v1/messages`` themselves."""
        return self.base_url.removesuffix("/v1")


class AgentProgramError(Exception):
    """An agent program failed: it raised, ran out of time or returned something that is not an answer."""


class AgentProgram:
    """A user's agent function, called once per episode.

    Args:
        function: ``FUNC(task, llm)``, ``def`` (run in a thread of its own) or ``async def``.
        name: How reports name it (``examples/calculator_agent.py:solve``).
    """

    def __init__(self, function: Callable[[AgentTask, LLMEndpoint], Any], name: str = "") -> None:
        self.function = function
        self.name = name or getattr(function, "__qualname__", repr(function))
        self.is_async = inspect.iscoroutinefunction(function)

    @classmethod
    def load(cls, spec: str) -> AgentProgram:
        """The program ``spec`` names (:func:`load_function`)."""
        return cls(load_function(spec), spec)

    async def run(
        self, task: AgentTask, llm: LLMEndpoint, timeout_s: float, threads: concurrent.futures.Executor
    ) -> str | float:
        """The program's answer for one episode (a sync program runs on ``threads``).

        Raises:
            AgentProgramError: It raised (the error named), ran past ``timeout_s``, or returned neither text
                nor a number.
        """
        try:
            if self.is_async:
                result = await asyncio.wait_for(self.function(task, llm), timeout_s)
            else:
                loop = asyncio.get_running_loop()
                # A thread cannot be stopped: past the time limit it is abandoned, and its episode's later calls
                # to the model are refused (the gateway has closed the episode), so it ends soon after.
                result = await asyncio.wait_for(loop.run_in_executor(threads, self.function, task, llm), timeout_s)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, timeout_s)
        except TimeoutError:
            raise AgentProgramError(f"{self.name} ran past its time limit of {timeout_s:g} s") from None
        except Exception as error:
            raise AgentProgramError(f"{self.name} raised {type(error).__name__}: {error}") from error
        if isinstance(result, bool) or not isinstance(result, (str, int, float)):
            raise AgentProgramError(f"{self.name} returned {type(result).__name__}; return the answer text or a reward")
        return result if isinstance(result, str) else float(result)


#: Bytes of an agent command's stdout and stderr kept (the last ones): its answer is its last line.
OUTPUT_TAIL_BYTES = 64 * 1024


class AgentCommand:
    """An agent that is an executable, run once per episode (``agent.command``): any language, any venv.

    It runs in a process group of its own with the episode's endpoints in its environment (:meth:`environment`)
    and the task's text on stdin; the last non-empty line it prints is its answer (``returns="reward"``: a number,
    the reward). It has the same ``run`` as :class:`AgentProgram`, so :class:`AgentRollout` plays either.

    Args:
        command: The command line, split as a shell would split it (no shell runs it).
        returns: ``answer`` or ``reward``.
    """

    def __init__(self, command: str, returns: str = "answer") -> None:
        self.argv = shlex.split(command)
        self.name = command
        self.returns = returns

    @staticmethod
    def environment(task: AgentTask, llm: LLMEndpoint) -> dict[str, str]:
        """The variables an episode's command gets (besides this process's): each endpoint as its SDK reads it."""
        variables = {
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": llm.api_key,
            "OPENAI_MODEL": llm.model,
            "ANTHROPIC_BASE_URL": llm.anthropic_base_url,
            "ANTHROPIC_API_KEY": llm.api_key,
            "AGENTFLY_TASK_ID": task.id,
            "AGENTFLY_TASK_SEED": str(task.seed),
        }
        if task.tools_url is not None:
            variables["AGENTFLY_TOOLS_URL"] = task.tools_url
        return variables

    async def run(
        self, task: AgentTask, llm: LLMEndpoint, timeout_s: float, threads: concurrent.futures.Executor
    ) -> str | float:
        """The command's answer for one episode (``threads`` is unused: a process needs none).

        Raises:
            AgentProgramError: It could not start, exited with an error, ran past ``timeout_s`` (its group is
                killed), printed no answer, or (``returns="reward"``) a last line that is not a number; the reason
                names it, with the tail of its stderr.
        """
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **self.environment(task, llm)},
                start_new_session=True,  # a group of its own: whatever it starts is killed with it
            )
        except OSError as error:
            raise AgentProgramError(f"{self.name} could not start: {error}") from None
        _LIVE_GROUPS.add(process.pid)
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        reading = asyncio.gather(_tail(process.stdout), _tail(process.stderr), _feed(process.stdin, task.prompt))
        try:
            async with asyncio.timeout(timeout_s):
                stdout, stderr, _ = await reading
                code = await process.wait()
        except TimeoutError:
            reading.cancel()
            _kill_group(process)
            await process.wait()
            raise AgentProgramError(f"{self.name} ran past its time limit of {timeout_s:g} s") from None
        finally:
            _kill_group(process)  # what it left running in the background goes too
            _LIVE_GROUPS.discard(process.pid)
        said = _last_lines(stderr)
        if code != 0:
            raise AgentProgramError(f"{self.name} exited with code {code}" + (f"; stderr ends: {said}" if said else ""))
        lines = [line.strip() for line in stdout.decode(errors="replace").splitlines() if line.strip()]
        if not lines:
            raise AgentProgramError(f"{self.name} printed no answer" + (f"; stderr ends: {said}" if said else ""))
        if self.returns == "answer":
            return lines[-1]
        try:
            return float(lines[-1])
        except ValueError:
            raise AgentProgramError(f"{self.name} printed {lines[-1]!r} as its reward, not a number") from None


async def _tail(stream: asyncio.StreamReader) -> bytes:
    """What a stream gives until it ends, of which the last :data:`OUTPUT_TAIL_BYTES` are kept."""
    kept = b""
    while chunk := await stream.read(1 << 16):
        kept = (kept + chunk)[-OUTPUT_TAIL_BYTES:]
    return kept


async def _feed(stdin: asyncio.StreamWriter, text: str) -> None:
    """The task's text to a command's stdin, then closed (a command that reads none is not an error)."""
    try:
        stdin.write(text.encode())
        await stdin.drain()
        stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


#: The process groups of the agent commands running now. Each is a group of its own (so its time limit kills all
#: it started), which a signal to the trainer's group does not reach: they are killed when the trainer exits.
_LIVE_GROUPS: set[int] = set()


@atexit.register
def _kill_live_groups() -> None:
    for group in list(_LIVE_GROUPS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


def _last_lines(output: bytes, count: int = 5) -> str:
    return " | ".join(line for line in output.decode(errors="replace").strip().splitlines()[-count:] if line.strip())


def load_agent(agent: AgentConfig) -> AgentProgram | AgentCommand:
    """The agent ``[agent]`` names: a function (``program``) or an executable (``command``)."""
    if agent.command:
        return AgentCommand(agent.command, agent.returns)
    return AgentProgram.load(agent.program)


class AgentRollout:
    """Plays batches of episodes of an agent program, its model calls answered and recorded by ``gateway``.

    Args:
        envs: The env pool; each episode leases one env (its task, its reward, its tools).
        program: The agent: a program (a function) or a command (an executable).
        gateway: Answers the program's calls with the policy's generator; started for each batch.
        config: The rollout's chains per task (``samples_per_prompt``).
        agent: The program's time limit and whether it gets the env's tools.
        lease_timeout_s: How long an episode waits for an env.
    """

    def __init__(
        self,
        envs: ResourcePool[EnvHandle],
        program: AgentProgram | AgentCommand,
        gateway: Gateway,
        config: RolloutConfig,
        agent: AgentConfig,
        *,
        lease_timeout_s: float | None = 600.0,
    ) -> None:
        self.envs = envs
        self.program = program
        self.gateway = gateway
        self.config = config
        self.agent = agent
        self.lease_timeout_s = lease_timeout_s

    def run(self, task_seeds: Sequence[int], sample_seed: int, *, episode_id_prefix: str = "") -> RolloutResult:
        """Sync form of :meth:`arun`."""
        return run_sync(self.arun(task_seeds, sample_seed, episode_id_prefix=episode_id_prefix))

    async def arun(self, task_seeds: Sequence[int], sample_seed: int, *, episode_id_prefix: str = "") -> RolloutResult:
        """Play ``samples_per_prompt`` chains of each task (env seed ``task_seeds[g]`` for task ``g``).

        Args:
            task_seeds: One env seed per task.
            sample_seed: Seeds the sampling, with each episode's group, chain and call number.
            episode_id_prefix: Prefix of each trajectory's ``episode_id`` (``{prefix}{group}-{chain}``).
        """
        n = self.config.samples_per_prompt
        episodes = [Episode(group=g, chain=c, seed=int(seed)) for g, seed in enumerate(task_seeds) for c in range(n)]
        stats = RolloutStats()
        started = time.perf_counter()
        self.gateway.scheduler.on_batch = lambda seconds: stats.count_batch(self.envs, seconds)
        leases = await lease_envs(self.envs, episodes, self.lease_timeout_s)
        playing = [episode for episode in episodes if episode.failure is None]
        threads = concurrent.futures.ThreadPoolExecutor(max(1, len(playing)), thread_name_prefix="agentfly-agent")
        try:
            await self.gateway.start()
            await asyncio.gather(
                *(
                    self._episode(lease.resource, episode, sample_seed, threads)
                    for lease, episode in zip(leases, playing, strict=True)
                )
            )
        finally:
            await self.gateway.stop()
            threads.shutdown(wait=False, cancel_futures=True)
            # A failed episode's env may be in any state: the pool replaces it.
            await asyncio.gather(
                *(lease.release(broken=e.failure is not None) for lease, e in zip(leases, playing, strict=True))
            )
        return RolloutResult.of(episodes, stats, started, episode_id_prefix)

    async def _episode(
        self, env: EnvHandle, episode: Episode, sample_seed: int, threads: concurrent.futures.Executor
    ) -> None:
        seed = zlib.crc32(f"{sample_seed}/{episode.group}/{episode.chain}".encode())
        await play_agent_episode(env, episode, self.program, self.gateway, self.agent, threads, sampling_seed=seed)


async def play_agent_episode(
    env: EnvHandle,
    episode: Episode,
    agent: AgentProgram | AgentCommand,
    gateway: Gateway,
    config: AgentConfig,
    threads: concurrent.futures.Executor,
    *,
    sampling_seed: int | None = None,
) -> None:
    """One episode of ``agent`` on a leased ``env``, its model calls answered by ``gateway`` (started).

    The env is reset to ``episode.seed`` (the task), the episode opened on the gateway (seeded with
    ``sampling_seed``; None: by its random key), the agent run with ``config``'s time limit (a sync program on
    ``threads``), its rows and counters taken into ``episode``, then its answer stepped to the env as the final
    answer and scored by the env's reward (a float answer is the reward itself). Nothing raises: a failure (the
    env's, or the agent's: it raised, ran out of time, never called the model) ends the episode with
    ``episode.failure``. :class:`AgentRollout` plays its batches with it, the OpenRLHF backend's program executor
    (:mod:`agentfly_train.backends.openrlhf.program_executor`) each sample.

    Example:
        >>> episode = Episode(group=0, chain=0, seed=3)  # doctest: +SKIP
        >>> await play_agent_episode(env, episode, AgentProgram.load("agent.py:solve"), gateway, AgentConfig(),
        ...                          threads)  # doctest: +SKIP
        >>> episode.failure, episode.reward, len(episode.rows)  # doctest: +SKIP
        (None, 1.0, 1)
    """
    start = await reset_episode(env, episode, episode.seed)
    if start is None:
        return
    # Its tools are served wherever the env runs (in this process, a Ray actor), stepped through its handle.
    tools_env = StartedEpisode(env, start) if config.tools else None
    endpoint = gateway.open_episode(seed=sampling_seed, tools_env=tools_env)
    task = AgentTask(
        prompt=start.observation,
        id=str(start.task.get("id", episode.seed)),
        seed=episode.seed,
        tools_url=endpoint.tools_url,
    )
    llm = LLMEndpoint(endpoint.base_url, endpoint.key, gateway.settings.model)
    try:
        answer = await agent.run(task, llm, config.timeout_s, threads)
    except AgentProgramError as error:
        episode.failure = str(error)
        return
    finally:
        recording = gateway.close_episode(endpoint.key)
        episode.rows, episode.calls = recording.rows, recording.counters
        episode.model_turns, episode.turns_cut = recording.counters.calls, recording.counters.cut_calls
        if tools_env is not None and endpoint.tools_url is not None:  # the steps its tool calls took
            played, seen = tools_env.trajectory, len(episode.trajectory.steps)
            for step, seconds in zip(played.steps[seen:], played.latency_s[seen:], strict=True):
                episode.record(step, seconds)
    if not episode.rows:
        episode.failure = (
            f"{agent.name}'s first call was past the episode's budget (rollout.max_episode_tokens = "
            f"{gateway.settings.max_episode_tokens} tokens)"
            if recording.counters.over_budget
            else f"{agent.name} never called the model"
        )
    elif recording.counters.over_budget:  # its rows reached the episode's budget: what came after is not played
        episode.truncate("max_tokens")
    elif isinstance(answer, float):
        episode.verdict = answer
    elif not episode.summary.terminated and not episode.summary.truncated:  # its tools may have ended it
        action = answer_action(start.answer_format, answer)
        if action is None:
            episode.truncate("no_answer")  # an env that takes no final answer, left unfinished by the tools
        else:
            await step_episode(env, episode, action)


def gateway_for(config: Config, generator: Generator, tokenizer: Any, *, temperature: float | None = None) -> Gateway:
    """The gateway a run's agent program calls: the run's generator, turn and episode budgets and sampling
    (``temperature`` instead of the rollout's, e.g. an evaluation's), whatever a request asks for. Its context
    window is ``agent.context_tokens``, else the one the generator holds (the model's), else (a scripted expert
    holds none) the episode's budget."""
    rollout = config.rollout
    context = config.agent.context_tokens or getattr(generator, "max_model_len", None) or rollout.max_episode_tokens
    settings = GatewaySettings(
        model=config.model.path,
        max_model_len=context,
        max_episode_tokens=rollout.max_episode_tokens,
        sampling=SamplingParams.from_rollout(rollout, temperature=temperature),
        fixed_sampling=True,
        batch_wait_s=rollout.batch_wait_s,
        max_batch_size=rollout.max_batch_size,
        seed=config.seed,
    )
    return Gateway(generator, tokenizer, settings)


def agent_demonstrations(config: Config, tokenizer: Any, envs: ResourcePool[EnvHandle]) -> list[Episode]:
    """Warm-start demonstrations in the program's own format: the program plays ``sft.expert_episodes`` training
    tasks (seeds 0, 1, ...) against ``agent.expert``, a scripted model (:mod:`~agentfly_train.generation.scripted`),
    through the gateway; the rows of the episodes that succeed (or reach ``sft.min_reward``) are returned."""
    from agentfly_train.chat import ChatFormat
    from agentfly_train.generation.scripted import ScriptedGenerator

    expert = ScriptedGenerator(ChatFormat(tokenizer), load_function(config.agent.expert))
    rollout_config = msgspec.structs.replace(config.rollout, samples_per_prompt=1)
    rollout = AgentRollout(
        envs,
        load_agent(config.agent),
        gateway_for(config, expert, tokenizer),
        rollout_config,
        config.agent,
    )
    kept: list[Episode] = []
    seeds = list(range(config.sft.expert_episodes))
    for start in range(0, len(seeds), envs.config.size):
        result = rollout.run(seeds[start : start + envs.config.size], sample_seed=config.seed)
        threshold = config.sft.min_reward
        kept += [
            e
            for e in result.episodes
            if e.failure is None and e.rows and (e.success if threshold is None else e.reward >= threshold)
        ]
    return kept
