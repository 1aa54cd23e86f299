"""Text spaces for Gymnasium: any string up to a length, and model turns that call tools.

Gymnasium's own :class:`gymnasium.spaces.Text` only admits a fixed character set, which model text
never respects. :class:`TextSpace` admits any string up to ``max_length``; :class:`ToolCallSpace`
additionally samples *plausible* actions (a well-formed call of a random tool, or a final answer), so
``check_env``, random baselines and ``make_vec`` exercise the env's real code paths.

Example:
    >>> space = TextSpace(max_length=10)
    >>> "héllo" in space, "x" * 11 in space, 3 in space
    (True, False, False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from gymnasium.spaces import Space

from agentfly_env.core.types import ToolCall

if TYPE_CHECKING:  # the space reads a tool's fields only; the core does not build on the tools layer
    from agentfly_env.tools.tool import Tool

_WORDS = (
    "apple river blue seven quick table north energy signal garden paper light stone circuit "
    "market silver number window orange planet coffee music winter bridge cloud data"
).split()


def random_words(rng: np.random.Generator, low: int = 1, high: int = 4) -> str:
    """A few random English words: plausible filler for sampled strings."""
    return " ".join(rng.choice(_WORDS, size=int(rng.integers(low, high + 1))))


class TextSpace(Space[str]):
    """Any ``str`` of at most ``max_length`` characters.

    Args:
        max_length: Longest admitted string.
        seed: Seed for :meth:`sample`.
    """

    def __init__(self, max_length: int = 1 << 20, seed: int | np.random.Generator | None = None):
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return random_words(self.np_random, 1, 12)[: self.max_length]

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and other.max_length == self.max_length


def sample_json(schema: dict[str, Any], rng: np.random.Generator, depth: int = 0) -> Any:
    """A random value that fits a JSON schema (the subset that tool schemas use)."""
    if "enum" in schema:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    if "anyOf" in schema:
        options = [option for option in schema["anyOf"] if option.get("type") != "null"] or schema["anyOf"]
        return sample_json(options[int(rng.integers(len(options)))], rng, depth)
    kind = schema.get("type")
    if kind == "integer":
        return int(rng.integers(0, 100))
    if kind == "number":
        return round(float(rng.uniform(0, 100)), 2)
    if kind == "boolean":
        return bool(rng.integers(2))
    if kind == "null":
        return None
    if kind == "array":
        count = 0 if depth > 2 else int(rng.integers(0, 3))
        return [sample_json(schema.get("items", {}), rng, depth + 1) for _ in range(count)]
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return {
            name: sample_json(sub, rng, depth + 1)
            for name, sub in properties.items()
            if name in required or (depth < 2 and rng.random() < 0.3)
        }
    return random_words(rng)


class ToolSpec(NamedTuple):
    """What the action space needs of a tool: plain data, so the space pickles to worker processes."""

    name: str
    parameters: dict[str, Any]
    examples: list[dict[str, Any]]

    @classmethod
    def of(cls, tool: Tool) -> ToolSpec:
        return cls(tool.name, tool.parameters, tool.examples)


class ToolCallSpace(TextSpace):
    """Model turns; :meth:`sample` writes a call of a random tool in the env's format, or an answer.

    Args:
        tools: The tools the env offers.
        format_call: Renders a :class:`ToolCall` as model text (the env parser's ``format_call``).
        answers: Renders a final answer as model text (e.g. :class:`~agentfly_env.tools.tool_env.AnswerFormat`);
            None when the env has no answer action.
        answer_probability: Share of samples that are answers rather than tool calls.
        max_length: Longest admitted string.
        seed: Seed for :meth:`sample`.
    """

    def __init__(
        self,
        tools: Sequence[Tool | ToolSpec],
        format_call: Callable[[ToolCall], str],
        answers: Callable[[str], str] | None = None,
        answer_probability: float = 0.2,
        max_length: int = 1 << 20,
        seed: int | np.random.Generator | None = None,
    ):
        self.tools = [item if isinstance(item, ToolSpec) else ToolSpec.of(item) for item in tools]
        self.format_call = format_call
        self.answers = answers
        self.answer_probability = answer_probability if self.tools else 1.0
        super().__init__(max_length=max_length, seed=seed)

    def sample_call(self) -> ToolCall:
        """A random, well-formed call of a random tool (its examples first, else from its schema)."""
        rng = self.np_random
        chosen = self.tools[int(rng.integers(len(self.tools)))]
        if chosen.examples:
            arguments = chosen.examples[int(rng.integers(len(chosen.examples)))]
        else:
            arguments = sample_json(chosen.parameters, rng)
        return ToolCall(chosen.name, arguments)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if self.answers is not None and self.np_random.random() < self.answer_probability:
            return self.answers(random_words(self.np_random, 1, 3))
        if not self.tools:
            return super().sample()
        return self.format_call(self.sample_call())

    def __repr__(self) -> str:
        return f"ToolCallSpace(tools={[t.name for t in self.tools]})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ToolCallSpace) and [t.name for t in other.tools] == [t.name for t in self.tools]
