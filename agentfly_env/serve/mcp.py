"""An env's tools over MCP: ``agentfly-serve ENV_ID --mcp`` serves them on stdin/stdout.

An MCP-speaking agent gets the env's tools (``tools/list``: each tool's name, description and JSON
schema, as the env gives them to a model) and calls them (``tools/call``). Each call is one turn of
an episode of the env: the call is written in the env's own call format
(:meth:`~agentfly_env.tools.parsing.Parser.format_call`) and stepped through ``astep``, so the env runs it
exactly as it runs a model's call (argument checks, its pooled sandbox or JVM, caching, tools that end
the episode, the reward). The tool's output is the result's text; a failed call (unknown tool, bad
arguments, a tool error) has ``isError`` set; the step's reward, ``terminated``/``truncated`` and turn
come as the result's structured content.

The first call starts an episode (a reset with ``seed``, then the next seeds); when one ends, the next
call starts another. A session made with ``adopt_episode=True`` serves instead the one episode open on
its env when it is made (a trainer resets the env to read the task, then hands it to a program's tools):
calls after that episode ends are answered with an error and start nothing. The resource
``agentfly://episode`` is the current episode as JSON: its task prompt, system prompt, turn, reward so far
and whether it is over.

The same calls are answered on ``agentfly-serve``'s OpenEnv server (``mcp`` messages on ``/ws``, ``POST
/mcp``) by :func:`answer`, against the session's env.

Needs the ``serve`` extra (the ``mcp`` package).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from agentfly_env.core.types import EpisodeStart, ToolCall, Trajectory
from agentfly_env.extras import requires_extra
from agentfly_env.resources.distributed import make_env
from agentfly_env.serve.protocol import JsonRpcCode, JsonRpcError
from agentfly_env.tools.parsing import get_parser

with requires_extra("serve", "mcp", "mcp_types", feature="agentfly-serve --mcp"):
    import mcp_types as types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.stdio import stdio_server

__all__ = [
    "EPISODE_URI",
    "RESERVED_TOOL_NAMES",
    "ToolSession",
    "answer",
    "create_mcp_server",
    "create_routed_mcp_server",
    "serve_stdio",
]

EPISODE_URI = "agentfly://episode"

#: OpenEnv's ``RESERVED_TOOL_NAMES``: its own messages, never tools.
RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})


class ToolSession:
    """One env whose turns are tool calls: episodes start on the first call and after each one ends.

    Calls are stepped one at a time (concurrent calls, a program's parallel tool calls, wait their turn).

    Args:
        env: An in-process env with tools (``tool_schemas``, ``parser``, ``trajectory``, ``astep``).
        seed: The first episode's seed; each next episode takes the next one.
        adopt_episode: Serve the episode open on ``env`` now, and only it: calls step it, and once it is
            over they are answered with an error (``isError``, "the episode has ended") instead of starting
            another. Without it, an episode open on ``env`` now (left by its last user) is not this
            session's, and the first call starts a new one.

    Raises:
        TypeError: The env has no tools, or no call format to write them in.
        ValueError: ``adopt_episode`` with no episode open on the env.

    Example:
        >>> _ = env.reset(seed=3)  # doctest: +SKIP
        >>> session = ToolSession(env, adopt_episode=True)  # doctest: +SKIP
        >>> await session.call("calculator", {"expression": "2+3"})  # doctest: +SKIP
    """

    def __init__(self, env: Any, seed: int | None = None, *, adopt_episode: bool = False) -> None:
        if not self.serves(env):
            raise TypeError(f"{env.env_id} has no tools to serve over MCP")
        if adopt_episode and (env.trajectory is None or env.trajectory.done):
            raise ValueError(f"{env.env_id} has no open episode to adopt: reset it first")
        self.env = env
        self.seed = seed
        # Adopted: the one episode this session serves. Otherwise an episode left open by the env's last
        # user (an env from a pool) is foreign: not this session's.
        self._adopted = env.trajectory if adopt_episode else None
        self._foreign = None if adopt_episode else env.trajectory
        self._stepping = asyncio.Lock()  # one env steps one call at a time

    @staticmethod
    def serves(env: Any) -> bool:
        """Whether ``env`` has tools, and a call format to write them in."""
        return bool(getattr(env, "tool_schemas", None)) and hasattr(env, "parser")

    @property
    def done(self) -> bool:
        """Whether no episode of this session's is open. The env's trajectory says, so a session that also
        resets and steps the env (OpenEnv's ``/ws``) shares its episode with the tool calls."""
        trajectory = self.env.trajectory
        if self._adopted is not None:  # over once it ends, or once someone else resets the env
            return trajectory is not self._adopted or trajectory.done
        return trajectory is None or trajectory is self._foreign or trajectory.done

    def tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=schema["function"]["name"],
                description=schema["function"].get("description"),
                input_schema=schema["function"].get("parameters") or {"type": "object", "properties": {}},
            )
            for schema in self.env.tool_schemas
        ]

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        async with self._stepping:
            if self.done:
                if self._adopted is not None:
                    return _episode_ended(self.env.env_id)
                await self._start()
            action = self.env.parser.format_call(ToolCall(name, arguments))
            observation, reward, terminated, truncated, info = await self.env.astep(action)
        step = info["step"]
        failed = bool(step.parse_errors) or any(result.error is not None for result in step.tool_results)
        return types.CallToolResult(
            content=[types.TextContent(text=observation)],
            structured_content={
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "turn": self.env.turn,
            },
            is_error=failed,
        )

    async def _start(self) -> None:
        await self.env.areset(seed=self.seed)
        if self.seed is not None:
            self.seed += 1

    async def episode(self) -> dict[str, Any]:
        """The current episode (one is started if none is open); an adopting session's is the adopted one."""
        if self.env.trajectory is None:
            await self._start()
        trajectory = self.env.trajectory if self._adopted is None else self._adopted
        return {
            "env_id": self.env.env_id,
            "task": trajectory.observation,
            "system_prompt": self.env.system_prompt,
            "turn": len(trajectory.steps),
            "total_reward": trajectory.total_reward,
            "done": trajectory.done,
        }


