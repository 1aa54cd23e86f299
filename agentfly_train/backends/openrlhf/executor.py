"""AgentFly envs as an OpenRLHF 0.11.2 agent: the executor the plug-in's agent file hands to OpenRLHF.

OpenRLHF loads the agent file by path (``--train.agent_func_path``) in every vLLM engine actor and builds its
``AgentExecutor()``. ``agentfly-train --backend openrlhf`` writes that file, ``agentfly_agent.py``, beside the run's
settings file (:mod:`~agentfly_train.backends.openrlhf.settings`); it exposes this module's
:class:`AgentExecutor` bound to the settings (``AgentExecutor.bound(path)``). The code lives here, in an ordinary
module, because a file loaded by path is not in ``sys.modules`` (dataclasses and pickling need that) and would hold
a second copy of the pools.

For each sample of a prompt row, OpenRLHF's own multi-turn loop (``MultiTurnAgentExecutor.execute``)
creates an ``AgentInstance()`` without arguments, calls ``reset`` with the row's prompt and label, then
alternates: vLLM generates a turn from the token ids so far, ``step`` receives the turn's text and
returns the reward, the env's observation and ``done``. OpenRLHF keeps the generated token ids as they
are and records their spans (``action_ranges``); the text ``step`` returns is tokenized and appended
outside every span, so env tokens carry no loss.

The label (JSON, written by :func:`agentfly_train.dataset.export_tasks`) names the env, its options and
the seed, so the instance rebuilds exactly the task the prompt shows. The run's turn limit
(``Settings.max_turns``) joins the options as ``max_turns`` unless the label sets its own
(:func:`env_options`). Envs are leased per episode from a pool per (env id, options) and process: Ray actors
spread over the cluster when Ray is running (as it is inside OpenRLHF), so blocking env code never runs on
vLLM's event loop; in-process envs otherwise.

What ``step`` returns:
    * ``rewards``: the env's reward for the step (a 0-d tensor; OpenRLHF sums them over the episode);
      ``scores``: the episode's return so far.
    * ``environment_feedback``: the observation as the chat template's tool (or user) turn, followed by
      the opening of the next model turn, e.g. for ChatML ``<|im_end|>\\n<|im_start|>tool\\n{obs}
      <|im_end|>\\n<|im_start|>assistant\\n``; the closing token is left out when the model generated it.
      The same tokens the local backend appends (:meth:`ChatFormat.observation_text`).
    * ``done`` and ``extra_logs`` (:func:`episode_logs`): turns, tool calls, parse errors, errors, success, env
      latency, truncation and failure flags, and for each tool of ``Settings.tools`` (the run's envs' tools)
      ``tool/<name>/calls``, ``tool/<name>/errors`` (timeouts included), ``tool/<name>/timeouts`` and
      ``tool/<name>/ms`` (the calls' summed wall time): the same keys on every step and every sample, as OpenRLHF
      batches them key by key. OpenRLHF logs a key's mean over a step's samples, so these read as per-episode
      means (calls per episode, errors per episode, milliseconds per episode).

Per-turn sampling: OpenRLHF's loop gives every turn the whole rest of ``max_len`` as its budget (an
untrained model fills it in a turn or two) and has no stop strings or top-k. The plug-in keeps
OpenRLHF's ``execute`` (its contract and its token bookkeeping) and sets these on the copy of the
sampling parameters each ``generate`` call gets: the turn's budget is the smaller of what is left and
``Settings.max_turn_tokens``, and ``Settings.stop`` / ``Settings.top_k`` apply (stop strings kept in
the output, as the local rollout keeps them). A turn cut by its own budget is ``finish_reason ==
"length"`` to OpenRLHF, as a turn cut by ``max_len`` is.

OpenRLHF behaviour handled here:
    * An episode whose next turn would not fit in ``max_len`` gets no further ``step`` from OpenRLHF,
      so it would end without its final reward and keep its env leased. ``step`` ends such an episode
      itself (``truncated``, ``truncation_context=1`` in ``extra_logs``) as soon as the observation plus
      at least ``Settings.min_turn_tokens`` would not fit, and releases the env.
    * Env tokens count in OpenRLHF's ``response_length`` (its issue #1243), and so in the overlong
      penalty (``--algo.overlong_buffer_len``): budget that penalty for observations, or leave it off.

Settings: one :class:`~agentfly_train.backends.openrlhf.settings.Settings` record (env pool and its size, the env
actors' Ray options, the observation role, lease timeout, a turn's token budget and minimum room, stop strings,
top-k, the turn limit, the tools to log, and the ``[agent]`` section an agent program plays with), read from the
settings file the executor class is bound to, or given as ``AgentExecutor(settings=...)``; the program executor
(:mod:`~agentfly_train.backends.openrlhf.program_executor`) shares them, with this module's labels, env pools and
episode logs.

Example:
    What OpenRLHF's vLLM actor does with the agent file, for one sample (``engine`` is the vLLM actor)::

        executor = AgentExecutor.bound("/runs/x/openrlhf/agentfly-settings.json")()  # what agentfly_agent.py builds
        result = await executor.execute(prompt, label, sampling_params, 2048, tokenizer, engine)
        result["observation_tokens"], result["action_ranges"], result["reward"]
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from agentfly_env.core.types import tool_status
from agentfly_env.resources.distributed import make_env_pool
from agentfly_env.resources.pool import Lease, ResourcePool
from agentfly_train.backends.openrlhf.settings import Settings, SettingsFile
from agentfly_train.chat import ChatFormat
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


# Pools belong to the event loop that created them; vLLM's engine keeps one loop for its lifetime.
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ResourcePool[Any]]] = weakref.WeakKeyDictionary()
_CHAT_FORMATS: dict[tuple[int, str], ChatFormat] = {}


def env_options(label: EpisodeLabel, settings: Settings) -> dict[str, Any]:
    """The ``gym.make`` options of the label's env: the label's, with the run's turn limit (``settings.max_turns``)
    as ``max_turns`` unless the label sets its own.

    Example:
        >>> label = EpisodeLabel("AgentFly/Math-v0", {"difficulty": 0})
        >>> env_options(label, Settings(max_turns=3)), env_options(label, Settings())
        ({'difficulty': 0, 'max_turns': 3}, {'difficulty': 0})
        >>> env_options(EpisodeLabel("AgentFly/Math-v0", {"max_turns": 5}), Settings(max_turns=3))
        {'max_turns': 5}
    """
    options = dict(label.options)
    if settings.max_turns is not None:
        options.setdefault("max_turns", settings.max_turns)
    return options


def env_pool(label: EpisodeLabel, settings: Settings) -> ResourcePool[Any]:
    """This process's pool of ``label.env_id`` envs made with the label's options (:func:`env_options`), created on
    first use."""
    pools = _POOLS.setdefault(asyncio.get_running_loop(), {})
    options = env_options(label, settings)
    key = json.dumps([label.env_id, options], sort_keys=True)
    if key not in pools:
        backend = settings.pool_backend
        pools[key] = make_env_pool(
            label.env_id,
            options,
            backend=backend,
            size=settings.pool_size,
            ray_options=settings.actor_options if backend == "ray" else None,
        )
    return pools[key]


async def close_pools() -> None:
    """Close the pools of the running loop (destroys their envs or Ray actors)."""
    for pool in _POOLS.pop(asyncio.get_running_loop(), {}).values():
        await pool.close()


def episode_logs(played: EpisodeStats, tools: Sequence[str] = ()) -> dict[str, float]:
    """What OpenRLHF logs of an episode (its ``extra_logs``), by either executor: the same keys for every episode,
    as OpenRLHF batches them key by key; for each name in ``tools`` (the run's, ``Settings.tools``), the
    episode's calls of that tool (:func:`tool_logs`).

    Example:
        >>> logs = episode_logs(EpisodeStats(failure="the env actor died"), ["calculator"])
        >>> logs["failed"], logs["turns"], logs["tool/calculator/calls"]
        (1.0, 0.0, 0.0)
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
        **tool_logs(played.trajectory.steps if played.trajectory is not None else (), tools),
    }


