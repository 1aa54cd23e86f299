"""The one request guard of every server here: ``agentfly-serve``, the trainer's gateway and ``agentfly-view``.

A server on loopback is still reachable from every web page its user opens: a page can open a WebSocket to
it, send a "simple" cross-site POST (``text/plain``, no preflight), or point its own DNS name at 127.0.0.1
and read the answers (DNS rebinding). A careless client can send a body of any size, or JSON nested
thousands deep. :class:`RequestGuard` refuses all of that before a route sees the request, by Jupyter's
rules (its ``check_host`` and ``check_origin``):

* **Host.** Unless the server is exposed on purpose (``allow_remote``), the ``Host`` header must name a
  loopback address, ``localhost``, or a name in ``allowed_hosts``: a rebinding page sends its own name.
* **Origin.** A request that carries an ``Origin`` (browsers send one with every WebSocket, every
  cross-origin fetch and every POST) must come from the server's own origin (the ``Host`` it was sent
  to) or one in ``allowed_origins``. Programs send none and pass.
* **Content type.** A request with a body (or a content type) is JSON (``application/json`` or
  ``application/*+json``): no form or ``text/plain`` request reaches a route.
* **Size.** A body over ``max_body_bytes`` is refused; a route gets the body read whole. What comes past
  the limit is read and dropped, so that a careless client gets its 413 rather than a broken pipe, up to
  :data:`DRAIN_FACTOR` times the limit (a ``Content-Length`` beyond that is refused before a byte is read).
* **Nesting.** A JSON body nested deeper than ``max_json_depth`` is refused: nothing behind the guard
  recurses that deep. WebSocket frames are checked with the same :func:`json_too_deep` by the server
  that reads them.

Each refusal is answered in the server's own error shape (``error_body``), with 403 (host, origin),
413 (size), 415 (content type) or 400 (nesting); a refused WebSocket handshake is answered 403.

Example:
    >>> rules = GuardRules(max_body_bytes=1024)
    >>> rules.refusal({"host": "evil.example:8000"})
    (403, "Host 'evil.example:8000' is not this server's: it answers loopback and localhost only (allow a name with --allow-host)")
    >>> rules.refusal({"host": "127.0.0.1:8000", "origin": "http://127.0.0.1:8000"}) is None
    True
    >>> json_too_deep(b'{"a": [[[1]]]}', limit=3), json_too_deep(b'{"a": "[[[[[["}', limit=3)
    (True, False)
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

__all__ = [
    "GuardRules",
    "RequestGuard",
    "add_guard_arguments",
    "bind_refusal",
    "is_loopback",
    "json_too_deep",
    "rules_from_arguments",
]

#: Host names that always mean this machine.
LOOPBACK_NAMES = frozenset({"localhost"})

#: Deepest JSON nesting a request may have by default; real requests (OpenAI tool schemas, MCP calls,
#: reset options) stay within a dozen levels.
MAX_JSON_DEPTH = 64
#: How many times the body limit the guard reads (and drops) of a body too large before it answers.
DRAIN_FACTOR = 16


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name, IPv6 with or without brackets) is this machine's loopback.

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("[::1]"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, True, False)
    """
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(host: str) -> str:
    """The name or address in a ``Host`` header, without its port (``[::1]:80`` -> ``::1``)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    name, _, _ = host.partition(":")
    return name


# Strings hold no structure: the unrolled-loop form of one JSON string, escapes included.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def json_too_deep(document: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``document`` nests arrays and objects deeper than ``limit``.

    Read without decoding, so a value too deep to decode (or to encode again) is found before anything
    recurses into it; one with at most ``limit`` brackets is passed at the cost of two counts.
    """
    data = document.encode("utf-8", "surrogatepass") if isinstance(document, str) else bytes(document)
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    structure = np.frombuffer(_JSON_STRING.sub(b"", data), np.uint8)
    return bool(structure.size) and int(np.cumsum(_OPEN[structure], dtype=np.int64).max()) > limit


