"""Tool calls between model text and OpenAI's ``tool_calls``, both ways, with the project's parsers.

Reading: the model's turn is parsed with :func:`agentfly_env.tools.parsing.get_parser` (hermes by
default); the calls become OpenAI tool calls, and for hermes the ``<tool_call>`` blocks are taken out
of the message content, as OpenAI-compatible servers do. A turn with a malformed call comes back whole
as content, with no tool calls, so the program sees what the model wrote.

Writing: a chat template that does not render ``tool_calls`` itself (SmolLM2's) gets them written
into the assistant content in the parser's format, such that reading and writing an unedited turn
gives the model's text back: ``write(*read(text)) == text`` for a turn in the canonical form
(the form :meth:`~agentfly_env.tools.parsing.Parser.format_call` writes, calls after the prose).

Example:
    >>> codec = ToolCallText("hermes")
    >>> text = 'Adding.\\n<tool_call>\\n{"name": "add", "arguments": {"a": 2}}\\n</tool_call>'
    >>> content, calls = codec.read(text)
    >>> content, calls
    ('Adding.', [ToolCall(name='add', arguments={'a': 2}, id=None)])
    >>> codec.write(content, calls) == text
    True
    >>> openai_tool_call(calls[0], "call_1")["function"]
    {'name': 'add', 'arguments': '{"a": 2}'}
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentfly_env.core.types import ToolCall
from agentfly_env.tools.parsing import HermesParser, Parser, get_parser


class ToolCallText:
    """Reads tool calls out of a model turn and writes them back in the same format.

    Args:
        parser: A parser name (``hermes``, ``json``, ``react``, ``bracket``) or instance.
    """

    def __init__(self, parser: str | Parser = "hermes") -> None:
        self.parser = get_parser(parser)
        # Only hermes marks its calls off from the prose; other formats keep the call text in the content.
        self._blocks = (
            re.compile(r"\s*<tool_call>.*?</tool_call>", re.DOTALL) if isinstance(self.parser, HermesParser) else None
        )

    def read(self, text: str) -> tuple[str, list[ToolCall]]:
        """The message content and the calls of a model turn (no calls where any call is malformed)."""
        result = self.parser.parse(text)
        if result.errors or not result.calls:
            return text, []
        content = self._blocks.sub("", text).strip() if self._blocks is not None else text
        return content, list(result.calls)

    def write(self, content: str, calls: list[ToolCall]) -> str:
        """An assistant message as model text: the content, then each call in the parser's format."""
        if not calls or (self._blocks is None and content):  # those formats' content holds its calls already
            return content
        written = "\n".join(self.parser.format_call(call) for call in calls)
        return f"{content}\n{written}" if content else written

    def forced_opening(self, name: str | None = None) -> str:
        """The text a call starts with in the parser's format: up to the tool's name (``name`` None: any tool),
        or up to the arguments of a call to ``name``. A turn that starts with it writes a call
        (``tool_choice`` ``required`` or a named function).

        Raises:
            ValueError: The format does not write a call's name and arguments in that order.

        Example:
            >>> ToolCallText("hermes").forced_opening(), ToolCallText("hermes").forced_opening("add")
            ('<tool_call>\\n{"name": "', '<tool_call>\\n{"name": "add", "arguments": ')
        """
        written = self.parser.format_call(ToolCall(name or _NAME, {_ARGUMENT: 0}))
        cut = written.find(_NAME) if name is None else written.find(json.dumps({_ARGUMENT: 0}))
        if cut <= 0 or (name is not None and written.find(name) > cut):
            raise ValueError(f"the {type(self.parser).__name__} call format cannot be started for the model")
        return written[:cut]

    def describe_tools(self, tools: list[dict[str, Any]]) -> str:
        """What a system prompt says about the tools when the chat template does not render them (as
        :class:`~agentfly_env.tools.tool_env.ToolEnv` says it)."""
        listed = "\n".join(json.dumps(tool["function"], ensure_ascii=False) for tool in tools)
        return f"You can call these tools:\n{listed}\n\n{self.parser.instructions()}"


# Placeholders that mark where a call's name and arguments go in the parser's format (forced_opening).
_NAME, _ARGUMENT = "AGENTFLYTOOLNAME", "AGENTFLYARGUMENT"


def openai_tool_call(call: ToolCall, call_id: str) -> dict[str, Any]:
    """A parsed call in OpenAI's shape (``arguments`` as JSON text: an object, or a string for the formats
    that pass one bare string)."""
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}
