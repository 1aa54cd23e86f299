"""The program that runs inside the sandbox: a supervisor that forks Python sessions and relays to them.

It runs on the sandbox's interpreter with the standard library only: it is copied into the sandbox
as a single file and cannot import this package. The host talks to the supervisor; the supervisor
talks to the current session, a process it forked from itself. So a fresh session costs a fork, not
an interpreter start-up, and nothing a session did (variables, monkeypatched modules, files in tmp,
processes it started) survives into the next one.

Protocol: frames of a 4-byte big-endian length followed by a UTF-8 JSON object.

* host -> supervisor (its stdin): ``{"op": "run", "code": "..."}`` or ``{"op": "reset"}``.
* supervisor -> host (its stdout): ``{"type": "ready"}`` once a session is up (at start and after
  ``reset``), ``{"type": "result", ...}`` for ``run``, or ``{"type": "fatal", "message": ...}`` when it
  cannot go on.

A session reads code on fd 3 and answers on fd 4; its stdout and stderr (fds 1 and 2) are pipes the
supervisor drains while the code runs, keeping at most ``max_output_bytes`` of each and counting the
rest, so a flood of output never piles up in memory anywhere. A session that dies (a segfault,
``os._exit``, a signal, a CPU limit) is reported with the reason and replaced by a fresh one. Wall-clock
timeouts are the host's job: it kills the whole sandbox, since it cannot trust a session that hangs.

Example:
    >>> frame = encode_frame({"op": "reset"})
    >>> frame[:4], json.loads(frame[4:])
    (b'\\x00\\x00\\x00\\x0f', {'op': 'reset'})
"""

from __future__ import annotations

import ast
import builtins
import fcntl
import io
import json
import linecache
import os
import resource
import select
import signal
import struct
import sys
import time
import traceback
import types
from typing import Any

HEADER = struct.Struct(">I")
# Fixed descriptors of a session: the request and result pipes to its supervisor.
REQUEST_FD, RESULT_FD = 3, 4
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
# Bound now: code in a session may monkeypatch ``json`` or ``repr``, but not what answers for it.
_dumps, _loads, _repr = json.dumps, json.loads, repr
_CRASH_HINTS = {
    signal.SIGSEGV: "a segmentation fault",
    signal.SIGBUS: "a bus error",
    signal.SIGABRT: "an abort",
    signal.SIGKILL: "SIGKILL (killed from inside, or out of memory)",
    signal.SIGXCPU: "its CPU time limit (SIGXCPU)",
    signal.SIGXFSZ: "its file size limit (SIGXFSZ)",
}


class ProtocolError(Exception):
    """A peer sent something that is not a well-formed frame."""


def encode_frame(message: dict[str, Any]) -> bytes:
    """A frame: the length, then the JSON text (strings made valid UTF-8 first)."""
    payload = _dumps(message, ensure_ascii=False).encode("utf-8", "replace")
    return HEADER.pack(len(payload)) + payload


def write_frame(fd: int, message: dict[str, Any]) -> None:
    view = memoryview(encode_frame(message))
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        data = os.read(fd, size - len(chunks))
        if not data:
            return None
        chunks += data
    return bytes(chunks)


