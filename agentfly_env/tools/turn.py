"""``TurnReport``: how the tools of one turn tell their env more than their output.

A tool's output is what the model reads. Some tools also decide the episode: buying ends a WebShop
episode with a score, a dead game engine cuts an episode short, a command the game did not know is an
error worth counting. A tool (or the env around it) says so on the turn's report, which
:class:`~agentfly_env.tools.tool_env.ToolEnv` hands to every tool that names a ``turn`` parameter and reads
once, when the turn's calls have returned. Nothing about a turn is kept on the env between a tool and
the step that follows it.

Example:
    >>> from agentfly_env import ListTasks, RewardResult, ToolEnv, reward, tool
    >>> @tool
    ... def buy(item: str, turn: TurnReport) -> str:
    ...     '''Buy an item; this ends the episode.'''
    ...     turn.end_episode(RewardResult(float(item == "lamp")))
    ...     return f"You bought the {item}."
    >>> env = ToolEnv(tools=[buy], tasks=ListTasks([{"prompt": "Buy a lamp."}]), reward=reward(lambda: 0.0, name="none"))
    >>> _ = env.reset(seed=0)
    >>> env.step('<tool_call>{"name": "buy", "arguments": {"item": "lamp"}}</tool_call>')[:3]
    ('You bought the lamp.', 1.0, True)
"""

from __future__ import annotations

from typing import Any

from agentfly_env.tools.rewards import RewardResult


class TurnReport:
    """What one turn's tools report besides their output.

    Attributes:
        ends: The episode ends with this turn.
        result: The score it ends with; None lets the env's reward score it.
        truncation_reason: Set when the episode must stop for an outside reason (a backend died).
        errors: Errors of the turn by kind, counted into ``info["step"].errors``.
        info: Extra ``info`` entries for this step.
    """

    __slots__ = ("ends", "errors", "info", "result", "truncation_reason")

    def __init__(self) -> None:
        self.ends = False
        self.result: RewardResult | None = None
        self.truncation_reason: str | None = None
        self.errors: dict[str, int] = {}
        self.info: dict[str, Any] = {}

    def end_episode(self, result: RewardResult | None = None) -> None:
        """End the episode after this turn, scored by ``result`` (None: by the env's reward).

        A second call keeps the first result unless it brings one where there was none.
        """
        self.ends = True
        if self.result is None:
            self.result = result

    def truncate(self, reason: str, **info: Any) -> None:
        """Stop the episode after this turn for an outside reason, with no reward; ``info`` explains."""
        if self.truncation_reason is None:
            self.truncation_reason = reason
        self.info.update(info)

    def count_error(self, kind: str, count: int = 1) -> None:
        """Count an error of this turn (``info["step"].errors[kind]``)."""
        self.errors[kind] = self.errors.get(kind, 0) + count
