"""Token-faithful multi-turn rollouts: many env episodes driven concurrently through ``astep``.

Each episode's sequence is built by appending tokens only: the prompt (tokenized once), then for every
turn the tokens the model generated (kept exactly, with their log-probs, ``action_mask`` 1) and the
observation turn (the chat template's tool or user turn around the env's text, tokenized once,
``action_mask`` 0). Nothing is decoded and re-tokenized to rebuild the history; the action text the
env receives is decoded from the generated tokens, and that is the only decoding.

Scheduling (``overlap=True``): every episode is a coroutine. With an async generator (one that has
``agenerate``, e.g. vLLM's async engine) each episode sends its next turn the moment its env step
returns and the engine batches whatever is running: no batch barrier. Otherwise one server (the
:class:`~agentfly_train.generation.scheduler.GenerationScheduler`, which the gateway shares too) batches
the episodes that are waiting for the model and runs the generator in a worker thread, so env steps of
the other episodes (tool calls, sandboxes, searches) run on the event loop meanwhile; a batch starts
at once when every unfinished episode is waiting, else after ``batch_wait_s`` with whoever is waiting.
``overlap=False`` plays lockstep rounds (generate for all, then step all), the usual synchronous loop,
for comparison.

Bounded history (``rollout.history_turns = K``): each turn's context is the first prompt (the task) and only the last
K turns with their observations, cut from the same token sequence (still nothing re-tokenized), as step-wise agents
on long text worlds prompt a small model. The episode is then trained as the contexts the model saw, one row per
window (:meth:`Episode.windows`), like an agent program's calls.

Multi-chain: ``samples_per_prompt`` chains of one task (same env seed, so the same task) run at once and
come back as consecutive episodes: the group of GRPO and RLOO.

Envs come from an env pool (:func:`~agentfly_env.resources.distributed.make_env_pool`), leased for one episode
each, in this process or as Ray actors: the same interface every episode driver uses. What an env
reports is read from its typed records (``info["start"]``, ``info["step"]``), and the episode's
trajectory is assembled from them, so a remote env records the same trajectory as a local one.

Example:
    >>> envs = make_env_pool("AgentFly/Math-v0", {"difficulty": 0}, size=8)  # doctest: +SKIP
    >>> rollout = Rollout(envs, chat, generator, RolloutConfig(samples_per_prompt=4))  # doctest: +SKIP
    >>> result = rollout.run(task_seeds=[0, 1], sample_seed=0)  # doctest: +SKIP
    >>> len(result.episodes), result.stats.env_wait_share < 0.05  # doctest: +SKIP
    (8, True)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from agentfly_env.core.aio import run_sync
from agentfly_env.core.types import EpisodeStart, EpisodeSummary, Step, Trajectory
from agentfly_env.resources.distributed import EnvHandle, make_env_pool
from agentfly_env.resources.pool import Lease, ResourcePool, default_manager
from agentfly_train.chat import ChatFormat
from agentfly_train.config import Config, RolloutConfig
from agentfly_train.gateway.recording import EpisodeCounters, Row
from agentfly_train.generation import (
    Generation,
    GenerationRequest,
    Generator,
    SamplingParams,
)
from agentfly_train.generation.scheduler import GenerationScheduler


@dataclass
class Turn:
    """One model turn inside an episode's token sequence.

    Attributes:
        start: Index of the turn's first generated token in ``Episode.token_ids``.
        end: One past its last generated token.
        finish_reason: ``stop``, ``stop_string`` or ``length`` (the per-turn budget cut it).
        observation_tokens: Tokens appended after it (template and observation; 0 after the last turn).
    """

    start: int
    end: int
    finish_reason: str
    observation_tokens: int = 0


@dataclass(kw_only=True)
class EpisodeStats:
    """What an episode did: the env's account (its trajectory, as the env recorded it) and the driver's
    own counters, kept alike by every episode driver (the local rollout, evaluation against a server,
    the OpenRLHF plug-in).

    Reward, success, tool calls, errors and the ending are derived from the trajectory
    (:class:`~agentfly_env.core.types.EpisodeSummary`), with the driver's own cut (a token or turn budget)
    and an env failure on top.

    Attributes:
        trajectory: The episode as the env recorded it, step by step (None until it started).
        model_turns: Turns the model took.
        turns_cut: Turns the per-turn token budget cut (``finish_reason == "length"``).
        env_seconds: Time spent in ``areset`` and ``astep``.
        cut_reason: Why the driver cut the episode (``max_turns``, ``max_tokens``, ``context``), if it did.
        failure: Why the episode failed for a reason outside the model (its env died or raised, an agent
            program raised or ran out of time), or None. Such an episode is reported but left out of the
            loss and of its group's baseline.
        verdict: The reward an agent program gave its own episode (it returned a float), which stands for
            the env's; None when the env's reward counts. Success is then a verdict above 0.
    """

    trajectory: Trajectory | None = None
    model_turns: int = 0
    turns_cut: int = 0
    env_seconds: float = 0.0
    cut_reason: str | None = None
    failure: str | None = None
    verdict: float | None = None

    @property
    def summary(self) -> EpisodeSummary:
        """The env's account of the episode so far."""
        return EpisodeSummary.of(self.trajectory.steps if self.trajectory is not None else ())

    @property
    def reward(self) -> float:
        return self.summary.reward if self.verdict is None else self.verdict

    @property
    def success(self) -> bool:
        return self.summary.success if self.verdict is None else self.verdict > 0

    @property
    def tool_calls(self) -> int:
        return self.summary.tool_calls

    @property
    def parse_errors(self) -> int:
        return self.summary.parse_errors

    @property
    def errors(self) -> int:
        return self.summary.errors

    @property
    def terminated(self) -> bool:
        return self.summary.terminated

    @property
    def truncated(self) -> bool:
        """Cut: by the env (its turn limit, a backend) or by the driver's budget."""
        summary = self.summary
        return summary.truncated or (self.cut_reason is not None and not summary.terminated)

    @property
    def truncation_reason(self) -> str | None:
        summary = self.summary
        return summary.truncation_reason if summary.truncated else self.cut_reason if self.truncated else None

    @property
    def done(self) -> bool:
        summary = self.summary
        return summary.terminated or summary.truncated or self.cut_reason is not None or self.failure is not None

    def count_turn(self, finish_reason: str) -> None:
        """Count a model turn and how it ended."""
        self.model_turns += 1
        self.turns_cut += finish_reason == "length"

    def start(self, start: EpisodeStart) -> None:
        """Begin the episode's trajectory from the env's reset record."""
        self.trajectory = Trajectory.begin(start)

    def record(self, step: Step, seconds: float = 0.0) -> None:
        """Add an env step, as the env recorded it, to the trajectory."""
        self.env_seconds += seconds
        assert self.trajectory is not None, "record() before start()"
        self.trajectory.add(step, seconds)

    def truncate(self, reason: str) -> None:
        """Cut the episode for the driver's own reason (a token or turn budget)."""
        self.cut_reason = reason

    def fail(self, error: BaseException) -> None:
        """End the episode failed: its env died or raised (``failure`` says how)."""
        self.failure = f"{type(error).__name__}: {error}"

    def written(self) -> Trajectory | None:
        """The trajectory as a run's trajectories file keeps it: with the reason, when the episode failed."""
        if self.trajectory is None or self.failure is None:
            return self.trajectory
        return msgspec.structs.replace(self.trajectory, failure=self.failure)


