"""``AgentFly/Remote-v0``: an env served over OpenEnv's protocol, played as an ordinary AgentFly env.

``gym.make("AgentFly/Remote-v0", url="http://host:8000")`` opens one WebSocket session on the server
(``agentfly-serve``, or any OpenEnv server) and keeps it across episodes; ``reset`` and ``step`` are the
server env's own. Against ``agentfly-serve`` everything a local env gives comes through: the task,
``info["start"]`` (system prompt, tool schemas), ``info["step"]`` with its tool calls, results and
reward components, ``terminated`` apart from ``truncated`` and its reason, and the trajectory names
the served env's id. So the trainer, the bench and the viewer take it as they take a local env (a
pool of them is a pool of sessions). JSON has no tuples: a tuple in the server env's ``info`` comes
back as a list.

The task comes without its gold fields (:data:`~agentfly_env.core.tasks.GOLD_FIELDS`: the answer, hidden
tests, ...) unless the server was started with ``--send-gold``: the reward is the served env's, computed on
the server, so training needs none of them here (the trainer reads the task's ``id``).

Against another OpenEnv server, the action goes out as ``{action_field: text}`` (``"message"`` by
default, OpenEnv's text-env field), the observation's ``text`` field (or the whole observation as
JSON, when it has none) is the observation, ``done`` is ``terminated``, and ``info["observation"]``
holds the observation's fields as the server sent them.

If the connection drops mid-episode, the step ends the episode as truncated
(``info["step"].truncation_reason == "remote_disconnected"``) and the next ``reset`` connects again; an
error the server reports raises :class:`RemoteEnvError` with OpenEnv's error code.

The session belongs to the event loop that opened it. ``reset``/``step`` from sync code run on one loop
kept per thread, so an episode stays on its session; code that already runs a loop uses
``areset``/``astep`` (the sync calls would each run on a loop of their own, and so each open a session).

Example:
    >>> import gymnasium as gym, agentfly_env
    >>> env = gym.make("AgentFly/Remote-v0", url="http://127.0.0.1:8000")  # doctest: +SKIP
    >>> observation, info = env.reset(seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import msgspec

from agentfly_env.core.env import AgentEnv
from agentfly_env.core.types import EpisodeStart, Step
from agentfly_env.extras import requires_extra
from agentfly_env.serve.protocol import decode_frame, encode

__all__ = ["RemoteConnectionError", "RemoteEnv", "RemoteEnvError", "websocket_url"]

#: ``info`` keys :class:`~agentfly_env.core.env.AgentEnv` adds itself after a reset and a step; the rest of a
#: served env's ``info`` is its own, handed back to the base class as such.
_RESET_KEYS = frozenset({"env_id", "system_prompt", "tools", "turn", "start"})
_STEP_KEYS = frozenset({"turn", "step"})


class RemoteEnvError(RuntimeError):
    """The server answered with an error frame.

    Attributes:
        code: OpenEnv's error code (``CAPACITY_REACHED``, ``EXECUTION_ERROR``, ...).
        data: The error frame's fields.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.code = str(data.get("code", "UNKNOWN"))
        self.data = data
        #: The error came on a session kept from before (it was closed meanwhile), not on a new one.
        self.stale = False
        super().__init__(f"{self.code}: {data.get('message', 'no message')}")


class RemoteConnectionError(ConnectionError):
    """The server could not be reached, or the connection dropped while a request was out."""

    #: The connection was one kept from before (the server may have closed it meanwhile).
    stale = False


def websocket_url(url: str) -> str:
    """The session endpoint of a server's base URL, as OpenEnv's client derives it.

    Example:
        >>> websocket_url("http://127.0.0.1:8000/"), websocket_url("https://envs.example.org")
        ('ws://127.0.0.1:8000/ws', 'wss://envs.example.org/ws')
    """
    base = url.rstrip("/")
    for scheme, ws_scheme in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(scheme):
            base = ws_scheme + base[len(scheme) :]
    if not base.startswith(("ws://", "wss://")):
        base = "ws://" + base
    return base if base.endswith("/ws") else f"{base}/ws"


