"""AgentFly envs as an OpenRLHF 0.11.2 agent: the executor that ``agent.py`` hands to OpenRLHF.

OpenRLHF loads ``agent.py`` by path (``--train.agent_func_path``) in every vLLM engine actor and builds
its ``AgentExecutor()``; the code lives here, in an ordinary module, because a file loaded by path is
not in ``sys.modules`` (dataclasses and pickling need that) and would hold a second copy of the pools.

For each sample of a prompt row, OpenRLHF's own multi-turn loop (``MultiTurnAgentExecutor.execute``)
creates an ``AgentInstance()`` without arguments, calls ``reset`` with the row's prompt and label, then
alternates: vLLM generates a turn from the token ids so far, ``step`` receives the turn's text and
returns the reward, the env's observation and ``done``. OpenRLHF keeps the generated token ids as they
are and records their spans (``action_ranges``); the text ``step`` returns is tokenized and appended
outside every span, so env tokens carry no loss.

The label (JSON, written by :func:`agentfly_train.dataset.export_tasks`) names the env, its options and
the seed, so the instance rebuilds exactly the task the prompt shows. Envs are leased per episode from
a pool per (env id, options) and process: Ray actors spread over the cluster when Ray is running (as
it is inside OpenRLHF), so blocking env code never runs on vLLM's event loop; in-process envs otherwise.

What ``step`` returns:
    * ``rewards``: the env's reward for the step (a 0-d tensor; OpenRLHF sums them over the episode);
      ``scores``: the episode's return so far.
    * ``environment_feedback``: the observation as the chat template's tool (or user) turn, followed by
      the opening of the next model turn, e.g. for ChatML ``<|im_end|>\\n<|im_start|>tool\\n{obs}
      <|im_end|>\\n<|im_start|>assistant\\n``; the closing token is left out when the model generated it.
      The same tokens the local backend appends (:meth:`ChatFormat.observation_text`).
    * ``done`` and ``extra_logs``: turns, tool calls, parse errors, errors, success, env latency,
      truncation and failure flags (the same keys on every step, as OpenRLHF batches them).

Per-turn sampling: OpenRLHF's loop gives every turn the whole rest of ``max_len`` as its budget (an
untrained model fills it in a turn or two) and has no stop strings or top-k. The plug-in keeps
OpenRLHF's ``execute`` (its contract and its token bookkeeping) and sets these on the copy of the
sampling parameters each ``generate`` call gets: the turn's budget is the smaller of what is left and
``AGENTFLY_MAX_TURN_TOKENS``, and ``AGENTFLY_STOP`` / ``AGENTFLY_TOP_K`` apply (stop strings kept in
the output, as the local rollout keeps them). A turn cut by its own budget is ``finish_reason ==
"length"`` to OpenRLHF, as a turn cut by ``max_len`` is.

OpenRLHF behaviour handled here:
    * An episode whose next turn would not fit in ``max_len`` gets no further ``step`` from OpenRLHF,
      so it would end without its final reward and keep its env leased. ``step`` ends such an episode
      itself (``truncated``, ``truncation_context=1`` in ``extra_logs``) as soon as the observation plus
      at least ``AGENTFLY_MIN_TURN_TOKENS`` would not fit, and releases the env.
    * Env tokens count in OpenRLHF's ``response_length`` (its issue #1243), and so in the overlong
      penalty (``--algo.overlong_buffer_len``): budget that penalty for observations, or leave it off.

Settings (environment variables, set by ``agentfly-train --backend openrlhf``):
    * ``AGENTFLY_ENV_POOL``: ``ray``, ``local`` or ``auto`` (default: Ray when it is initialised).
    * ``AGENTFLY_ENV_POOL_SIZE``: env instances per (env, options) in each engine process (default 16).
    * ``AGENTFLY_ENV_ACTOR_OPTIONS``: JSON of :class:`~agentfly_env.resources.distributed.RayEnvOptions` fields for
      the env actors, e.g. ``{"num_cpus": 1, "resources": {"env_node": 1}}`` to place them on CPU nodes.
    * ``AGENTFLY_OBSERVATION_ROLE``: ``tool`` (default) or ``user``.
    * ``AGENTFLY_LEASE_TIMEOUT_S``: how long an episode waits for a free env (default 600).
    * ``AGENTFLY_MIN_TURN_TOKENS``: room a turn needs to be worth generating (default 16).
    * ``AGENTFLY_MAX_TURN_TOKENS``: a turn's token budget (``rollout.max_new_tokens``; 0 = no limit of its own).
    * ``AGENTFLY_STOP``: JSON list of stop strings (``rollout.stop``).
    * ``AGENTFLY_TOP_K``: top-k sampling (``rollout.top_k``; 0 = off).
    * ``AGENTFLY_AGENT``: JSON of the run's ``[agent]`` section (:class:`~agentfly_train.config.AgentConfig`) when an
      agent program plays the episodes; read by the program executor
      (:mod:`~agentfly_train.backends.openrlhf.program_executor`), which shares this module's labels, settings,
      env pools and episode logs.

Example:
    What OpenRLHF's vLLM actor does with it, for one sample (``engine`` is the vLLM actor)::

        executor = AgentExecutor()
        result = await executor.execute(prompt, label, sampling_params, 2048, tokenizer, engine)
        result["observation_tokens"], result["action_ranges"], result["reward"]
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import weakref
from dataclasses import dataclass, field
from typing import Any

import msgspec
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from agentfly_env.resources.distributed import make_env_pool
from agentfly_env.resources.pool import Lease, ResourcePool
from agentfly_train.backends.openrlhf.config import ENV_POOLS
from agentfly_train.chat import ChatFormat
from agentfly_train.config import AgentConfig
from agentfly_train.rollout import EpisodeStats, reset_episode, step_episode

logger = logging.getLogger("agentfly.openrlhf")


class EpisodeLabel(msgspec.Struct, forbid_unknown_fields=True):
    """What a prompt row's label carries: the env, its ``gym.make`` options and the task's seed."""

    env_id: str
    options: dict[str, Any] = {}
    seed: int | None = None

    @classmethod
    def parse(cls, label: Any) -> EpisodeLabel:
        """Decode a label (JSON text, or the dict OpenRLHF may have parsed already).

        Raises:
            ValueError: saying what a label must hold.
        """
        try:
            if isinstance(label, (str, bytes)):
                return msgspec.json.decode(label, type=cls)
            return msgspec.convert(label, type=cls)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise ValueError(
                f"an AgentFly prompt row's label must be JSON like "
                f'{{"env_id": "AgentFly/Math-v0", "options": {{}}, "seed": 0}} '
                f"(write rows with `agentfly-train export`); got {str(label)[:200]!r}: {error}"
            ) from None


@dataclass(frozen=True)
class Settings:
    """The plug-in's settings, read from the environment (see the module docstring)."""

    pool: str = "auto"
    pool_size: int = 16
    actor_options: dict[str, Any] = field(default_factory=dict)
    observation_role: str = "tool"
    lease_timeout_s: float = 600.0
    min_turn_tokens: int = 16
    max_turn_tokens: int = 0
    stop: tuple[str, ...] = ()
    top_k: int = 0
    agent: AgentConfig = field(default_factory=AgentConfig)

    @classmethod
    def from_environ(cls) -> Settings:
        env = os.environ
        settings = cls(
            pool=env.get("AGENTFLY_ENV_POOL", cls.pool),
            pool_size=int(env.get("AGENTFLY_ENV_POOL_SIZE", cls.pool_size)),
            actor_options=json.loads(env.get("AGENTFLY_ENV_ACTOR_OPTIONS") or "{}"),
            observation_role=env.get("AGENTFLY_OBSERVATION_ROLE", cls.observation_role),
            lease_timeout_s=float(env.get("AGENTFLY_LEASE_TIMEOUT_S", cls.lease_timeout_s)),
            min_turn_tokens=int(env.get("AGENTFLY_MIN_TURN_TOKENS", cls.min_turn_tokens)),
            max_turn_tokens=int(env.get("AGENTFLY_MAX_TURN_TOKENS", cls.max_turn_tokens)),
            stop=tuple(json.loads(env.get("AGENTFLY_STOP") or "[]")),
            top_k=int(env.get("AGENTFLY_TOP_K", cls.top_k)),
            agent=_agent_config(env.get("AGENTFLY_AGENT") or "{}"),
        )
        if settings.pool not in ENV_POOLS:
            raise ValueError(
                f"AGENTFLY_ENV_POOL must be {', '.join(ENV_POOLS[:-1])} or {ENV_POOLS[-1]}; got {settings.pool!r}"
            )
        return settings

    @property
    def pool_backend(self) -> str:
        if self.pool != "auto":
            return self.pool
        try:
            import ray
        except ImportError:
            return "local"
        return "ray" if ray.is_initialized() else "local"