@dataclass
class Episode(EpisodeStats):
    """One played episode: its statistics plus its token sequence (or, an agent program's, its rows).

    Attributes:
        group: Index of its task in the rollout batch.
        chain: Index of the chain within the group.
        seed: The env seed (the task).
        token_ids: The whole sequence: prompt, turns, observations.
        action_mask: 1 for each token the model generated, 0 for the rest.
        logprobs: The generator's log-prob of each generated token; 0.0 elsewhere.
        prompt_length: Tokens in the first prompt.
        turns: The model turns' places in the sequence.
        rows: An agent program's episode: its model calls as the gateway recorded them, one token row per
            conversation that continued exactly (the episode's own ``token_ids`` stay empty).
        calls: An agent program's episode: what its calls came to (calls, rows, prefix mismatches, latency).
        history_turns: The model sees the first prompt and only its last ``history_turns`` turns with their
            observations (``rollout.history_turns``); 0 for the whole episode. ``token_ids`` still holds the
            whole episode; :attr:`sequences` are the windows the model saw.
    """

    group: int
    chain: int
    seed: int
    token_ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prompt_length: int = 0
    turns: list[Turn] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    calls: EpisodeCounters | None = None
    history_turns: int = 0

    @property
    def sequences(self) -> list[Row] | list[Episode]:
        """What the update trains on: the rows of an agent program's episode; with a bounded history, one row per
        context the model saw (:meth:`windows`); else the episode's own sequence (also for an agent episode
        without rows, so a failed one still holds its place in its group)."""
        if self.rows:
            return self.rows
        if self.window_start(len(self.turns) - 1) == self.prompt_length:  # every turn saw the whole history
            return [self]
        return self.windows()

    def turn_places(self, sequences: Sequence[Any] | None = None) -> list[tuple[int, int, int]]:
        """Where each model turn is trained: its row in :attr:`sequences` (pass them when already built) and its
        ``(start, end)`` in that row."""
        sequences = self.sequences if sequences is None else sequences
        if sequences[0] is self:
            return [(0, turn.start, turn.end) for turn in self.turns]
        return [(row, start, end) for row, sequence in enumerate(sequences) for start, end in sequence.calls]

    def window_start(self, turn: int) -> int:
        """Where, in ``token_ids``, the history that turn number ``turn`` sees starts after the first prompt: the
        first of its last ``history_turns`` turns (the prompt's end when it sees them all)."""
        if not self.history_turns or turn <= self.history_turns:
            return self.prompt_length
        return self.turns[turn - self.history_turns].start

    def context(self) -> list[int]:
        """The tokens the model continues at its next turn: the first prompt, then the history it sees.

        Example:
            >>> e = Episode(group=0, chain=0, seed=0, history_turns=1)
            >>> e.append([1, 2], generated=False); e.prompt_length = 2
            >>> for action, observation in (([10], [11]), ([20], [21])):
            ...     e.turns.append(Turn(len(e.token_ids), len(e.token_ids) + 1, "stop"))
            ...     e.append(action, generated=True, logprobs=[-0.5]); e.append(observation, generated=False)
            >>> e.token_ids, e.context()
            ([1, 2, 10, 11, 20, 21], [1, 2, 20, 21])
        """
        return self.token_ids[: self.prompt_length] + self.token_ids[self.window_start(len(self.turns)) :]

    def windows(self) -> list[Row]:
        """The episode as the contexts the model saw: one row per window start (turns that saw the same start
        extend one row, as the gateway extends a conversation that continued), each turn's tokens action-masked
        in its own row only. Each row's ``calls`` are its turns' ``(start, end)`` in it. Without a bounded history,
        one row: the whole sequence up to its last turn (none before the first turn).

        Example:
            >>> e = Episode(group=0, chain=0, seed=0, history_turns=1)
            >>> e.append([1, 2], generated=False); e.prompt_length = 2
            >>> for action, observation in (([10], [11]), ([20], [21]), ([30], [])):
            ...     e.turns.append(Turn(len(e.token_ids), len(e.token_ids) + 1, "stop"))
            ...     e.append(action, generated=True, logprobs=[-0.5]); e.append(observation, generated=False)
            >>> [(row.token_ids, row.action_mask, row.calls) for row in e.windows()]
            [([1, 2, 10, 11, 20], [0, 0, 1, 0, 1], [(2, 3), (4, 5)]), ([1, 2, 20, 21, 30], [0, 0, 0, 0, 1], [(4, 5)])]
        """
        prompt = self.token_ids[: self.prompt_length]
        rows: list[Row] = []
        start, done = -1, 0
        for number, turn in enumerate(self.turns):
            if self.window_start(number) != start:
                start = done = self.window_start(number)  # ``done``: where the window's tokens in the row end
                rows.append(Row(token_ids=list(prompt), action_mask=[0] * len(prompt), logprobs=[0.0] * len(prompt)))
            row, context = rows[-1], self.token_ids[done : turn.start]
            row.token_ids += context + self.token_ids[turn.start : turn.end]
            row.action_mask += [0] * len(context) + [1] * (turn.end - turn.start)
            row.logprobs += [0.0] * len(context) + self.logprobs[turn.start : turn.end]
            row.calls.append((len(row.token_ids) - (turn.end - turn.start), len(row.token_ids)))
            done = turn.end
        return rows

    @property
    def generated_tokens(self) -> int:
        return sum(sum(sequence.action_mask) for sequence in self.sequences)

    @property
    def tool_calls(self) -> int:
        """The model's tool calls: an agent program's as the gateway returned them (to the program's own tools or
        the env's), else the env's count."""
        return self.calls.tool_calls if self.calls is not None else self.summary.tool_calls

    def append(self, token_ids: Sequence[int], *, generated: bool, logprobs: Sequence[float] = ()) -> None:
        """Append tokens: generated ones with their log-probs, or env/template ones (mask 0)."""
        self.token_ids.extend(token_ids)
        self.action_mask.extend([1 if generated else 0] * len(token_ids))
        self.logprobs.extend(logprobs if generated else [0.0] * len(token_ids))


