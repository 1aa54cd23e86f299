"""A chat request's messages as prompt tokens, exactly as the model's chat template renders them.

The template is rendered twice: with the real messages, and with every non-empty content replaced by a
sentinel. The sentinel rendering says which text is the template's own (role headers, turn closings,
the template's tool-call markup): that text is tokenized as template text (special-token strings become
their ids); each message content, as the template wrote it, is tokenized as plain text, as
:class:`~agentfly_train.chat.ChatFormat` does, so a content that *contains* ``<|im_end|>`` cannot end a
turn.

One exception keeps the model's own turns token-exact: an assistant message the program sends back
*unchanged* (exactly the content and tool calls the gateway returned for one of the episode's earlier
calls) is put in as the ids the model sampled for it, not as a tokenization of its text
(:meth:`ChatRenderer.encode`'s ``sampled_turns``, kept per episode). Re-tokenizing would split the
episode's row wherever the model's tokens are not the tokenizer's canonical ones, or where it wrote a
tool call in another form than the gateway writes calls back (compact JSON, a trailing newline);
token-in/token-out servers (`OpenPipe ART <https://github.com/OpenPipe/ART>`_, `verifiers
<https://github.com/PrimeIntellect-ai/verifiers>`_) splice the sampled ids back too. It is safe because
it is narrow: only ids the model sampled in this episode; only for a message whose template content is
exactly the text they were returned as (an edited message is tokenized from its text, so it starts a
new row and is never trained); and only where the template writes that content as sent. Where the
template rewrites a content (strips earlier reasoning, trims it), the rewritten text is tokenized,
never the sampled tokens, so such a template shows up as a row split in the recording instead of a
silent mismatch; where it renders ``tool_calls`` itself, a message with calls is not spliced either
(their markup is the template's text, not the model's).

Templates that ignore ``tools`` or ``tool_calls`` (SmolLM2's) still work: the tools are described in
the system message, and an assistant message's calls are written into its content in the parser's
format (:class:`~agentfly_train.gateway.tool_calls.ToolCallText`); an unedited turn is then the ids
the model sampled, whatever form it wrote its calls in.

Example:
    >>> renderer = ChatRenderer(ChatFormat(tokenizer), ToolCallText("hermes"))  # doctest: +SKIP
    >>> ids = renderer.encode([ChatMessage("user", "2 + 2?")], tools=[])  # doctest: +SKIP
    >>> tokenizer.decode(ids)  # doctest: +SKIP
    '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM...<|im_start|>assistant\\n'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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

    def encode(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        sampled_turns: Mapping[str, list[int]] | None = None,
    ) -> list[int]:
        """Prompt tokens for ``messages`` (and the model turn's opening).

        Args:
            messages: The conversation.
            tools: Tool definitions in OpenAI's shape.
            sampled_turns: The episode's answered turns (:meth:`sampled_turn` of each): an assistant
                message whose :meth:`turn_text` is here, and which the template writes as sent, is put
                in as these ids instead of a tokenization of its text.

        Raises:
            RenderError: The template raised (e.g. it wants alternating roles) or cannot be split.
        """
        if tools and not self.renders_tools:
            messages = _with_system_note(messages, self.tool_text.describe_tools(tools))
        dicts = [self._template_message(m) for m in messages]
        sampled = [self._sampled_ids(m, sampled_turns) for m in messages]
        template_tools = tools if self.renders_tools else []
        contents = [d["content"] for d in dicts]
        sentinels = [f"AGENTFLYSENTINEL{i}X" if text else "" for i, text in enumerate(contents)]
        masked = [{**d, "content": s} if s else d for d, s in zip(dicts, sentinels, strict=True)]
        real = self._render(dicts, template_tools)
        pieces, shown = _split(self._render(masked, template_tools), sentinels)
        return self._tokenize(real, pieces, [contents[i] for i in shown], [sampled[i] for i in shown])

    def turn_text(self, content: str, calls: list[ToolCall]) -> str | None:
        """An assistant message as the template is given it: its content with its calls written in the
        parser's format. None where the template renders the calls itself (then the message is not the
        model's text alone, so it is never spliced)."""
        if calls and self.renders_tool_calls:
            return None
        return self.tool_text.write(content, calls)

    def sampled_turn(self, content: str, calls: list[ToolCall], token_ids: list[int]) -> tuple[str, list[int]] | None:
        """An answered call's entry for :meth:`encode`'s ``sampled_turns``: the returned message's
        :meth:`turn_text` and the ids the model sampled, without the end-of-turn token that closed them
        (the template writes its own closing after a content). None where there is nothing to splice: no
        text, no ids, or calls the template renders itself.

        ``content`` and ``calls`` must be what the program got back, so that the same message sent back
        unchanged has the same :meth:`turn_text` (a turn cut at a stop string does not qualify: its
        returned text lacks the stop string its ids hold).
        """
        text = self.turn_text(content, calls)
        ids = token_ids[:-1] if token_ids and token_ids[-1] in self.chat.end_of_turn_ids else token_ids
        return (text, list(ids)) if text and ids else None

    def _sampled_ids(self, message: ChatMessage, sampled_turns: Mapping[str, list[int]] | None) -> list[int] | None:
        """The ids the model sampled for ``message``, when it is one of its turns sent back unchanged."""
        if message.role != "assistant" or not sampled_turns:
            return None
        text = self.turn_text(message.content, [call for _, call in message.tool_calls])
        return sampled_turns.get(text) if text is not None else None

    def _tokenize(
        self, real: str, pieces: list[str], contents: list[str], sampled: list[list[int] | None]
    ) -> list[int]:
        """Walk the real rendering along the template's own pieces; what lies between two pieces is a
        content as the template wrote it (the original, or the template's rewrite of it). A content
        written as sent that has ``sampled`` ids is those ids."""
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
                at += len(content)  # written as sent (the usual case)
                spliced = sampled[index]
                ids += spliced if spliced is not None else self.chat.content_ids(content)
                continue
            # Rewritten by the template: it ends where the template's next piece starts, and only the
            # rewritten text can be tokenized (never the sampled ids of the original).
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


def _with_system_note(messages: list[ChatMessage], note: str) -> list[ChatMessage]:
    """``note`` appended to the system message (one is put first when there is none)."""
    if messages and messages[0].role == "system":
        first = messages[0]
        text = f"{first.content}\n\n{note}" if first.content else note
        return [replace(first, content=text), *messages[1:]]
    return [ChatMessage("system", note), *messages]


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
