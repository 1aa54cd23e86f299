"""Anthropic's Messages API (``POST /v1/messages``) as a thin converter onto the gateway's chat core.

What Claude-style agent loops speak (the ``anthropic`` client, the Claude Agent SDK). ``system`` becomes the
system message; a user message's ``text`` blocks its text and its ``tool_result`` blocks tool messages (in
their order, before the text); an assistant message's ``text`` blocks its content and its ``tool_use`` blocks
its tool calls (``input`` as the call's arguments), so a turn sent back as it came splices in the ids the
model sampled; ``tools`` (``input_schema`` as the parameters), ``tool_choice``, ``max_tokens`` and
``stop_sequences`` their chat fields. The answer is a ``message`` with ``text`` and ``tool_use`` blocks and
Anthropic's ``stop_reason``, or, streamed, its event lifecycle (``message_start`` ... ``message_stop``).
Errors come in Anthropic's shape (``{"type": "error", "error": {"type": ..., "message": ...}}``).

What has no equivalent for a text model's chat is a 400 naming the field: extended ``thinking``, thinking
blocks, images and documents, server tools (web search, code execution, the text editor, bash), ``top_k``
(the gateway samples with the run's own).

Example:
    >>> request = parse_messages_request(
    ...     b'{"system": "Be brief.", "max_tokens": 9, "messages": [{"role": "user", "content": "2 + 3?"}]}'
    ... )
    >>> [(m.role, m.content) for m in request.messages], request.max_tokens
    ([('system', 'Be brief.'), ('user', '2 + 3?')], 9)
"""

from __future__ import annotations

import json
from typing import Any

from agentfly_train.gateway.protocol import ChatRequest, RequestError, converted_request, converted_tools, decode_body

__all__ = ["message_body", "message_events", "parse_messages_request"]

#: Anthropic's ``stop_reason`` for each of the chat core's finish reasons.
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_TOOL_CHOICES = {"auto": "auto", "none": "none", "any": "required"}


def parse_messages_request(raw: bytes) -> ChatRequest:
    """A ``POST /v1/messages`` body as the chat request it means.

    Raises:
        RequestError: Malformed JSON, a block or tool without a chat equivalent, or a field the chat core
            refuses; the error names the field.
    """
    body = decode_body(raw)
    if "max_tokens" not in body:
        raise RequestError("'max_tokens' is required", "max_tokens")
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled"):
        raise RequestError("extended thinking is not supported by this model", "thinking")
    if body.get("top_k") is not None:
        raise RequestError("'top_k' is not supported: the gateway samples with the run's own top_k", "top_k")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        messages.append({"role": "system", "content": _text(system, "system")})
    given = body.get("messages")
    if not isinstance(given, list) or not given:
        raise RequestError("'messages' must be a non-empty array", "messages")
    for index, message in enumerate(given):
        messages += _messages(message, f"messages[{index}]")
    chat: dict[str, Any] = {
        "messages": messages,
        "max_tokens": body["max_tokens"],
        "tools": converted_tools(body.get("tools"), _tool),
    }
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind == "tool":
            chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
        elif kind in _TOOL_CHOICES:
            chat["tool_choice"] = _TOOL_CHOICES[kind]
        else:
            raise RequestError(
                f"tool_choice must be of type 'auto', 'any', 'tool' or 'none', got {kind!r}", "tool_choice"
            )
    renamed = {"temperature": "temperature", "top_p": "top_p", "stop": "stop_sequences", "stream": "stream"}
    return converted_request(chat, body, renamed)


def _messages(message: Any, where: str) -> list[dict[str, Any]]:
    """One Messages-API message as chat messages (a user turn's tool results are tool messages of their own)."""
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise RequestError(f"{where} must be an object with role 'user' or 'assistant'", f"{where}.role")
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise RequestError(f"{where}.content must be a string or an array of blocks", f"{where}.content")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for index, block in enumerate(content):
        here = f"{where}.content[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and role == "assistant":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise RequestError(f"{here} must have a string 'id' and 'name'", here)
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            calls.append(
                {"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}}
            )
        elif kind == "tool_result" and role == "user":
            if not isinstance(block.get("tool_use_id"), str):
                raise RequestError(f"{here}.tool_use_id must be a string", f"{here}.tool_use_id")
            text = _text(block.get("content", ""), f"{here}.content")
            results.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        else:
            raise RequestError(
                f"{here}: a {kind!r} block is not supported in a {role} message (text, tool_use, tool_result)", here
            )
    if role == "assistant":
        return [{"role": "assistant", "content": "".join(texts) or None, "tool_calls": calls or None}]
    return results + ([{"role": "user", "content": "".join(texts)}] if texts or not results else [])


def _text(value: Any, where: str) -> str:
    """A string, or ``text`` blocks joined (a system prompt, a tool result)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for index, block in enumerate(value):
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                raise RequestError(
                    f"{where}[{index}] must be a text block (the model reads text only)", f"{where}[{index}]"
                )
            texts.append(block["text"])
        return "".join(texts)
    raise RequestError(f"{where} must be a string or an array of text blocks", where)


def _tool(tool: Any, where: str) -> dict[str, Any]:
    """A client tool in the chat shape; Anthropic's server tools (typed, versioned) have no chat equivalent."""
    if not isinstance(tool, dict) or tool.get("type") not in (None, "custom"):
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise RequestError(
            f"{where}: only client tools (name, input_schema) are supported, got {kind!r}", f"{where}.type"
        )
    function = {"name": tool.get("name")}  # in OpenAI's order, as the tools are described to the model
    if "description" in tool:
        function["description"] = tool["description"]
    function["parameters"] = tool.get("input_schema", {})
    return {"type": "function", "function": function}


# ----------------------------------------------------------------------------- answers


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        arguments = json.loads(call["function"]["arguments"])
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": call["function"]["name"],
                "input": arguments if isinstance(arguments, dict) else {"input": arguments},
            }
        )
    return blocks


def message_body(
    message_id: str,
    model: str,
    message: dict[str, Any],
    finish_reason: str,
    stop_sequence: str | None,
    usage: dict[str, int],
) -> dict[str, Any]:
    """A whole ``message`` for an answered call."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _blocks(message),
        "stop_reason": "stop_sequence" if stop_sequence is not None else STOP_REASONS[finish_reason],
        "stop_sequence": stop_sequence,
        "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]},
    }


def message_events(whole: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished message as the Messages API streams one: ``message_start``, each content block's start,
    its text or input JSON as one delta, and its stop, ``message_delta`` with the stop reason and the
    output tokens, ``message_stop``."""
    started = {**whole, "content": [], "stop_reason": None, "stop_sequence": None}
    started["usage"] = {**whole["usage"], "output_tokens": 0}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": started}]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            opened, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}
        events += [
            {"type": "content_block_start", "index": index, "content_block": opened},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    stop = {"stop_reason": whole["stop_reason"], "stop_sequence": whole["stop_sequence"]}
    events += [
        {"type": "message_delta", "delta": stop, "usage": {"output_tokens": whole["usage"]["output_tokens"]}},
        {"type": "message_stop"},
    ]
    return events
