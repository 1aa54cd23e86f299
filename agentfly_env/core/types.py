"""The data types that cross module boundaries: messages, tool calls, steps, trajectories.

All are msgspec Structs, so they encode to JSON or msgpack quickly and validate on decode.

Example:
    >>> call = ToolCall(name="calculator", arguments={"expression": "1 + 2"})
    >>> msgspec.json.decode(msgspec.json.encode(call), type=ToolCall) == call
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """One tool invocation parsed from a model turn.

    ``arguments`` is a JSON object for function-calling formats. Formats that carry one bare
    string (ReAct ``Action Input: foo``, bracket ``search[foo]``) give a ``str``; the tool binds it to
    its single parameter.
    """

    name: str
    arguments: dict[str, Any] | str = msgspec.field(default_factory=dict)
    id: str | None = None


class ParseError(msgspec.Struct, frozen=True):
    """Why a piece of model text could not be read as a tool call.

    ``message`` is written for the model: it says what was wrong and how a valid call looks.
    ``snippet`` is a short excerpt of the offending text (at most a few hundred characters).
    """

    message: str
    snippet: str = ""


class ParseResult(msgspec.Struct, frozen=True):
    """What a parser read from one model turn: the calls it found and the errors it met."""

    calls: list[ToolCall] = msgspec.field(default_factory=list)
    errors: list[ParseError] = msgspec.field(default_factory=list)


#: What went wrong in a call that failed (:attr:`ToolResult.error`).
ToolError = Literal["unknown_tool", "invalid_arguments", "tool_error", "timeout", "resource_broken"]
#: How a tool call went, for per-tool metrics (:func:`tool_status`).
ToolStatus = Literal["ok", "error", "timeout", "invalid_arguments", "unknown_tool"]


def tool_status(error: str | None) -> ToolStatus:
    """A call's status from its :attr:`ToolResult.error`: the one place it is derived, so it is never stored
    twice. A tool that raised and a broken resource are both ``error``: the tool failed, not the model.

    Example:
        >>> tool_status(None), tool_status("resource_broken"), tool_status("timeout")
        ('ok', 'error', 'timeout')
    """
    if error is None:
        return "ok"
    if error in ("timeout", "invalid_arguments", "unknown_tool"):
        return error  # type: ignore[return-value]
    return "error"


class ToolResult(msgspec.Struct, omit_defaults=True):
    """The outcome of running one tool call.

    ``error`` is set (and ``output`` holds the model-facing explanation) when the call failed:
    unknown tool, bad arguments, an exception in the tool, a timeout, or a broken leased resource
    (``resource_broken``: the pool replaces it); :attr:`status` says it in a word.

    ``duration_s`` is the call's wall time, as the env that ran it measured it (lease, cache and tool
    included). It travels with the result (to drivers, over the wire, into trajectory files) but is left out
    of ``==``, so the results, and so the steps, of a seeded rollout still compare equal.
    """

    name: str
    output: str
    error: ToolError | None = None
    call_id: str | None = None
    cached: bool = False
    duration_s: float = 0.0

    def __eq__(self, other: object) -> bool:
        if type(other) is not ToolResult:
            return NotImplemented
        return all(getattr(self, field) == getattr(other, field) for field in _COMPARED_RESULT_FIELDS)

    @property
    def status(self) -> ToolStatus:
        """``ok``, ``error``, ``timeout``, ``invalid_arguments`` or ``unknown_tool`` (:func:`tool_status`)."""
        return tool_status(self.error)


#: Everything but the timing: what makes two results equal.
_COMPARED_RESULT_FIELDS = tuple(field for field in ToolResult.__struct_fields__ if field != "duration_s")


class Message(msgspec.Struct, omit_defaults=True):
    """A chat message in the OpenAI shape (``tool_calls`` only on assistant turns)."""

    role: Role
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[ToolCall] | None = None


class EpisodeStart(msgspec.Struct, omit_defaults=True):
    """What an env says when an episode starts: ``info["start"]`` after every ``reset``.

    Everything an episode driver needs to open the model's conversation, typed, so a trainer reads
    fields rather than string keys (and gets the same from a remote env as from a local one).
    """

    env_id: str
    observation: str
    seed: int | None = None
    task: dict[str, Any] = msgspec.field(default_factory=dict)
    system_prompt: str | None = None
    tools: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: How a final answer is written as an action (:func:`~agentfly_env.tools.tool_env.answer_action` reads it):
    #: ``{"mode": "tag", "tag": "answer"}``, ``{"mode": "tool", "parser": "hermes"}`` or ``{"mode": "none"}``;
    #: empty for an env whose action is the answer text itself.
    answer_format: dict[str, str] = msgspec.field(default_factory=dict)
    #: How the env reads a tool call in an action: a parser name (:func:`~agentfly_env.tools.parsing.get_parser`),
    #: for a driver that writes calls itself (the MCP tools of an env in another process); empty: no tools.
    tool_format: str = ""


class Step(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One env step: the model's action and what the env answered; ``info["step"]`` after every ``step``.

    The one record of a step: the env's ``_step`` makes it, :class:`~agentfly_env.core.env.AgentEnv`
    completes it (``action``, the turn budget, ``truncated``), the trajectory holds it, and every driver,
    the server and ``Remote-v0`` pass it on as it is.

    Attributes:
        errors: What went wrong in the turn, by kind (``parse_error``, ``unknown_tool``, ...), counted.
        success: Whether the task counts as solved (meaningful on the step that ends the episode).
        reward_components: The named parts of this step's reward.
        truncation_reason: Why the episode was cut (``max_turns``, a backend failure), when it was.

    Its one timing, each tool result's ``duration_s``, is left out of ``==``, so the steps of a seeded rollout
    compare equal (step wall times are on the :class:`Trajectory`).

    Example:
        >>> Step(observation="4", reward=1.0, terminated=True, success=True).truncated
        False
    """

    action: str = ""
    observation: str
    reward: float
    terminated: bool = False
    truncated: bool = False
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    tool_results: list[ToolResult] = msgspec.field(default_factory=list)
    parse_errors: list[ParseError] = msgspec.field(default_factory=list)
    reward_components: dict[str, float] = msgspec.field(default_factory=dict)
    truncation_reason: str | None = None
    errors: dict[str, int] = msgspec.field(default_factory=dict)
    success: bool = False


