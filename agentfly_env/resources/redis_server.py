"""A throwaway ``redis-server`` on a free loopback port: the Redis cache's tests start one, and the
benchmarks' chaos soak starts, kills and restarts one (both import it from here, the core, which the
core's own tests may load on a core-only install).

The server binds 127.0.0.1 only, persists nothing (``--save "" --appendonly no``) and keeps its
files in a temporary directory removed on stop.

Example:
    >>> with RedisServer() as server:  # doctest: +SKIP
    ...     client = redis.Redis.from_url(server.url)
    ...     server.kill()  # SIGKILL, to test a server dying mid-run
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    """A loopback TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """Runs ``redis-server`` in a subprocess; use as a context manager or call start/stop.

    Args:
        port: The port to listen on; a free one is picked when None.
        binary: The redis-server executable, looked up on PATH.
        startup_timeout_s: How long to wait for the server to answer PING.

    Raises:
        RuntimeError: From :meth:`start`, if the binary is missing or the server does not come up.
    """

    def __init__(self, port: int | None = None, binary: str = "redis-server", startup_timeout_s: float = 5.0) -> None:
        self.port = port if port is not None else free_port()
        self._binary = binary
        self._startup_timeout_s = startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        executable = shutil.which(self._binary)
        if executable is None:
            raise RuntimeError(
                f"{self._binary!r} not found on PATH; the Redis tests need a real server "
                "(Debian/Ubuntu: apt-get install redis-server)"
            )
        self._dir = Path(tempfile.mkdtemp(prefix="agentfly-redis-"))
        log = self._dir / "redis.log"
        self._proc = subprocess.Popen(
            [
                executable,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self._dir),
                "--logfile",
                str(log),
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._answers_ping():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{detail}")
            time.sleep(0.01)
        return self

    def kill(self) -> None:
        """SIGKILL the server and wait for it to die (no clean shutdown, sockets just drop)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 5 s) and remove its directory."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False
