"""OpenEnv's wire protocol, as the ``openenv`` package (0.10.0) speaks it, for AgentFly's text envs.

One WebSocket (``/ws``) is one session with its own env. The client sends JSON frames and gets one
frame back for each::

    {"type": "reset", "data": {"seed": 0, "episode_id": "...", "options": {...}}}  -> observation
    {"type": "step", "data": {"message": "<tool_call>...</tool_call>"}}           -> observation
    {"type": "state"}                                                            -> state
    {"type": "close"}                                                            -> (the session ends)
    {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 1}}  -> mcp

    {"type": "observation", "data": {"observation": {...}, "reward": 1.0, "done": true}}
    {"type": "state", "data": {"episode_id": "...", "step_count": 2}}
    {"type": "error", "data": {"message": "...", "code": "VALIDATION_ERROR"}}
    {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "result": {"tools": [...]}}}

An ``mcp`` message carries a JSON-RPC 2.0 request (:func:`decode_jsonrpc`) and its answer a JSON-RPC
response, with OpenEnv's error codes (:class:`JsonRpcCode`); ``POST /mcp`` takes and gives the same
JSON-RPC objects bare.

The envelopes, the ``data`` of reset (``seed`` >= 0, ``episode_id``, other keys passed on or ignored),
the action's ``metadata`` field, the error codes and the observation's layout (its fields, then
``reward`` and ``done`` beside it) are OpenEnv's. What is AgentFly's is the content: the action is the
model's turn (``message``, as in OpenEnv's text envs), and the observation carries the env's answer
(``text``), Gymnasium's ``terminated``/``truncated`` (OpenEnv has only ``done``) and the env's ``info``
as JSON, with ``info["start"]`` and ``info["step"]`` the :class:`~agentfly_env.core.types.EpisodeStart` and
:class:`~agentfly_env.core.types.Step` records; JSON has no tuples, so tuples in ``info`` arrive as lists.

This module is the codec, shared by the server (:mod:`agentfly_env.serve.server`) and the client env
(:mod:`agentfly_env.serve.remote`); it needs msgspec and numpy only. :func:`decode_message` never raises anything but
:class:`ProtocolError`, whatever the bytes.

Example:
    >>> decode_message('{"type": "step", "data": {"message": "hi"}}')
    StepRequest(action=Action(message='hi', metadata={}))
    >>> decode_message('{"type": "dance"}')
    Traceback (most recent call last):
    ...
    agentfly_env.serve.protocol.ProtocolError: UNKNOWN_TYPE: unknown message type 'dance'; expected one of reset, step, state, close, mcp
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from agentfly_env.serve.guard import MAX_JSON_DEPTH, json_too_deep

__all__ = [
    "Action",
    "CloseRequest",
    "ErrorCode",
    "JsonRpcCode",
    "JsonRpcError",
    "JsonRpcRequest",
    "MCPRequest",
    "Observation",
    "ProtocolError",
    "Request",
    "ResetRequest",
    "State",
    "StateRequest",
    "StepRequest",
    "decode_frame",
    "decode_jsonrpc",
    "decode_message",
    "encode",
    "error_frame",
    "jsonrpc_error",
    "jsonrpc_result",
    "mcp_frame",
    "observation_frame",
    "schemas",
    "state_frame",
]


class ErrorCode(enum.StrEnum):
    """OpenEnv's ``WSErrorCode``: the ``code`` of an error frame."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


class JsonRpcCode(enum.IntEnum):
    """JSON-RPC 2.0's error codes, as OpenEnv's ``JsonRpcErrorCode`` names them."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000


class JsonRpcError(Exception):
    """An MCP request refused or failed; becomes a JSON-RPC error response (:func:`jsonrpc_error`)."""

    def __init__(self, code: JsonRpcCode, message: str, data: Any = None) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code, self.message, self.data = code, message, data


class ProtocolError(Exception):
    """A frame the protocol refuses, or a session it cannot serve; becomes an error frame.

    Attributes:
        code: OpenEnv's error code.
        message: What was wrong, for the client's developer.
        details: Extra fields of the error frame (``max_sessions`` for a refusal, ...).
    """

    def __init__(self, code: ErrorCode, message: str, **details: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.details = code, message, details


# ---------------------------------------------------------------------------------------- the schemas


class Action(msgspec.Struct, forbid_unknown_fields=True):
    """One model turn. Unknown fields are refused, as OpenEnv's ``Action`` (``extra="forbid"``) does."""

    message: str
    metadata: dict[str, Any] = {}


class Observation(msgspec.Struct):
    """What the env answered; ``reward`` and ``done`` travel beside it, as OpenEnv lays them out."""

    text: str
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = {}
    metadata: dict[str, Any] = {}


class State(msgspec.Struct):
    """OpenEnv's ``State``: the episode's id and the steps taken in it, plus the env's id."""

    episode_id: str | None = None
    step_count: int = 0
    env_id: str | None = None


class ResetRequest(msgspec.Struct):
    """The ``data`` of a reset. Other keys are ignored, as OpenEnv ignores those its env does not take."""

    seed: Annotated[int, msgspec.Meta(ge=0)] | None = None
    episode_id: Annotated[str, msgspec.Meta(max_length=255)] | None = None
    options: dict[str, Any] | None = None


class StepRequest(msgspec.Struct):
    action: Action


class StateRequest(msgspec.Struct):
    pass


class CloseRequest(msgspec.Struct):
    pass