@dataclass
class RolloutStats:
    """Timing of one rollout.

    Attributes:
        wall_s: Wall time of the whole rollout.
        generate_s: Time the generator was busy (an async generator: while any request was in it).
        env_s: Time spent in env calls, summed over episodes (they overlap, so it can exceed the wall).
        generated_tokens: Tokens sampled.
        batches: Generation batches (an async generator: busy spans, each ending when it has no request left).
        pool_leases_peak: Most envs leased from the env pool at once (sampled at each batch).
    """

    wall_s: float = 0.0
    generate_s: float = 0.0
    env_s: float = 0.0
    generated_tokens: int = 0
    batches: int = 0
    pool_leases_peak: int = 0

    def count_batch(self, envs: ResourcePool[Any], seconds: float) -> None:
        """Record one generation batch and the env leases held while it ran."""
        self.batches += 1
        self.generate_s += seconds
        self.pool_leases_peak = max(self.pool_leases_peak, envs.stats().in_use)

    @property
    def env_wait_s(self) -> float:
        """Wall time the generator sat idle: waiting on envs (and on the bookkeeping around them)."""
        return max(0.0, self.wall_s - self.generate_s)

    @property
    def env_wait_share(self) -> float:
        return self.env_wait_s / self.wall_s if self.wall_s else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s else 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "wall_s": self.wall_s,
            "generate_s": self.generate_s,
            "env_s": self.env_s,
            "env_wait_s": self.env_wait_s,
            "env_wait_share": self.env_wait_share,
            "generated_tokens": self.generated_tokens,
            "tokens_per_s": self.tokens_per_s,
            "batches": self.batches,
            "pool_leases_peak": self.pool_leases_peak,
        }