class StartedEpisode:
    """An episode just started on any env handle (an in-process env, a Ray actor's, a mixture's component), as
    :class:`ToolSession` steps an env: the tools and their call format from the episode's start, the trajectory
    from the steps the env sends back. A trainer serves a program's tools from one, wherever its env runs.

    Args:
        env: What :meth:`astep` steps (an :class:`~agentfly_env.resources.distributed.EnvHandle`).
        start: The episode's ``info["start"]``.

    Example:
        >>> _, info = await handle.areset(seed=3)  # doctest: +SKIP
        >>> session = ToolSession(StartedEpisode(handle, info["start"]), adopt_episode=True)  # doctest: +SKIP
    """

    def __init__(self, env: Any, start: EpisodeStart) -> None:
        self.env = env
        self.env_id = start.env_id
        self.system_prompt = start.system_prompt
        self.tool_schemas = start.tools
        if start.tool_format:
            self.parser = get_parser(start.tool_format)
        self.trajectory = Trajectory.begin(start)
        self.turn = 0

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The env's step, recorded (its wall time here includes the trip to the env's process)."""
        started = time.perf_counter()
        observation, reward, terminated, truncated, info = await self.env.astep(action)
        self.turn = info.get("turn", self.turn + 1)
        self.trajectory.add(info["step"], time.perf_counter() - started)
        return observation, reward, terminated, truncated, info


def _episode_ended(env_id: str) -> types.CallToolResult:
    text = f"the episode has ended: these {env_id} tools served one episode and take no more calls"
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


async def answer(session: ToolSession | None, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The result of an MCP request on OpenEnv's server (``tools/list``, ``tools/call``) as JSON, with
    OpenEnv's errors; a call is refused before it is stepped, so a refused call takes no turn.

    Args:
        session: The session's env as a :class:`ToolSession`; None for an env without tools.

    Raises:
        JsonRpcError: ``METHOD_NOT_FOUND``; ``INTERNAL_ERROR`` for an env without tools;
            ``INVALID_PARAMS`` for a call without a name, to a reserved or unknown tool, or with
            arguments that are not an object.
    """
    if method not in ("tools/list", "tools/call"):
        raise JsonRpcError(JsonRpcCode.METHOD_NOT_FOUND, f"Method not found: {method}")
    if session is None:
        raise JsonRpcError(JsonRpcCode.INTERNAL_ERROR, "Environment does not support MCP")
    tools = session.tools()
    if method == "tools/list":
        return {"tools": [_as_json(tool) for tool in tools]}
    name, arguments = params.get("name"), params.get("arguments", {})
    if not name:
        raise JsonRpcError(JsonRpcCode.INVALID_PARAMS, "Missing 'name' in params")
    if not isinstance(name, str):
        raise JsonRpcError(JsonRpcCode.INVALID_PARAMS, "Invalid params - 'name' must be a string")
    if name in RESERVED_TOOL_NAMES:
        raise JsonRpcError(JsonRpcCode.INVALID_PARAMS, f"Reserved orchestration tool: {name}")
    if name not in {tool.name for tool in tools}:
        raise JsonRpcError(JsonRpcCode.INVALID_PARAMS, f"Tool not found: {name}")
    if not isinstance(arguments, dict):
        raise JsonRpcError(JsonRpcCode.INVALID_PARAMS, "Invalid params - 'arguments' must be an object")
    return _as_json(await session.call(name, arguments))


def _as_json(model: Any) -> dict[str, Any]:
    """An MCP type as it goes on the wire (camelCase keys, no empty fields)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def create_mcp_server(session: ToolSession) -> Server[Any]:
    """The MCP server (low-level ``mcp.server.Server``) of one :class:`ToolSession`."""
    return create_routed_mcp_server(
        lambda ctx: session, name=f"agentfly:{session.env.env_id}", instructions=session.env.system_prompt
    )


def create_routed_mcp_server(
    session_of: Callable[[ServerRequestContext[Any, Any]], ToolSession], *, name: str, instructions: str | None = None
) -> Server[Any]:
    """An MCP server of many :class:`ToolSession`: each request is answered by the one ``session_of`` picks
    from the request's context (over HTTP, say, the one its path names: ``ctx.request.path_params``).

    ``session_of`` may raise (a ``LookupError`` with a clear message) for a request no session answers.
    """

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=session_of(ctx).tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await session_of(ctx).call(params.name, dict(params.arguments or {}))

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        resource = types.Resource(
            uri=EPISODE_URI, name="episode", description="the current episode", mime_type="application/json"
        )
        return types.ListResourcesResult(resources=[resource])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != EPISODE_URI:
            raise ValueError(f"unknown resource {params.uri}; this server has {EPISODE_URI}")
        text = json.dumps(await session_of(ctx).episode())
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=EPISODE_URI, mime_type="application/json", text=text)]
        )

    return Server(
        name,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


async def serve_stdio(env: str, env_kwargs: Mapping[str, Any] | None = None, *, seed: int | None = None) -> None:
    """Serve the tools of ``env`` (a registered id) over MCP on stdin/stdout until the client leaves."""
    agent_env = make_env(env, env_kwargs)
    try:
        session = ToolSession(agent_env, seed)
        server = create_mcp_server(session)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await agent_env.aclose()
