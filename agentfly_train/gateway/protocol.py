"""OpenAI's chat-completions wire format: requests validated, responses and stream chunks built, errors shaped.

Only what the gateway supports is accepted; a field it cannot honour is a 400 naming the field,
never silently ignored (``n=2``, a ``tool_choice`` naming a tool it was not given). Fields that do not change what is
sampled (``user``, ``metadata``, ``store``, ...) are ignored, as OpenAI-compatible servers do.

Example:
    >>> request = parse_request(b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}')
    >>> request.messages[0].content, request.max_tokens, request.stream
    ('hi', 5, False)
    >>> try:
    ...     parse_request(b'{"messages": [], "n": 2}')
    ... except RequestError as error:
    ...     error.body()["error"]["param"]
    'n'
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agentfly_env.core.types import ToolCall
from agentfly_train.gateway.rendering import ChatMessage

ROLES = ("system", "developer", "user", "assistant", "tool")


class RequestError(Exception):
    """A request the gateway answers with OpenAI's error JSON.

    Args:
        message: What is wrong, for the program's author.
        param: The request field at fault (``messages[2].content``), or None.
        status: The HTTP status.
        code: OpenAI's machine-readable code, or None.
    """

    def __init__(self, message: str, param: str | None = None, *, status: int = 400, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status
        self.code = code

    def body(self) -> dict[str, Any]:
        """The error in OpenAI's shape (:func:`openai_error`)."""
        return openai_error(self)


#: How a dialect writes an error: its JSON body for a :class:`RequestError`.
ErrorShape = Callable[[RequestError], dict[str, Any]]

#: Anthropic's error ``type`` for each HTTP status (its API reference's table).
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
}


def openai_error(error: RequestError) -> dict[str, Any]:
    """OpenAI's error object (chat completions and Responses): message, type, param, code."""
    kind = "invalid_request_error" if error.status < 500 else "server_error"
    return {"error": {"message": error.message, "type": kind, "param": error.param, "code": error.code}}


def anthropic_error(error: RequestError) -> dict[str, Any]:
    """Anthropic's error object (Messages); the field at fault begins the message, as Anthropic writes it."""
    kind = _ANTHROPIC_ERRORS.get(error.status, "invalid_request_error" if error.status < 500 else "api_error")
    message = f"{error.param}: {error.message}" if error.param else error.message
    return {"type": "error", "error": {"type": kind, "message": message}}


@dataclass
class ChatRequest:
    """A validated ``POST /chat/completions`` body.

    Attributes:
        messages: The conversation.
        tools: Tool definitions in OpenAI's shape (``{"type": "function", "function": {...}}``).
        tool_choice: ``auto``, ``none`` (renders no tools, so the model is not offered any) or ``required`` (the
            model's turn starts with the call format's opening, so it writes a call).
        tool_name: With ``required``, the one tool the call must be to (a named function): its turn starts
            with the call up to the arguments.
        temperature: None for the gateway's default.
        top_p: None for the gateway's default.
        max_tokens: ``max_completion_tokens`` or ``max_tokens``; None for the gateway's default.
        stop: Strings that end the completion (left out of the returned text, as OpenAI does).
        stream: Answer as server-sent events.
        include_usage: ``stream_options.include_usage``: a last chunk with the token counts.
        seed: Seeds the sampling; None for one derived from the episode and its call number.
    """

    messages: list[ChatMessage]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str = "auto"
    tool_name: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False
    seed: int | None = None


def parse_request(raw: bytes) -> ChatRequest:
    """Validate a request body.

    Raises:
        RequestError: Malformed JSON, or a field that is missing, has the wrong type or asks for what
            the gateway does not do; the error names the field.
    """
    return chat_request(decode_body(raw))


