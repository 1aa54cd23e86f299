"""``AgentEnv``: the multi-turn text Gymnasium env that every tool and task in AgentFly builds on.

Observations and actions are strings: the action is the model's whole turn, the observation is what
the env answers (tool output, a page, an error the model should read). ``areset``/``astep`` are the
native forms, so thousands of episodes share one event loop; ``reset``/``step`` drive them for sync
code. The base class owns what every env needs the same way: the episode state machine and its clear
errors for API misuse, the turn budget, bounded observations, and the episode record.

A subclass implements :meth:`AgentEnv._reset` and :meth:`AgentEnv._step` (async), and optionally
:meth:`AgentEnv._end_episode` to give back what the episode held.

Besides an env's own entries, ``info`` always has the typed record of what happened: after ``reset``,
``info["start"]`` (an :class:`~agentfly_env.types.EpisodeStart`: task, system prompt, tool schemas);
after ``step``, ``info["step"]`` (the :class:`~agentfly_env.types.Step` also appended to the
trajectory: tool calls, results, errors, success, reward components, truncation). The plain keys
(``info["errors"]``, ``info["success"]``, ...) are the same values, for code that reads dicts.

Example:
    >>> class Echo(AgentEnv):
    ...     async def _reset(self, seed, options):
    ...         return "Say something.", {}
    ...     async def _step(self, action):
    ...         return Transition(f"You said: {action}", reward=1.0, terminated=action == "bye")
    >>> env = Echo(max_turns=3)
    >>> env.reset(seed=0)[0]
    'Say something.'
    >>> env.step("hi")[:3]
    ('You said: hi', 1.0, False)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentfly_env.aio import run_sync
from agentfly_env.spaces import TextSpace
from agentfly_env.text import truncate_text
from agentfly_env.types import EpisodeStart, ParseError, Step, ToolCall, ToolResult, Trajectory


class EnvStateError(RuntimeError):
    """The env was used out of order: stepped before ``reset`` or after its episode ended."""


@dataclass
class Transition:
    """What a subclass's :meth:`AgentEnv._step` returns; the base class makes the step's record from it.

    Attributes:
        observation: The env's answer to the action (bounded by the base class).
        reward: Reward for this step; the final reward lands on the step that terminates.
        terminated: The task ended (solved, failed, or answered).
        truncation_reason: Set when the episode must stop for an outside reason (a backend died);
            the base class adds ``"max_turns"`` itself.
        success: Whether the task counts as solved.
        reward_components: The named parts of the reward.
        tool_calls: The calls the action made.
        tool_results: What they returned.
        parse_errors: What could not be read as a call.
        errors: Errors of the turn by kind, counted.
        info: The env's own extra ``info`` entries.
    """

    observation: str
    reward: float = 0.0
    terminated: bool = False
    truncation_reason: str | None = None
    success: bool = False
    reward_components: dict[str, float] = field(default_factory=dict)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    parse_errors: list[ParseError] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


class AgentEnv(gym.Env[str, str]):
    """A multi-turn text env with native async ``areset``/``astep``.

    Args:
        max_turns: Steps before the episode is truncated (``info["truncation_reason"] == "max_turns"``).
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
        self._episode_open = False
        self._needs_reset = True
        self._closed = False

    # ----------------------------------------------------------------- subclass hooks

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Start an episode; return the first observation and the reset info."""
        raise NotImplementedError

    async def _step(self, action: str) -> Transition:
        """Act on one model turn."""
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
        await self._finish_episode()
        self.turn = 0
        observation, info = await self._reset(seed, dict(options or {}))
        observation = truncate_text(observation, self.max_observation_chars)
        start = EpisodeStart(
            env_id=self.env_id,
            observation=observation,
            seed=seed,
            task=info.setdefault("task", {}),
            system_prompt=self.system_prompt,
            tools=[dict(schema) for schema in self.tool_schemas],
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
        outcome = await self._step(action)
        truncation_reason = outcome.truncation_reason
        if truncation_reason is None and not outcome.terminated and self.turn >= self.max_turns:
            truncation_reason = "max_turns"
        truncated = truncation_reason is not None and not outcome.terminated
        record = Step(
            action=action,
            observation=truncate_text(outcome.observation, self.max_observation_chars),
            reward=float(outcome.reward),
            terminated=outcome.terminated,
            truncated=truncated,
            tool_calls=outcome.tool_calls,
            tool_results=outcome.tool_results,
            parse_errors=outcome.parse_errors,
            reward_components=outcome.reward_components,
            truncation_reason=truncation_reason if truncated else None,
            errors=outcome.errors,
            success=outcome.success,
        )
        info = outcome.info
        info.update(
            turn=self.turn,
            tool_calls=record.tool_calls,
            tool_results=record.tool_results,
            parse_errors=record.parse_errors,
            errors=record.errors,
            success=record.success,
            reward_components=record.reward_components,
            truncation_reason=record.truncation_reason,
            step=record,
        )
        assert self.trajectory is not None
        self.trajectory.steps.append(record)
        if outcome.terminated or truncated:
            self._needs_reset = True
            await self._finish_episode()
        self.trajectory.latency_s.append(time.perf_counter() - started)
        return record.observation, record.reward, record.terminated, truncated, info

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