@dataclass
class RolloutResult:
    """Episodes in (group, chain) order, and the rollout's timing."""

    episodes: list[Episode]
    stats: RolloutStats

    @classmethod
    def of(cls, episodes: list[Episode], stats: RolloutStats, started: float, episode_id_prefix: str) -> RolloutResult:
        """A played batch: its timing completed (from ``started``, a ``perf_counter`` reading) and each trajectory
        named ``{episode_id_prefix}{group}-{chain}``."""
        stats.wall_s = time.perf_counter() - started
        stats.generated_tokens = sum(e.generated_tokens for e in episodes)
        stats.env_s = sum(e.env_seconds for e in episodes)
        for episode in episodes:
            if episode.trajectory is not None:
                episode.trajectory.episode_id = f"{episode_id_prefix}{episode.group}-{episode.chain}"
        return cls(episodes=episodes, stats=stats)


async def reset_episode(env: EnvHandle, stats: EpisodeStats, seed: int | None) -> EpisodeStart | None:
    """Start an episode on a leased env; its opening record begins ``stats.trajectory``.

    Returns None when the env died or raised: the episode has then failed (``stats.failure``), and the
    env is for its pool to replace. Every episode driver starts and steps episodes through these two
    functions, so an env failure ends one episode the same way everywhere, never the batch.
    """
    started = time.perf_counter()
    try:
        _, info = await env.areset(seed=seed)
    except Exception as error:
        stats.fail(error)
        return None
    finally:
        stats.env_seconds += time.perf_counter() - started
    start: EpisodeStart = info["start"]
    stats.start(start)
    return start


