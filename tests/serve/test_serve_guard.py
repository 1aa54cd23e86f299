"""What ``agentfly-serve`` refuses and keeps apart: a session's episode never reaches the next session, a web
page of another origin or a rebound host name gets nothing, a client's mistake is a 4xx naming the field and
the env goes on, deep JSON is an error frame, and the CLI says in one line what it cannot serve.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import gymnasium as gym
import pytest
from serving import WS_UPGRADE, http_request, serving
from websockets.asyncio.client import connect

import agentfly_env  # noqa: F401  (registers the ids)
from agentfly_env.serve.cli import main as serve_main

MATH = "AgentFly/Math-v0"
MATH_KWARGS = {"difficulty": 0}
SEED = 3
DEEP = "[" * 1000 + "]" * 1000


def answer_of(seed: int) -> str:
    """The winning final turn of seed's episode (the server keeps the answer to itself)."""
    env = gym.make(MATH, **MATH_KWARGS)
    answer = env.reset(seed=seed)[1]["task"]["answer"]
    env.close()
    return f"<answer>{answer}</answer>"


async def request(ws: Any, message: dict[str, Any] | str) -> dict[str, Any]:
    await ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), 30))


def ws_url(served: Any) -> str:
    return served.url.replace("http://", "ws://") + "/ws"


def host_of(served: Any) -> str:
    return served.url.removeprefix("http://")


async def test_an_episode_a_session_left_open_never_reaches_the_next_session():
    winning = answer_of(SEED)
    with serving(MATH, MATH_KWARGS, max_sessions=1) as served:
        first = await connect(ws_url(served))
        assert (await request(first, {"type": "reset", "data": {"seed": SEED}}))["type"] == "observation"
        first.transport.abort()  # gone, episode open, no close
        await first.wait_closed()
        await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        async with connect(ws_url(served)) as second:  # the one env, so the same env
            state = await request(second, {"type": "state"})
            stolen = await request(second, {"type": "step", "data": {"message": winning}})
            assert state["data"]["step_count"] == 0 and state["data"]["episode_id"] is None
            assert stolen["type"] == "error" and "reset" in stolen["data"]["message"], stolen
            reset = await request(second, {"type": "reset", "data": {"seed": SEED}})
            won = await request(second, {"type": "step", "data": {"message": winning}})
            assert reset["type"] == "observation" and won["data"]["reward"] == 1.0  # its own episode plays
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        assert stats["pool"]["created"] == 1 and stats["pool"]["failures"] == 0


async def test_a_web_page_of_another_origin_is_refused_and_programs_are_not():
    with serving(MATH, MATH_KWARGS) as served:
        host = host_of(served)
        evil = {"Origin": "http://evil.example", "Host": host}
        assert http_request(served.url, "GET", "/ws", {**WS_UPGRADE, **evil})[0] == 403
        assert http_request(served.url, "GET", "/ws", {**WS_UPGRADE, "Origin": "null", "Host": host})[0] == 403
        assert (
            http_request(served.url, "GET", "/ws", {**WS_UPGRADE, "Origin": f"http://{host}", "Host": host})[0] == 101
        )
        assert http_request(served.url, "GET", "/ws", {**WS_UPGRADE, "Host": host})[0] == 101  # a program
        # a "simple" cross-site POST needs no preflight: text/plain, a form, or no type at all
        reset = json.dumps({"seed": SEED}).encode()
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            assert http_request(served.url, "POST", "/reset", {"Content-Type": kind}, reset)[0] == 415, kind
        assert http_request(served.url, "POST", "/reset", {}, reset)[0] == 415
        assert http_request(served.url, "POST", "/reset", {"Content-Type": "application/json", **evil}, reset)[0] == 403
        assert http_request(served.url, "POST", "/reset", {"Content-Type": "application/json"}, reset)[0] == 200
        assert http_request(served.url, "POST", "/reset")[0] == 200  # no body: the defaults
        # the two resets let in opened a session each, and the two handshakes let in may have (their client left
        # at once); none of the seven refused did
        assert 2 <= served.sessions()["opened"] <= 4


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.nip.io", "[::2]:8000", "10.0.0.1"])
def test_a_host_name_that_is_not_loopback_is_refused(host):
    with serving(MATH, MATH_KWARGS) as served:
        status, body = http_request(served.url, "GET", "/health", {"Host": host})
        assert status == 403 and "Host" in json.loads(body)["detail"]
        assert http_request(served.url, "GET", "/ws", {**WS_UPGRADE, "Host": host})[0] == 403
        for loopback in ("localhost", "localhost:1", "127.0.0.1", "127.8.9.10:5", "[::1]:8000"):
            assert http_request(served.url, "GET", "/health", {"Host": loopback})[0] == 200, loopback


