"""The message decoder of the wire protocol: every frame gives a request or a ProtocolError, never a crash."""

from __future__ import annotations

import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from agentfly_env.core.types import Step, ToolCall
from agentfly_env.serve.protocol import (
    Action,
    CloseRequest,
    ErrorCode,
    MCPRequest,
    ProtocolError,
    ResetRequest,
    StateRequest,
    StepRequest,
    decode_message,
    encode,
    error_frame,
    observation_frame,
)

REQUESTS = (ResetRequest, StepRequest, StateRequest, CloseRequest, MCPRequest)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["reset", "step", "state", "close", "mcp", ""]) | json_values,
        "data": json_values
        | st.fixed_dictionaries(
            {}, optional={"message": json_values, "seed": json_values, "metadata": json_values, "x": json_values}
        ),
        "extra": json_values,
    },
)


def decodes_or_refuses(frame: str | bytes) -> None:
    try:
        request = decode_message(frame)
    except ProtocolError as error:
        assert error.code in ErrorCode and error.message
        assert json.loads(encode(error_frame(error)))["data"]["code"] == error.code.value
    else:
        assert isinstance(request, REQUESTS)


@given(st.binary(max_size=256))
def test_any_bytes_decode_or_give_a_protocol_error(frame):
    decodes_or_refuses(frame)


@given(st.text(max_size=256))
def test_any_text_decodes_or_gives_a_protocol_error(frame):
    decodes_or_refuses(frame)


@given(envelopes)
def test_any_json_envelope_decodes_or_gives_a_protocol_error(message):
    decodes_or_refuses(json.dumps(message))


@given(
    st.text(),
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    st.none() | st.integers(min_value=0, max_value=2**63 - 1),
    st.none() | st.text(max_size=255),
)
def test_valid_messages_decode_to_what_was_sent(text, metadata, seed, episode_id):
    step = {"type": "step", "data": {"message": text, "metadata": metadata}}
    assert decode_message(json.dumps(step)) == StepRequest(Action(text, metadata))
    reset = {"type": "reset", "data": {"seed": seed, "episode_id": episode_id, "ignored": [1]}}
    assert decode_message(json.dumps(reset).encode()) == ResetRequest(seed, episode_id)
    assert (
        decode_message('{"type": "state"}') == StateRequest() and decode_message('{"type": "close"}') == CloseRequest()
    )


@given(st.integers(max_value=-1) | st.text() | st.floats(allow_nan=False, allow_infinity=False))
def test_a_reset_seed_must_be_a_non_negative_integer(seed):
    try:
        decode_message(json.dumps({"type": "reset", "data": {"seed": seed}}))
    except ProtocolError as error:
        assert error.code is ErrorCode.VALIDATION_ERROR
    else:
        raise AssertionError(f"seed {seed!r} was accepted")


def test_an_observation_frame_carries_typed_records_as_json():
    step = Step(
        action="a",
        observation="b",
        reward=1.0,
        terminated=True,
        truncated=False,
        tool_calls=[ToolCall("calculator", {"expression": "1"})],
    )
    frame = json.loads(encode(observation_frame("b", 1.0, True, False, {"step": step, "pair": (1, 2)})))
    assert frame["type"] == "observation" and frame["data"]["done"] is True and frame["data"]["reward"] == 1.0
    info = frame["data"]["observation"]["info"]
    assert msgspec.convert(info["step"], Step) == step and info["pair"] == [1, 2]