def _agent_config(text: str) -> AgentConfig:
    try:
        return msgspec.json.decode(text, type=AgentConfig)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ValueError(
            f'AGENTFLY_AGENT must be JSON of the [agent] section, like {{"program": "/abs/agent.py:solve"}}; '
            f"got {text[:200]!r}: {error}"
        ) from None


# Pools belong to the event loop that created them; vLLM's engine keeps one loop for its lifetime.
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ResourcePool[Any]]] = weakref.WeakKeyDictionary()
_CHAT_FORMATS: dict[tuple[int, str], ChatFormat] = {}


def env_pool(label: EpisodeLabel, settings: Settings) -> ResourcePool[Any]:
    """This process's pool of ``label.env_id`` envs made with ``label.options`` (created on first use)."""
    pools = _POOLS.setdefault(asyncio.get_running_loop(), {})
    key = json.dumps([label.env_id, label.options], sort_keys=True)
    if key not in pools:
        backend = settings.pool_backend
        pools[key] = make_env_pool(
            label.env_id,
            label.options,
            backend=backend,
            size=settings.pool_size,
            ray_options=settings.actor_options if backend == "ray" else None,
        )
    return pools[key]


async def close_pools() -> None:
    """Close the pools of the running loop (destroys their envs or Ray actors)."""
    for pool in _POOLS.pop(asyncio.get_running_loop(), {}).values():
        await pool.close()