def read_frame(fd: int, limit: int) -> dict[str, Any] | None:
    """The next frame on a blocking descriptor; None at end of file."""
    header = _read_exactly(fd, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > limit:
        raise ProtocolError(f"a frame of {size} bytes is over the limit of {limit}")
    payload = _read_exactly(fd, size)
    if payload is None:
        return None
    message = _loads(payload)
    if not isinstance(message, dict):
        raise ProtocolError("a frame is not a JSON object")
    return message


def _prctl(option: int, value: int) -> None:
    """Best effort: ``prctl`` through ctypes (a missing libffi only costs this hardening)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass


def wipe(path: str) -> None:
    """Delete everything under ``path``, making unreadable directories readable first."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                wipe(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


class _Capture:
    """Keeps the first ``limit`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def text(self) -> str:
        text = self.data.decode("utf-8", "replace")
        if self.total > len(self.data):
            text += f"\n... [output truncated: {self.total} bytes in total, the first {len(self.data)} shown]"
        return text


# ----------------------------------------------------------------------------- the session


class Session:
    """The Python session a model's code runs in: one ``__main__`` namespace that persists across calls."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.limit = int(config["max_output_bytes"])
        self.module = types.ModuleType("__main__")
        self.module.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = self.module  # so pickle and multiprocessing find the code's classes
        self.cells = 0

    def setup(self) -> None:
        """Drop privileges, apply limits, start from an empty tmp and fresh stdout/stderr."""
        config = self.config
        os.setsid()  # its own process group: the supervisor can kill it and all it started at once
        uid, gid = config.get("uid"), config.get("gid")
        if uid is not None and os.getuid() == 0:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        # Both are cleared by the change of user above, so they come after it.
        if os.getppid() != 1:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # without a pid namespace, die with the supervisor
        _prctl(PR_SET_DUMPABLE, 1)  # the supervisor is not dumpable; the session's own /proc stays usable
        limits = config["limits"]
        for name, value in limits.items():
            if value is not None:
                number = getattr(resource, name)
                soft = int(value)
                # CPU: SIGXCPU at the limit (a clear crash reason), SIGKILL one second later.
                hard = soft + 1 if name == "RLIMIT_CPU" else soft
                resource.setrlimit(number, (soft, hard))
        tmp = config["tmp"]
        wipe(tmp)
        os.chdir(tmp)
        self.streams = (self._open(1), self._open(2))
        sys.__stdout__, sys.__stderr__ = self.streams
        import faulthandler

        faulthandler.enable(file=self.streams[1])  # a segfault leaves a Python stack in stderr

    def serve(self) -> None:
        write_frame(RESULT_FD, {"type": "ready"})
        while True:
            request = read_frame(REQUEST_FD, limit=1 << 30)
            if request is None:
                return
            write_frame(RESULT_FD, self.execute(str(request.get("code", ""))))

    def execute(self, code: str) -> dict[str, Any]:
        """Run one cell like a REPL: statements, then the value of a final expression."""
        self.cells += 1
        filename = f"<cell {self.cells}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        namespace = self.module.__dict__
        # Whatever the last cell did to them (replaced, closed), this one prints to the pipes again.
        self.streams = tuple(self._open(i + 1) if stream.closed else stream for i, stream in enumerate(self.streams))
        sys.stdout, sys.stderr = self.streams
        value = error = None
        status, pid = 0, os.getpid()
        started = time.perf_counter()
        try:
            tree = ast.parse(code, filename)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, filename, "exec"), namespace)
            if last is not None:
                result = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
                if result is not None:
                    namespace["_"] = result
                    value = self._bounded(_repr(result))
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            error = f"SystemExit({exc.code!r}) was raised; the session ignores it and keeps running."
        except BaseException as exc:  # KeyboardInterrupt too: every outcome is the model's to read
            status, error = 1, self._format_exception(exc)
        finally:
            if os.getpid() != pid:  # a process the code forked got back here: it must not answer
                if status and error and not error.startswith("SystemExit"):
                    self.streams[1].write(error)  # what Python prints when a process dies of an exception
                self._flush()
                os._exit(status)
        self._flush()
        return {"type": "result", "value": value, "error": error, "duration_s": time.perf_counter() - started}

    def _format_exception(self, exc: BaseException) -> str:
        trace = exc.__traceback__
        # Drop this module's frames: the model should see its own code only.
        while trace is not None and trace.tb_frame.f_code.co_filename == __file__:
            trace = trace.tb_next
        lines = traceback.format_exception(type(exc), exc, trace)
        return self._bounded("".join(lines), keep_end=True)

    def _bounded(self, text: str, keep_end: bool = False) -> str:
        if len(text) <= self.limit:
            return text
        if keep_end:
            return f"... [{len(text) - self.limit} characters cut]\n" + text[-self.limit :]
        return text[: self.limit] + f"... [{len(text) - self.limit} characters cut]"

    @staticmethod
    def _open(fd: int) -> io.TextIOWrapper:
        return open(fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115

    def _flush(self) -> None:
        for stream in {*self.streams, sys.stdout, sys.stderr}:
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):  # the code closed, broke or replaced its stream
                pass


# ----------------------------------------------------------------------------- the supervisor


