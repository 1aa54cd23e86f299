"""``agentfly-serve`` in a thread of the test process, and scripts run in the peers' own venvs.

:func:`serving` runs a server on a free loopback port, so a test can read its session counters
(``GET /sessions``) while its clients play. Peers (the real ``openenv`` client, the OpenAI Agents SDK)
run in venvs of their own (``make peers``: ``.venv-peers/NAME``), driven as child processes by
:func:`run_in_peer`. Used by tests/serve and tests/train/test_gateway_framework.py.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentfly_bench.suites._peers import peer_python
from agentfly_bench.suites.serve import openenv_python
from agentfly_env.serve.server import ServeConfig, create_app, make_server

REPO_ROOT = Path(__file__).resolve().parents[1]
__all__ = [
    "REPO_ROOT",
    "WS_UPGRADE",
    "Served",
    "http_request",
    "openenv_python",
    "peer_python",
    "run_in_openenv",
    "run_in_peer",
    "serving",
]


def run_in_peer(python: Path | None, script: str | Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``script`` (a path from the repository root, or absolute) with a peer venv's ``python``, this
    process's environment plus ``env``; what it printed (a non-zero exit fails the test with its stderr)."""
    assert python is not None, "the peer's venv is missing: make peers"
    completed = subprocess.run(
        [str(python), str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def run_in_openenv(script: str, *args: str) -> Any:
    """Run ``script`` (a path from the repository root) in openenv's own venv; the JSON it prints."""
    return json.loads(run_in_peer(openenv_python(), script, *args))


def http_request(
    url: str, method: str = "GET", path: str = "/", headers: dict[str, str] | None = None, body: bytes = b""
) -> tuple[int, bytes]:
    """One request as sent, headers and all (a ``Host`` of the test's choosing), to the server at ``url``:
    its status and body. A WebSocket handshake is a GET with :data:`WS_UPGRADE` (101 when accepted)."""
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    try:
        headers = dict(headers or {})
        connection.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body or method in ("POST", "PUT", "PATCH"):
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body or None)
        reply = connection.getresponse()
        return reply.status, b"" if reply.status == 101 else reply.read()
    finally:
        connection.close()


#: The headers of a WebSocket handshake (RFC 6455's example key).
WS_UPGRADE = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}


class Served:
    """A running server: its base URL and its counters."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.token = token

    def get(self, path: str) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        with urllib.request.urlopen(urllib.request.Request(self.url + path, headers=headers), timeout=10) as reply:
            return json.loads(reply.read())

    def sessions(self) -> dict[str, Any]:
        return self.get("/sessions")

    def wait_until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> dict[str, Any]:
        """The session counters once ``predicate`` holds of them (fails the test if it never does)."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.sessions()
            if predicate(stats) or time.monotonic() > deadline:
                return stats
            time.sleep(0.05)


@contextlib.contextmanager
def serving(
    env: str | Callable[[], gym.Env], env_kwargs: dict[str, Any] | None = None, **config: Any
) -> Iterator[Served]:
    """``agentfly-serve`` in a thread on a free loopback port, stopped (its pool closed) afterwards."""
    settings = ServeConfig(**config)
    server = make_server(create_app(env, env_kwargs, settings), settings, port=0)
    thread = threading.Thread(target=server.run, name="agentfly-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}", settings.token)
    finally:
        server.should_exit = True
        thread.join(30)
