"""Any registered env over OpenEnv's protocol: a WebSocket session per episode stream, HTTP beside it.

:func:`create_app` builds the ASGI app that ``agentfly-serve`` runs under uvicorn (``/ws`` on raw ASGI
messages, the HTTP routes on Starlette):

* ``/ws``: one session per WebSocket, with one env of its own leased from an env pool
  (:func:`~agentfly_env.resources.distributed.make_env_pool`) for the whole connection and awaited through its
  native ``areset``/``astep``, so thousands of sessions share one event loop and no thread.
* ``POST /reset``, ``POST /step``, ``GET /state``: OpenEnv's stateless HTTP routes. Each leases an env
  for the one request; ``/step`` plays a one-step episode (a reset with the body's ``seed`` and
  ``options``, then the action), which is what a single-turn caller over plain HTTP needs.
* ``GET /health``, ``GET /metadata``, ``GET /schema`` as OpenEnv answers them, and ``GET /sessions``
  (ours): the sessions open and waiting, and the env pool's counters.
* MCP, as OpenEnv serves it (:func:`~agentfly_env.serve.mcp.answer`: ``tools/list``, and ``tools/call``
  as one turn of the session's episode): an ``mcp`` message on ``/ws`` is answered against the
  session's env; ``POST /mcp`` against a fresh env for the one request, or against an HTTP session
  (OpenEnv's ``openenv/session/create``, then ``session_id`` in the params, ``openenv/session/close``
  to end it), which one WebSocket at a time may join (``/ws?session_id=``), as OpenEnv's
  ``MCPToolClient`` does. An HTTP session holds its env until it is closed, idle for
  ``idle_timeout_s`` with no WebSocket joined, or the server stops; its requests keep the WebSocket
  that joined it from going idle.

Capacity is the pool's: at most ``max_sessions`` envs exist, one per open session (or HTTP request).
A session past the cap waits for one, first come first served, for at most ``queue_timeout_s``, and
at most ``max_queue`` wait; past that it gets a ``CAPACITY_REACHED`` error frame and the close code
1013 (try again later). A session silent for ``idle_timeout_s`` is closed with a ``SESSION_ERROR``
frame and code 1000, one that does not take its answer within ``send_timeout_s`` is dropped (1008). A
client that leaves the queue takes no env; frames sent while queued are answered once the env comes.
Frames that are not JSON, not a known message or not a valid one get an error frame and the session
goes on; a frame over ``max_message_bytes`` closes it with code 1009 (the WebSocket code for a message
too big). Whatever ends a session (a close message, a disconnect, even mid-step, a refusal, the server
stopping), its env goes back to the pool, whose next lease first ends the episode it left open (so no
session steps another's); an env that raised something other than a usage error is destroyed instead of
reused.

Every request passes the request guard first (:mod:`agentfly_env.serve.guard`): a ``Host`` that is not
loopback (unless ``allow_remote``), a cross-origin ``Origin`` (a web page's WebSocket or POST), a body that
is not JSON, over ``max_message_bytes`` or nested too deep, are refused before a route sees them. With
``token`` set, every route but ``/health`` also needs ``Authorization: Bearer <token>``. A client's mistake
(reset options the env refuses, a bad field) is a 4xx naming the field, and the env goes on serving.

The task's gold fields (:data:`~agentfly_env.core.tasks.GOLD_FIELDS`: its answer, hidden tests, target...) stay
on the server: a reset's ``info["task"]`` and ``info["start"].task`` go out without them, since a client may
hand the observation and its info to the agent it trains. The reward is the served env's, computed here, so
a trainer needs none; one that does starts the server with ``send_gold`` (``agentfly-serve --send-gold``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import inspect
import logging
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, TypeVar

import gymnasium as gym
import msgspec
from gymnasium.envs.registration import load_env_creator

from agentfly_env.core.env import AgentEnv, EnvStateError, OptionsError
from agentfly_env.core.tasks import GOLD_FIELDS
from agentfly_env.core.types import EpisodeStart
from agentfly_env.extras import requires_extra
from agentfly_env.resources.distributed import make_env_pool
from agentfly_env.resources.pool import PoolClosedError, PoolTimeoutError, ResourcePool
from agentfly_env.serve.guard import GuardRules, RequestGuard
from agentfly_env.serve.mcp import ToolSession, answer
from agentfly_env.serve.protocol import (
    Action,
    CloseRequest,
    ErrorCode,
    JsonRpcCode,
    JsonRpcError,
    JsonRpcRequest,
    MCPRequest,
    ProtocolError,
    ResetRequest,
    State,
    StateRequest,
    StepRequest,
    decode_frame,
    decode_jsonrpc,
    decode_message,
    encode,
    error_frame,
    jsonrpc_error,
    jsonrpc_result,
    mcp_frame,
    observation_frame,
    schemas,
    state_frame,
)

with requires_extra("serve", "starlette", "uvicorn", feature="agentfly-serve"):
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HttpSessions", "ServeConfig", "SessionManager", "create_app", "make_server"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: WebSocket close codes (RFC 6455).
CLOSE_NORMAL, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_INTERNAL, CLOSE_TRY_AGAIN = 1000, 1008, 1009, 1011, 1013


@dataclass(frozen=True)
class ServeConfig:
    """Limits of one server.

    Attributes:
        max_sessions: Envs alive at once: open sessions plus HTTP requests in flight.
        max_queue: Sessions that may wait for an env; one more is refused at once.
        queue_timeout_s: How long a session waits for an env before it is refused.
        idle_timeout_s: A session that sends nothing for this long is closed (None: never).
        max_message_bytes: Largest client frame (and HTTP body); a larger frame closes the session.
        send_timeout_s: A client that does not take an answer within this long is dropped.
        token: Bearer token every route but ``/health`` requires (None: none).
        send_gold: Send the task's gold fields (:data:`~agentfly_env.core.tasks.GOLD_FIELDS`) with each reset;
            by default they stay on the server.
        compression: Accept WebSocket per-message deflate from the clients that offer it (Remote-v0 and
            OpenEnv's client do). Off by default: frames are small JSON, and each compressed session holds
            about 40 KiB of zlib state on the server and spends CPU on every frame.
        allow_remote: Answer any ``Host`` header (a server listening beyond loopback on purpose; set a token).
        allowed_hosts: ``Host`` names to answer besides loopback and ``localhost``.
        allowed_origins: Web origins whose pages may call the server (none by default: a browser page of
            another origin is refused, since any site the user visits could otherwise play or reset).
    """

    max_sessions: int = 256
    max_queue: int = 1024
    queue_timeout_s: float = 30.0
    idle_timeout_s: float | None = 300.0
    max_message_bytes: int = 1 << 20
    send_timeout_s: float = 30.0
    token: str | None = None
    send_gold: bool = False
    compression: bool = False
    allow_remote: bool = False
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

    @property
    def guard(self) -> GuardRules:
        """The request guard's rules (:mod:`agentfly_env.serve.guard`), the body bounded as a frame is."""
        return GuardRules(
            max_body_bytes=self.max_message_bytes,
            allow_remote=self.allow_remote,
            allowed_hosts=self.allowed_hosts,
            allowed_origins=self.allowed_origins,
        )

    def __post_init__(self) -> None:
        if self.max_sessions < 1 or self.max_queue < 0 or self.max_message_bytes < 1:
            raise ValueError(f"max_sessions and max_message_bytes must be >= 1 and max_queue >= 0: {self}")
        for name in ("queue_timeout_s", "idle_timeout_s", "send_timeout_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")


class SessionManager:
    """The env pool behind the server, and the count of what holds or waits for its envs."""

    def __init__(self, pool: ResourcePool[AgentEnv], config: ServeConfig) -> None:
        self.pool = pool
        self.config = config
        self.active = 0
        self.opened = 0
        self.refused = 0

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[_Session]:
        """Lease an env for one session (or HTTP request); it goes back however the block ends.

        Raises:
            ProtocolError: ``CAPACITY_REACHED`` (queue full, or no env within ``queue_timeout_s``) or
                ``FACTORY_ERROR`` (the env could not be made).
        """
        if self.active >= self.config.max_sessions and self.pool.stats().waiting >= self.config.max_queue:
            self.refused += 1
            raise self._capacity_error("the queue is full")
        try:
            lease = await self.pool.acquire(timeout=self.config.queue_timeout_s)
        except (PoolTimeoutError, PoolClosedError) as error:
            self.refused += 1
            raise self._capacity_error(str(error)) from None
        except Exception as error:
            raise ProtocolError(ErrorCode.FACTORY_ERROR, f"the env could not be made: {error!r}") from error
        session = _Session(lease.resource, send_gold=self.config.send_gold)
        self.active += 1
        self.opened += 1
        try:
            yield session
        finally:
            self.active -= 1
            # Shielded: a session cancelled while its env goes back (the server stopping) still returns it.
            await asyncio.shield(lease.release(broken=session.broken))

    def _capacity_error(self, why: str) -> ProtocolError:
        cap = self.config.max_sessions
        return ProtocolError(
            ErrorCode.CAPACITY_REACHED,
            f"no session free: {why} ({self.active} of {cap} sessions open, {self.pool.stats().waiting} waiting)",
            active_sessions=self.active,
            max_sessions=cap,
        )

    def stats(self) -> dict[str, Any]:
        return {
            "active_sessions": self.active,
            "max_sessions": self.config.max_sessions,
            "opened": self.opened,
            "refused": self.refused,
            "pool": msgspec.to_builtins(self.pool.stats()),
        }


class _Session:
    """One env's episode stream: what the protocol's messages do to it."""

    def __init__(self, env: AgentEnv, *, send_gold: bool = False) -> None:
        self.env = env
        self.send_gold = send_gold
        self.episode_id: str | None = None
        self.broken = False
        self.last_used = time.monotonic()  # the end of the last call into the env
        # One call into the env at a time: an HTTP session is reached by its WebSocket and by requests.
        self.lock = asyncio.Lock()
        # Made with the session, so that an episode the env's last user left open is not its tools'.
        self.tools = ToolSession(env) if ToolSession.serves(env) else None

    @functools.cached_property
    def id(self) -> str:
        """The session's id (OpenEnv's ``session_id``), made when first asked for."""
        return uuid.uuid4().hex

    async def reset(self, request: ResetRequest) -> dict[str, Any]:
        # What an env refuses in a reset's options (a key it lacks, a value of the wrong type) is the caller's
        # mistake, not the env failing: a validation error naming the options, and the env goes on.
        refused = (LookupError, TypeError, ValueError) if request.options else ()
        observation, info = await self._call(self.env.areset(seed=request.seed, options=request.options), refused)
        self.episode_id = request.episode_id or uuid.uuid4().hex
        return observation_frame(observation, None, False, False, info if self.send_gold else _without_gold(info))

    async def step(self, request: StepRequest) -> dict[str, Any]:
        observation, reward, terminated, truncated, info = await self._call(self.env.astep(request.action.message))
        return observation_frame(observation, reward, terminated, truncated, info)

    def state(self) -> dict[str, Any]:
        return state_frame(State(self.episode_id, self.env.turn, self.env.env_id))

    async def mcp(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """An MCP request's result on this session's env (:func:`~agentfly_env.serve.mcp.answer`)."""
        return await self._call(answer(self.tools, method, params))

    async def _call(self, call: Any, refused_options: tuple[type[Exception], ...] = ()) -> Any:
        """The env's answer. Options it refuses (:class:`OptionsError`, or ``refused_options`` raised by a reset
        given options) are a ``VALIDATION_ERROR`` naming them; other errors an ``EXECUTION_ERROR``. An error
        that is not the caller's misuse (stepping an ended episode) marks the env broken: it is destroyed,
        not lent again."""
        try:
            async with self.lock:
                try:
                    return await call
                finally:
                    self.last_used = time.monotonic()
        except asyncio.CancelledError:
            call.close()  # cancelled before it had the lock: it never ran, and must not warn that it never did
            raise
        except JsonRpcError:
            raise
        except OptionsError as error:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, str(error), field=f"options.{error.option}") from None
        except refused_options as error:
            message = f"the env refused the options: {type(error).__name__}: {error}"
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, message, field="options") from None
        except (EnvStateError, TypeError, ValueError) as error:
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, f"{type(error).__name__}: {error}") from None
        except Exception as error:
            self.broken = True
            logger.exception("%s failed", self.env.env_id)
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, f"the env failed: {error!r}") from None


