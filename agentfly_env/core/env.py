"""``AgentEnv``: the multi-turn text Gymnasium env that every tool and task in AgentFly builds on.

Observations and actions are strings: the action is the model's whole turn, the observation is what
the env answers (tool output, a page, an error the model should read). ``areset``/``astep`` are the
native forms, so thousands of episodes share one event loop; ``reset``/``step`` drive them for sync
code. The base class owns what every env needs the same way: the episode state machine and its clear
errors for API misuse, the turn budget, bounded observations, and the episode record.

A subclass implements :meth:`AgentEnv._reset` and :meth:`AgentEnv._step` (async), and optionally
:meth:`AgentEnv._end_episode` to give back what the episode held.

``info`` holds the typed record of what happened beside the env's own entries: after ``reset``,
``info["start"]`` (an :class:`~agentfly_env.core.types.EpisodeStart`: task, system prompt, tool schemas;
``info["task"]``, ``info["tools"]`` and ``info["system_prompt"]`` name its parts); after ``step``,
``info["step"]``, the :class:`~agentfly_env.core.types.Step` that ``_step`` made and the trajectory holds
(tool calls, results, errors, success, reward components, truncation), and ``info["turn"]``. A step
record is made once, by the env, and passed on as it is: drivers, the server and ``Remote-v0`` read it,
none rebuilds it.

The task is read-only (:mod:`agentfly_env.core.readonly`): ``info["start"].task`` and ``trajectory.task``
are the task source's own object, shared with other episodes of the same task, and ``info["task"]`` is a
:class:`~agentfly_env.core.readonly.ReadOnlyView` of it (a mapping, not a ``dict``: Gymnasium's env
checker requires that no dict be shared by two calls' infos); changing either raises ``TypeError``;
``dict(info["task"])`` or ``copy.deepcopy(info["task"])`` is a copy to change (or to give ``json``). A
task source's frozen tasks pass through; a mutable task an env returns from ``_reset`` is frozen as a copy
(the env keeps its own).

Example:
    >>> class Echo(AgentEnv):
    ...     async def _reset(self, seed, options):
    ...         return "Say something.", {}
    ...     async def _step(self, action):
    ...         return Step(observation=f"You said: {action}", reward=1.0, terminated=action == "bye"), {}
    >>> env = Echo(max_turns=3)
    >>> env.reset(seed=0)[0]
    'Say something.'
    >>> env.step("hi")[:3]
    ('You said: hi', 1.0, False)
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym

from agentfly_env.core.aio import run_sync
from agentfly_env.core.readonly import ReadOnlyDict, ReadOnlyView, read_only
from agentfly_env.core.spaces import TextSpace
from agentfly_env.core.text import truncate_text
from agentfly_env.core.types import EpisodeStart, Step, Trajectory

_NO_TASK = ReadOnlyDict()


class EnvStateError(RuntimeError):
    """The env was used out of order: stepped before ``reset`` or after its episode ended."""


class OptionsError(ValueError):
    """A reset's ``options`` ask for what the env does not have (a task index out of range, a field of the
    wrong type): the caller's mistake, not the env's failure; the env stays usable.

    Example:
        >>> OptionsError("task_index", "7 is outside 0..3")
        OptionsError("options['task_index']: 7 is outside 0..3")
        >>> _.option
        'task_index'
    """

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"options[{option!r}]: {message}")
        self.option = option


class AgentEnv(gym.Env[str, str]):
    """A multi-turn text env with native async ``areset``/``astep``.

    Args:
        max_turns: Steps before the episode is truncated (``info["step"].truncation_reason == "max_turns"``).
        max_observation_chars: Observations longer than this are cut with a visible marker.
        render_mode: None or ``"ansi"`` (``render()`` returns the last exchange as text).
        env_id: Name recorded in trajectories; set from the registered id by ``gym.make``.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(
        self,
        *,
        max_turns: int = 10,
        max_observation_chars: int = 8192,
        render_mode: str | None = None,
        env_id: str | None = None,
    ) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode {render_mode!r} not in {self.metadata['render_modes']}")
        self.max_turns = max_turns
        self.max_observation_chars = max_observation_chars
        self.render_mode = render_mode
        self.env_id = env_id or type(self).__name__
        self.observation_space = TextSpace(max_length=max_observation_chars)
        self.action_space = TextSpace()
        self.turn = 0
        self.trajectory: Trajectory | None = None
        #: The model's instructions for every episode (an env with tools lists them here); None for none.
        self.system_prompt: str | None = None
        #: The tools' schemas in OpenAI function format.
        self.tool_schemas: list[dict[str, Any]] = []
        #: How a final answer is written as an action (``EpisodeStart.answer_format``); empty: as itself.
        self.answer_format: dict[str, str] = {}
        #: How a tool call is written in an action (``EpisodeStart.tool_format``, a parser name); empty: no tools.
        self.tool_format = ""
        self._episode_open = False
        self._needs_reset = True
        self._closed = False

    # ----------------------------------------------------------------- subclass hooks

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Start an episode; return the first observation and the reset info."""
        raise NotImplementedError

    async def _step(self, action: str) -> tuple[Step, dict[str, Any]]:
        """Act on one model turn: the step's record and the env's own ``info`` entries for it.

        The record says what the env decided: the observation, reward, ``terminated``, tool calls and
        results, errors, success, and ``truncation_reason`` when an outside failure cuts the episode.
        The base class completes it: it sets ``action``, bounds the observation, adds the turn budget's
        ``"max_turns"`` and sets ``truncated``.
        """
        raise NotImplementedError

    async def _end_episode(self) -> None:
        """Release what the episode holds (leases, sessions). Called once per episode."""

    async def _close(self) -> None:
        """Release what the env holds beyond an episode."""

    # ----------------------------------------------------------------- the async API

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a new episode (ending the current one, if any). Same seed, same task."""
        if self._closed:
            raise EnvStateError(f"{self.env_id}: reset() after close()")
        super().reset(seed=seed)
        await self.aend_episode()  # a reset that fails leaves no episode to step
        observation, info = await self._reset(seed, dict(options or {}))
        observation = truncate_text(observation, self.max_observation_chars)
        task = read_only(info.get("task", _NO_TASK))
        info["task"] = ReadOnlyView(task)  # not a dict: Gymnasium's checker wants no dict shared by two infos
        start = EpisodeStart(
            env_id=self.env_id,
            observation=observation,
            seed=seed,
            task=task,
            system_prompt=self.system_prompt,
            tools=[dict(schema) for schema in self.tool_schemas],
            answer_format=dict(self.answer_format),
            tool_format=self.tool_format,
        )
        self.trajectory = Trajectory.begin(start)
        self._episode_open = True
        self._needs_reset = False
        info.update(env_id=self.env_id, system_prompt=start.system_prompt, tools=start.tools, turn=0, start=start)
        return observation, info

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Act on one model turn: ``(observation, reward, terminated, truncated, info)``.

        Raises:
            EnvStateError: before the first ``reset`` or after the episode ended.
            TypeError: when ``action`` is not a string.
        """
        if self._needs_reset:
            ended = "ended" if self.trajectory is not None else "not started"
            raise EnvStateError(f"{self.env_id}: step() called but the episode has {ended}; call reset() first")
        if not isinstance(action, str):
            raise TypeError(f"{self.env_id}: the action must be the model's text (str), got {type(action).__name__}")
        started = time.perf_counter()
        self.turn += 1
        record, info = await self._step(action)
        record.action = action
        record.observation = truncate_text(record.observation, self.max_observation_chars)
        record.reward = float(record.reward)
        reason = record.truncation_reason
        if reason is None and not record.terminated and self.turn >= self.max_turns:
            reason = "max_turns"
        record.truncated = reason is not None and not record.terminated
        record.truncation_reason = reason if record.truncated else None
        info["turn"] = self.turn
        info["step"] = record
        assert self.trajectory is not None
        self.trajectory.add(record, time.perf_counter() - started)
        if record.terminated or record.truncated:  # release what the episode held (not in its step's time)
            self._needs_reset = True
            await self._finish_episode()
        return record.observation, record.reward, record.terminated, record.truncated, info

    async def aend_episode(self) -> None:
        """End the open episode, if any, and forget it: until the next ``reset`` a step raises
        :class:`EnvStateError`, and ``turn`` and ``trajectory`` start over.

        Env pools call it before they lend an env again, so an episode that one user left open never
        passes to the next (who could otherwise step it, and collect its reward, without a reset).
        """
        self._needs_reset = True
        self.turn = 0
        self.trajectory = None
        await self._finish_episode()

    async def aclose(self) -> None:
        """End the episode, release everything; a second call does nothing."""
        if self._closed:
            return
        await self._finish_episode()
        await self._close()
        self._closed = True

    async def _finish_episode(self) -> None:
        if self._episode_open:
            self._episode_open = False
            await self._end_episode()

    # ----------------------------------------------------------------- the sync API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        return run_sync(self.areset(seed=seed, options=options))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return run_sync(self.astep(action))

    def close(self) -> None:
        if not self._closed:
            run_sync(self.aclose())

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.trajectory is None:
            return None
        lines = [f"[observation] {self.trajectory.observation}"]
        if self.trajectory.steps:
            last = self.trajectory.steps[-1]
            lines = [f"[action] {last.action}", f"[observation] {last.observation}", f"[reward] {last.reward:g}"]
        return "\n".join(lines)
