"""``agentfly-serve`` over OpenEnv's protocol, driven by the real ``openenv`` client and by Remote-v0.

The reference for every episode is the same env played in this process with the same seed and
actions: what comes through the wire must equal it (as JSON: tuples arrive as lists).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import gymnasium as gym
import msgspec
import pytest
from serving import openenv_python, run_in_openenv, serving
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

import agentfly_env  # noqa: F401  (registers the ids)
from agentfly_bench.suites.serve import reference
from agentfly_env import AgentEnv
from agentfly_env.core.tasks import GOLD_FIELDS
from agentfly_env.core.types import Step
from agentfly_env.resources.distributed import make_env_pool
from agentfly_env.serve.cli import build_parser
from agentfly_env.serve.cli import main as serve_main
from agentfly_env.serve.protocol import encode
from agentfly_env.serve.remote import RemoteEnvError

MATH = "AgentFly/Math-v0"
MATH_KWARGS = {"difficulty": 0}
SEED = 3
BAD_CALL = '<tool_call>{"name": "calculator", "arguments": </tool_call>'  # a parse error, counted


def as_json(value: Any) -> Any:
    """``value`` as it crosses the wire (the server's own encoder): Structs and ``info["task"]``'s view as
    objects, tuples as lists; less the wall times, which differ run to run (:func:`untimed`)."""
    return untimed(msgspec.json.decode(encode(value)))


def untimed(value: Any) -> Any:
    """JSON builtins without a trajectory's step times (``latency_s``) and its tool calls' (``duration_s``)."""
    if isinstance(value, dict):
        return {key: untimed(item) for key, item in value.items() if key not in ("latency_s", "duration_s")}
    if isinstance(value, list):
        return [untimed(item) for item in value]
    return value


def local_episode(seed: int = SEED) -> tuple[list[str], list[tuple[Any, ...]], Any]:
    """Math-v0 in this process: a malformed call, then its expert (a calculator call, then the answer).

    Returns the actions, each ``reset``/``step`` return as JSON builtins, and the trajectory.
    """
    env = gym.make(MATH, **MATH_KWARGS)
    observation, info = env.reset(seed=seed)
    returns: list[tuple[Any, ...]] = [(observation, as_json(info))]
    actions = [BAD_CALL]
    observation, reward, terminated, truncated, info = env.step(BAD_CALL)
    returns.append((observation, reward, terminated, truncated, as_json(info)))
    while not (terminated or truncated):
        actions.append(env.unwrapped.expert_action())
        observation, reward, terminated, truncated, info = env.step(actions[-1])
        returns.append((observation, reward, terminated, truncated, as_json(info)))
    trajectory = env.unwrapped.trajectory
    env.close()
    return actions, returns, trajectory


def test_the_local_episode_uses_the_calculator_and_earns_its_reward():
    actions, returns, trajectory = local_episode()
    assert [step.tool_calls[0].name for step in trajectory.steps if step.tool_calls] == ["calculator"]
    assert trajectory.steps[0].errors and trajectory.total_reward == 1.0 and trajectory.success


@pytest.mark.skipif(openenv_python() is None, reason="openenv's venv is missing: make peers")
def test_the_openenv_client_plays_the_same_episode_as_in_process():
    actions, returns, _ = local_episode()
    with serving(MATH, MATH_KWARGS, send_gold=True) as served:  # the whole info, gold included
        wire = run_in_openenv("tests/serve/_openenv_client.py", served.url, str(SEED), json.dumps(actions))
        assert served.wait_until(lambda stats: stats["active_sessions"] == 0)["pool"]["in_use"] == 0
    (first_observation, first_info), *steps = returns
    reset = wire["results"][0]
    assert reset["observation"]["text"] == first_observation and reset["observation"]["info"] == first_info
    assert reset["reward"] is None and reset["done"] is False
    for result, (observation, reward, terminated, truncated, info) in zip(wire["results"][1:], steps, strict=True):
        assert result["observation"]["text"] == observation
        assert result["reward"] == reward and result["done"] == (terminated or truncated)
        assert result["observation"]["terminated"] == terminated and result["observation"]["truncated"] == truncated
        assert (
            untimed(result["observation"]["info"]) == info
        )  # tool calls, results, errors, reward components, the Step
    assert wire["state"]["step_count"] == len(actions) and wire["state"]["env_id"] == MATH


def test_remote_v0_plays_the_same_episode_as_in_process():
    actions, returns, trajectory = local_episode()
    with serving(MATH, MATH_KWARGS, send_gold=True) as served:
        env = gym.make("AgentFly/Remote-v0", url=served.url)
        observation, info = env.reset(seed=SEED)
        remote_returns: list[tuple[Any, ...]] = [(observation, as_json(info))]
        for action in actions:
            observation, reward, terminated, truncated, info = env.step(action)
            remote_returns.append((observation, reward, terminated, truncated, as_json(info)))
        remote_trajectory = env.unwrapped.trajectory
        assert served.sessions()["active_sessions"] == 1  # one session, kept across episodes
        env.close()
        assert served.wait_until(lambda stats: stats["active_sessions"] == 0)["pool"]["in_use"] == 0
    assert remote_returns == returns
    assert isinstance(info["step"], Step)  # typed, as a local env's
    local, remote = (as_json(t) for t in (trajectory, remote_trajectory))
    assert remote == local and remote["env_id"] == MATH
    timed = [result.duration_s for step in remote_trajectory.steps for result in step.tool_results]
    assert timed and all(seconds > 0 for seconds in timed)  # each call's wall time, as the served env measured it


def test_a_remote_envs_start_is_the_served_envs_with_its_tools_and_their_call_format():
    local = gym.make(MATH, **MATH_KWARGS)
    _, local_info = local.reset(seed=SEED)
    local.close()
    with serving(MATH, MATH_KWARGS) as served:
        remote = gym.make("AgentFly/Remote-v0", url=served.url)
        _, remote_info = remote.reset(seed=SEED)
        remote.close()
    start = remote_info["start"]
    assert start.tool_format == local_info["start"].tool_format == "hermes"
    assert (start.tools, start.answer_format) == (local_info["start"].tools, local_info["start"].answer_format)


def test_the_gold_fields_stay_on_the_server_unless_it_is_told_to_send_them():
    _, returns, _ = local_episode()
    local_task = returns[0][1]["task"]
    assert GOLD_FIELDS & set(local_task) == {"answer", "metadata"}  # what Math-v0's tasks hold
    shown = {key: value for key, value in local_task.items() if key not in GOLD_FIELDS}

    async def ws_reset(served: Any) -> dict[str, Any]:
        async with connect(ws_url(served)) as ws:
            return (await request(ws, {"type": "reset", "data": {"seed": SEED}}))["data"]["observation"]["info"]

    with serving(MATH, MATH_KWARGS) as served:
        over_ws = asyncio.run(ws_reset(served))
        over_http = post(served.url + "/reset", {"seed": SEED})[1]["observation"]["info"]
        remote = gym.make("AgentFly/Remote-v0", url=served.url)
        _, remote_info = remote.reset(seed=SEED)
        remote.close()
    for info in (over_ws, over_http):
        assert info["task"] == info["start"]["task"] == shown
    assert remote_info["task"] == remote_info["start"].task == shown
    with serving(MATH, MATH_KWARGS, send_gold=True) as served:
        assert asyncio.run(ws_reset(served))["task"] == local_task
    assert "--send-gold" in build_parser().format_help()


async def test_per_message_deflate_is_accepted_only_when_configured():
    for compression in (False, True):
        with serving(SlowEcho, compression=compression) as served:
            async with connect(ws_url(served)) as ws:  # websockets offers deflate by default, as Remote-v0 does
                assert (await request(ws, {"type": "reset"}))["type"] == "observation"
                assert bool(ws.protocol.extensions) is compression


def test_remote_v0_truncates_the_episode_when_the_server_goes_away():
    with serving(MATH, MATH_KWARGS) as served:
        env = gym.make("AgentFly/Remote-v0", url=served.url)
        env.reset(seed=SEED)
    observation, reward, terminated, truncated, info = env.step("<answer>2</answer>")
    assert truncated and not terminated and info["step"].truncation_reason == "remote_disconnected"
    assert "connection" in observation
    env.close()


# ---------------------------------------------------------------------------------------- limits and faults


class SlowEcho(AgentEnv):
    """Echoes each action after ``delay`` seconds (a slow tool)."""

    def __init__(self, delay: float = 0.3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = delay

    async def _reset(self, seed, options):
        return "Say something.", {}

    async def _step(self, action):
        await asyncio.sleep(self.delay)
        return Step(observation=f"You said: {action}", reward=1.0, terminated=action == "bye"), {}


async def request(ws: Any, message: dict[str, Any] | str | bytes) -> dict[str, Any]:
    await ws.send(message if isinstance(message, str | bytes) else json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), 30))


def ws_url(served: Any, query: str = "") -> str:
    return served.url.replace("http://", "ws://") + "/ws" + query


async def test_sessions_past_the_cap_queue_then_get_a_clear_refusal():
    with serving(SlowEcho, max_sessions=1, max_queue=1, queue_timeout_s=60) as served:
        async with connect(ws_url(served)) as first:
            assert (await request(first, {"type": "reset"}))["type"] == "observation"
            second = await connect(ws_url(served))
            await second.send(json.dumps({"type": "reset"}))  # waits for the one env
            await asyncio.to_thread(served.wait_until, lambda stats: stats["pool"]["waiting"] == 1)
            async with connect(ws_url(served)) as third:  # the queue is full: refused at once
                refusal = json.loads(await asyncio.wait_for(third.recv(), 30))
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(third.recv(), 30)
            assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED"
            assert refusal["data"]["max_sessions"] == 1 and closed.value.rcvd.code == 1013
        # the first session closed: its env goes to the one waiting
        assert json.loads(await asyncio.wait_for(second.recv(), 30))["type"] == "observation"
        await second.close()
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        assert stats["refused"] == 1 and stats["pool"]["in_use"] == 0 and stats["pool"]["created"] == 1


async def test_a_session_that_waits_too_long_is_refused():
    with serving(SlowEcho, max_sessions=1, queue_timeout_s=0.2) as served:
        async with connect(ws_url(served)) as first:
            await request(first, {"type": "reset"})  # the one env is first's before second connects
            async with connect(ws_url(served)) as second:
                refusal = json.loads(await asyncio.wait_for(second.recv(), 30))
            assert refusal["data"]["code"] == "CAPACITY_REACHED"


async def test_idle_sessions_are_closed_and_their_env_returned():
    with serving(SlowEcho, idle_timeout_s=1.0) as served:
        async with connect(ws_url(served)) as ws:
            await request(ws, {"type": "reset"})
            notice = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
        assert notice["data"]["code"] == "SESSION_ERROR" and "idle" in notice["data"]["message"]
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        assert stats["pool"]["in_use"] == 0


async def test_bad_frames_get_protocol_errors_and_the_session_goes_on():
    with serving(SlowEcho, max_message_bytes=4096) as served:
        async with connect(ws_url(served)) as ws:
            codes = [
                (await request(ws, frame))["data"]["code"]
                for frame in (
                    "not json",
                    b"\xff\xfe",
                    "[1, 2]",
                    {"type": "dance"},
                    {"data": {}},
                    {"type": "step", "data": {"msg": "hi"}},
                    {"type": "step", "data": {"message": 3}},
                    {"type": "reset", "data": {"seed": -1}},
                    {"type": "state", "extra": 1},
                    {"type": "step", "data": {"message": "before any reset"}},
                )
            ]
            assert codes == [
                "INVALID_JSON",
                "INVALID_JSON",
                "VALIDATION_ERROR",
                "UNKNOWN_TYPE",
                "UNKNOWN_TYPE",
                "VALIDATION_ERROR",
                "VALIDATION_ERROR",
                "VALIDATION_ERROR",
                "VALIDATION_ERROR",
                "EXECUTION_ERROR",
            ]
            assert (await request(ws, {"type": "reset"}))["data"]["observation"]["text"] == "Say something."
            step = await request(ws, {"type": "step", "data": {"message": "bye"}})
            assert step["data"]["reward"] == 1.0 and step["data"]["done"] is True
            state = await request(ws, {"type": "state"})
            assert state["data"]["step_count"] == 1
            # a frame over the limit closes the session with 1009 (message too big)
            await ws.send(json.dumps({"type": "step", "data": {"message": "x" * 10_000}}))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            assert closed.value.rcvd.code == 1009
        async with connect(ws_url(served, "?session_id=nope")) as ws:
            unknown = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert unknown["data"]["code"] == "SESSION_ERROR" and "nope" in unknown["data"]["message"]
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        assert stats["pool"]["in_use"] == 0 and stats["pool"]["failures"] == 0


async def test_a_client_that_disconnects_mid_step_gives_its_env_back():
    with serving(SlowEcho, max_sessions=1) as served:
        ws = await connect(ws_url(served))
        await request(ws, {"type": "reset"})
        await ws.send(json.dumps({"type": "step", "data": {"message": "hello"}}))
        ws.transport.abort()  # gone mid-step, without a close handshake
        await ws.wait_closed()
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        assert stats["pool"]["in_use"] == 0
        async with connect(ws_url(served)) as again:  # the one env serves the next session
            assert (await request(again, {"type": "reset"}))["type"] == "observation"
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        assert stats["pool"]["created"] == 1 and stats["opened"] == 2


def client_frame(text: str) -> bytes:
    """A masked WebSocket text frame, as a client sends it (the mask key is zero: the payload is as is)."""
    payload = text.encode()
    size = len(payload)
    length = bytes([0x80 | size]) if size < 126 else bytes([0x80 | 127]) + size.to_bytes(8, "big")
    return b"\x81" + length + b"\0\0\0\0" + payload


async def test_a_client_that_does_not_read_its_answers_is_dropped_and_its_env_returned():
    with serving(lambda: SlowEcho(delay=0.0), send_timeout_s=0.5, max_message_bytes=2 << 20) as served:
        port = int(served.url.rpartition(":")[2])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # a raw client that never reads
        writer.write(
            b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")  # the last thing it reads
        writer.write(client_frame('{"type": "reset"}'))
        big = client_frame(json.dumps({"type": "step", "data": {"message": "x" * (1 << 20)}}))
        for _ in range(8):  # each answer carries the 1-MiB text three times: the buffers fill, the sends stall
            writer.write(big)
        stats = await asyncio.to_thread(
            served.wait_until, lambda stats: stats["opened"] and not stats["active_sessions"]
        )
        writer.transport.abort()
        await writer.wait_closed()  # the socket closes on the loop, before the server stops
        assert stats["opened"] == 1 and stats["active_sessions"] == 0 and stats["pool"]["in_use"] == 0


async def test_a_bearer_token_guards_every_route_but_health():
    with serving(SlowEcho, token="sesame") as served:
        with pytest.raises(InvalidStatus) as refused:
            await connect(ws_url(served))
        assert refused.value.response.status_code == 403
        with pytest.raises(urllib.error.HTTPError) as unauthorized:
            urllib.request.urlopen(served.url + "/sessions", timeout=10)
        assert unauthorized.value.code == 401
        with urllib.request.urlopen(served.url + "/health", timeout=10) as reply:
            assert json.loads(reply.read()) == {"status": "healthy"}


def test_remote_v0_sends_its_token():
    with serving(SlowEcho, token="sesame") as served:
        env = gym.make("AgentFly/Remote-v0", url=served.url, token="sesame")
        assert env.reset()[0] == "Say something."
        env.close()
        wrong = gym.make("AgentFly/Remote-v0", url=served.url, token="open")
        with pytest.raises(ConnectionError, match="403"):
            wrong.reset()
        wrong.close()


def test_remote_v0_raises_the_servers_refusal():
    with serving(SlowEcho, max_sessions=1, queue_timeout_s=0.2) as served:
        first = gym.make("AgentFly/Remote-v0", url=served.url)
        first.reset()
        second = gym.make("AgentFly/Remote-v0", url=served.url)
        with pytest.raises(RemoteEnvError) as refused:
            second.reset()
        assert refused.value.code == "CAPACITY_REACHED"
        first.close()
        served.wait_until(lambda stats: stats["active_sessions"] == 0)
        assert second.reset()[0] == "Say something."  # a new session, once the env is free
        second.close()


# ---------------------------------------------------------------------------------------- HTTP


def post(url: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_http_routes_answer_as_openenv_does():
    _, returns, _ = local_episode()
    with serving(MATH, MATH_KWARGS) as served:
        status, reset = post(served.url + "/reset", {"seed": SEED})
        assert status == 200 and reset["observation"]["text"] == returns[0][0] and reset["done"] is False
        answer = returns[-1][4]["step"]["action"]
        status, step = post(served.url + "/step", {"action": {"message": answer}, "seed": SEED, "request_id": "r1"})
        assert status == 200 and step["reward"] == 1.0 and step["done"] is True
        assert post(served.url + "/step", {"action": {"text": answer}})[0] == 422
        assert post(served.url + "/reset", b"{oops")[0] == 422
        assert post(served.url + "/reset", {"seed": "zero"})[0] == 422
        assert post(served.url + "/reset", b" " * ((1 << 20) + 1))[0] == 413  # over max_message_bytes
        assert served.get("/health") == {"status": "healthy"}
        assert served.get("/metadata")["name"] == MATH
        schema = served.get("/schema")
        assert set(schema) == {"action", "observation", "state"} and "message" in json.dumps(schema["action"])
        assert served.get("/state") == {"episode_id": None, "step_count": 0, "env_id": MATH}
        assert served.sessions()["pool"]["in_use"] == 0


def test_the_cli_serves_loopback_unless_told_otherwise(capsys):
    assert serve_main([MATH, "--host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


@pytest.mark.skipif(openenv_python() is None, reason="openenv's venv is missing: make peers")
def test_remote_v0_plays_an_openenv_server():
    with reference(openenv_python(), wait=0.01, max_sessions=4) as server:  # openenv's own create_app
        env = gym.make("AgentFly/Remote-v0", url=server.url)
        observation, info = env.reset(seed=1)
        assert observation == "Say something." and info["observation"]["text"] == observation
        assert env.step("hi")[:4] == ("You said: hi", 1.0, False, False)
        observation, reward, terminated, truncated, info = env.step("bye")
        assert (observation, reward, terminated, truncated) == ("You said: bye", 1.0, True, False)
        assert [step.action for step in env.unwrapped.trajectory.steps] == ["hi", "bye"]
        env.close()


async def test_a_pool_of_remote_envs_plays_concurrent_episodes_as_the_trainer_leases_them():
    local = gym.make(MATH, **MATH_KWARGS)
    gold = [local.reset(seed=seed)[1]["task"]["answer"] for seed in range(8)]
    local.close()
    with serving(MATH, MATH_KWARGS, max_sessions=3) as served:
        async with make_env_pool("AgentFly/Remote-v0", {"url": served.url}, size=3) as pool:

            async def episode(seed: int) -> tuple[float, bool, str]:
                async with pool.lease(timeout=60) as env:
                    await env.areset(seed=seed)  # its task comes without the answer: the reward is the server's
                    answer = f"<answer>{gold[seed]}</answer>"
                    _, reward, terminated, _, _ = await env.astep(answer)
                    return reward, terminated, env.trajectory.env_id

            results = await asyncio.gather(*(episode(seed) for seed in range(8)))
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
    assert results == [(1.0, True, MATH)] * 8
    assert stats["opened"] <= 3  # each env keeps its session across the episodes it plays


def test_remote_v0_starts_a_new_session_when_the_server_closed_its_idle_one():
    with serving(SlowEcho, idle_timeout_s=1.0) as served:
        env = gym.make("AgentFly/Remote-v0", url=served.url)
        env.reset()
        served.wait_until(lambda stats: stats["active_sessions"] == 0)  # reaped
        assert env.reset()[0] == "Say something." and env.step("bye")[2] is True
        assert served.sessions()["opened"] == 2
        env.close()


async def test_a_client_that_leaves_the_queue_never_takes_an_env():
    with serving(SlowEcho, max_sessions=1) as served:
        async with connect(ws_url(served)) as first:
            await request(first, {"type": "reset"})
            leaving = await connect(ws_url(served))
            await asyncio.to_thread(served.wait_until, lambda stats: stats["pool"]["waiting"] == 1)
            await leaving.close()
            await asyncio.to_thread(served.wait_until, lambda stats: stats["pool"]["waiting"] == 0)
        async with connect(ws_url(served)) as third:
            assert (await request(third, {"type": "reset"}))["type"] == "observation"
        stats = await asyncio.to_thread(served.wait_until, lambda stats: stats["active_sessions"] == 0)
        assert stats["opened"] == 2 and stats["pool"]["in_use"] == 0