def _without_gold(info: dict[str, Any]) -> dict[str, Any]:
    """A reset's ``info`` with its task (and the start record's, the same dict) stripped of the gold fields;
    ``info`` itself, which the env may hold on to, is left as it is."""
    task = info.get("task")
    if not isinstance(task, Mapping) or GOLD_FIELDS.isdisjoint(task):
        return info
    shown = {key: value for key, value in task.items() if key not in GOLD_FIELDS}
    start = info.get("start")
    if isinstance(start, EpisodeStart):
        return {**info, "task": shown, "start": msgspec.structs.replace(start, task=shown)}
    return {**info, "task": shown}


@dataclass
class _Held:
    """An HTTP session: its env's lease (``release`` gives it back) and who uses it."""

    session: _Session
    release: contextlib.AsyncExitStack
    joined: bool = False  # a WebSocket uses it (``/ws?session_id=``)
    closing: bool = False  # closed while joined: it ends when the WebSocket leaves


class HttpSessions:
    """OpenEnv's HTTP MCP sessions: envs leased by ``openenv/session/create`` until closed or idle."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager
        self.open: dict[str, _Held] = {}

    async def create(self) -> str:
        """A new session's id (raises :class:`ProtocolError` as :meth:`SessionManager.session` does)."""
        release = contextlib.AsyncExitStack()
        session = await release.enter_async_context(self.manager.session())
        self.open[session.id] = _Held(session, release)
        return session.id

    def get(self, session_id: str) -> _Session:
        held = self.open.get(session_id)
        if held is None:
            raise JsonRpcError(JsonRpcCode.INVALID_PARAMS, f"Unknown session_id: {session_id}")
        return held.session

    async def close(self, session_id: str) -> dict[str, Any]:
        """OpenEnv's ``openenv/session/close`` answer; a joined session is closed when its WebSocket leaves."""
        held = self.open.get(session_id)
        if held is None:
            raise JsonRpcError(JsonRpcCode.INVALID_PARAMS, f"Unknown session_id: {session_id}")
        if held.joined:
            held.closing = True
            return {"session_id": session_id, "closed": False, "closing": True}
        await self._end(session_id)
        return {"session_id": session_id, "closed": True}

    @contextlib.asynccontextmanager
    async def join(self, session_id: str) -> AsyncIterator[_Session]:
        """A WebSocket's use of a session, one WebSocket at a time (OpenEnv's ``/ws?session_id=``).

        Raises:
            ProtocolError: ``SESSION_ERROR``: no such session, or one already joined.
        """
        held = self.open.get(session_id)
        if held is None:
            raise ProtocolError(ErrorCode.SESSION_ERROR, f"Unknown session_id: {session_id}")
        if held.joined:
            raise ProtocolError(ErrorCode.SESSION_ERROR, f"Session {session_id} already has an attached WebSocket")
        held.joined = True
        try:
            yield held.session
        finally:
            held.joined = False
            held.session.last_used = time.monotonic()  # idle from the WebSocket's leaving
            if held.closing:
                await asyncio.shield(self._end(session_id))

    async def reap(self, idle_timeout_s: float) -> None:
        """Close the sessions idle for ``idle_timeout_s`` with no WebSocket joined, until cancelled."""
        while True:
            await asyncio.sleep(idle_timeout_s / 4)
            deadline = time.monotonic() - idle_timeout_s
            idle = [key for key, held in self.open.items() if not held.joined and held.session.last_used < deadline]
            for session_id in idle:
                try:
                    await self._end(session_id)
                except Exception:  # the reaper goes on for the others
                    logger.exception("closing the idle HTTP session %s failed", session_id)

    async def aclose(self) -> None:
        for session_id in list(self.open):
            await self._end(session_id)

    async def _end(self, session_id: str) -> None:
        held = self.open.pop(session_id, None)
        if held is not None:
            async with held.session.lock:  # not under a call in flight
                await held.release.aclose()


