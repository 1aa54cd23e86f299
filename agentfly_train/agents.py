"""Agent programs as they are: a function that calls an OpenAI-compatible API, played and trained on an env.

The contract (``agentfly-train --agent PATH.py:FUNC``)::

    def FUNC(task, llm) -> str | float          # or: async def FUNC(task, llm)
        client = openai.OpenAI(base_url=llm.base_url, api_key=llm.api_key)
        reply = client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task.prompt}])
        return reply.choices[0].message.content

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
import concurrent.futures
import importlib
import importlib.util
import inspect
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
from agentfly_env.tools.tool_env import answer_action
from agentfly_train.config import AgentConfig, Config, RolloutConfig
from agentfly_train.gateway import Gateway, GatewaySettings
from agentfly_train.generation import Generator
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


class AgentRollout:
    """Plays batches of episodes of an agent program, its model calls answered and recorded by ``gateway``.

    Args:
        envs: The env pool; each episode leases one env (its task, its reward, its tools).
        program: The agent program.
        gateway: Answers the program's calls with the policy's generator; started for each batch.
        config: The rollout's chains per task (``samples_per_prompt``).
        agent: The program's time limit and whether it gets the env's tools.
        lease_timeout_s: How long an episode waits for an env.
    """

    def __init__(
        self,
        envs: ResourcePool[EnvHandle],
        program: AgentProgram,
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
        start = await reset_episode(env, episode, episode.seed)
        if start is None:
            return
        endpoint = self.gateway.open_episode(
            seed=zlib.crc32(f"{sample_seed}/{episode.group}/{episode.chain}".encode()),
            tools_env=env if self.agent.tools else None,
        )
        task = AgentTask(
            prompt=start.observation,
            id=str(start.task.get("id", episode.seed)),
            seed=episode.seed,
            tools_url=endpoint.tools_url,
        )
        llm = LLMEndpoint(endpoint.base_url, endpoint.key, self.gateway.settings.model)
        try:
            answer = await self.program.run(task, llm, self.agent.timeout_s, threads)
        except AgentProgramError as error:
            episode.failure = str(error)
            return
        finally:
            recording = self.gateway.close_episode(endpoint.key)
            episode.rows, episode.calls = recording.rows, recording.counters
            episode.model_turns, episode.turns_cut = recording.counters.calls, recording.counters.cut_calls
            if endpoint.tools_url is not None:  # the steps its tool calls took, as the env recorded them
                played, seen = env.trajectory, len(episode.trajectory.steps)
                for step, seconds in zip(played.steps[seen:], played.latency_s[seen:], strict=True):
                    episode.record(step, seconds)
        if not episode.rows:
            episode.failure = f"{self.program.name} never called the model"
        elif isinstance(answer, float):
            episode.verdict = answer
        elif not episode.summary.terminated and not episode.summary.truncated:  # its tools may have ended it
            action = answer_action(start.answer_format, answer)
            if action is None:
                episode.truncate("no_answer")  # an env that takes no final answer, left unfinished by the tools
            else:
                await step_episode(env, episode, action)


def gateway_for(config: Config, generator: Generator, tokenizer: Any, *, temperature: float | None = None) -> Gateway:
    """The gateway a run's agent program calls: the run's generator, context window, turn budget and sampling
    (``temperature`` instead of the rollout's, e.g. an evaluation's), whatever a request asks for."""
    rollout = config.rollout
    settings = GatewaySettings(
        model=config.model.path,
        max_model_len=rollout.max_episode_tokens,
        max_new_tokens=rollout.max_new_tokens,
        temperature=rollout.temperature if temperature is None else temperature,
        top_p=rollout.top_p,
        top_k=rollout.top_k,
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
        AgentProgram.load(config.agent.program),
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