def tool_logs(steps: Sequence[Any], tools: Sequence[str]) -> dict[str, float]:
    """One episode's calls of each of ``tools``, from its steps' ``tool_results``: ``tool/<name>/calls``,
    ``tool/<name>/errors`` (calls that did not return ``ok``, timeouts included), ``tool/<name>/timeouts`` and
    ``tool/<name>/ms`` (their wall times summed, in milliseconds); zeros for a tool it did not call. Calls of a
    name not in ``tools`` are not logged: every episode of a run carries the same keys.

    Example:
        >>> from agentfly_env.core.types import Step, ToolResult
        >>> step = Step(observation="", reward=0.0, tool_results=[ToolResult("f", "", duration_s=0.002),
        ...                                                      ToolResult("f", "", "timeout", duration_s=0.5)])
        >>> tool_logs([step], ["f", "g"])["tool/f/calls"], tool_logs([step], ["f"])["tool/f/timeouts"]
        (2.0, 1.0)
        >>> tool_logs([step], ["f"])["tool/f/ms"], tool_logs([step], ["f", "g"])["tool/g/errors"]
        (502.0, 0.0)
    """
    logs = {f"tool/{name}/{field}": 0.0 for name in tools for field in ("calls", "errors", "timeouts", "ms")}
    for step in steps:
        for result in step.tool_results:
            prefix = f"tool/{result.name}/"
            if prefix + "calls" not in logs:
                continue
            logs[prefix + "calls"] += 1
            logs[prefix + "errors"] += result.error is not None
            logs[prefix + "timeouts"] += tool_status(result.error) == "timeout"
            logs[prefix + "ms"] += 1000 * result.duration_s
    return logs


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
                "AgentInstance runs inside this module's AgentExecutor (it needs the generated token ids); point "
                "--train.agent_func_path at the agent file agentfly-train writes (agentfly_agent.py) or at "
                "agentfly_train/backends/openrlhf/agent.py"
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
            "extra_logs": episode_logs(self._played, self._episode.settings.tools),
        }


class AgentExecutor(MultiTurnAgentExecutor, SettingsFile):
    """OpenRLHF's multi-turn loop over :class:`AgentInstance`; what OpenRLHF builds from the agent file.

    Args:
        settings: The plug-in's settings; without them (OpenRLHF's ``AgentExecutor()``), those of the file the
            class is bound to (``AgentExecutor.bound(path)``, what the generated agent file exposes), else the
            :class:`~agentfly_train.backends.openrlhf.settings.Settings` defaults.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(AgentInstance)
        self.settings = self.settings_or_file(settings)

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