class Supervisor:
    """Owns one session at a time; relays the host's requests to it and watches it."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.limit = int(config["max_output_bytes"])
        # The session's answer holds at most a value and a traceback of ``limit`` characters each;
        # JSON may escape a character into six bytes.
        self.result_limit = 16 * self.limit + 65536
        self.pid = 0
        self.pidfd = -1
        self.fds: dict[str, int] = {}
        self.poller = select.poll()

    # -- sessions

    def spawn(self) -> None:
        """Fork a fresh session and wait until it is ready.

        Raises:
            RuntimeError: the session could not start (its reason, e.g. a uid the system refuses).
        """
        request_r, request_w = os.pipe()
        result_r, result_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the session
            try:
                targets = {
                    0: os.open(os.devnull, os.O_RDONLY),
                    1: out_w,
                    2: err_w,
                    REQUEST_FD: request_r,
                    RESULT_FD: result_w,
                }
                # Copies above every target first, so no dup2 below overwrites a source still needed.
                high = {fd: fcntl.fcntl(source, fcntl.F_DUPFD, 16) for fd, source in targets.items()}
                for fd, source in high.items():
                    os.dup2(source, fd)
                os.closerange(RESULT_FD + 1, os.sysconf("SC_OPEN_MAX"))
                session = Session(self.config)
                session.setup()
            except BaseException as exc:  # tell the supervisor why, then go
                try:
                    write_frame(RESULT_FD, {"type": "fatal", "message": f"the session could not start: {exc!r}"})
                finally:
                    os._exit(1)
            try:
                session.serve()
            finally:
                os._exit(0)
        for fd in (request_r, result_w, out_w, err_w):
            os.close(fd)
        self.pid = pid
        self.fds = {"request": request_w, "result": result_r, "stdout": out_r, "stderr": err_r}
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)  # drained as far as they go, never waited on
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # old kernel: poll with a timeout instead
            self.pidfd = -1
        self.poller = select.poll()
        for fd in (result_r, out_r, err_r, self.pidfd):
            if fd >= 0:
                self.poller.register(fd, select.POLLIN)
        try:
            ready = read_frame(result_r, self.result_limit)
        except (ProtocolError, ValueError) as exc:
            ready = {"type": "fatal", "message": f"the session sent a malformed greeting: {exc}"}
        if ready is None or ready.get("type") != "ready":
            self.end()
            raise RuntimeError((ready or {}).get("message", "the session exited before it was ready"))

    def end(self) -> int | None:
        """Kill the session and everything it started; return its wait status if it had exited."""
        if not self.pid:
            return None
        if os.getpid() == 1:
            # In the sandbox's pid namespace the supervisor is init: this reaches every other process.
            _kill(-1)
        else:
            _kill(-self.pid)
        status = None
        while True:  # reap the session and, as init, every orphan it left
            try:
                pid, code = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid == self.pid:
                status = code
                if os.getpid() != 1:
                    break
        for fd in [*self.fds.values(), self.pidfd]:
            if fd >= 0:
                os.close(fd)
        self.pid, self.pidfd, self.fds = 0, -1, {}
        return status

    # -- requests

    def run(self, code: str) -> dict[str, Any]:
        started = time.perf_counter()
        captures = {"stdout": _Capture(self.limit), "stderr": _Capture(self.limit)}
        streams = {self.fds["stdout"]: captures["stdout"], self.fds["stderr"]: captures["stderr"]}
        result: dict[str, Any] | None = None
        problem: str | None = None
        try:
            write_frame(self.fds["request"], {"code": code})
        except OSError:
            problem = "it stopped reading requests"
        buffer = bytearray()
        while result is None and problem is None:
            events = self.poller.poll(None if self.pidfd >= 0 else 50)
            if not events and os.waitpid(self.pid, os.WNOHANG)[0]:
                problem = "exited"
            for fd, _ in events:
                if fd in streams:
                    if _drain(fd, streams[fd]):  # every writer closed it
                        self.poller.unregister(fd)
                elif fd == self.fds["result"]:
                    chunk = os.read(fd, 65536)
                    if not chunk:  # usually because it died: then say how
                        problem = "exited" if self._exited(grace_s=0.2) else "closed its result pipe"
                        break
                    buffer += chunk
                    try:
                        result = self._parse(buffer)
                    except (ProtocolError, ValueError) as exc:
                        problem = f"broke the protocol ({exc})"
                    if result is not None:
                        break
                elif fd == self.pidfd:
                    problem = "exited"
        for fd, capture in streams.items():  # what was written before the answer is in the pipe now
            _drain(fd, capture)
        crashed = None
        if result is None:
            status = self.end()
            crashed = (
                self._crash_reason(status) if problem == "exited" else f"the Python process {problem} and was stopped"
            )
            # faulthandler's stack of a crash ends in this file's frames: the model needs its own only.
            stderr = captures["stderr"]
            kept = b"".join(line for line in stderr.data.splitlines(keepends=True) if __file__.encode() not in line)
            stderr.total -= len(stderr.data) - len(kept)
            stderr.data = bytearray(kept)
            try:
                self.spawn()
            except RuntimeError as exc:
                return {"type": "fatal", "message": f"{crashed}; a new session could not start: {exc}"}
            result = {"value": None, "error": None}
        return {
            "type": "result",
            "stdout": captures["stdout"].text(),
            "stderr": captures["stderr"].text(),
            "stdout_bytes": captures["stdout"].total,
            "stderr_bytes": captures["stderr"].total,
            "value": result.get("value"),
            "error": result.get("error"),
            "crashed": crashed,
            "duration_s": time.perf_counter() - started,
        }

    def _parse(self, buffer: bytearray) -> dict[str, Any] | None:
        """The session's answer once all of it has arrived; None before that."""
        if len(buffer) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(buffer)
        if size > self.result_limit:
            raise ProtocolError(f"an answer of {size} bytes")
        if len(buffer) < HEADER.size + size:
            return None
        if len(buffer) > HEADER.size + size:
            raise ProtocolError("unexpected data after the answer")
        message = _loads(bytes(buffer[HEADER.size :]))
        if not isinstance(message, dict) or message.get("type") != "result":
            raise ProtocolError("the answer is not a result")
        return message

    def _exited(self, grace_s: float) -> bool:
        """Whether the session has exited, waiting up to ``grace_s`` for it."""
        if self.pidfd >= 0:
            return bool(select.select([self.pidfd], [], [], grace_s)[0])
        time.sleep(grace_s)
        return os.waitpid(self.pid, os.WNOHANG)[0] != 0

    @staticmethod
    def _crash_reason(status: int | None) -> str:
        if status is not None and os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = f"signal {number}"
            return f"the Python process was killed by {_CRASH_HINTS.get(number, name)}"
        if status is not None and os.WIFEXITED(status):
            return f"the Python process exited with status {os.WEXITSTATUS(status)}"
        return "the Python process exited"

    def serve(self) -> None:
        try:
            self.spawn()
        except RuntimeError as exc:
            write_frame(1, {"type": "fatal", "message": str(exc)})
            return
        write_frame(1, {"type": "ready", "python": sys.version.split()[0]})
        while True:
            request = read_frame(0, limit=1 << 30)
            if request is None:  # the host is gone
                self.end()
                return
            op = request.get("op")
            if op == "run":
                reply = self.run(str(request.get("code", "")))
            elif op == "reset":
                self.end()
                try:
                    self.spawn()
                    reply = {"type": "ready", "python": sys.version.split()[0]}
                except RuntimeError as exc:
                    reply = {"type": "fatal", "message": str(exc)}
            else:
                reply = {"type": "fatal", "message": f"unknown request {op!r}"}
            write_frame(1, reply)
            if reply["type"] == "fatal":
                self.end()
                return


def _kill(target: int) -> None:
    try:
        os.kill(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _drain(fd: int, capture: _Capture) -> bool:
    """Read what is in a non-blocking pipe now, without waiting for more; True at end of file."""
    try:
        while chunk := os.read(fd, 65536):
            capture.feed(chunk)
    except BlockingIOError:
        return False
    return True


def main(argv: list[str]) -> None:
    """Start the supervisor with the JSON config in ``argv[1]``."""
    config = json.loads(argv[1])
    sys.stdout = io.TextIOWrapper(io.BytesIO())  # fd 1 is the protocol: nothing may print to it
    import site

    for directory in config.get("site_dirs", []):
        site.addsitedir(directory)
    # Hide paths that do not exist here (an editable install's .pth may name the host's project).
    sys.path[:] = [entry for entry in sys.path if os.path.exists(entry)]
    _prctl(PR_SET_DUMPABLE, 0)  # no session may ptrace the supervisor or read its memory
    Supervisor(config).serve()


if __name__ == "__main__":
    main(sys.argv)
