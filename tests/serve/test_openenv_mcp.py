"""OpenEnv's MCP on ``agentfly-serve``'s server (``mcp`` messages on ``/ws``, ``POST /mcp``), driven by the
``openenv`` package's own MCP client and by raw frames for what it does not send.

The reference is the same calls made in this process (:func:`agentfly_env.serve.mcp.answer` on the same env,
reset with the same seed): the results, and the errors, must be equal.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import gymnasium as gym
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from serving import openenv_python, run_in_openenv, serving
from test_serve import SlowEcho, post, request, ws_url
from websockets.asyncio.client import connect

import agentfly_env  # noqa: F401  (registers the ids)
from agentfly_env import ListTasks, ToolEnv, reward, tool
from agentfly_env.serve.mcp import RESERVED_TOOL_NAMES, ToolSession, answer
from agentfly_env.serve.protocol import JsonRpcCode, JsonRpcError, JsonRpcRequest, decode_jsonrpc

MATH = "AgentFly/Math-v0"
MATH_KWARGS = {"difficulty": 0, "tools": ["calculator"], "answer_mode": "tool"}
SEED = 3


async def in_process(calls: list[tuple[str, dict[str, Any]]]) -> tuple[str, list[dict[str, Any]], list[Any]]:
    """Math-v0 reset with SEED, then ``calls`` made in this process: the task, the tools and each call's
    result (``{"result": ...}``) or JSON-RPC error (``{"error": {"code": ..., "message": ...}}``)."""
    env = gym.make(MATH, **MATH_KWARGS).unwrapped
    try:
        session = ToolSession(env)  # as the server's session: made with the lease, before the reset
        task, _ = await env.areset(seed=SEED)
        tools = (await answer(session, "tools/list", {}))["tools"]
        outcomes = []
        for name, arguments in calls:
            try:
                outcomes.append({"result": await answer(session, "tools/call", {"name": name, "arguments": arguments})})
            except JsonRpcError as error:
                outcomes.append({"error": {"code": error.code, "message": error.message}})
    finally:
        await env.aclose()
    return task, tools, outcomes


def expert_calls() -> list[tuple[str, dict[str, Any]]]:
    """The calculator on the task, a bad argument, an unknown and a reserved tool, then the answer."""
    env = gym.make(MATH, **MATH_KWARGS).unwrapped
    env.reset(seed=SEED)
    task = env.task
    env.close()
    return [
        ("calculator", {"expression": task["metadata"]["expression"]}),
        ("calculator", {"expr": "1"}),
        ("nope", {}),
        ("reset", {}),
        ("finish", {"answer": str(task["answer"])}),
    ]


def post_mcp(served: Any, body: bytes | dict[str, Any]) -> dict[str, Any]:
    status, reply = post(served.url + "/mcp", body)
    assert status == 200  # as OpenEnv's: what went wrong is said in JSON-RPC
    return reply


def rpc(method: str, request_id: int | str | None = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params, "id": request_id}


@pytest.mark.skipif(openenv_python() is None, reason="openenv's venv is missing: make peers")
async def test_the_openenv_mcp_client_calls_the_tools_as_in_process():
    calls = expert_calls()
    task, tools, outcomes = await in_process(calls)
    assert [outcome.get("error", {}).get("code") for outcome in outcomes] == [
        None,
        None,
        JsonRpcCode.INVALID_PARAMS,
        JsonRpcCode.INVALID_PARAMS,
        None,
    ]
    assert outcomes[1]["result"]["isError"] and outcomes[-1]["result"]["structuredContent"]["reward"] == 1.0
    with serving(MATH, MATH_KWARGS) as served:
        wire = await asyncio.to_thread(
            run_in_openenv, "tests/serve/_openenv_mcp_client.py", served.url, str(SEED), json.dumps(calls)
        )
        # the client closed its HTTP session, and its env went back
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["http_sessions"] == 0)
        assert stats["active_sessions"] == 0 and stats["pool"]["in_use"] == 0 and stats["pool"]["failures"] == 0

    # MCPToolClient: the tools, then the calls on the episode its WebSocket reset (refused ones take no turn)
    http = wire["http"]
    assert http["tools"] == [
        {"name": tool["name"], "description": tool["description"], "input_schema": tool["inputSchema"]}
        for tool in tools
    ]
    assert http["reset"]["text"] == task and http["state"]["step_count"] == 3
    for (name, _), outcome, got in zip(calls, outcomes, http["results"], strict=True):
        if "error" in outcome:
            assert got == {"error": f"Tool '{name}' failed: {outcome['error']['message']}"}
        else:
            assert got == outcome
    # mcp messages on /ws: JSON-RPC responses to each request, with its id
    assert wire["ws"][0] == {"jsonrpc": "2.0", "id": 0, "result": {"tools": tools}}
    for request_id, (outcome, got) in enumerate(zip(outcomes, wire["ws"][1:], strict=True), 1):
        if "error" in outcome:
            assert got == {"jsonrpc": "2.0", "id": request_id, "error": {**outcome["error"], "data": None}}
        else:
            assert got == {"jsonrpc": "2.0", "id": request_id, **outcome}


def test_post_mcp_answers_bad_requests_in_json_rpc_and_plays_each_call_on_a_fresh_env():
    with serving(MATH, MATH_KWARGS) as served:

        def error_of(body: bytes | dict[str, Any]) -> tuple[int, str]:
            error = post_mcp(served, body)["error"]
            return error["code"], error["message"]

        assert error_of(b"{not json") == (JsonRpcCode.PARSE_ERROR, "Parse error")
        assert error_of(b"[1, 2]") == (JsonRpcCode.PARSE_ERROR, "Parse error")
        code, message = error_of({"jsonrpc": "2.0", "id": 1})
        assert code == JsonRpcCode.INVALID_REQUEST and "method" in message
        assert error_of(rpc("initialize")) == (JsonRpcCode.METHOD_NOT_FOUND, "Method not found: initialize")
        assert error_of(rpc("tools/call")) == (JsonRpcCode.INVALID_PARAMS, "Missing 'name' in params")
        code, message = error_of(rpc("tools/call", name="calculator", arguments="1 + 1"))
        assert code == JsonRpcCode.INVALID_PARAMS and "arguments" in message
        assert error_of(rpc("tools/list", session_id="nope")) == (
            JsonRpcCode.INVALID_PARAMS,
            "Unknown session_id: nope",
        )
        code, message = error_of(rpc("openenv/session/close"))
        assert code == JsonRpcCode.INVALID_PARAMS and "session_id" in message
        assert post_mcp(served, rpc("tools/list", request_id="a"))["id"] == "a"
        for _ in range(2):  # no session: each call is the first turn of a new episode
            result = post_mcp(served, rpc("tools/call", name="calculator", arguments={"expression": "6 * 7"}))["result"]
            assert result["content"] == [{"type": "text", "text": "42"}] and result["structuredContent"]["turn"] == 1
        stats = served.sessions()
        assert stats["http_sessions"] == 0 and stats["active_sessions"] == 0 and stats["pool"]["in_use"] == 0


async def test_mcp_frames_on_ws_share_the_sessions_episode_and_bad_ones_keep_it_alive():
    with serving(MATH, MATH_KWARGS) as served:
        async with connect(ws_url(served)) as ws:
            await request(ws, {"type": "reset", "data": {"seed": SEED}})
            for frame in ({"type": "mcp"}, {"type": "mcp", "data": [1]}, {"type": "mcp", "data": {}, "id": 1}):
                assert (await request(ws, frame))["data"]["code"] == "VALIDATION_ERROR"
            bad = await request(ws, {"type": "mcp", "data": {"method": "tools/list", "id": 7}})
            assert bad["type"] == "mcp" and bad["data"]["id"] is None
            assert bad["data"]["error"]["code"] == JsonRpcCode.INVALID_REQUEST
            own = (await request(ws, {"type": "mcp", "data": rpc("openenv/session/create")}))["data"]["result"]
            closing = await request(ws, {"type": "mcp", "data": rpc("openenv/session/close", **own)})
            assert closing["data"]["error"]["code"] == JsonRpcCode.INVALID_REQUEST
            call = rpc("tools/call", 2, name="calculator", arguments={"expression": "2 + 2"})
            answer_frame = await request(ws, {"type": "mcp", "data": call})
            assert answer_frame["data"]["id"] == 2 and answer_frame["data"]["result"]["structuredContent"]["turn"] == 1
            assert (await request(ws, {"type": "state"}))["data"]["step_count"] == 1  # the reset's episode
    with serving(SlowEcho) as served:
        async with connect(ws_url(served)) as ws:
            toolless = await request(ws, {"type": "mcp", "data": rpc("tools/list")})
            assert toolless["data"]["error"] == {
                "code": JsonRpcCode.INTERNAL_ERROR,
                "message": "Environment does not support MCP",
                "data": None,
            }
            assert (await request(ws, {"type": "reset"}))["data"]["observation"]["text"] == "Say something."


async def test_an_http_session_is_joined_by_one_websocket_closed_after_it_and_reaped_when_idle():
    with serving(MATH, MATH_KWARGS, idle_timeout_s=2.0) as served:
        session_id = (await asyncio.to_thread(post_mcp, served, rpc("openenv/session/create")))["result"]["session_id"]
        assert served.sessions()["http_sessions"] == 1 and served.sessions()["active_sessions"] == 1
        async with connect(ws_url(served, f"?session_id={session_id}")) as ws:
            await request(ws, {"type": "reset", "data": {"seed": SEED}})
            async with connect(ws_url(served, f"?session_id={session_id}")) as second:
                refusal = json.loads(await asyncio.wait_for(second.recv(), 30))
                assert refusal["data"]["code"] == "SESSION_ERROR" and "already" in refusal["data"]["message"]
            call = rpc("tools/call", name="calculator", arguments={"expression": "1 + 1"}, session_id=session_id)
            assert (await asyncio.to_thread(post_mcp, served, call))["result"]["structuredContent"]["turn"] == 1
            assert (await request(ws, {"type": "state"}))["data"]["step_count"] == 1  # one episode, two doors
            closing = await asyncio.to_thread(post_mcp, served, rpc("openenv/session/close", session_id=session_id))
            assert closing["result"] == {"session_id": session_id, "closed": False, "closing": True}
            assert (await request(ws, {"type": "state"}))["type"] == "state"  # still served until it leaves
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["http_sessions"] == 0)
        assert stats["http_sessions"] == 0 and stats["active_sessions"] == 0
        # a session nobody uses is reaped, its env given back
        await asyncio.to_thread(post_mcp, served, rpc("openenv/session/create"))
        assert served.sessions()["http_sessions"] == 1
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["http_sessions"] == 0)
        assert stats["http_sessions"] == 0 and stats["pool"]["in_use"] == 0


async def test_requests_on_an_http_session_keep_its_websocket_from_going_idle():
    # Requests 0.25 s apart (plus their round trip) against a 2 s idle timeout: a loaded machine's slow
    # request does not open a gap of idleness, and 16 of them outlast the timeout twice over.
    with serving(MATH, MATH_KWARGS, idle_timeout_s=2.0) as served:
        session_id = (await asyncio.to_thread(post_mcp, served, rpc("openenv/session/create")))["result"]["session_id"]
        async with connect(ws_url(served, f"?session_id={session_id}")) as ws:
            for _ in range(16):  # 4 s of tool listing over HTTP, nothing over the WebSocket
                await asyncio.to_thread(post_mcp, served, rpc("tools/list", session_id=session_id))
                await asyncio.sleep(0.25)
            assert (await request(ws, {"type": "state"}))["type"] == "state"
            # then silence on both: the WebSocket goes idle, and the session after it
            idle = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert idle["data"]["code"] == "SESSION_ERROR" and "idle" in idle["data"]["message"]
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["http_sessions"] == 0)
        assert stats["http_sessions"] == 0 and stats["pool"]["in_use"] == 0


@tool
def double(x: int) -> int:
    """Double a number."""
    return 2 * x


@reward
def correct(prediction, answer):
    return float(prediction == answer)


class Crashing(ToolEnv):
    """A tool env whose backend fails after every call (not a tool error: the env raises)."""

    def __init__(self) -> None:
        super().__init__(tools=[double], tasks=ListTasks([{"prompt": "Double 21.", "answer": "42"}]), reward=correct)

    async def _finish_turn(self, turn: Any) -> None:
        raise RuntimeError("the backend is gone")


def test_an_env_that_fails_under_a_call_gives_an_internal_error_and_is_not_lent_again():
    with serving(Crashing) as served:
        call = rpc("tools/call", name="double", arguments={"x": 21})
        for destroyed in (1, 2):
            error = post_mcp(served, call)["error"]
            assert error["code"] == JsonRpcCode.INTERNAL_ERROR and "the backend is gone" in error["message"]
            assert served.sessions()["pool"]["destroyed"] == destroyed
        assert post_mcp(served, rpc("tools/list"))["result"]["tools"][0]["name"] == "double"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
requests = json_values | st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | json_values,
        "method": st.sampled_from(["tools/list", "tools/call"]) | json_values,
        "params": json_values,
        "id": json_values,
        "extra": json_values,
    },
)


@given(requests)
def test_any_json_is_a_json_rpc_request_or_an_invalid_request(value):
    try:
        decoded = decode_jsonrpc(value)
    except JsonRpcError as error:
        assert error.code is JsonRpcCode.INVALID_REQUEST and error.message.startswith("Invalid request: ")
    else:
        assert isinstance(decoded, JsonRpcRequest) and value["jsonrpc"] == "2.0" and value["method"] == decoded.method
        assert decoded.params == value.get("params", {}) and decoded.id == value.get("id")


def test_refused_mcp_requests_take_no_turn():
    env = gym.make(MATH, **MATH_KWARGS).unwrapped
    session = ToolSession(env)
    tool_names = {tool.name for tool in session.tools()}

    @settings(max_examples=200, deadline=None)
    @given(
        st.sampled_from(["tools/call", "tools/list", "resources/list"]) | st.text(max_size=12),
        st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from([*sorted(RESERVED_TOOL_NAMES), "calculator", ""]) | json_values,
                "arguments": json_values,
            },
        ),
    )
    def refused(method, params):
        name, arguments = params.get("name"), params.get("arguments", {})
        assume(
            not (
                method == "tools/call" and isinstance(name, str) and name in tool_names and isinstance(arguments, dict)
            )
        )
        try:
            result = asyncio.run(answer(session, method, params))
        except JsonRpcError as error:
            assert error.code in (JsonRpcCode.METHOD_NOT_FOUND, JsonRpcCode.INVALID_PARAMS) and error.message
        else:
            assert method == "tools/list" and {tool["name"] for tool in result["tools"]} == tool_names
        assert env.trajectory is None and env.turn == 0

    try:
        refused()
    finally:
        env.close()