def episode_logs(played: EpisodeStats) -> dict[str, float]:
    """What OpenRLHF logs of an episode (its ``extra_logs``), by either executor: the same keys for every episode,
    as OpenRLHF batches them key by key.

    Example:
        >>> logs = episode_logs(EpisodeStats(failure="the env actor died"))
        >>> logs["failed"], logs["turns"]
        (1.0, 0.0)
    """
    return {
        "turns": float(played.model_turns),
        "tool_calls": float(played.tool_calls),
        "parse_errors": float(played.parse_errors),
        "errors": float(played.errors),
        "success": float(played.success),
        "env_latency_s": played.env_seconds,
        "truncated": float(played.truncated),
        "truncation_context": float(played.truncation_reason == "context"),
        "failed": float(played.failure is not None),
    }


def chat_format(tokenizer: Any, role: str) -> ChatFormat:
    """The (cached) chat template pieces of ``tokenizer``."""
    key = (id(tokenizer), role)
    if key not in _CHAT_FORMATS:
        _CHAT_FORMATS[key] = ChatFormat(tokenizer, role)
    return _CHAT_FORMATS[key]


@dataclass
class _Episode:
    """One ``execute`` call's state, shared by the executor, the engine wrapper and the instance."""

    chat: ChatFormat
    settings: Settings
    generated: list[int] = field(default_factory=list)
    lease: Lease[Any] | None = None

    async def release(self, *, broken: bool = False) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            await lease.release(broken=broken)


_EPISODE: contextvars.ContextVar[_Episode] = contextvars.ContextVar("agentfly_openrlhf_episode")


class _RecordingEngine:
    """Passes ``generate`` through to vLLM with the turn's own sampling settings (see the module
    docstring) and keeps the turn's token ids: ``step`` only gets the text, and whether the model closed
    its own turn is a fact about tokens."""

    def __init__(self, engine: Any, episode: _Episode) -> None:
        self._engine = engine
        self._episode = episode

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        settings = self._episode.settings  # OpenRLHF's loop passes a copy per call: it may be changed
        if settings.max_turn_tokens:
            sampling_params.max_tokens = min(sampling_params.max_tokens, settings.max_turn_tokens)
        if settings.stop:
            sampling_params.stop = list(settings.stop)
            sampling_params.include_stop_str_in_output = True
        if settings.top_k:
            sampling_params.top_k = settings.top_k
        output = await self._engine.generate(prompt_token_ids, sampling_params, multi_modal_data=multi_modal_data)
        self._episode.generated = list(output.outputs[0].token_ids)
        return output