async def step_episode(env: EnvHandle, stats: EpisodeStats, action: str) -> Step | None:
    """Play one model turn on a leased env and record what the env says about it (None: the env
    died or raised, and the episode has failed, as in :func:`reset_episode`)."""
    started = time.perf_counter()
    try:
        *_, info = await env.astep(action)
    except Exception as error:
        stats.fail(error)
        return None
    step: Step = info["step"]
    stats.record(step, time.perf_counter() - started)
    return step


def run_env_pool(
    config: Config, size: int, *, env_fn: Callable[[], Any] | None = None, options: dict[str, Any] | None = None
) -> ResourcePool[EnvHandle]:
    """A run's pool of ``size`` envs: built by ``env_fn`` when given (a test's own env), else the config's env id
    with ``options`` (default ``env.options``) in the config's pool backend (``env.pool``: this process or Ray)."""
    if env_fn is not None:
        return make_env_pool(env_fn, size=size)
    default_manager().configure(config.env.backend_pools)
    return make_env_pool(
        config.env.id, config.env.options if options is None else options, backend=config.env.pool, size=size
    )


async def lease_envs(
    envs: ResourcePool[EnvHandle], episodes: list[Episode], timeout_s: float | None
) -> list[Lease[EnvHandle]]:
    """An env for each episode; an episode whose env could not be made (its actor killed while it started)
    fails, with the reason, and the others are played. Every env failing to start is an error of the run.
    Returns the leases of the episodes left to play, in their order."""
    if len(episodes) > envs.config.size:
        raise ValueError(f"{len(episodes)} episodes need as many envs; the env pool holds {envs.config.size}")
    leased = await asyncio.gather(*(envs.acquire(timeout=timeout_s) for _ in episodes), return_exceptions=True)
    errors = [lease for lease in leased if isinstance(lease, BaseException)]
    if errors and (len(errors) == len(leased) or not all(isinstance(e, Exception) for e in errors)):
        await asyncio.gather(*(lease.release() for lease in leased if not isinstance(lease, BaseException)))
        raise errors[0]
    for episode, lease in zip(episodes, leased, strict=True):
        if isinstance(lease, Exception):
            episode.fail(lease)
    return [lease for lease in leased if not isinstance(lease, BaseException)]