def decode_body(raw: bytes) -> dict[str, Any]:
    """A request body's JSON object (any dialect's).

    Raises:
        RequestError: It is not JSON, or not an object.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise RequestError(f"the request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    return body


def converted_request(chat: dict[str, Any], body: dict[str, Any], renamed: Mapping[str, str]) -> ChatRequest:
    """Another dialect's request as the chat request it means: ``chat`` (what its converter built) plus the fields
    of its ``body`` that only differ in name (``renamed``: the chat name -> the dialect's), validated; an error
    names the field as the program wrote it."""
    for ours, theirs in renamed.items():
        if body.get(theirs) is not None:
            chat[ours] = body[theirs]
    try:
        return chat_request(chat)
    except RequestError as error:
        theirs = renamed.get(error.param or "")
        if theirs is not None and theirs != error.param:
            error.message = error.message.replace(f"'{error.param}'", f"'{theirs}'")
            error.param = theirs
        raise


def converted_tools(value: Any, convert: Callable[[Any, str], dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Another dialect's ``tools`` in the chat shape (``convert(tool, "tools[i]")`` each); None for none."""
    if not value:
        return None
    if not isinstance(value, list):
        raise RequestError("'tools' must be an array", "tools")
    return [convert(tool, f"tools[{index}]") for index, tool in enumerate(value)]


def chat_request(body: dict[str, Any]) -> ChatRequest:
    """A chat-completions body (decoded), validated: what every dialect is converted to."""
    if "messages" not in body:
        raise RequestError("'messages' is required", "messages")
    n = body.get("n")
    if n is not None and (not _is_int(n) or n != 1):
        raise RequestError(f"only n=1 is supported, got {n!r}", "n")
    tools = _tools(body.get("tools"))
    tool_choice, tool_name = _tool_choice(body.get("tool_choice") or "auto", tools)
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise RequestError("'stream_options' must be an object", "stream_options")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    max_param = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    return ChatRequest(
        messages=_messages(body["messages"]),
        tools=tools if tool_choice != "none" else [],
        tool_choice=tool_choice,
        tool_name=tool_name,
        temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0, open_low=True),
        max_tokens=_positive_int(max_tokens, max_param),
        stop=_stop(body.get("stop")),
        stream=_bool(body, "stream"),
        include_usage=_bool(stream_options, "include_usage", "stream_options.include_usage"),
        seed=_optional_int(body.get("seed"), "seed"),
    )


# ----------------------------------------------------------------------------- fields


def _messages(value: Any) -> list[ChatMessage]:
    if not isinstance(value, list) or not value:
        raise RequestError("'messages' must be a non-empty array of messages", "messages")
    return [_message(item, f"messages[{i}]") for i, item in enumerate(value)]


def _message(value: Any, where: str) -> ChatMessage:
    if not isinstance(value, dict):
        raise RequestError(f"{where} must be an object", where)
    role = value.get("role")
    if role not in ROLES:
        raise RequestError(f"{where}.role must be one of {', '.join(ROLES)}; got {role!r}", f"{where}.role")
    calls = _tool_calls(value.get("tool_calls"), f"{where}.tool_calls") if role == "assistant" else []
    content = _content(value.get("content"), f"{where}.content", optional=role == "assistant")
    tool_call_id = value.get("tool_call_id")
    if role == "tool" and not isinstance(tool_call_id, str):
        raise RequestError(f"{where}.tool_call_id must be a string", f"{where}.tool_call_id")
    name = value.get("name")
    if name is not None and not isinstance(name, str):
        raise RequestError(f"{where}.name must be a string", f"{where}.name")
    return ChatMessage(
        role="system" if role == "developer" else role,  # OpenAI's newer name for the system message
        content=content,
        tool_calls=calls,
        tool_call_id=tool_call_id if role == "tool" else None,
        name=name,
    )


def _content(value: Any, where: str, *, optional: bool) -> str:
    """A string, or an array of text parts (joined); null only where OpenAI allows it."""
    if isinstance(value, str):
        return value
    if value is None and optional:
        return ""
    if isinstance(value, list):
        texts = []
        for i, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise RequestError(f"{where}[{i}] must be a text part ({{'type': 'text', 'text': ...}})", where)
            texts.append(part["text"])
        return "".join(texts)
    raise RequestError(f"{where} must be a string or an array of text parts", where)