class AgentInstance(AgentInstanceBase):
    """One episode of an ``AgentFly/*`` env; made by OpenRLHF's loop, without arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            self._episode = _EPISODE.get()
        except LookupError:
            raise RuntimeError(
                "AgentInstance runs inside this module's AgentExecutor (it needs the generated token ids); "
                "point --train.agent_func_path at agentfly_train/backends/openrlhf/agent.py"
            ) from None
        # The same bookkeeping the local rollout keeps (rewards, tool calls, errors, success, end flags).
        self._played = EpisodeStats()

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Lease an env and start the label's task; the prompt row already shows its first observation."""
        episode = self._episode
        label = EpisodeLabel.parse(states["label"])
        episode.lease = await env_pool(label, episode.settings).acquire(timeout=episode.settings.lease_timeout_s)
        try:
            start = await reset_episode(episode.lease.resource, self._played, label.seed)
        except BaseException:  # cancelled: the env may be mid-reset
            await episode.release(broken=True)
            raise
        if start is None:  # OpenRLHF's loop has no failed reset: the error goes to it, the env to its pool
            await episode.release(broken=True)
            raise RuntimeError(f"{label.env_id} failed to start seed {label.seed}: {self._played.failure}")
        if start.observation not in states["observation"]:
            logger.warning(
                "the prompt does not contain %s's first observation for seed %s: the prompt file was written by "
                "another version of the env or with other options; the episode plays the env's task",
                label.env_id,
                label.seed,
            )
        return {"observation": states["observation"]}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Play the model's turn in the env; return reward, observation turn, ``done`` and logs."""
        episode = self._episode
        if episode.lease is None:
            raise RuntimeError("step() after the episode ended (or before reset())")
        action = episode.chat.strip_end_of_turn(states["action_text"])
        self._played.count_turn("stop")
        step = await step_episode(episode.lease.resource, self._played, action)
        if step is None:
            # The env died or raised (a killed actor, a crashed engine): the pool replaces it, the
            # episode ends as failed with no reward rather than taking the rollout down.
            logger.warning("episode failed: %s", self._played.failure)
            await episode.release(broken=True)
            return self._result(0.0, "", done=True)
        if self._played.done:
            await episode.release()
            return self._result(step.reward, "", done=True)
        feedback = episode.chat.observation_text(step.observation, episode.generated)
        room = states["sampling_params"].max_tokens - len(episode.generated) - len(episode.chat.template_ids(feedback))
        if room < episode.settings.min_turn_tokens:
            self._played.truncate("context")
            await episode.release()
            return self._result(step.reward, "", done=True)
        return self._result(step.reward, feedback, done=False)

    def _result(self, reward: float, feedback: str, *, done: bool) -> dict[str, Any]:
        return {
            "rewards": torch.tensor(reward),
            "scores": torch.tensor(self._played.reward),
            "environment_feedback": feedback,
            "done": done,
            "extra_logs": episode_logs(self._played),
        }


class AgentExecutor(MultiTurnAgentExecutor):
    """OpenRLHF's multi-turn loop over :class:`AgentInstance`; what OpenRLHF builds from this file."""

    def __init__(self) -> None:
        super().__init__(AgentInstance)
        self.settings = Settings.from_environ()

    async def execute(
        self,
        prompt: str,
        label: str,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        episode = _Episode(chat_format(hf_tokenizer, self.settings.observation_role), self.settings)
        token = _EPISODE.set(episode)
        try:
            return await super().execute(
                prompt, label, sampling_params, max_length, hf_tokenizer, _RecordingEngine(llm_engine, episode), images
            )
        finally:
            _EPISODE.reset(token)
            # The loop stopped before the env was done (an error, a cancel): the env is mid-episode and
            # may be in any state, so the pool replaces it.
            await episode.release(broken=True)