def test_names_and_origins_allowed_on_purpose_are_served():
    allowed = {"allowed_hosts": ("lab.example",), "allowed_origins": ("https://notebook.example",)}
    with serving(MATH, MATH_KWARGS, **allowed) as served:
        assert http_request(served.url, "GET", "/health", {"Host": "lab.example:8000"})[0] == 200
        assert http_request(served.url, "GET", "/health", {"Host": "other.example"})[0] == 403
        notebook = {"Origin": "https://notebook.example", "Host": host_of(served)}
        assert http_request(served.url, "GET", "/ws", {**WS_UPGRADE, **notebook})[0] == 101
    with serving(MATH, MATH_KWARGS, allow_remote=True) as served:  # exposed: any name reaches it, no page
        assert http_request(served.url, "GET", "/health", {"Host": "evil.example"})[0] == 200
        evil = {"Origin": "http://evil.example", "Host": "evil.example:1"}
        assert http_request(served.url, "GET", "/ws", {**WS_UPGRADE, **evil})[0] == 403


async def test_json_nested_too_deep_is_an_error_frame_or_a_400_and_the_session_goes_on():
    with serving(MATH, MATH_KWARGS) as served:
        async with connect(ws_url(served)) as ws:
            for frame in (
                DEEP,
                json.dumps({"type": "reset", "data": {"options": {"x": json.loads("[" * 100 + "]" * 100)}}}),
            ):
                error = await request(ws, frame)
                assert error["type"] == "error" and error["data"]["code"] == "VALIDATION_ERROR", error
                assert "nested" in error["data"]["message"]
            assert (await request(ws, {"type": "reset", "data": {"seed": SEED}}))["type"] == "observation"
        for path in ("/reset", "/step", "/mcp"):
            status, body = http_request(served.url, "POST", path, {"Content-Type": "application/json"}, DEEP.encode())
            assert status == 400 and "nested" in json.loads(body)["detail"], (path, body)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"task_index": 10**9}, "task_index"),
        ({"task_index": -1}, "task_index"),
        ({"task_index": "zero"}, "task_index"),
        ({"task_index": None}, "task_index"),
        ({"task_index": 1.5}, "task_index"),
        ({"task": 5}, "task"),
        ({"task": {"no": "prompt"}}, "task"),
    ],
)
async def test_reset_options_the_env_refuses_are_the_clients_mistake_not_the_envs(options, field):
    with serving(MATH, MATH_KWARGS, max_sessions=1) as served:
        async with connect(ws_url(served)) as ws:
            error = await request(ws, {"type": "reset", "data": {"seed": SEED, "options": options}})
            assert error["type"] == "error" and error["data"]["code"] == "VALIDATION_ERROR", error
            assert error["data"]["field"] == f"options.{field}" and field in error["data"]["message"]
            stepped = await request(ws, {"type": "step", "data": {"message": "<answer>1</answer>"}})
            assert stepped["type"] == "error"  # the failed reset left no episode to step
            assert (await request(ws, {"type": "reset", "data": {"seed": SEED}}))["type"] == "observation"
        body = json.dumps({"seed": SEED, "options": options}).encode()
        status, detail = http_request(served.url, "POST", "/reset", {"Content-Type": "application/json"}, body)
        assert status == 422 and field in json.loads(detail)["detail"]
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        assert stats["pool"]["created"] == 1 and stats["pool"]["failures"] == 0  # the one env goes on


def test_the_cli_says_in_one_line_what_it_cannot_serve(capsys):
    for given in ("AgentFly/Nope-v0", "AgentFly/Math-v9", "no_such_module:AgentFly/Math-v0"):
        assert serve_main([given]) == 2
        error = capsys.readouterr().err
        assert error.startswith("agentfly-serve: ") and error.count("\n") == 1 and "Traceback" not in error, error
