"""A chat request's messages as prompt tokens, exactly as the model's chat template renders them.

The template is rendered twice: with the real messages, and with every non-empty content replaced by a
sentinel. The sentinel rendering says which text is the template's own (role headers, turn closings,
the template's tool-call markup): that text is tokenized as template text (special-token strings become
their ids); each message content, as the template wrote it, is tokenized as plain text, as
:class:`~agentfly_train.chat.ChatFormat` does, so a content that *contains* ``<|im_end|>`` cannot end a
turn. Where the template rewrites a content (strips earlier reasoning, trims it), the rewritten text is
what gets tokenized: the prompt is what the template gives, never the sampled tokens spliced back in,
so such a template shows up as a row split in the recording instead of a silent mismatch.

Templates that ignore ``tools`` or ``tool_calls`` (SmolLM2's) still work: the tools are described in
the system message, and an assistant message's calls are written into its content in the parser's
format (:class:`~agentfly_train.gateway.tool_calls.ToolCallText`), which is the text the model
wrote when the program sends the message back unedited.

Example:
    >>> renderer = ChatRenderer(ChatFormat(tokenizer), ToolCallText("hermes"))  # doctest: +SKIP
    >>> ids = renderer.encode([ChatMessage("user", "2 + 2?")], tools=[])  # doctest: +SKIP
    >>> tokenizer.decode(ids)  # doctest: +SKIP
    '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM...<|im_start|>assistant\\n'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentfly_env.core.types import ToolCall
from agentfly_train.chat import ChatFormat
from agentfly_train.gateway.tool_calls import ToolCallText

_PROBE = "AGENTFLYGATEWAYPROBE"


class RenderError(ValueError):
    """The chat template cannot render these messages (it raised, or it renders them out of order)."""


@dataclass
class ChatMessage:
    """One message of a request, validated.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: Its text ("" when it has none, e.g. an assistant message that only calls tools).
        tool_calls: An assistant message's calls, each with its id.
        tool_call_id: The call a tool message answers.
        name: The optional ``name`` field.
    """

    role: str
    content: str = ""
    tool_calls: list[tuple[str, ToolCall]] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class ChatRenderer:
    """Encodes requests with one tokenizer's chat template.

    Args:
        chat: The template's token pieces (its tokenizer, template and content tokenization).
        tool_text: How tool calls are written when the template does not write them.

    Attributes:
        renders_tools: Whether the template renders a request's ``tools`` itself.
        renders_tool_calls: Whether it renders an assistant message's ``tool_calls`` itself.
    """

    def __init__(self, chat: ChatFormat, tool_text: ToolCallText) -> None:
        self.chat = chat
        self.tool_text = tool_text
        probe_tool = {"type": "function", "function": {"name": _PROBE, "description": "", "parameters": {}}}
        self.renders_tools = _PROBE in self._try_render([{"role": "user", "content": "hi"}], [probe_tool])
        called = {"role": "assistant", "content": "", "tool_calls": [_template_call("call_0", ToolCall(_PROBE))]}
        self.renders_tool_calls = _PROBE in self._try_render([{"role": "user", "content": "hi"}, called], [])

    def encode(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> list[int]:
        """Prompt tokens for ``messages`` (and the model turn's opening).

        Raises:
            RenderError: The template raised (e.g. it wants alternating roles) or cannot be split.
        """
        dicts = [self._template_message(m) for m in messages]
        if tools and not self.renders_tools:
            dicts = _with_system_note(dicts, self.tool_text.describe_tools(tools))
        template_tools = tools if self.renders_tools else []
        contents = [d["content"] for d in dicts]
        sentinels = [f"AGENTFLYSENTINEL{i}X" if text else "" for i, text in enumerate(contents)]
        masked = [{**d, "content": s} if s else d for d, s in zip(dicts, sentinels, strict=True)]
        real = self._render(dicts, template_tools)
        pieces, shown = _split(self._render(masked, template_tools), sentinels)
        return self._tokenize(real, pieces, [contents[i] for i in shown])

    def _tokenize(self, real: str, pieces: list[str], contents: list[str]) -> list[int]:
        """Walk the real rendering along the template's own pieces; what lies between two pieces is a
        content as the template wrote it (the original, or the template's rewrite of it)."""
        ids: list[int] = []
        at = 0
        for index, content in enumerate(contents):
            piece, following = pieces[index], pieces[index + 1]
            if not real.startswith(piece, at):
                raise RenderError("the chat template renders these messages differently from their layout")
            ids += self.chat.template_ids(piece)
            at += len(piece)
            last = index + 1 == len(contents)
            if real.startswith(content + following, at) and (not last or at + len(content + following) == len(real)):
                end = at + len(content)  # written as sent (the usual case)
            else:  # rewritten by the template: it ends where the template's next piece starts
                end = len(real) - len(following) if last else real.find(following, at)
                if end < at or (last and not real.endswith(following)):
                    raise RenderError("the chat template renders these messages differently from their layout")
            ids += self.chat.content_ids(real[at:end])
            at = end
        if real[at:] != pieces[-1]:
            raise RenderError("the chat template renders these messages differently from their layout")
        return ids + self.chat.template_ids(pieces[-1])

    def _template_message(self, message: ChatMessage) -> dict[str, Any]:
        """A message as chat templates take it (Hugging Face's convention: arguments as a dict)."""
        out: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            if self.renders_tool_calls:
                out["tool_calls"] = [_template_call(call_id, call) for call_id, call in message.tool_calls]
            else:
                out["content"] = self.tool_text.write(message.content, [call for _, call in message.tool_calls])
        if message.tool_call_id is not None:
            out["tool_call_id"] = message.tool_call_id
        if message.name is not None:
            out["name"] = message.name
        return out

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        try:
            return self.chat.tokenizer.apply_chat_template(
                messages, tools=tools or None, tokenize=False, add_generation_prompt=True
            )
        except Exception as error:  # jinja's raise_exception and template bugs alike
            raise RenderError(f"the chat template cannot render these messages: {error}") from error

    def _try_render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        try:
            return self._render(messages, tools)
        except RenderError:
            return ""


def _template_call(call_id: str, call: ToolCall) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _with_system_note(messages: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """``note`` appended to the system message (one is put first when there is none)."""
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        text = f"{first['content']}\n\n{note}" if first["content"] else note
        return [{**first, "content": text}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def _split(rendered: str, sentinels: list[str]) -> tuple[list[str], list[int]]:
    """The template's own text between the sentinels it shows, and the indices of the messages shown
    (a template may drop a message's content altogether)."""
    pieces: list[str] = []
    shown: list[int] = []
    rest = rendered
    for index, sentinel in enumerate(sentinels):
        at = rest.find(sentinel) if sentinel else -1
        if at < 0:
            continue
        pieces.append(rest[:at])
        shown.append(index)
        rest = rest[at + len(sentinel) :]
    return [*pieces, rest], shown