@dataclass(frozen=True)
class GuardRules:
    """What a server accepts (module docstring).

    Attributes:
        max_body_bytes: Largest request body.
        max_json_depth: Deepest nesting of a JSON body.
        allow_remote: Accept any ``Host`` header (a server exposed on purpose; use a token with it).
        allowed_hosts: Names besides loopback and ``localhost`` that the ``Host`` header may give
            (a name this machine has on the network, a reverse proxy's).
        allowed_origins: Web origins besides the server's own that may call it
            (``"https://lab.example:8888"``; ``"*"`` for any).
    """

    max_body_bytes: int = 1 << 20
    max_json_depth: int = MAX_JSON_DEPTH
    allow_remote: bool = False
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or self.max_json_depth < 1:
            raise ValueError(f"max_body_bytes and max_json_depth must be >= 1: {self}")
        object.__setattr__(self, "allowed_hosts", tuple(host.lower() for host in self.allowed_hosts))
        object.__setattr__(self, "allowed_origins", tuple(o.lower().rstrip("/") for o in self.allowed_origins))

    def refusal(self, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """Why a request with these (lower-cased) headers is refused before its body is read, as
        ``(status, message)``; None when its host, origin, content type and declared size pass."""
        host = headers.get("host", "")
        if host and not self.allow_remote:
            name = _host_name(host.lower())
            if not is_loopback(name) and name not in self.allowed_hosts:
                return 403, (
                    f"Host {host!r} is not this server's: it answers loopback and localhost only "
                    "(allow a name with --allow-host)"
                )
        origin = headers.get("origin")
        if origin is not None and not self._same_or_allowed(origin, host):
            return 403, f"cross-origin request from {origin!r} refused (allow an origin with --allow-origin)"
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > DRAIN_FACTOR * self.max_body_bytes):
            return 413, f"the body is over {self.max_body_bytes} bytes"
        kind = headers.get("content-type")
        if kind is not None and not _is_json(kind):
            return 415, f"a request body must be JSON (Content-Type: application/json), got {kind!r}"
        return None

    def body_refusal(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """Why a request's whole ``body`` is refused; None when it passes."""
        if not body:
            return None
        if "content-type" not in headers:
            return 415, "a request body must be JSON (Content-Type: application/json), got none"
        if json_too_deep(body, self.max_json_depth):
            return 400, f"the JSON body is nested deeper than {self.max_json_depth} levels"
        return None

    def _same_or_allowed(self, origin: str, host: str) -> bool:
        origin = origin.lower().rstrip("/")
        if "*" in self.allowed_origins or origin in self.allowed_origins:
            return True
        if origin == "null":  # sandboxed frames, file:// pages, redirects across origins
            return False
        return bool(host) and urllib.parse.urlsplit(origin).netloc == host.lower()


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _default_error(status: int, message: str, path: str) -> dict[str, Any]:
    return {"detail": message}


class RequestGuard:
    """ASGI middleware that applies :class:`GuardRules` to every HTTP request and WebSocket handshake.

    Args:
        app: The server's ASGI app.
        rules: What it accepts.
        error_body: The JSON body of a refusal in the server's own shape, from its status, message and the
            request's path (a server that speaks several dialects answers each in its own).
    """

    def __init__(
        self,
        app: Callable[..., Any],
        rules: GuardRules,
        error_body: Callable[[int, str, str], Any] = _default_error,
    ) -> None:
        self.app = app
        self.rules = rules
        self.error_body = error_body

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        refused = self.rules.refusal(headers)
        if refused is None and kind == "http":
            body, refused = await self._read_body(receive)
            if refused is None:
                refused = self.rules.body_refusal(body, headers)
            if refused is None:
                receive = _replay(body, receive)
        if refused is None:
            await self.app(scope, receive, send)
        elif kind == "websocket":  # a close before the accept is answered HTTP 403
            await send({"type": "websocket.close", "code": 1008, "reason": refused[1][:120]})
        else:
            await self._refuse(send, *refused, scope.get("path", "/"))

    async def _read_body(self, receive: Callable[..., Any]) -> tuple[bytes, tuple[int, str] | None]:
        """The whole body, or why it is refused (too large: read on, dropped, up to the drain limit)."""
        limit = self.rules.max_body_bytes
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: the app sees the disconnect itself
                return b"".join(chunks), None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= limit:
                chunks.append(chunk)
            else:
                chunks.clear()
            if not message.get("more_body", False) or size > DRAIN_FACTOR * limit:
                return (b"", (413, f"the body is over {limit} bytes")) if size > limit else (b"".join(chunks), None)

    async def _refuse(self, send: Callable[..., Any], status: int, message: str, path: str) -> None:
        body = msgspec.json.encode(self.error_body(status, message, path))
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _replay(body: bytes, receive: Callable[..., Any]) -> Callable[..., Any]:
    """A ``receive`` that gives the body already read once, then the client's own messages (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Any:
        return pending.pop() if pending else await receive()

    return replay


def add_guard_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options of :class:`GuardRules` (``--allow-remote``, ``--allow-host``, ``--allow-origin``)."""
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on a --host that is not loopback and answer any Host header (use --token with it)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host header name to answer besides loopback and localhost (repeatable)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (scheme://host:port) whose pages may call the server (repeatable; default: none)",
    )


def rules_from_arguments(args: argparse.Namespace, **limits: int) -> GuardRules:
    """:class:`GuardRules` from :func:`add_guard_arguments`' options (and ``max_body_bytes`` and the like)."""
    return GuardRules(
        allow_remote=args.allow_remote,
        allowed_hosts=tuple(args.allow_host),
        allowed_origins=tuple(args.allow_origin),
        **limits,
    )


def bind_refusal(prog: str, host: str, allow_remote: bool) -> str | None:
    """Why ``prog`` may not listen on ``host`` (not loopback, no ``--allow-remote``); None when it may."""
    if is_loopback(host) or allow_remote:
        return None
    return f"{prog}: {host} is not a loopback address; pass --allow-remote to serve other machines"