def _tool_calls(value: Any, where: str) -> list[tuple[str, ToolCall]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RequestError(f"{where} must be an array", where)
    calls = []
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RequestError(
                f"{here} must be {{'id', 'type': 'function', 'function': {{'name', 'arguments'}}}}", here
            )
        call_id = item.get("id")
        if not isinstance(call_id, str):
            raise RequestError(f"{here}.id must be a string", f"{here}.id")
        arguments = function.get("arguments", "{}")
        try:
            decoded = json.loads(arguments) if isinstance(arguments, str) else None
        except ValueError:
            decoded = None
        if not isinstance(decoded, (dict, str)):
            raise RequestError(
                f"{here}.function.arguments must be a JSON object in a string", f"{here}.function.arguments"
            )
        calls.append((call_id, ToolCall(name=function["name"], arguments=decoded)))
    return calls


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RequestError("'tools' must be an array", "tools")
    for i, tool in enumerate(value):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise RequestError(f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}", f"tools[{i}]")
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise RequestError(f"tools[{i}].function.name must be a non-empty string", f"tools[{i}].function.name")
        _parameters(function.get("parameters", {}), function["name"], f"tools[{i}].function.parameters")
    return value


def _parameters(schema: Any, name: str, where: str) -> None:
    """A tool's ``parameters``: a JSON Schema (draft 2020-12, OpenAI's) of an object, as OpenAI requires."""
    if not isinstance(schema, dict):
        raise RequestError(f"{where} of tool {name!r} must be a JSON Schema object", where)
    problem = _schema_problem(json.dumps(schema, sort_keys=True))
    if problem is not None:
        raise RequestError(f"{where} of tool {name!r} is not a JSON Schema: {problem}", where)
    if schema.get("type", "object") != "object":
        raise RequestError(
            f"{where} of tool {name!r} must describe an object (type 'object'), got {schema['type']!r}", where
        )


@functools.lru_cache(maxsize=1024)
def _schema_problem(schema_json: str) -> str | None:
    """What makes a schema (as sorted JSON) invalid, or None; checked once per schema, since a program sends
    the same tools with every call (a check takes about 0.7 ms)."""
    try:
        Draft202012Validator.check_schema(json.loads(schema_json))
    except SchemaError as error:
        return f"{''.join(f'[{part!r}]' for part in error.path)} {error.message}".strip()
    return None


def _tool_choice(value: Any, tools: list[dict[str, Any]]) -> tuple[str, str | None]:
    """``auto``, ``none``, ``required``, or ``{"type": "function", "function": {"name": ...}}`` (a tool given)."""
    if value in ("auto", "none", "required"):
        if value == "required" and not tools:
            raise RequestError("tool_choice 'required' needs tools", "tool_choice")
        return value, None
    function = value.get("function") if isinstance(value, dict) and value.get("type") == "function" else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise RequestError(
            "tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'function': {'name': ...}}",
            "tool_choice",
        )
    if name not in {tool["function"]["name"] for tool in tools}:
        raise RequestError(f"tool_choice names {name!r}, which is not among the tools", "tool_choice")
    return "required", name


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > 4:
        raise RequestError("'stop' must be a non-empty string or an array of at most 4 of them", "stop")
    return tuple(stops)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_int(value: Any, name: str) -> int | None:
    if value is not None and not _is_int(value):
        raise RequestError(f"'{name}' must be an integer", name)
    return value


def _positive_int(value: Any, name: str) -> int | None:
    if value is not None and (not _is_int(value) or value < 1):
        raise RequestError(f"'{name}' must be a positive integer, got {value!r}", name)
    return value


def _number(body: dict[str, Any], name: str, low: float, high: float, *, open_low: bool = False) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (low < value <= high if open_low else low <= value <= high):
        bounds = f"{'(' if open_low else '['}{low:g}, {high:g}]"
        raise RequestError(f"'{name}' must be a number in {bounds}, got {value!r}", name)
    return float(value)


def _bool(body: dict[str, Any], name: str, param: str | None = None) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(f"'{param or name}' must be a boolean", param or name)
    return value


# ----------------------------------------------------------------------------- responses


def completion_body(
    completion_id: str,
    created: int,
    model: str,
    message: dict[str, Any],
    finish_reason: str,
    usage: dict[str, int],
) -> dict[str, Any]:
    """A whole ``chat.completion``."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": usage,
    }


def stream_chunks(
    completion_id: str,
    created: int,
    model: str,
    message: dict[str, Any],
    finish_reason: str,
    usage: dict[str, int] | None,
) -> list[dict[str, Any]]:
    """A finished completion as OpenAI's ``chat.completion.chunk`` sequence: the role, the content, each
    tool call whole (with its index), the finish reason, and the usage when asked for. The turn is
    complete before anything is sent, so no tool call can be lost between chunks."""

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        chunks.append(chunk({"content": message["content"]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": index, **call}]}))
    chunks.append(chunk({}, finish_reason))
    if usage is not None:
        chunks.append({**chunk({}), "choices": [], "usage": usage})
    return chunks
