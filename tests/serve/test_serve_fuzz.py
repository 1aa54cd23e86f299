"""The fuzz lane against ``agentfly-serve``: random HTTP requests, and random frames over interleaved
WebSocket sessions, against a server whose env keeps a diary of its episode (each observation is every
action of the episode so far), so that a session that saw anything of another's would show it.

Asserted whatever is sent: no 5xx (every fault here is the client's), no 2xx for a foreign host or origin or
a body that is not JSON, one answer per frame, no session's diary in another's, no env broken by a client,
and nothing left open.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from fuzzing import JSON, bodies, headers, is_json_type, nested_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serving import http_request, serving
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from agentfly_env import AgentEnv
from agentfly_env.core.types import Step

pytestmark = pytest.mark.fuzz

LIMIT = 4096
SERVER = {"max_sessions": 8, "max_message_bytes": LIMIT, "queue_timeout_s": 5.0}
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Diary(AgentEnv):
    """Each step's observation is the JSON list of the episode's actions so far; ``bye`` ends it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_turns=1000, **kwargs)

    async def _reset(self, seed, options):
        self.entries: list[str] = []
        return "diary open", {}

    async def _step(self, action):
        self.entries.append(action)
        return Step(observation=json.dumps(self.entries), reward=0.0, terminated=action == "bye"), {}


@pytest.fixture(scope="module")
def served():
    with serving(Diary, **SERVER) as server:
        yield server
    # (the pool is closed with the server; the tests check it is empty before that)


def settled(served) -> dict[str, Any]:
    return served.wait_until(lambda stats: stats["active_sessions"] == 0 and stats["http_sessions"] == 0)


ROUTES = ("/reset", "/step", "/state", "/mcp", "/health", "/metadata", "/schema", "/sessions", "/ws", "/nope", "/")
MCP = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": st.sampled_from(("tools/list", "tools/call", "openenv/session/close", "x"))},
    optional={"params": JSON, "id": st.integers() | st.text(max_size=5)},
)
RESET = st.fixed_dictionaries({}, optional={"seed": st.integers(-2, 2**40), "options": JSON, "episode_id": st.text()})
STEP = st.fixed_dictionaries({"action": st.fixed_dictionaries({"message": st.text(max_size=20)}, optional={"x": JSON})})


@FUZZ
@given(data=st.data())
def test_random_http_requests_get_no_5xx_and_nothing_refused_gets_through(served, data):
    port = int(served.url.rpartition(":")[2])
    chosen, foreign = data.draw(headers(port, served.url))
    method = data.draw(st.sampled_from(("GET", "POST", "POST", "POST", "PUT", "DELETE", "OPTIONS")))
    path = data.draw(
        st.sampled_from(ROUTES)
        | st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=12).map("/{}".format)
    )
    body = data.draw(bodies(LIMIT, RESET | STEP | MCP)) if method != "GET" else b""
    status, answer = http_request(served.url, method, path, chosen, body)
    assert status < 500, (method, path, chosen, body[:200], answer[:300])
    if foreign or (body and not is_json_type(chosen)) or len(body) > LIMIT:
        assert status >= 400, (method, path, chosen, body[:200], answer[:300])
    if status == 200 and path == "/mcp":  # close what a random request may have opened
        session = json.loads(answer).get("result", {})
        if isinstance(session, dict) and isinstance(session.get("session_id"), str):
            close = {
                "jsonrpc": "2.0",
                "method": "openenv/session/close",
                "params": {"session_id": session["session_id"]},
            }
            http_request(served.url, "POST", "/mcp", {"Content-Type": "application/json"}, json.dumps(close).encode())
    assert http_request(served.url, "GET", "/health")[0] == 200


FRAMES = st.one_of(
    st.builds(lambda data: {"type": "reset", "data": data}, RESET),
    st.builds(lambda message: {"type": "step", "data": {"message": message}}, st.text(max_size=12) | st.just("bye")),
    st.just({"type": "state"}),
    st.builds(lambda data: {"type": "mcp", "data": data}, MCP),
    JSON.filter(lambda value: not (isinstance(value, dict) and value.get("type") == "close")),  # close: no answer
    st.binary(max_size=20),
    st.integers(60, 400).map(nested_text),
    st.just("x" * (LIMIT + 1)),  # too big: the server closes the session (1009)
)


@dataclass
class Client:
    """One WebSocket session as the fuzzer models it: what its env must hold."""

    ws: Any = None
    episode: list[str] | None = None  # the open episode's actions; None: no episode to step
    turns: int = 0  # the state's step_count


def step_message(frame: Any) -> str | None:
    """The action of a well-formed step frame, else None."""
    if isinstance(frame, dict) and frame.get("type") == "step" and set(frame) == {"type", "data"}:
        data = frame["data"]
        if isinstance(data, dict) and set(data) <= {"message", "metadata"} and isinstance(data.get("message"), str):
            return data["message"]
    return None


def expect(client: Client, frame: Any, answer: dict[str, Any]) -> None:
    """Check one answer against the model of the session, and move the model on."""
    kind = answer["type"]
    assert kind in ("observation", "state", "error", "mcp"), answer
    message = step_message(frame)
    if kind == "error":
        assert answer["data"]["code"] in ("INVALID_JSON", "UNKNOWN_TYPE", "VALIDATION_ERROR", "EXECUTION_ERROR"), answer
        assert "failed" not in answer["data"]["message"] and "internal" not in answer["data"]["message"], answer
        # a step of the session's own open episode is never refused; one without an episode always is
        assert message is None or (client.episode is None and "reset" in answer["data"]["message"]), answer
        return
    assert message is None or client.episode is not None, f"stepped an episode it never opened: {answer}"
    if kind == "mcp":
        return
    if message is not None:
        client.episode.append(message)
        client.turns += 1
        assert json.loads(answer["data"]["observation"]["text"]) == client.episode  # only its own actions
        if message == "bye":
            client.episode = None
    elif kind == "observation":  # a reset
        assert answer["data"]["observation"]["text"] == "diary open", answer
        client.episode, client.turns = [], 0
    else:
        assert answer["data"]["step_count"] == client.turns, answer


async def play(url: str, ops: list[tuple[int, Any]]) -> None:
    clients = [Client(), Client()]
    try:
        for who, frame in ops:
            client = clients[who]
            if client.ws is None:
                client.ws = await connect(url, max_size=None)
            text = frame if isinstance(frame, str | bytes) else json.dumps(frame)
            await client.ws.send(text)
            try:
                answer = json.loads(await asyncio.wait_for(client.ws.recv(), 30))
            except ConnectionClosed as closed:
                assert closed.rcvd is not None and closed.rcvd.code == 1009 and len(text) > LIMIT, closed
                clients[who] = Client()  # the session is over; the next frame opens a new one, fresh
                continue
            expect(client, frame, answer)
    finally:
        for client in clients:
            if client.ws is not None:
                await client.ws.close()


@FUZZ
@given(ops=st.lists(st.tuples(st.integers(0, 1), FRAMES), max_size=16))
def test_interleaved_sessions_see_only_their_own_episodes(served, ops):
    asyncio.run(play(served.url.replace("http://", "ws://") + "/ws", ops))


def test_after_the_fuzzing_nothing_is_left_open_and_no_env_was_broken(served):
    stats = settled(served)
    assert stats["pool"]["in_use"] == 0 and stats["pool"]["failures"] == 0, stats
