"""An env's tools over MCP (``agentfly-serve ENV_ID --mcp``), driven by the ``mcp`` package's own client
over stdio: the tools, their outputs and the episode's reward are the in-process env's."""

from __future__ import annotations

import json
import sys

import gymnasium as gym
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import agentfly_env  # noqa: F401  (registers the ids)
from agentfly_env.core.types import ToolCall
from agentfly_env.serve.mcp import EPISODE_URI

MATH = "AgentFly/Math-v0"
MATH_KWARGS = {"difficulty": 0, "tools": ["calculator"], "answer_mode": "tool"}
SEED = 3


def served() -> Client:
    command = ["-m", "agentfly_env.serve.cli", MATH, "--mcp", "--seed", str(SEED)]
    return Client(
        StdioServerParameters(command=sys.executable, args=[*command, "--env-kwargs", json.dumps(MATH_KWARGS)])
    )


async def test_the_mcp_client_calls_the_envs_tools_as_the_env_runs_them():
    local = gym.make(MATH, **MATH_KWARGS).unwrapped
    task, _ = local.reset(seed=SEED)
    expression = local.task["metadata"]["expression"]
    calls = [
        ToolCall("calculator", {"expression": expression}),
        ToolCall("calculator", {"expr": "1"}),  # a bad argument
        ToolCall("finish", {"answer": str(local.task["answer"])}),
    ]
    local_steps = [local.step(local.parser.format_call(call)) for call in calls]
    local.close()

    async with served() as client:
        tools = (await client.list_tools()).tools
        assert {tool.name: tool.input_schema for tool in tools} == {
            schema["function"]["name"]: schema["function"]["parameters"] for schema in local.tool_schemas
        }
        episode = json.loads((await client.read_resource(EPISODE_URI)).contents[0].text)
        assert episode["task"] == task and episode["turn"] == 0 and not episode["done"]
        results = [await client.call_tool(call.name, call.arguments) for call in calls]
        episode = json.loads((await client.read_resource(EPISODE_URI)).contents[0].text)
    for result, (observation, reward, terminated, truncated, info) in zip(results, local_steps, strict=True):
        assert result.content[0].text == observation
        assert result.structured_content["reward"] == reward and result.structured_content["terminated"] == terminated
        assert result.structured_content["truncated"] == truncated
        assert result.is_error == any(item.error is not None for item in info["step"].tool_results)
    assert [result.is_error for result in results] == [False, True, False]
    assert results[-1].structured_content["reward"] == 1.0 and episode["done"] and episode["total_reward"] == 1.0