async def _answer_mcp(request: JsonRpcRequest, sessions: HttpSessions, own: _Session | None = None) -> dict[str, Any]:
    """A JSON-RPC response to an MCP request: on ``own`` (a WebSocket's session), else as ``POST /mcp``
    answers it (on the HTTP session its ``session_id`` names, else on an env leased for the request)."""
    method, params = request.method, request.params
    try:
        if method == "openenv/session/create":
            result = {"session_id": own.id if own is not None else await sessions.create()}
        elif method == "openenv/session/close":
            target = params.get("session_id")
            if not target or not isinstance(target, str):
                raise JsonRpcError(JsonRpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required")
            if own is not None and target == own.id:
                raise JsonRpcError(
                    JsonRpcCode.INVALID_REQUEST, "Cannot close active WebSocket-managed session via MCP method"
                )
            result = await sessions.close(target)
        elif own is not None:
            result = await own.mcp(method, params)
        elif params.get("session_id"):
            result = await sessions.get(str(params["session_id"])).mcp(method, params)
        else:
            async with sessions.manager.session() as session:
                result = await session.mcp(method, params)
    except JsonRpcError as error:
        return jsonrpc_error(error, request.id)
    except ProtocolError as error:  # the env failed (INTERNAL_ERROR), or no env could be had (SERVER_ERROR)
        code = JsonRpcCode.INTERNAL_ERROR if error.code is ErrorCode.EXECUTION_ERROR else JsonRpcCode.SERVER_ERROR
        return jsonrpc_error(JsonRpcError(code, error.message, error.details or None), request.id)
    return jsonrpc_result(request.id, result)


class _Connection:
    """One WebSocket as raw ASGI messages: the hot path of every session, without Starlette's router,
    middleware and ``WebSocket`` wrapper (they took about 15% of the server's CPU time per session)."""

    __slots__ = ("receive", "_send", "query")

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.receive = receive
        self._send = send
        query = scope.get("query_string", b"")
        self.query = urllib.parse.parse_qs(query.decode("latin-1")) if query else {}

    async def accept(self) -> bool:
        """Complete the handshake; False when the client left before it."""
        if (await self.receive())["type"] != "websocket.connect":
            return False
        await self._send({"type": "websocket.accept"})
        return True

    async def send_text(self, text: str) -> None:
        await self._send({"type": "websocket.send", "text": text})

    async def close(self, code: int) -> None:
        await self._send({"type": "websocket.close", "code": code})


#: Frames a client may send while it waits for its env; they are answered once it has one.
MAX_EARLY_FRAMES = 8


async def _serve_session(websocket: _Connection, sessions: HttpSessions) -> None:
    """One WebSocket session, from the accept to the close."""
    manager = sessions.manager
    config = manager.config
    if not await websocket.accept():
        return

    async def send(frame: dict[str, Any]) -> None:
        async with asyncio.timeout(config.send_timeout_s):
            await websocket.send_text(encode(frame))

    close_code = CLOSE_NORMAL
    try:
        async with contextlib.AsyncExitStack() as held:
            if "session_id" in websocket.query:  # OpenEnv's join of an HTTP session
                session = await held.enter_async_context(sessions.join(websocket.query["session_id"][0]))
                early = []
            else:
                opening = asyncio.ensure_future(held.enter_async_context(manager.session()))
                early = await _wait_for_env(websocket, opening)
                if early is None:  # the client left while it waited: it never takes an env
                    return
                session = opening.result()
            while True:
                if early:
                    message = early.pop(0)
                else:
                    message = await _receive(websocket, session, config.idle_timeout_s)
                if message["type"] == "websocket.disconnect":
                    return
                frame = message.get("text")
                if frame is None:
                    frame = message.get("bytes") or b""
                try:
                    request = decode_message(frame)
                    if isinstance(request, CloseRequest):
                        break
                    if isinstance(request, ResetRequest):
                        answer = await session.reset(request)
                    elif isinstance(request, StepRequest):
                        answer = await session.step(request)
                    elif isinstance(request, MCPRequest):
                        try:
                            rpc = decode_jsonrpc(request.data)
                        except JsonRpcError as error:
                            answer = mcp_frame(jsonrpc_error(error))
                        else:
                            answer = mcp_frame(await _answer_mcp(rpc, sessions, session))
                    else:
                        assert isinstance(request, StateRequest)
                        answer = session.state()
                except ProtocolError as error:
                    answer = error_frame(error)
                await send(answer)
    except ProtocolError as error:  # the session could not start, or went idle
        close_code = CLOSE_TRY_AGAIN if error.code is ErrorCode.CAPACITY_REACHED else CLOSE_NORMAL
        with contextlib.suppress(Exception):
            await send(error_frame(error))
    except TimeoutError:  # a client that does not read its answers
        close_code = CLOSE_POLICY
    except (OSError, RuntimeError):  # the connection went away under a send (uvicorn's ClientDisconnected)
        return
    except Exception:  # the server's own fault: said to the client and logged, never a silent drop
        logger.exception("a /ws session failed")
        close_code = CLOSE_INTERNAL
        with contextlib.suppress(Exception):
            await send(error_frame(ProtocolError(ErrorCode.EXECUTION_ERROR, "internal server error")))
    # Bounded too: a client that reads nothing would hold the close (and this task) forever.
    with contextlib.suppress(Exception):
        async with asyncio.timeout(config.send_timeout_s):
            await websocket.close(close_code)


async def _receive(websocket: _Connection, session: _Session, idle_timeout_s: float | None) -> Any:
    """The client's next message, waited for while the session is in use (a joined HTTP session's
    requests use it too).

    Raises:
        ProtocolError: ``SESSION_ERROR`` when neither came for ``idle_timeout_s``.
    """
    timeout = idle_timeout_s
    while True:
        try:
            async with asyncio.timeout(timeout):
                return await websocket.receive()  # cancel-safe: a frame that comes meanwhile stays queued
        except TimeoutError:
            assert idle_timeout_s is not None
            timeout = session.last_used + idle_timeout_s - time.monotonic()
            if timeout <= 0:
                raise ProtocolError(ErrorCode.SESSION_ERROR, f"idle for {idle_timeout_s:g}s: session closed") from None


async def _wait_for_env(websocket: _Connection, opening: asyncio.Future[_Session]) -> list[Any] | None:
    """Wait for the session's env while watching the client: the frames it sent meanwhile, or None
    if it left (the wait is then cancelled, so a client gone from the queue takes no env).

    Raises:
        ProtocolError: The session could not open (at capacity, the env failed), or the client sent
            more than :data:`MAX_EARLY_FRAMES` frames before it did.
    """
    early: list[Any] = []
    # An env free now is leased within one turn of the loop: then there is no wait to watch the client in
    # (which costs a receive task, a wait on both and its cancellation, per session).
    await asyncio.sleep(0)
    while not opening.done():
        receiving = asyncio.ensure_future(websocket.receive())
        await asyncio.wait({opening, receiving}, return_when=asyncio.FIRST_COMPLETED)
        if not receiving.done():
            receiving.cancel()  # the frame stays queued for the session (uvicorn's queue is cancel-safe)
            with contextlib.suppress(asyncio.CancelledError):
                await receiving
        if receiving.done() and not receiving.cancelled():
            message = receiving.result()
            if message["type"] == "websocket.disconnect":
                await _abandon(opening)
                return None
            early.append(message)
            if len(early) > MAX_EARLY_FRAMES:
                await _abandon(opening)
                raise ProtocolError(ErrorCode.SESSION_ERROR, f"more than {MAX_EARLY_FRAMES} frames before a session")
    opening.result()  # raises why the session could not open
    return early


async def _abandon(opening: asyncio.Future[Any]) -> None:
    """Stop waiting for an env; one leased at the last moment goes back with the session's exit stack."""
    opening.cancel()
    with contextlib.suppress(asyncio.CancelledError, ProtocolError):
        await opening


class _BearerToken:
    """ASGI middleware: every route but ``/health`` needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope["path"] != "/health":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                if scope["type"] == "websocket":  # closing before the accept answers HTTP 403
                    await send({"type": "websocket.close", "code": CLOSE_POLICY})
                else:
                    await JSONResponse({"detail": "missing or wrong bearer token"}, 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(
    env: str | Callable[[], gym.Env],
    env_kwargs: Mapping[str, Any] | None = None,
    config: ServeConfig | None = None,
) -> ASGIApp:
    """The ASGI app serving ``env`` (a registered id, or a factory of envs) with ``config``'s limits.

    The env pool starts with the app (its lifespan) and is closed, every env with it, when it stops.
    """
    config = config or ServeConfig()
    pool = make_env_pool(env, env_kwargs, size=config.max_sessions, acquire_timeout_s=config.queue_timeout_s)
    manager = SessionManager(pool, config)
    http_sessions = HttpSessions(manager)
    name = env if isinstance(env, str) else pool.name.partition(":")[2]
    description = _describe(env)

    async def reset(request: Request) -> Response:
        start = _convert(await _read_body(request), ResetRequest)
        async with _http_errors(), manager.session() as session:
            return _json((await session.reset(start))["data"])

    async def step(request: Request) -> Response:
        # OpenEnv's StepRequest: {"action": {...}, "timeout_s": ..., "request_id": ...}; extra keys are
        # allowed, and ours are the reset's (seed, options) of the one-step episode.
        body = await _read_body(request)
        action = StepRequest(_convert(body.get("action"), Action))
        start = _convert({key: body[key] for key in ("seed", "options") if key in body}, ResetRequest)
        async with _http_errors(), manager.session() as session:
            await session.reset(start)
            return _json((await session.step(action))["data"])

    async def state(request: Request) -> Response:
        return _json(msgspec.to_builtins(State(env_id=name)))

    async def mcp(request: Request) -> Response:
        # As OpenEnv's: always HTTP 200, what is wrong said in JSON-RPC.
        try:
            rpc = decode_jsonrpc(decode_frame(await request.body()))
        except ProtocolError:
            return _json(jsonrpc_error(JsonRpcError(JsonRpcCode.PARSE_ERROR, "Parse error")))
        except JsonRpcError as error:
            return _json(jsonrpc_error(error))
        return _json(await _answer_mcp(rpc, http_sessions))

    async def health(request: Request) -> Response:
        return _json({"status": "healthy"})

    async def env_metadata(request: Request) -> Response:
        return _json(
            {
                "name": name,
                "description": description,
                "readme_content": None,
                "version": metadata.version("agentfly-gym"),
                "author": None,
                "documentation_url": None,
            }
        )

    async def schema(request: Request) -> Response:
        return _json(schemas())

    async def sessions(request: Request) -> Response:
        return _json({**manager.stats(), "http_sessions": len(http_sessions.open)})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await pool.start()
        reaper = asyncio.create_task(http_sessions.reap(config.idle_timeout_s)) if config.idle_timeout_s else None
        try:
            yield
        finally:
            if reaper is not None:
                reaper.cancel()
            await http_sessions.aclose()
            await pool.close()

    app = Starlette(
        routes=[
            Route("/reset", reset, methods=["POST"]),
            Route("/step", step, methods=["POST"]),
            Route("/state", state),
            Route("/mcp", mcp, methods=["POST"]),
            Route("/health", health),
            Route("/metadata", env_metadata),
            Route("/schema", schema),
            Route("/sessions", sessions),
        ],
        lifespan=lifespan,
        exception_handlers={_HTTPError: _http_error_response},
    )

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and scope["path"] == "/ws":
            await _serve_session(_Connection(scope, receive, send), http_sessions)
        else:
            await app(scope, receive, send)

    guarded = RequestGuard(serve, config.guard, lambda status, message, path: {"detail": message})
    return _BearerToken(guarded, config.token) if config.token else guarded


def make_server(
    app: ASGIApp, config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning"
) -> uvicorn.Server:
    """A uvicorn server for ``app`` that enforces ``config``'s frame limit (``server.run()`` serves).

    uvicorn reads WebSocket frames, so it is what closes a session whose frame is over
    ``max_message_bytes`` (code 1009) before the frame is held whole in memory.
    """
    return uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            ws_max_size=config.max_message_bytes,
            ws_per_message_deflate=config.compression,
            log_level=log_level,
            backlog=4096,
            timeout_graceful_shutdown=5,
        )
    )


def _describe(env: str | Callable[[], gym.Env]) -> str:
    """The first line of the env class's docstring (OpenEnv's metadata ``description``)."""
    maker: Any = env
    if isinstance(env, str):
        entry_point = gym.spec(env).entry_point
        maker = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    doc = inspect.getdoc(maker) or ""
    return doc.partition("\n")[0] or str(env)


async def _read_body(request: Request) -> dict[str, Any]:
    """The JSON object of a request's body (empty: ``{}``); the guard has bounded it."""
    body = await request.body()
    if not body:
        return {}
    try:
        return decode_frame(body)
    except ProtocolError as error:
        raise _HTTPError(422, error.message) from None


def _convert(data: Any, kind: type[T]) -> T:
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as error:
        raise _HTTPError(422, str(error)) from None


class _HTTPError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


async def _http_error_response(request: Request, error: Exception) -> Response:
    assert isinstance(error, _HTTPError)
    return _json({"detail": error.detail}, error.status)


@contextlib.asynccontextmanager
async def _http_errors() -> AsyncIterator[None]:
    """Protocol errors as HTTP answers: 503 at capacity, 422 for a bad request, 500 otherwise."""
    try:
        yield
    except ProtocolError as error:
        status = {ErrorCode.CAPACITY_REACHED: 503, ErrorCode.VALIDATION_ERROR: 422}.get(error.code, 500)
        raise _HTTPError(status, error.message) from None


def _json(content: Any, status: int = 200) -> Response:
    return Response(encode(content), status, media_type="application/json")