class MCPRequest(msgspec.Struct):
    """An ``mcp`` message: its ``data`` is a JSON-RPC request, checked by :func:`decode_jsonrpc` (a bad one
    is answered in JSON-RPC, not with an error frame, as OpenEnv answers it)."""

    data: dict[str, Any]


class JsonRpcRequest(msgspec.Struct, forbid_unknown_fields=True):
    """OpenEnv's ``JsonRpcRequest``: ``params`` an object, unknown fields refused."""

    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] = {}
    id: str | int | None = None


Request = ResetRequest | StepRequest | StateRequest | CloseRequest | MCPRequest


def schemas() -> dict[str, Any]:
    """OpenEnv's ``GET /schema`` answer: JSON schemas of the action, the observation and the state."""
    return {
        "action": msgspec.json.schema(Action),
        "observation": msgspec.json.schema(Observation),
        "state": msgspec.json.schema(State),
    }


# ---------------------------------------------------------------------------------------- decoding

_REQUEST_TYPES = ("reset", "step", "state", "close", "mcp")
_json_decoder = msgspec.json.Decoder()


def decode_frame(frame: str | bytes) -> dict[str, Any]:
    """A frame's JSON object.

    Raises:
        ProtocolError: ``INVALID_JSON`` for what is not JSON, ``VALIDATION_ERROR`` for JSON that is not
            an object.
    """
    try:
        message = _json_decoder.decode(frame)
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"invalid JSON: {error}") from None
    except RecursionError:
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, "the JSON is nested too deep to read") from None
    if not isinstance(message, dict):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"a message is a JSON object, got {type(message).__name__}")
    return message


def decode_message(frame: str | bytes) -> Request:
    """One client frame, checked: a :data:`Request`.

    Raises:
        ProtocolError: ``INVALID_JSON``, ``UNKNOWN_TYPE`` (no or an unknown ``type``) or
            ``VALIDATION_ERROR`` (fields missing, of the wrong type, or unknown where OpenEnv forbids them;
            JSON nested deeper than :data:`~agentfly_env.serve.guard.MAX_JSON_DEPTH`, which HTTP bodies are
            held to as well).
    """
    if json_too_deep(frame):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"the message is nested deeper than {MAX_JSON_DEPTH} levels")
    message = decode_frame(frame)
    kind = message.get("type")
    if kind not in _REQUEST_TYPES:
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE, f"unknown message type {kind!r}; expected one of {', '.join(_REQUEST_TYPES)}"
        )
    extra = sorted(str(key) for key in message if key not in ("type", "data"))
    if extra:
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"unknown field(s) {', '.join(extra)} in a {kind} message")
    data = message.get("data", {})
    try:
        if kind == "reset":
            return msgspec.convert(data, ResetRequest)
        if kind == "step":
            if "data" not in message:
                raise ProtocolError(ErrorCode.VALIDATION_ERROR, "a step message needs data (the action)")
            return StepRequest(msgspec.convert(data, Action))
        if kind == "mcp":
            if "data" not in message:
                raise ProtocolError(ErrorCode.VALIDATION_ERROR, "an mcp message needs data (a JSON-RPC request)")
            return msgspec.convert(message, MCPRequest)
    except msgspec.ValidationError as error:
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"invalid {kind} data: {error}") from None
    if "data" in message:
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"a {kind} message has no data")
    return StateRequest() if kind == "state" else CloseRequest()


def decode_jsonrpc(request: Any) -> JsonRpcRequest:
    """A JSON-RPC request (an ``mcp`` message's ``data``, or ``POST /mcp``'s body), checked.

    Raises:
        JsonRpcError: ``INVALID_REQUEST`` for anything that is not a JSON-RPC 2.0 request object.
    """
    try:
        return msgspec.convert(request, JsonRpcRequest)
    except msgspec.ValidationError as error:
        raise JsonRpcError(JsonRpcCode.INVALID_REQUEST, f"Invalid request: {error}") from None


# ---------------------------------------------------------------------------------------- encoding


def _fallback(value: Any) -> Any:
    """What JSON cannot hold as is: numpy values as their Python values, mappings (``info["task"]``'s
    read-only view) as objects, anything else as its text."""
    if isinstance(value, Mapping):
        return dict(value)
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    return tolist() if callable(tolist) else str(value)


_encoder = msgspec.json.Encoder(enc_hook=_fallback)


def encode(message: Any) -> str:
    """A frame's text: ``message`` as JSON (Structs, tuples and numpy values included)."""
    return _encoder.encode(message).decode()


def observation_frame(
    text: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any]
) -> dict[str, Any]:
    """An ``observation`` frame: after a reset (``reward`` None) or a step."""
    return {
        "type": "observation",
        "data": {
            "observation": Observation(text, terminated, truncated, info),
            "reward": reward,
            "done": terminated or truncated,
        },
    }


def state_frame(state: State) -> dict[str, Any]:
    return {"type": "state", "data": state}


def error_frame(error: ProtocolError) -> dict[str, Any]:
    return {"type": "error", "data": {"message": error.message, "code": error.code.value, **error.details}}


def jsonrpc_result(request_id: str | int | None, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def jsonrpc_error(error: JsonRpcError, request_id: str | int | None = None) -> dict[str, Any]:
    """A JSON-RPC error response, laid out as OpenEnv's (``data`` always present, None for none)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": error.code.value, "message": error.message, "data": error.data},
    }


def mcp_frame(response: dict[str, Any]) -> dict[str, Any]:
    """An ``mcp`` frame: the answer to an ``mcp`` message, a JSON-RPC response."""
    return {"type": "mcp", "data": response}
