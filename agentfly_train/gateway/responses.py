"""OpenAI's Responses API (``POST /responses``) as a thin converter onto the gateway's chat core.

What the OpenAI Agents SDK and codex-style programs speak by default. A request's ``instructions`` and
``input`` items become chat messages (``instructions`` a system message; a ``message`` item a message; a
``function_call`` item a tool call of the assistant turn it belongs to, merged with that turn's message; a
``function_call_output`` item a tool message), its function ``tools``, ``tool_choice`` and
``max_output_tokens`` the chat fields of the same meaning; the answer is rendered, sampled and recorded by
the same core as a chat completion (so a turn sent back unchanged splices in the ids the model sampled),
and comes back as a ``response`` object: a ``message`` output item for the text and a ``function_call``
item per call, or, streamed, the whole event lifecycle (``response.created`` ... ``response.completed``).

What has no chat equivalent is a 400 in OpenAI's error shape naming the field, never dropped silently:
``previous_response_id`` and ``conversation`` (server-side state: send the whole ``input``), built-in
tools, images and files for a text model, reasoning items, a structured ``text.format``.

Example:
    >>> request = parse_responses_request(b'{"instructions": "Be brief.", "input": "2 + 3?", "max_output_tokens": 9}')
    >>> [(m.role, m.content) for m in request.messages], request.max_tokens
    ([('system', 'Be brief.'), ('user', '2 + 3?')], 9)
    >>> parse_responses_request(b'{"input": "hi", "previous_response_id": "resp_1"}')
    Traceback (most recent call last):
    ...
    agentfly_train.gateway.protocol.RequestError: 'previous_response_id' is not supported: the gateway keeps no responses; send the whole conversation as 'input'
"""

from __future__ import annotations

from typing import Any

from agentfly_train.gateway.protocol import ChatRequest, RequestError, converted_request, converted_tools, decode_body

__all__ = ["parse_responses_request", "response_body", "response_events"]

#: Fields that ask for what the gateway does not do, and why.
UNSUPPORTED = {
    "previous_response_id": "the gateway keeps no responses; send the whole conversation as 'input'",
    "conversation": "the gateway keeps no conversations; send the whole conversation as 'input'",
    "prompt": "stored prompts live on OpenAI's servers; send 'instructions' and 'input'",
    "background": "responses are answered at once; there is nothing to poll",
}
_TEXT_PARTS = {"input_text", "output_text", "text"}


def parse_responses_request(raw: bytes) -> ChatRequest:
    """A ``POST /responses`` body as the chat request it means.

    Raises:
        RequestError: Malformed JSON, an item or tool without a chat equivalent, or a field the chat
            core refuses; the error names the field.
    """
    body = decode_body(raw)
    for name, why in UNSUPPORTED.items():
        if body.get(name) not in (None, False, ""):
            raise RequestError(f"{name!r} is not supported: {why}", name)
    text_format = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if text_format not in (None, {"type": "text"}):
        raise RequestError("only plain text output is supported ('text.format' of type 'text')", "text.format")
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise RequestError("'instructions' must be a string", "instructions")
        messages.append({"role": "system", "content": instructions})
    given = body.get("input")
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list) and given:
        for index, item in enumerate(given):
            _add_item(messages, item, f"input[{index}]")
    else:
        raise RequestError("'input' must be a string or a non-empty array of items", "input")
    chat: dict[str, Any] = {"messages": messages, "tools": converted_tools(body.get("tools"), _tool)}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":  # a named function, flat in this API
        chat["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        chat["tool_choice"] = choice
    renamed = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_output_tokens", "stream": "stream"}
    return converted_request(chat, body, renamed)


def _add_item(messages: list[dict[str, Any]], item: Any, where: str) -> None:
    if not isinstance(item, dict):
        raise RequestError(f"{where} must be an object", where)
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        messages.append({"role": role, "content": _content(item.get("content"), f"{where}.content")})
    elif kind == "function_call":
        for field in ("call_id", "name", "arguments"):
            if not isinstance(item.get(field), str):
                raise RequestError(f"{where}.{field} must be a string", f"{where}.{field}")
        call = {
            "id": item["call_id"],
            "type": "function",
            "function": {"name": item["name"], "arguments": item["arguments"]},
        }
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant":  # the calls of the turn whose text came just before
            last.setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    elif kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise RequestError(f"{where}.call_id must be a string", f"{where}.call_id")
        output = item.get("output")
        text = output if isinstance(output, str) else _content(output, f"{where}.output")
        messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
    elif kind == "reasoning":
        raise RequestError(f"{where}: reasoning items have no chat equivalent (this gateway returns none)", where)
    else:
        raise RequestError(f"{where}: items of type {kind!r} are not supported (a text model's chat)", f"{where}.type")


def _content(value: Any, where: str) -> str:
    """A message's text: a string, or text parts joined; images, files and audio are refused."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise RequestError(f"{where} must be a string or an array of text parts", where)
    texts = []
    for index, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        elif kind in _TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            raise RequestError(
                f"{where}[{index}] must be a text part ({', '.join(sorted(_TEXT_PARTS))}); got {kind!r}: "
                "the model reads text only",
                f"{where}[{index}]",
            )
    return "".join(texts)


def _tool(tool: Any, where: str) -> dict[str, Any]:
    """A Responses function tool in the chat shape; built-in tools have no chat equivalent."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    if kind != "function":
        raise RequestError(f"{where}: only function tools are supported, got {kind!r}", f"{where}.type")
    function = {key: tool[key] for key in ("name", "description", "parameters") if key in tool}
    return {"type": "function", "function": function}


# ----------------------------------------------------------------------------- responses


def _output(message: dict[str, Any], response_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if message.get("content"):
        text = {"type": "output_text", "text": message["content"], "annotations": []}
        items.append(
            {
                "type": "message",
                "id": f"msg_{response_id}",
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    for call in message.get("tool_calls") or ():
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{call['id']}",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        )
    return items


def response_body(
    response_id: str, created: int, model: str, message: dict[str, Any], finish_reason: str, usage: dict[str, int]
) -> dict[str, Any]:
    """A whole ``response`` object for an answered call (``incomplete`` when cut at the token limit)."""
    cut = finish_reason == "length"
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": model,
        "output": _output(message, response_id),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        },
    }


def response_events(whole: dict[str, Any]) -> list[dict[str, Any]]:
    """A finished response as the Responses API streams one: ``response.created``, ``response.in_progress``,
    each output item added, its text or arguments as one delta and done, the item done, then
    ``response.completed`` (or ``response.incomplete``) with the whole response; numbered in order."""
    started = {**whole, "status": "in_progress", "incomplete_details": None, "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(whole["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": []}
            events += [
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "content": []},
                },
                {"type": "response.content_part.added", **at, "content_index": 0, "part": part},
                {"type": "response.output_text.delta", **at, "content_index": 0, "delta": text},
                {"type": "response.output_text.done", **at, "content_index": 0, "text": text},
                {"type": "response.content_part.done", **at, "content_index": 0, "part": {**part, "text": text}},
            ]
        else:
            events += [
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "arguments": ""},
                },
                {"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]},
                {"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]},
            ]
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": f"response.{whole['status']}", "response": whole})
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]