class Trajectory(msgspec.Struct, omit_defaults=True):
    """A whole episode: the task, the first observation and every step (``latency_s``: each step's wall time);
    ``failure``: why a driver ended it failed for a reason outside the model (its env died, an agent program
    raised), as the trainer writes it to a run's trajectories, else None."""

    env_id: str
    observation: str
    seed: int | None = None
    task: dict[str, Any] = msgspec.field(default_factory=dict)
    steps: list[Step] = msgspec.field(default_factory=list)
    episode_id: str | None = None
    system_prompt: str | None = None
    latency_s: list[float] = msgspec.field(default_factory=list)
    failure: str | None = None

    @classmethod
    def begin(cls, start: EpisodeStart) -> Trajectory:
        """The record of an episode that has just started (no steps yet)."""
        return cls(
            env_id=start.env_id,
            observation=start.observation,
            seed=start.seed,
            task=start.task,
            system_prompt=start.system_prompt,
        )

    def add(self, step: Step, latency_s: float) -> None:
        """Append a step as the env made it, with its wall time: the one way a trajectory grows, in the
        env and in every driver that keeps the records an env sends it."""
        self.steps.append(step)
        self.latency_s.append(latency_s)

    def summary(self) -> EpisodeSummary:
        """What the episode came to (reward, success, turns, tool calls, errors, ending)."""
        return EpisodeSummary.of(self.steps)

    @property
    def total_reward(self) -> float:
        return self.summary().reward

    @property
    def success(self) -> bool:
        """Whether the episode solved its task (its last step says so)."""
        return self.summary().success

    @property
    def done(self) -> bool:
        summary = self.summary()
        return summary.terminated or summary.truncated


class StepLike(Protocol):
    """What a summary reads of a step: a :class:`~agentfly_env.core.types.Step`, or a partial decode of one."""

    reward: float
    terminated: bool
    truncated: bool
    success: bool
    truncation_reason: str | None
    tool_calls: Sequence[Any]
    errors: Mapping[str, int]


class EpisodeSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What an episode came to, by its steps.

    Attributes:
        reward: The sum of its rewards.
        success: The last step's ``success``.
        turns: Steps taken.
        tool_calls: Tool calls over the episode.
        parse_errors: Turns' text that could not be read as a call, counted.
        errors: Every error the env counted (parse errors, unknown tools, failures, ...).
        terminated: The env ended it (solved, failed, answered).
        truncated: It was cut (the turn budget, a backend failure); ``truncation_reason`` says why.
    """

    reward: float = 0.0
    success: bool = False
    turns: int = 0
    tool_calls: int = 0
    parse_errors: int = 0
    errors: int = 0
    terminated: bool = False
    truncated: bool = False
    truncation_reason: str | None = None

    @classmethod
    def of(cls, steps: Sequence[StepLike]) -> EpisodeSummary:
        """The summary of an episode's steps (none: an episode that has not been played)."""
        if not steps:
            return cls()
        reward, calls, parse_errors, errors = 0.0, 0, 0, 0
        for step in steps:  # one pass: the viewer summarises 100k episodes with this
            reward += step.reward
            calls += len(step.tool_calls)
            if step.errors:
                parse_errors += step.errors.get("parse_error", 0)
                errors += sum(step.errors.values())
        last = steps[-1]
        return cls(
            reward=reward,
            success=last.success,
            turns=len(steps),
            tool_calls=calls,
            parse_errors=parse_errors,
            errors=errors,
            terminated=last.terminated,
            truncated=last.truncated,
            truncation_reason=last.truncation_reason,
        )


