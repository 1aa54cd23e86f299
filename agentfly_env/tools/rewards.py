"""``@reward``: plain functions as reward functions, their arguments injected by name.

The env offers a context of named values; a reward asks for the ones it needs by naming its
parameters. Every env gives ``prediction`` (the final answer text, or None), ``trajectory``
(the :class:`~agentfly_env.core.types.Trajectory` so far), ``task`` (the task dict), ``env`` (the env, for
rewards that read its state) and each field of the task by its own name (``answer``, ``tests``, ...).

A reward returns a number, or a :class:`RewardResult` whose components land in ``info``.
Sync rewards that are slow (running tests, calling a judge) take ``blocking=True`` and run in a worker
thread so other episodes keep stepping; async rewards simply await.

Example:
    >>> @reward
    ... def exact_match(prediction: str | None, answer: str) -> float:
    ...     return float((prediction or "").strip() == answer)
    >>> import asyncio
    >>> asyncio.run(exact_match.compute({"prediction": "4", "answer": "4", "task": {}})).score
    1.0
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from agentfly_env.core.aio import call_function, is_coroutine_function


class RewardResult(msgspec.Struct, omit_defaults=True):
    """A reward with its parts.

    Attributes:
        score: The scalar reward.
        components: Named parts of the score (e.g. ``{"format": 0.1, "correct": 1.0}``), put in ``info``.
        success: Whether the task counts as solved; None lets the env decide from the score.
        details: Anything else worth logging (failed test messages, the judge's verdict).
    """

    score: float
    components: dict[str, float] = msgspec.field(default_factory=dict)
    success: bool | None = None
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class Reward:
    """A reward function with the names it asks for. Build one with :func:`reward`."""

    def __init__(self, function: Callable[..., Any], *, name: str | None = None, blocking: bool = False):
        self.function = function
        self.name = name or function.__name__
        self.blocking = blocking
        self._inline = not blocking and not is_coroutine_function(function)  # called as it is, no await
        signature = inspect.signature(function)
        self.accepts_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        self.parameters = [
            p.name for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        self.required = [
            p.name for p in signature.parameters.values() if p.default is p.empty and p.name in self.parameters
        ]

    def __repr__(self) -> str:
        return f"Reward({self.name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly, so decorated functions stay usable."""
        return self.function(*args, **kwargs)

    async def compute(self, context: Mapping[str, Any]) -> RewardResult:
        """Run the reward with the context values it names.

        Raises:
            TypeError: when the reward names a value the env does not offer (a programming error).
            ValueError: when the reward returns something that is not a finite number or RewardResult.
        """
        if self.accepts_any:
            kwargs = dict(context)
        else:
            missing = [name for name in self.required if name not in context]
            if missing:
                raise TypeError(
                    f"reward {self.name!r} asks for {missing}, which this env does not provide; "
                    f"available: {sorted(context)}"
                )
            kwargs = {name: context[name] for name in self.parameters if name in context}
        if self._inline:  # the common case (a quick sync scorer), without call_function's frame
            return self._as_result(self.function(**kwargs))
        return self._as_result(await call_function(self.function, kwargs, blocking=self.blocking))

    def _as_result(self, value: Any) -> RewardResult:
        result = value if isinstance(value, RewardResult) else None
        if result is None and isinstance(value, (int, float)):  # bool is an int: True -> 1.0
            result = RewardResult(float(value))
        if result is None or not math.isfinite(result.score):
            raise ValueError(f"reward {self.name!r} returned {value!r}; expected a finite number or RewardResult")
        return result


def reward(function: Callable[..., Any] | None = None, *, name: str | None = None, blocking: bool = False) -> Any:
    """Turn a sync or async function into a :class:`Reward`; usable bare or with options.

    Args:
        function: The function, when used as a bare decorator.
        name: Overrides the function's name (used in logs and ``info``).
        blocking: Run a sync function in a worker thread (for slow rewards).
    """

    def decorate(inner: Callable[..., Any]) -> Reward:
        return Reward(inner, name=name, blocking=blocking)

    return decorate(function) if function is not None else decorate
