"""Each episode's env tools over MCP: ``http://HOST:PORT/episodes/{key}/mcp``, a program's ``task.tools_url``.

The trainer resets an episode's env to read its task, then opens the env here under the episode's key:
its tools are served (``tools/list``, ``tools/call``, the resource ``agentfly://episode``) by a
:class:`~agentfly_env.serve.mcp.ToolSession` that adopts that open episode, so each tool call is a turn
of the very episode the trainer records, stepped through the env's ``astep`` as a model's call would be.
Once the episode is over, calls are answered with an error result ("the episode has ended"); none
starts another episode. After :meth:`EpisodeTools.close` (and for keys never opened) requests get a 404.

The transport is the MCP SDK's own streamable HTTP (``StreamableHTTPSessionManager``), stateless with JSON
responses: each request stands alone, so there is no MCP session to keep, expire or clean up per episode.
One low-level MCP server answers every episode; its handlers find the episode by the key in the request's
path. Its ``serverInfo`` and ``instructions`` are therefore the same for all episodes (a program reads its
env's system prompt from the task, or from the ``agentfly://episode`` resource).

What is served is an env as :class:`~agentfly_env.serve.mcp.ToolSession` steps one: ``tool_schemas``, ``parser``,
``trajectory`` and ``astep``. A trainer hands over a :class:`~agentfly_env.serve.mcp.StartedEpisode`, which is that
for any env handle (an in-process env, a Ray actor's env, a mixture's component), stepped on the event loop that
serves the requests.

Example:
    >>> tools = EpisodeTools()
    >>> app = Starlette(routes=[tools.route])  # doctest: +SKIP
    >>> async with tools.running():  # doctest: +SKIP
    ...     env.reset(seed=3)
    ...     tools_url = server_url + tools.open(key, env)  # None for an env without tools
    ...     ...  # the program calls the tools: mcp.Client(tools_url).call_tool("calculator", {...})
    ...     tools.close(key)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agentfly_env.serve.mcp import ToolSession, create_routed_mcp_server

__all__ = ["EpisodeTools"]


class EpisodeTools:
    """An ASGI app serving each open episode's env tools over MCP (streamable HTTP) at :attr:`PATH`.

    Add :attr:`route` to a Starlette app's routes (a ``Route`` with this app as its ASGI endpoint, any
    method: MCP POSTs its messages and may GET or DELETE), and answer requests inside :meth:`running`.
    :meth:`open` and :meth:`close` run on the serving event loop.
    """

    #: Where an episode's tools are served, relative to the server's root.
    PATH = "/episodes/{key}/mcp"

    def __init__(self) -> None:
        self.sessions: dict[str, ToolSession] = {}
        self.closed: set[str] = set()  # to tell a late request "closed" rather than "unknown"
        self.route = Route(self.PATH, endpoint=self)
        self._server = create_routed_mcp_server(self._session_of, name="agentfly-episode-tools")
        self._manager: StreamableHTTPSessionManager | None = None

    def open(self, key: str, env: Any) -> str | None:
        """Serve the tools of ``env``, whose open episode is episode ``key``'s; returns their path
        (:attr:`PATH` with the key), or None when ``env`` has no tools (then nothing is served).

        Raises:
            ValueError: ``key`` is already open, or ``env`` has no open episode.
        """
        if key in self.sessions:
            raise ValueError(f"episode {key!r} already has its tools open")
        if not ToolSession.serves(env):
            return None
        self.sessions[key] = ToolSession(env, adopt_episode=True)
        self.closed.discard(key)
        return self.PATH.format(key=key)

    def close(self, key: str) -> bool:
        """Stop serving episode ``key``'s tools (later requests get a 404); whether any were open. Any
        episode's key may be closed, so a server closes every episode here, with tools or without."""
        self.closed.add(key)
        return self.sessions.pop(key, None) is not None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[EpisodeTools]:
        """Answer requests while the block runs (before and after it, they get a 503).

        The SDK's session manager runs in a task of its own, so entering and leaving this block may
        happen in different tasks (as a server's start and stop do).
        """
        manager = StreamableHTTPSessionManager(self._server, json_response=True, stateless=True)
        started, stopping = asyncio.Event(), asyncio.Event()

        async def run_manager() -> None:
            async with manager.run():
                started.set()
                await stopping.wait()

        runner = asyncio.create_task(run_manager(), name="agentfly-episode-tools")
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait([runner, waiting], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if runner.done():
            runner.result()  # the error it stopped with
        self._manager = manager
        try:
            yield self
        finally:
            self._manager = None
            stopping.set()
            await runner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = scope["path_params"]["key"]
        if key not in self.sessions:
            ended = "closed: its tools take no more calls" if key in self.closed else "unknown"
            await _error(f"episode {key!r} is {ended}", 404)(scope, receive, send)
        elif self._manager is None:
            await _error("the episode tools are not running", 503)(scope, receive, send)
        else:
            await self._manager.handle_request(scope, receive, send)

    def _session_of(self, ctx: ServerRequestContext[Any, Any]) -> ToolSession:
        key = ctx.request.path_params["key"]
        try:
            return self.sessions[key]
        except KeyError:  # closed while its request was on the way
            raise LookupError(f"episode {key!r} is closed: its tools take no more calls") from None


def _error(message: str, status: int) -> Response:
    """A JSON-RPC error body with no request id, as the SDK answers an unknown MCP session."""
    body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=INVALID_REQUEST, message=message))
    return Response(body.model_dump_json(by_alias=True), status_code=status, media_type="application/json")
