"""Each episode's env tools over MCP (agentfly_train.gateway.tools), served by uvicorn and driven by the ``mcp``
package's own streamable HTTP clients: a call is a turn of the very episode the trainer's reset opened, one
episode only, and closed or unknown keys get a 404."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import gymnasium as gym
import httpx
import pytest
import uvicorn
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

import agentfly_env  # noqa: F401  (registers the ids)
from agentfly_env.core.types import ToolCall
from agentfly_env.serve.mcp import ToolSession
from agentfly_train.gateway.tools import EpisodeTools

MATH = "AgentFly/Math-v0"
MATH_KWARGS = {"difficulty": 0, "tools": ["calculator"], "answer_mode": "tool"}
SEED = 3
ENDED = "the episode has ended"


@asynccontextmanager
async def modern_client(url: str) -> AsyncIterator[Any]:
    """The SDK's high-level client (it negotiates the newest protocol the server speaks)."""
    async with Client(url) as client:
        yield client


@asynccontextmanager
async def handshake_client(url: str) -> AsyncIterator[Any]:
    """The transport and ClientSession with the initialize handshake, as older MCP clients talk."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


Connect = Callable[[str], AbstractAsyncContextManager[Any]]


@pytest.fixture
async def served() -> AsyncIterator[tuple[EpisodeTools, str]]:
    """EpisodeTools mounted in a Starlette app, served by uvicorn on a free port: (the tools, the server's URL)."""
    tools = EpisodeTools()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[tools.route]), log_level="warning", lifespan="off"))
    async with tools.running():
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started:
            await asyncio.sleep(0.01)
        yield tools, f"http://127.0.0.1:{listener.getsockname()[1]}"
        server.should_exit = True
        await serving
    listener.close()


def math_env(seed: int | None = SEED, **kwargs: Any) -> Any:
    env = gym.make(MATH, **(MATH_KWARGS | kwargs)).unwrapped
    if seed is not None:
        env.reset(seed=seed)
    return env


@pytest.mark.parametrize("connect", [modern_client, handshake_client], ids=["modern", "handshake"])
async def test_tool_calls_are_turns_of_the_episode_the_reset_opened_and_end_with_it(
    served: tuple[EpisodeTools, str], connect: Connect
) -> None:
    tools, url = served
    env, twin = math_env(), math_env()  # the twin steps the same calls in-process, for the expected outputs
    opened = env.trajectory
    calculate = ToolCall("calculator", {"expression": env.task["metadata"]["expression"]})
    finish = ToolCall("finish", {"answer": env.task["answer"]})
    expected = [twin.step(twin.parser.format_call(call)) for call in (calculate, finish)]

    path = tools.open("ep-1", env)
    assert path == "/episodes/ep-1/mcp"
    async with connect(url + path) as client:
        listed = (await client.list_tools()).tools
        assert {tool.name: tool.input_schema for tool in listed} == {
            schema["function"]["name"]: schema["function"]["parameters"] for schema in env.tool_schemas
        }

        calculated = await client.call_tool(calculate.name, calculate.arguments)
        assert not calculated.is_error and calculated.content[0].text == expected[0][0] == env.task["answer"]
        assert env.trajectory is opened and env.turn == len(opened.steps) == 1
        assert opened.steps[0].action == env.parser.format_call(calculate)

        finished = await client.call_tool(finish.name, finish.arguments)
        assert finished.content[0].text == expected[1][0]
        assert finished.structured_content == {"reward": 1.0, "terminated": True, "truncated": False, "turn": 2}

        late = await client.call_tool(calculate.name, calculate.arguments)
        assert late.is_error and ENDED in late.content[0].text
    # the late call started no episode and took no turn
    assert env.trajectory is opened and len(opened.steps) == 2 and opened.done
    tools.close("ep-1")
    env.close(), twin.close()


