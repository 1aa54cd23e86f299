"""MCP calls through the ``openenv`` package's own code, run in openenv's venv (not this project's).

Usage: python _openenv_mcp_client.py URL SEED CALLS_JSON   (CALLS_JSON: [[tool name, arguments], ...])

Plays the calls twice, each time after a reset with SEED, and prints one JSON object:

* ``http``: with openenv's ``MCPToolClient`` as it comes (an HTTP session made by ``openenv/session/create``
  and joined by its WebSocket, the reset over that WebSocket, ``tools/list`` and ``tools/call`` over
  ``POST /mcp``, ``openenv/session/close`` at the end): the tools, the reset's observation, each call's
  result or the error it raised, and the state.
* ``ws``: ``mcp`` messages on ``/ws``. No openenv client sends them, so they are openenv's own
  ``WSMCPMessage`` and ``JsonRpcRequest`` models, sent by its ``GenericEnvClient`` as it sends every
  message: the JSON-RPC responses, ``tools/list``'s first.
"""

import asyncio
import json
import sys

from openenv.core import GenericEnvClient
from openenv.core.env_server.mcp_types import JsonRpcRequest, WSMCPMessage
from openenv.core.mcp_client import MCPToolClient


async def over_http(url: str, seed: int, calls: list) -> dict:
    async with MCPToolClient(base_url=url) as env:
        reset = await env.reset(seed=seed)
        tools = [tool.model_dump() for tool in await env.list_tools()]
        results = []
        for name, arguments in calls:
            try:
                results.append({"result": await env.call_tool(name, **arguments)})
            except RuntimeError as error:
                results.append({"error": str(error)})
        state = await env.state()
    return {"tools": tools, "reset": reset.observation.model_dump(), "results": results, "state": state.model_dump()}


async def over_ws(url: str, seed: int, calls: list) -> list:
    requests = [JsonRpcRequest(jsonrpc="2.0", method="tools/list", id=0)]
    requests += [
        JsonRpcRequest(jsonrpc="2.0", method="tools/call", params={"name": name, "arguments": arguments}, id=i)
        for i, (name, arguments) in enumerate(calls, 1)
    ]
    async with GenericEnvClient(base_url=url) as env:
        await env.reset(seed=seed)
        answers = [
            await env._send_and_receive(WSMCPMessage(data=request.model_dump()).model_dump()) for request in requests
        ]
    assert all(answer["type"] == "mcp" for answer in answers), answers
    return [answer["data"] for answer in answers]


url, seed, calls = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
print(json.dumps({"http": asyncio.run(over_http(url, seed, calls)), "ws": asyncio.run(over_ws(url, seed, calls))}))