class RemoteEnv(AgentEnv):
    """An env played over OpenEnv's WebSocket protocol; one session, kept across episodes.

    Args:
        url: The server's base URL (``http://``, ``https://``, ``ws://`` or ``wss://``).
        token: Sent as ``Authorization: Bearer <token>``.
        headers: More HTTP headers for the connection.
        action_field: The action's field that carries the model's text.
        connect_timeout_s: Seconds to open the connection.
        message_timeout_s: Seconds to wait for one answer (a reset or a step) before the connection is
            dropped; the server env's own step time counts.
        max_message_bytes: Largest answer accepted.
        env_id: Name of the env until the server names it (an AgentFly server does, on reset).
        render_mode: As for :class:`~agentfly_env.core.env.AgentEnv`.

    The turn budget and the observation bound are the server env's; this side adds none.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        action_field: str = "message",
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 300.0,
        max_message_bytes: int = 64 << 20,
        env_id: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        with requires_extra("serve", "websockets", feature="AgentFly/Remote-v0"):
            from websockets.asyncio.client import connect
            from websockets.exceptions import WebSocketException
        super().__init__(
            max_turns=sys.maxsize, max_observation_chars=sys.maxsize, render_mode=render_mode, env_id=env_id
        )
        self.url = websocket_url(url)
        self.action_field = action_field
        self.message_timeout_s = message_timeout_s
        self._headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
        self._connect = connect
        self._connect_options = {"open_timeout": connect_timeout_s, "max_size": max_message_bytes}
        self._transport_errors = (WebSocketException, OSError, TimeoutError)
        self._ws: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ----------------------------------------------------------------- the episode

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        data: dict[str, Any] = {} if seed is None else {"seed": seed}
        if options:
            data["options"] = options
        try:
            payload = await self._request({"type": "reset", "data": data})
        except (RemoteConnectionError, RemoteEnvError) as error:
            # A kept session the server has closed since (idle, restarted) shows up now: start a new one.
            if not error.stale:
                raise
            payload = await self._request({"type": "reset", "data": data})
        observation = payload.get("observation") or {}
        wire_info = observation.get("info")
        if not (isinstance(wire_info, dict) and "start" in wire_info):
            return _text_of(observation), {"observation": observation}
        start = msgspec.convert(wire_info["start"], EpisodeStart)
        self.env_id = start.env_id
        self.system_prompt = start.system_prompt
        self.tool_schemas = start.tools
        self.answer_format = start.answer_format
        self.tool_format = start.tool_format
        info = {key: value for key, value in wire_info.items() if key not in _RESET_KEYS}
        info["task"] = start.task
        return start.observation, info

    async def _step(self, action: str) -> tuple[Step, dict[str, Any]]:
        try:
            payload = await self._request({"type": "step", "data": {self.action_field: action}})
        except RemoteConnectionError as error:
            lost = f"(the connection to {self.url} was lost: {error})"
            return Step(observation=lost, reward=0.0, truncation_reason="remote_disconnected"), {}
        observation = payload.get("observation") or {}
        wire_info = observation.get("info")
        if not (isinstance(wire_info, dict) and "step" in wire_info):
            reward = payload.get("reward")
            step = Step(
                observation=_text_of(observation),
                reward=0.0 if reward is None else float(reward),
                terminated=bool(payload.get("done")),
            )
            return step, {"observation": observation}
        # The served env's own record, as it made it (the base class's completion changes nothing in it).
        info = {key: value for key, value in wire_info.items() if key not in _STEP_KEYS}
        return msgspec.convert(wire_info["step"], Step), info

    async def _close(self) -> None:
        if self._ws is None or self._loop is not asyncio.get_running_loop():
            await self._drop()
            return
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                await ws.send(encode({"type": "close"}))
                await ws.close()
            except self._transport_errors:
                pass  # gone already: nothing left to release

    # ----------------------------------------------------------------- the wire

    async def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one message and wait for its answer's ``data``.

        Raises:
            RemoteConnectionError: Not connected, or the connection failed or timed out meanwhile (it is
                dropped: an answer that came late would pair with the next request).
            RemoteEnvError: The server answered with an error frame.
        """
        reused = self._ws is not None
        ws = await self._connection()
        try:
            await ws.send(encode(message))
            async with asyncio.timeout(self.message_timeout_s):
                frame = await ws.recv()
        except self._transport_errors as error:
            await self._drop()
            lost = RemoteConnectionError(f"{self.url}: {type(error).__name__}: {error}")
            lost.stale = reused
            raise lost from error
        except BaseException:  # cancelled mid-request: the answer would arrive out of turn
            await asyncio.shield(self._drop())
            raise
        reply = decode_frame(frame)
        if reply.get("type") == "error":
            error = RemoteEnvError(reply.get("data") or {})
            if error.code in ("CAPACITY_REACHED", "SESSION_ERROR"):  # the server closes these sessions
                await self._drop()
                error.stale = reused and error.code == "SESSION_ERROR"
            raise error
        return reply.get("data") or {}

    async def _connection(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._ws is not None and (self._loop is not loop or self._ws.close_code is not None):
            await self._drop()  # closed by the server, or opened on another event loop: a new session
        if self._ws is None:
            try:
                self._ws = await self._connect(
                    self.url, additional_headers=self._headers or None, proxy=None, **self._connect_options
                )
            except self._transport_errors as error:
                raise RemoteConnectionError(f"cannot connect to {self.url}: {error}") from error
            self._loop = loop
        return self._ws

    async def _drop(self) -> None:
        """Abort the connection (no close handshake: the server frees the session when it notices)."""
        ws, self._ws = self._ws, None
        if ws is None:
            return
        ws.transport.abort()
        if self._loop is asyncio.get_running_loop():  # let the connection wind down its keepalive task
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1):
                    await ws.wait_closed()


def _text_of(observation: dict[str, Any]) -> str:
    """A foreign server's observation as text: its ``text`` field, or its fields as JSON."""
    text = observation.get("text")
    if isinstance(text, str):
        return text
    return encode({key: value for key, value in observation.items() if key != "metadata"})