class Rollout:
    """Plays batches of episodes with a generator.

    Args:
        envs: The env pool; each episode leases one env (``prompts x samples_per_prompt`` at most at once).
        chat: The chat template's token pieces.
        generator: Continues token contexts (the policy).
        config: Budgets, sampling and scheduling.
        params: Sampling parameters (default: from ``config``).
        lease_timeout_s: How long an episode waits for an env.
    """

    def __init__(
        self,
        envs: ResourcePool[EnvHandle],
        chat: ChatFormat,
        generator: Generator,
        config: RolloutConfig,
        params: SamplingParams | None = None,
        *,
        lease_timeout_s: float | None = 600.0,
    ) -> None:
        self.envs = envs
        self.chat = chat
        self.tokenizer = chat.tokenizer
        self.generator = generator
        self.config = config
        self.params = params or SamplingParams.from_rollout(config, stop_token_ids=chat.end_of_turn_ids)
        self.lease_timeout_s = lease_timeout_s
        self.prefix_ids = chat.content_ids(config.assistant_prefix) if config.assistant_prefix else []

    def run(self, task_seeds: Sequence[int], sample_seed: int, *, episode_id_prefix: str = "") -> RolloutResult:
        """Sync form of :meth:`arun`."""
        return run_sync(self.arun(task_seeds, sample_seed, episode_id_prefix=episode_id_prefix))

    async def arun(self, task_seeds: Sequence[int], sample_seed: int, *, episode_id_prefix: str = "") -> RolloutResult:
        """Play ``samples_per_prompt`` chains of each task; the env seed of task ``g`` is ``task_seeds[g]``.

        Args:
            task_seeds: One env seed per task.
            sample_seed: Seeds the sampling; the same weights and seeds give the same episodes.
            episode_id_prefix: Prefix of each trajectory's ``episode_id`` (``{prefix}{group}-{chain}``).
        """
        n = self.config.samples_per_prompt
        history = self.config.history_turns
        episodes = [
            Episode(group=g, chain=c, seed=int(seed), history_turns=history)
            for g, seed in enumerate(task_seeds)
            for c in range(n)
        ]
        stats = RolloutStats()
        started = time.perf_counter()
        leases = await lease_envs(self.envs, episodes, self.lease_timeout_s)
        playing = [episode for episode in episodes if episode.failure is None]
        try:
            if self.config.overlap:
                await _OverlappedRun(self, playing, leases, sample_seed, stats).run()
            else:
                await self._lockstep(playing, leases, sample_seed, stats)
        finally:
            # An env that failed, or was left mid-episode (an error, a cancel), may be in any state: the
            # pool replaces it.
            await asyncio.gather(
                *(
                    lease.release(broken=e.failure is not None or not e.done)
                    for lease, e in zip(leases, playing, strict=True)
                )
            )
        return RolloutResult.of(episodes, stats, started, episode_id_prefix)

    # ----------------------------------------------------------------- one episode's steps

    async def _reset(self, env: EnvHandle, episode: Episode) -> None:
        start = await reset_episode(env, episode, episode.seed)
        if start is None:
            return
        prompt = self.chat.encode_prompt(start.system_prompt, start.observation) + self.prefix_ids
        episode.append(prompt, generated=False)
        episode.prompt_length = len(prompt)

    def _request(self, episode: Episode, sample_seed: int) -> GenerationRequest | None:
        """The next generation request, or None (and the episode truncated) when no budget is left."""
        context = episode.context()
        room = self.config.max_episode_tokens - len(context)
        if room <= 0:
            episode.truncate("max_tokens")
            return None
        seed = np.random.SeedSequence([sample_seed, episode.group, episode.chain, len(episode.turns)])
        return GenerationRequest(context, room, int(seed.generate_state(1, np.uint64)[0] >> 1))

    def _take_generation(self, episode: Episode, generation: Generation) -> str:
        """Append the generated tokens; return the action text for the env."""
        start = len(episode.token_ids)
        episode.append(generation.token_ids, generated=True, logprobs=generation.logprobs)
        episode.turns.append(Turn(start, len(episode.token_ids), generation.finish_reason))
        episode.count_turn(generation.finish_reason)
        return self.config.assistant_prefix + self.tokenizer.decode(generation.token_ids, skip_special_tokens=True)

    async def _step(self, env: EnvHandle, episode: Episode, generation: Generation, action: str) -> None:
        """Play a turn; append the observation turn when the episode goes on."""
        step = await step_episode(env, episode, action)
        if step is None or episode.done:
            return
        if len(episode.turns) >= self.config.max_turns:
            episode.truncate("max_turns")
            return
        continuation = self.chat.encode_observation(step.observation, generation.token_ids) + self.prefix_ids
        # The next turn's context: the first prompt, then the history its window keeps, this observation included.
        history = len(episode.token_ids) - episode.window_start(len(episode.turns))
        if episode.prompt_length + history + len(continuation) >= self.config.max_episode_tokens:
            episode.truncate("max_tokens")
            return
        episode.append(continuation, generated=False)
        episode.turns[-1].observation_tokens = len(continuation)

    # ----------------------------------------------------------------- lockstep rounds

    async def _lockstep(
        self, episodes: list[Episode], leases: list[Lease[EnvHandle]], sample_seed: int, stats: RolloutStats
    ) -> None:
        envs = [lease.resource for lease in leases]
        await asyncio.gather(*(self._reset(env, e) for env, e in zip(envs, episodes, strict=True)))
        active = [i for i, episode in enumerate(episodes) if not episode.done]  # a reset can fail
        while active:
            requests = {i: self._request(episodes[i], sample_seed) for i in active}
            active = [i for i in active if requests[i] is not None]
            if not active:
                break
            started = time.perf_counter()
            generations = await asyncio.to_thread(
                self.generator.generate,
                [requests[i] for i in active],
                self.params,  # type: ignore[misc]
            )
            stats.count_batch(self.envs, time.perf_counter() - started)
            actions = {i: self._take_generation(episodes[i], g) for i, g in zip(active, generations, strict=True)}
            await asyncio.gather(
                *(self._step(envs[i], episodes[i], g, actions[i]) for i, g in zip(active, generations, strict=True))
            )
            active = [i for i in active if not episodes[i].done]