def summarize(summaries: Iterable[EpisodeSummary]) -> dict[str, float]:
    """Means per episode over many: reward, success, turns, tool calls, parse errors, errors, truncations."""
    played = list(summaries)
    count = max(len(played), 1)
    return {
        "episodes": len(played),
        "reward_mean": sum(s.reward for s in played) / count,
        "success_rate": sum(s.success for s in played) / count,
        "turns_per_episode": sum(s.turns for s in played) / count,
        "tool_calls_per_episode": sum(s.tool_calls for s in played) / count,
        "parse_errors_per_episode": sum(s.parse_errors for s in played) / count,
        "errors_per_episode": sum(s.errors for s in played) / count,
        "truncated_rate": sum(s.truncated for s in played) / count,
    }


class ToolStats(msgspec.Struct, frozen=True, kw_only=True):
    """One tool's calls over many episodes (:class:`ToolTally`).

    Attributes:
        calls: Calls run, over all the episodes.
        calls_per_episode: ``calls`` per episode (every episode counts, those that never called it too).
        error_rate: The share of its calls that did not return ``ok`` (:func:`tool_status`; timeouts included).
        timeout_rate: The share that timed out.
        latency_ms_p50: The median of its calls' wall times (:attr:`ToolResult.duration_s`), in milliseconds.
        latency_ms_p95: Their 95th percentile (both interpolated between ranks, as ``numpy.percentile``).
    """

    calls: int
    calls_per_episode: float
    error_rate: float
    timeout_rate: float
    latency_ms_p50: float
    latency_ms_p95: float


#: The :class:`ToolStats` fields reported as metrics, ``tool/<name>/<field>`` (:func:`tool_metrics`).
TOOL_METRICS = ("calls_per_episode", "error_rate", "timeout_rate", "latency_ms_p50", "latency_ms_p95")


class ToolTally:
    """Per-tool counts and wall times, gathered episode by episode (the viewer adds a run's as it indexes them).

    Example:
        >>> tally = ToolTally()
        >>> tally.add([Step(observation="", reward=0.0, tool_results=[ToolResult("f", "", "timeout", duration_s=0.5)])])
        >>> tally.add([])
        >>> tally.stats()["f"].calls_per_episode, tally.stats()["f"].timeout_rate, tally.stats()["f"].latency_ms_p50
        (0.5, 1.0, 500.0)
    """

    def __init__(self) -> None:
        self.episodes = 0
        self._failed: dict[str, int] = {}
        self._timeouts: dict[str, int] = {}
        self._seconds: dict[str, list[float]] = {}

    def add(self, steps: Iterable[Any]) -> None:
        """Count one episode's steps: :class:`Step` records, or partial decodes with ``tool_results`` that have
        ``name``, ``error`` and ``duration_s``."""
        self.episodes += 1
        for step in steps:
            for result in step.tool_results:
                name = result.name
                seconds = self._seconds.get(name)
                if seconds is None:
                    seconds = self._seconds[name] = []
                    self._failed[name] = self._timeouts[name] = 0
                seconds.append(result.duration_s)
                if result.error is not None:
                    self._failed[name] += 1
                    self._timeouts[name] += tool_status(result.error) == "timeout"

    def stats(self) -> dict[str, ToolStats]:
        """Each tool's :class:`ToolStats`, by name, sorted."""
        out = {}
        for name in sorted(self._seconds):
            seconds = sorted(self._seconds[name])
            calls = len(seconds)
            out[name] = ToolStats(
                calls=calls,
                calls_per_episode=calls / max(self.episodes, 1),
                error_rate=self._failed[name] / calls,
                timeout_rate=self._timeouts[name] / calls,
                latency_ms_p50=1000 * _percentile(seconds, 0.50),
                latency_ms_p95=1000 * _percentile(seconds, 0.95),
            )
        return out


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated between the ranks around it (numpy's default)."""
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def tool_stats(episodes: Iterable[Iterable[Any]]) -> dict[str, ToolStats]:
    """Per tool, over episodes given as their steps: calls per episode, error and timeout rates, latency p50 and
    p95 (:class:`ToolStats`). The one computation behind every report of them: the trainer's metrics, eval's
    summary, ``agentfly-play``'s table and the viewer."""
    tally = ToolTally()
    for steps in episodes:
        tally.add(steps)
    return tally.stats()


def tool_metrics(stats: Mapping[str, ToolStats]) -> dict[str, float]:
    """``stats`` as flat scalars, ``tool/<name>/<field>`` (:data:`TOOL_METRICS`), for metrics files and TensorBoard.

    Example:
        >>> step = Step(observation="", reward=0.0, tool_results=[ToolResult("f", "", duration_s=0.002)])
        >>> tool_metrics(tool_stats([[step]]))["tool/f/latency_ms_p95"]
        2.0
    """
    return {f"tool/{name}/{field}": getattr(one, field) for name, one in stats.items() for field in TOOL_METRICS}