async def test_closed_and_unknown_keys_get_a_404_that_says_which(served: tuple[EpisodeTools, str]) -> None:
    tools, url = served
    env = math_env()
    path = tools.open("ep-1", env)
    list_tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    async with httpx.AsyncClient(base_url=url) as http:
        assert (await http.post(path, json=list_tools, headers=headers)).status_code == 200
        assert tools.close("ep-1")
        closed = await http.post(path, json=list_tools, headers=headers)
        unknown = await http.post("/episodes/ep-2/mcp", json=list_tools, headers=headers)
    assert closed.status_code == 404 and closed.json()["error"]["message"] == (
        "episode 'ep-1' is closed: its tools take no more calls"
    )
    assert unknown.status_code == 404 and unknown.json()["error"]["message"] == "episode 'ep-2' is unknown"
    assert not tools.close("ep-1")  # already closed
    env.close()


async def test_an_env_without_tools_gets_no_endpoint(served: tuple[EpisodeTools, str]) -> None:
    tools, url = served
    env = math_env(tools=[], answer_mode="tag")
    assert tools.open("ep-1", env) is None and "ep-1" not in tools.sessions
    async with httpx.AsyncClient(base_url=url) as http:
        assert (await http.post("/episodes/ep-1/mcp", json={})).status_code == 404
    env.close()


async def test_a_key_is_opened_once() -> None:
    tools, env = EpisodeTools(), math_env()
    tools.open("ep-1", env)
    with pytest.raises(ValueError, match="already has its tools open"):
        tools.open("ep-1", env)
    env.close()


async def test_an_adopting_session_needs_an_open_episode_and_leaves_one_it_did_not_open() -> None:
    env = math_env(seed=None)
    with pytest.raises(ValueError, match="no open episode to adopt: reset it first"):
        ToolSession(env, adopt_episode=True)
    env.reset(seed=SEED)
    session = ToolSession(env, adopt_episode=True)
    assert not session.done and (await session.episode())["turn"] == 0
    env.reset(seed=SEED + 1)  # someone else's episode now: not this session's to step
    assert session.done
    result = await session.call("calculator", {"expression": "1 + 1"})
    assert result.is_error and ENDED in result.content[0].text and env.turn == 0
    env.close()


async def test_a_session_that_does_not_adopt_still_starts_its_own_episode() -> None:
    env = math_env()
    left_open = env.trajectory
    session = ToolSession(env, seed=SEED)
    assert session.done
    result = await session.call("calculator", {"expression": "1 + 1"})
    assert not result.is_error and env.trajectory is not left_open and len(env.trajectory.steps) == 1
    env.close()


async def test_concurrent_calls_step_the_env_one_at_a_time() -> None:
    env = math_env()
    stepping, overlapped = [], []
    astep = env.astep

    async def slow_astep(action: str) -> Any:
        overlapped.append(bool(stepping))
        stepping.append(action)
        await asyncio.sleep(0.01)  # a tool that waits (a sandbox, a JVM) lets other calls in
        try:
            return await astep(action)
        finally:
            stepping.pop()

    env.astep = slow_astep
    session = ToolSession(env, adopt_episode=True)
    results = await asyncio.gather(*(session.call("calculator", {"expression": f"{n} + 1"}) for n in range(3)))
    assert [result.content[0].text for result in results] == ["1", "2", "3"]
    assert overlapped == [False, False, False] and len(env.trajectory.steps) == 3
    env.close()


async def test_the_tools_start_and_stop_in_different_tasks_as_a_server_does() -> None:
    tools, env = EpisodeTools(), math_env()
    path = tools.open("ep-1", env)
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    transport = httpx.ASGITransport(app=Starlette(routes=[tools.route]))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:

        async def list_tools() -> int:
            response = await http.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
            return response.status_code

        running = tools.running()
        await asyncio.create_task(running.__aenter__())
        assert await list_tools() == 200
        await asyncio.create_task(running.__aexit__(None, None, None))
        assert await list_tools() == 503
    env.close()