class _OverlappedRun:
    """One overlapped rollout: a coroutine per episode, their turns batched by a :class:`GenerationScheduler`."""

    def __init__(
        self,
        rollout: Rollout,
        episodes: list[Episode],
        leases: list[Lease[EnvHandle]],
        sample_seed: int,
        stats: RolloutStats,
    ) -> None:
        self.rollout = rollout
        self.episodes = episodes
        self.envs = [lease.resource for lease in leases]
        self.sample_seed = sample_seed
        self.scheduler = GenerationScheduler(
            rollout.generator,
            batch_wait_s=rollout.config.batch_wait_s,
            max_batch_size=rollout.config.max_batch_size,
            on_batch=lambda seconds: stats.count_batch(rollout.envs, seconds),
        )

    async def run(self) -> None:
        for _ in self.episodes:
            self.scheduler.join()
        try:
            async with self.scheduler.running(), asyncio.TaskGroup() as group:
                for env, episode in zip(self.envs, self.episodes, strict=True):
                    group.create_task(self._episode(env, episode))
        except BaseExceptionGroup as errors:  # surface the failure itself, not the group around it
            first = next(
                (e for e in errors.exceptions if not isinstance(e, asyncio.CancelledError)), errors.exceptions[0]
            )
            raise first from None

    async def _episode(self, env: EnvHandle, episode: Episode) -> None:
        rollout = self.rollout
        try:
            await rollout._reset(env, episode)
            while not episode.done:
                request = rollout._request(episode, self.sample_seed)
                if request is None:
                    break
                generation = await self.scheduler.generate(request, rollout.params)
                action = rollout._take_generation(episode, generation)
                await rollout._step(env, episode, generation, action)
        finally:
            self.scheduler.leave()
