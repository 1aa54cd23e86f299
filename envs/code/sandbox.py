"""A sandboxed Python worker: bubblewrap around a supervisor that forks a fresh session per episode.

:class:`Sandbox` is the host's handle on one worker (see :mod:`agentfly_envs.code.worker` for what
runs inside). The bubblewrap jail it builds:

* **namespaces**: new pid, network, IPC and UTS namespaces (a user namespace too when the host is not
  root). The network namespace has only a loopback that is down: no connection can be made, not even
  to the host's ``localhost`` services. The pid namespace hides the host's processes; the supervisor
  is its init (``--as-pid-1``), so code in a session cannot signal it.
* **files**: a fresh root holding ``/usr`` (and the ``/bin``, ``/lib`` links), a few files of
  ``/etc`` (the loader cache, the time zone, a made-up ``passwd``), the interpreter's install prefix
  and the host environment's site-packages, all read-only; a new ``/proc`` and ``/dev``; a private,
  size-limited, writable ``/tmp`` (also the home and working directory). The project, the user's
  home and the rest of ``/etc`` (``shadow`` included) are not there at all. The root is remounted
  read-only last.
* **user**: when the host runs as root, each session switches to a uid of its own (from
  ``uid_base``, reserved host-wide so that two processes' sandboxes never share one), so the process
  limit counts only that sandbox's processes and no session can touch another's. bubblewrap keeps just
  ``CAP_SETUID``, ``CAP_SETGID`` and ``CAP_KILL`` for the supervisor; the session drops them with root,
  under ``no_new_privs`` and ``nosuid`` mounts.
* **limits** (``setrlimit`` in each session): address space, CPU seconds, processes, file size, open
  files, no core dumps; a wall-clock timeout per call, after which the host kills the whole sandbox.
* **lifetime**: ``--die-with-parent``: the sandbox dies with the thread that started it (a
  long-lived spawner thread), so nothing outlives the host process.

bubblewrap options measured on the development machine (root in a container, Debian bubblewrap 0.8,
kernel 6.x): ``--unshare-pid/net/ipc/uts``, ``--unshare-cgroup-try``, ``--die-with-parent``,
``--new-session``, ``--as-pid-1``, ``--cap-drop ALL`` with ``--cap-add``, ``--ro-bind``, ``--ro-bind-data``,
``--tmpfs`` with ``--size`` and ``--perms``, ``--proc``, ``--dev``, ``--remount-ro /`` all work.
``--unshare-all`` is avoided on purpose: as root it adds a user namespace that maps only uid 0, so a
session could not switch to its own uid. A non-root host cannot bind the interpreter from an
unreadable home (``/root/.pyenv`` under a ``0700`` ``/root``), and ``--ro-bind-fd`` cannot help after a
change of user (``/proc/self/fd`` becomes unreadable), which is why root keeps bubblewrap privileged
and drops to the sandbox uid inside.

Example:
    >>> config = SandboxConfig(timeout_s=5, memory_mb=512)
    >>> config.rlimits()["RLIMIT_AS"] == 512 * 2**20
    True
    >>> import asyncio
    >>> async def demo() -> str:
    ...     sandbox = await Sandbox.start(config)
    ...     try:
    ...         await sandbox.run("x = 6 * 7")
    ...         return (await sandbox.run("print(x)")).stdout
    ...     finally:
    ...         await sandbox.close()
    >>> asyncio.run(demo())
    '42\\n'
"""

from __future__ import annotations

import asyncio
import atexit
import fcntl
import functools
import json
import logging
import os
import pwd
import shutil
import site
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import Any, Literal

import msgspec

from agentfly_env.resources.pool import ResourceBrokenError
from agentfly_envs.code.worker import HEADER, encode_frame

__all__ = [
    "ExecResult",
    "Sandbox",
    "SandboxConfig",
    "SandboxDied",
    "SandboxError",
    "SandboxTimeout",
    "SandboxUnavailable",
    "bwrap_command",
    "child_pids",
]

logger = logging.getLogger(__name__)

WORKER_SOURCE = Path(__file__).with_name("worker.py")
#: Where the worker and the host's site-packages appear inside the sandbox.
SANDBOX_HOME = "/opt/agentfly"
INSTALL = "Install it: `apt-get install bubblewrap` (Debian, Ubuntu) or `dnf install bubblewrap` (Fedora)."
INSTALL_HINT = (
    f"{INSTALL} Or set the sandbox option if_missing='subprocess' to run code in an rlimited subprocess "
    "WITHOUT isolation."
)


class SandboxError(RuntimeError):
    """Base class of the sandbox's errors."""


class SandboxUnavailable(SandboxError):
    """A sandbox cannot be started: bubblewrap is missing (and the config refuses to go without it),
    or the sandbox failed to come up (the message carries bubblewrap's or the worker's reason)."""


class SandboxDied(SandboxError, ResourceBrokenError):
    """The sandbox went away or broke the protocol mid-call; it has been killed and must be replaced."""


class SandboxTimeout(SandboxError, TimeoutError):
    """A call ran past its wall-clock timeout; the sandbox has been killed and must be replaced."""


class SandboxConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How a sandbox is built and limited. Plain data: it compares, hashes and converts from a dict.

    Example:
        >>> msgspec.convert({"timeout_s": 2, "memory_mb": 256}, SandboxConfig).timeout_s
        2.0
    """

    bwrap: str = "bwrap"
    """The bubblewrap executable: a name looked up on ``PATH``, or a path."""
    if_missing: Literal["refuse", "subprocess"] = "refuse"
    """Without bubblewrap: ``"refuse"`` to start (an error that says how to install it), or
    ``"subprocess"``: run the worker as a plain rlimited subprocess, with a loud warning. That
    subprocess sees the host's files and network; use it only for trusted code."""
    timeout_s: float | None = 10.0
    """Wall-clock limit of one call; past it the sandbox is killed (None: no limit)."""
    cpu_time_s: int | None = 60
    """CPU seconds each process of a session may use in all (RLIMIT_CPU; SIGXCPU at the limit)."""
    memory_mb: int | None = 1024
    """Address space of each process (RLIMIT_AS): an allocation past it raises ``MemoryError``."""
    max_processes: int | None = 64
    """Processes and threads a session may run at once (RLIMIT_NPROC). Counted per user: enforced
    when the session has a uid of its own (a root host) or a user namespace on Linux >= 5.14."""
    max_file_mb: int | None = 64
    """Largest file a session may write (RLIMIT_FSIZE)."""
    max_open_files: int = 256
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    tmp_mb: int | None = 256
    """Size of the private ``/tmp`` (a tmpfs in memory); None leaves bubblewrap's default, for
    bubblewrap older than 0.7 that lacks ``--size``."""
    max_output_bytes: int = 65536
    """Stdout and stderr are each cut to this many bytes per call (the rest is counted, not kept);
    the value of the last expression and a traceback to this many characters."""
    site_packages: bool = True
    """Make the host environment's installed packages importable (read-only)."""
    uid_base: int | None = 64000
    """First of the uids given to sessions when the host runs as root (None: stay root inside, which
    leaves the process limit unenforced)."""
    uid_count: int = 1000
    """How many uids from ``uid_base`` on may be used, one per live sandbox."""
    startup_timeout_s: float = 60.0
    """How long a sandbox may take to start or to reset."""

    def __post_init__(self) -> None:
        positive = {
            "timeout_s": self.timeout_s,
            "cpu_time_s": self.cpu_time_s,
            "memory_mb": self.memory_mb,
            "max_processes": self.max_processes,
            "max_file_mb": self.max_file_mb,
            "tmp_mb": self.tmp_mb,
            "max_output_bytes": self.max_output_bytes,
            "max_open_files": self.max_open_files,
            "uid_count": self.uid_count,
            "startup_timeout_s": self.startup_timeout_s,
        }
        for name, value in positive.items():
            if value is not None and value <= 0:
                raise ValueError(f"sandbox option {name} must be positive, got {value}")

    @classmethod
    def of(cls, value: SandboxConfig | dict[str, Any] | None) -> SandboxConfig:
        """A config from itself, a dict of options (as ``gym.make`` passes it) or None (the defaults).

        Raises:
            ValueError: an unknown option or a value of the wrong type.
        """
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        try:
            return msgspec.convert(value, cls)
        except msgspec.ValidationError as error:
            raise ValueError(f"invalid sandbox options: {error}") from None

    def rlimits(self) -> dict[str, int | None]:
        """The resource limits of a session, by ``resource`` constant name."""
        mib = 1 << 20
        return {
            "RLIMIT_AS": self.memory_mb * mib if self.memory_mb else None,
            "RLIMIT_CPU": self.cpu_time_s,
            "RLIMIT_FSIZE": self.max_file_mb * mib if self.max_file_mb else None,
            "RLIMIT_NOFILE": self.max_open_files,
            "RLIMIT_CORE": 0,
        }

    def find_bwrap(self) -> str | None:
        """The bubblewrap path, or None when it is missing and the config allows a plain subprocess.

        Raises:
            SandboxUnavailable: bubblewrap is missing and the config refuses to go without it.
        """
        found = shutil.which(self.bwrap)
        if found is not None:
            return found
        if self.if_missing == "subprocess":
            return None
        raise SandboxUnavailable(
            f"bubblewrap (`{self.bwrap}`) was not found, so model code cannot be sandboxed. {INSTALL_HINT}"
        )


# ----------------------------------------------------------------------------- replies


class ExecResult(msgspec.Struct, tag="result", tag_field="type", kw_only=True):
    """What one call printed and returned.

    Example:
        >>> result = ExecResult(stdout="3 items\\n", value="[1, 2, 3]")
        >>> result.ok, result.to_text()
        (True, '3 items\\n[1, 2, 3]')

    Attributes:
        stdout: What the code printed (cut at ``max_output_bytes``, with a marker saying how much).
        stderr: What it wrote to stderr: warnings, a subprocess's errors, a crash's Python stack.
        stdout_bytes: How many bytes the code wrote to stdout in all.
        stderr_bytes: How many bytes it wrote to stderr in all.
        value: ``repr`` of the last expression's value, as a REPL shows it (None if there was none).
        error: The traceback of an exception, trimmed to the model's code.
        crashed: Why the session died (a signal, ``os._exit``, a CPU limit); a new one replaced it.
        duration_s: Wall time of the call inside the sandbox.
    """

    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    value: str | None = None
    error: str | None = None
    crashed: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """The code ran to the end without an exception or a crash."""
        return self.error is None and self.crashed is None

    def to_text(self) -> str:
        """The result as the model reads it: output, traceback, value, and what a crash cost.

        Example:
            >>> ExecResult(stdout="hi\\n", value="3").to_text()
            'hi\\n3'
        """
        parts = [text.rstrip("\n") for text in (self.stdout, self.stderr, self.error) if text]
        if self.value is not None:
            parts.append(self.value)
        if self.crashed:
            parts.append(
                f"[{self.crashed}. A fresh session replaced it: variables, imports and files from earlier calls are gone.]"
            )
        return "\n".join(parts) or "(no output)"


class _Ready(msgspec.Struct, tag="ready", tag_field="type"):
    python: str = ""


class _Fatal(msgspec.Struct, tag="fatal", tag_field="type"):
    message: str = "unknown"


_DECODER = msgspec.json.Decoder(ExecResult | _Ready | _Fatal)


# ----------------------------------------------------------------------------- the jail


@dataclass(frozen=True)
class _Interpreter:
    """The host's Python as the sandbox sees it."""

    executable: str  # the real binary, not a venv's symlink
    prefix: str  # its install prefix, bound read-only at the same path (its RUNPATH may be absolute)
    site_dirs: tuple[str, ...]  # site-packages outside the prefix (a venv's), bound elsewhere


@functools.cache
def host_interpreter() -> _Interpreter:
    """The running interpreter's real binary, install prefix and extra site-packages."""
    executable = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if not executable.startswith(prefix + os.sep):
        prefix = os.path.dirname(os.path.dirname(executable))  # bin/python -> its prefix
    candidates = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    site_dirs: list[str] = []
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if os.path.isdir(real) and not real.startswith(prefix + os.sep) and real not in site_dirs:
            site_dirs.append(real)
    return _Interpreter(executable, prefix, tuple(site_dirs))


_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/mime.types",
    "/etc/alternatives",  # symlinks that some of /usr/bin points through
    "/etc/fonts",  # for plotting libraries
)


def _environment(home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",  # the same set and dict orders in every session: seeded rollouts repeat
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
    }


def bwrap_command(
    config: SandboxConfig, bwrap: str, command: list[str], *, files: dict[str, int] | None = None
) -> list[str]:
    """The bubblewrap command line that runs ``command`` in the jail described in this module.

    Args:
        config: The private tmp's size and whether the host's site-packages are bound.
        bwrap: The bubblewrap executable.
        command: What to run inside, e.g. ``[python, "-c", "print(1)"]``.
        files: Files to create read-only inside, by path, each read from an open descriptor that
            the caller passes to the child (``--ro-bind-data``).
    """
    interpreter = host_interpreter()
    privileged = os.geteuid() == 0
    args = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not privileged:
        args.append("--unshare-user")
    args += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL"]
    if privileged:  # the supervisor switches sessions to their uid and kills what they leave
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL"]
    args += ["--ro-bind", "/usr", "/usr"]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind-try", path, path]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for path in ("/tmp", "/dev/shm"):
        args += ["--perms", "1777", *(["--size", str(config.tmp_mb << 20)] if config.tmp_mb else []), "--tmpfs", path]
    binds = [("--ro-bind-try", path, path) for path in _ETC_FILES]
    if interpreter.prefix != "/usr" and not interpreter.prefix.startswith("/usr/"):
        binds.append(("--ro-bind", interpreter.prefix, interpreter.prefix))
    if config.site_packages:
        binds += [("--ro-bind", path, f"{SANDBOX_HOME}/site/{i}") for i, path in enumerate(interpreter.site_dirs)]
    binds += [("--ro-bind-data", str(fd), path) for path, fd in (files or {}).items()]
    made = {"/usr", "/proc", "/dev", "/tmp"}
    for option, source, target in binds:
        # bubblewrap would make missing parents with the host's mode (/root is 0700), so that a
        # session's uid could not reach what lies below: make them world-readable first.
        for parent in _parents(target):
            if parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
        if option == "--ro-bind-data":
            args += ["--perms", "0644"]  # bubblewrap's default is 0600: a session's uid could not read it
        args += [option, source, target]
    args += ["--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
    for name, value in _environment("/tmp").items():
        args += ["--setenv", name, value]
    return [*args, "--", *command]


def _parents(path: str) -> Iterator[str]:
    parts = Path(path).parts[1:-1]
    for depth in range(1, len(parts) + 1):
        yield "/" + "/".join(parts[:depth])


def _data_fd(data: bytes) -> int:
    """A pipe's read end holding ``data``: how bubblewrap receives a file's content."""
    read, write = os.pipe()
    try:
        if len(data) > fcntl.fcntl(write, fcntl.F_GETPIPE_SZ):
            fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, len(data))
        os.write(write, data)
    finally:
        os.close(write)
    return read


def _nproc_counts_per_sandbox(has_own_uid: bool, user_namespace: bool) -> bool:
    """Whether RLIMIT_NPROC would count only the sandbox's processes (see ``max_processes``)."""
    if has_own_uid:
        return True
    if not user_namespace:
        return False
    release = os.uname().release.split(".")
    try:
        return (int(release[0]), int(release[1])) >= (5, 14)  # per-user-namespace counting
    except (ValueError, IndexError):
        return False


class _UidPool:
    """Hands out uids from a range, one per live sandbox on this host.

    A uid is reserved across processes by an exclusive ``flock`` on a file named after it in
    :data:`UID_LOCK_DIR`, which the kernel drops when its holder exits, however it exits; a uid that a
    process still runs as (an orphan of a killed host process, still dying) is skipped too. Two processes'
    sandboxes sharing a uid would share its process limit.
    """

    def __init__(self) -> None:
        self._held: dict[int, int] = {}  # uid -> the descriptor that holds its lock
        self._lock = threading.Lock()

    def take(self, base: int, count: int) -> int:
        with self._lock:
            directory = _uid_lock_dir()
            running = set(processes_running_as().values())
            start = os.getpid() % count  # processes sharing a range start in different places
            for step in range(count):
                uid = base + (start + step) % count
                if uid in self._held or uid in running or _is_account(uid):
                    continue
                fd = os.open(directory / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # another process's sandbox has it
                    os.close(fd)
                    continue
                self._held[uid] = fd
                return uid
        raise SandboxUnavailable(f"all {count} sandbox uids from {base} are in use; raise uid_count")

    def give(self, uid: int) -> None:
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)


#: Where processes on this host reserve sandbox uids (one lock file per uid; only a root host uses it).
UID_LOCK_DIR = Path(tempfile.gettempdir()) / "agentfly-sandbox-uids"


def _uid_lock_dir() -> Path:
    """:data:`UID_LOCK_DIR`, made private to this user if it is missing; refused if anyone else could write it."""
    try:
        UID_LOCK_DIR.mkdir(mode=0o700)
    except FileExistsError:
        pass
    status = UID_LOCK_DIR.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o022:
        raise SandboxUnavailable(
            f"{UID_LOCK_DIR} must be a directory that only uid {os.geteuid()} can write; remove it and retry"
        )
    return UID_LOCK_DIR


def processes_running_as(uids: Collection[int] | None = None) -> dict[int, int]:
    """The host's processes (pid -> uid) that run as any of ``uids`` (None: as any uid)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
            except FileNotFoundError:  # gone while we looked
                continue
            if uids is None or uid in uids:
                found[int(entry.name)] = uid
    return found


def _is_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def child_pids(pid: int) -> list[int]:
    """The host pids of a process's children."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:  # a kernel without that file: read every process's parent
        children = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                        children.append(int(entry.name))
                except (OSError, ValueError, IndexError):
                    continue
        return children


_UIDS = _UidPool()
_live: weakref.WeakSet[Sandbox] = weakref.WeakSet()


@atexit.register
def _kill_live_sandboxes() -> None:
    """At exit, kill and reap the sandboxes nobody closed (a process-wide pool's idle ones)."""
    for sandbox in list(_live):
        sandbox.kill()
        if sandbox.process is not None:
            try:
                sandbox.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


_spawner: tuple[int, ThreadPoolExecutor] | None = None


def _spawn_thread() -> ThreadPoolExecutor:
    """One long-lived thread starts every sandbox: ``--die-with-parent`` ties a sandbox to the thread
    that forked it, so a short-lived thread (asyncio's helpers, a notebook's) would take it along."""
    global _spawner
    if _spawner is None or _spawner[0] != os.getpid():  # a forked child has the executor, not its thread
        _spawner = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentfly-sandbox-spawner"))
    return _spawner[1]


# ----------------------------------------------------------------------------- the host's handle


class Sandbox:
    """One sandboxed worker. Start it with :meth:`start`; one call at a time runs in it.

    Example:
        >>> async def crash_and_go_on() -> tuple[str, str]:
        ...     sandbox = await Sandbox.start(SandboxConfig(timeout_s=5))
        ...     try:
        ...         died = await sandbox.run("import os; os._exit(7)")
        ...         return died.crashed, (await sandbox.run("2 + 2")).value
        ...     finally:
        ...         await sandbox.close()
        >>> asyncio.run(crash_and_go_on())
        ('the Python process exited with status 7', '4')

    Args:
        config: The jail and its limits.

    Attributes:
        uid: The uid its sessions run as (None: the caller's).
        isolated: False when it is a plain subprocess because bubblewrap is missing.
        python: The Python version inside.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.uid: int | None = None
        self.isolated = True
        self.python = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._to_worker = self._from_worker = self._stderr = self._supervisor_fd = -1
        self._tmp: str | None = None
        self._lock = asyncio.Lock()
        self._dead = False
        self._closed = False
        # A JSON escape may turn a byte of output into six: the longest sane reply, with room to spare.
        self._reply_limit = 64 * self.config.max_output_bytes + (1 << 20)

    def __repr__(self) -> str:
        pid = self.process.pid if self.process else None
        return f"Sandbox(pid={pid}, uid={self.uid}, isolated={self.isolated}, alive={self.alive})"

    @classmethod
    async def start(cls, config: SandboxConfig | None = None) -> Sandbox:
        """Start a sandbox and wait until its first session is ready.

        Raises:
            SandboxUnavailable: bubblewrap is missing (and the config refuses), or it did not start.
        """
        sandbox = cls(config)
        try:
            await sandbox._spawn()
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    @property
    def alive(self) -> bool:
        """Started, not killed, and its process still running."""
        return self.process is not None and not self._dead and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        """The host pid of the sandbox (bubblewrap, or the supervisor when not isolated)."""
        return self.process.pid if self.process else None

    async def run(self, code: str, *, timeout_s: float | None | EllipsisType = ...) -> ExecResult:
        """Run ``code`` in the current session.

        Args:
            code: Python source; a final expression's value comes back in ``value``.
            timeout_s: Wall-clock limit (``...``: the config's; None: none). Cancelling the call
                has the same effect as a timeout: the sandbox is killed.

        Raises:
            SandboxTimeout: the code ran too long; the sandbox is dead now.
            SandboxDied: the sandbox went away; it is dead now.
        """
        timeout = self.config.timeout_s if timeout_s is ... else timeout_s
        reply = await self._request({"op": "run", "code": code}, timeout, "the code ran longer than")
        if not isinstance(reply, ExecResult):
            self.kill()
            raise SandboxDied(f"the sandbox answered a run with {type(reply).__name__}")
        return reply

    async def reset(self) -> None:
        """Replace the session by a fresh one: no variables, no processes, an empty tmp.

        Raises:
            SandboxDied: the sandbox could not make a new session; it is dead now.
        """
        reply = await self._request({"op": "reset"}, self.config.startup_timeout_s, "a reset took longer than")
        if not isinstance(reply, _Ready):
            self.kill()
            raise SandboxDied(f"the sandbox answered a reset with {type(reply).__name__}")

    def kill(self) -> None:
        """Kill the sandbox now (idempotent); :meth:`close` still has to reap it."""
        self._dead = True
        process = self.process
        if process is not None and process.poll() is None:
            try:
                process.kill()
            except ProcessLookupError:
                pass

    async def close(self) -> None:
        """Kill the sandbox, wait for it to exit and free its descriptors, tmp and uid (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.kill()
        process = self.process
        if process is not None:
            deadline = time.monotonic() + 10
            while process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
        if self._supervisor_fd >= 0:  # bubblewrap is gone; wait until its namespace is empty too
            try:
                async with asyncio.timeout(10):
                    await self._ready(self._supervisor_fd)
            except TimeoutError:
                logger.warning("sandbox %s: its processes did not exit within 10 s", self.pid)
        for fd in (self._to_worker, self._from_worker, self._stderr, self._supervisor_fd):
            if fd >= 0:
                os.close(fd)
        self._to_worker = self._from_worker = self._stderr = self._supervisor_fd = -1
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        if self.uid is not None:
            _UIDS.give(self.uid)
        _live.discard(self)

    # -- starting

    async def _spawn(self) -> None:
        config = self.config
        bwrap = config.find_bwrap()
        self.isolated = bwrap is not None
        if os.geteuid() == 0 and config.uid_base is not None:
            self.uid = _UIDS.take(config.uid_base, config.uid_count)
        user_namespace = self.isolated and os.geteuid() != 0
        limits = config.rlimits()
        if config.max_processes and _nproc_counts_per_sandbox(self.uid is not None, user_namespace):
            limits["RLIMIT_NPROC"] = config.max_processes
        worker_config = {
            "uid": self.uid,
            "gid": self.uid,
            "limits": limits,
            "max_output_bytes": config.max_output_bytes,
            "tmp": "/tmp",
            "site_dirs": [],
        }
        files: dict[str, int] = {}
        try:
            if bwrap is not None:
                files = self._jail_files()
                argv, env, cwd = self._jail_command(bwrap, worker_config, files), None, None
            else:
                self._tmp = tempfile.mkdtemp(prefix="agentfly-sandbox-")
                if self.uid is not None:
                    os.chown(self._tmp, self.uid, self.uid)
                worker_config["tmp"] = self._tmp
                argv = [sys.executable, "-s", "-P", str(WORKER_SOURCE), json.dumps(worker_config)]
                env, cwd = _environment(self._tmp), self._tmp
                message = (
                    f"bubblewrap (`{config.bwrap}`) was not found: model code runs in a plain rlimited subprocess "
                    f"that can read the host's files and use its network. {INSTALL}"
                )
                logger.warning(message)
                warnings.warn(message, RuntimeWarning, stacklevel=3)
            await self._launch(argv, env, cwd, list(files.values()))
        finally:
            for fd in files.values():
                os.close(fd)
        try:
            async with asyncio.timeout(config.startup_timeout_s):
                reply = await self._receive()
        except TimeoutError:
            self.kill()
            raise SandboxUnavailable(f"the sandbox did not start within {config.startup_timeout_s:g} s") from None
        except SandboxDied as error:
            raise SandboxUnavailable(f"the sandbox did not start: {error}") from None
        if not isinstance(reply, _Ready):
            self.kill()
            reason = reply.message if isinstance(reply, _Fatal) else type(reply).__name__
            raise SandboxUnavailable(f"the sandbox did not start: {reason}")
        self.python = reply.python
        if self.isolated:
            self._watch_supervisor()

    def _watch_supervisor(self) -> None:
        """Hold a pidfd of the supervisor (bubblewrap's child): it becomes readable only once the
        supervisor, the init of the sandbox's pid namespace, has exited, and the kernel lets an init
        exit only after every other process of its namespace is gone."""
        assert self.process is not None
        children = child_pids(self.process.pid)
        if len(children) == 1:
            try:
                self._supervisor_fd = os.pidfd_open(children[0])
            except (AttributeError, OSError):  # an old kernel: close() waits for bubblewrap only
                pass

    def _jail_files(self) -> dict[str, int]:
        """The files made inside the jail: the worker program, and accounts that name the session's user."""
        uid = self.uid if self.uid is not None else os.geteuid()
        gid = self.uid if self.uid is not None else os.getegid()
        return {
            f"{SANDBOX_HOME}/worker.py": _data_fd(WORKER_SOURCE.read_bytes()),
            "/etc/passwd": _data_fd(
                f"root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{gid}:sandbox:/tmp:/bin/sh\n".encode()
            ),
            "/etc/group": _data_fd(f"root:x:0:\nsandbox:x:{gid}:\n".encode()),
        }

    def _jail_command(self, bwrap: str, worker_config: dict[str, Any], files: dict[str, int]) -> list[str]:
        interpreter = host_interpreter()
        if self.config.site_packages:
            worker_config["site_dirs"] = [f"{SANDBOX_HOME}/site/{i}" for i in range(len(interpreter.site_dirs))]
        worker = [interpreter.executable, "-s", "-P", f"{SANDBOX_HOME}/worker.py", json.dumps(worker_config)]
        return bwrap_command(self.config, bwrap, worker, files=files)

    async def _launch(self, argv: list[str], env: dict[str, str] | None, cwd: str | None, pass_fds: list[int]) -> None:
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        popen = functools.partial(
            subprocess.Popen,
            argv,
            stdin=to_worker_r,
            stdout=from_worker_w,
            stderr=stderr_w,
            pass_fds=pass_fds,
            env=env,
            cwd=cwd,
            start_new_session=True,  # out of the host's process group: a Ctrl-C is the host's alone
        )
        try:
            self.process = await asyncio.get_running_loop().run_in_executor(_spawn_thread(), popen)
            _live.add(self)
        finally:
            for fd in (to_worker_r, from_worker_w, stderr_w):
                os.close(fd)
        self._to_worker, self._from_worker, self._stderr = to_worker_w, from_worker_r, stderr_r
        for fd in (to_worker_w, from_worker_r, stderr_r):
            os.set_blocking(fd, False)

    # -- talking

    async def _request(self, request: dict[str, Any], timeout: float | None, late: str) -> Any:
        """Send one request and read its reply; any failure on the way kills the sandbox."""
        async with self._lock:
            if not self.alive:
                raise SandboxDied("the sandbox is not running (it was killed or has exited)")
            try:
                async with asyncio.timeout(timeout):
                    await self._send(encode_frame(request))
                    reply = await self._receive()
            except TimeoutError:
                self.kill()
                raise SandboxTimeout(f"{late} {timeout:g} s; the sandbox was killed") from None
            except BaseException:  # cancelled, or the sandbox died: the pipes are in an unknown state
                self.kill()
                raise
        if isinstance(reply, _Fatal):
            self.kill()
            raise SandboxDied(f"the sandbox gave up: {reply.message}")
        return reply

    async def _send(self, frame: bytes) -> None:
        view = memoryview(frame)
        while view:
            try:
                view = view[os.write(self._to_worker, view) :]
            except BlockingIOError:
                await self._ready(self._to_worker, write=True)
            except (BrokenPipeError, OSError) as error:
                raise SandboxDied(f"the sandbox stopped reading ({error}){self._stderr_tail()}") from None

    async def _receive(self) -> Any:
        (size,) = HEADER.unpack(await self._read(HEADER.size))
        if size > self._reply_limit:
            self.kill()
            raise SandboxDied(f"the sandbox sent a reply of {size} bytes (limit {self._reply_limit})")
        payload = await self._read(size)
        try:
            return _DECODER.decode(payload)
        except msgspec.DecodeError as error:
            self.kill()
            raise SandboxDied(f"the sandbox sent a malformed reply: {error}") from None

    async def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            try:
                chunk = os.read(self._from_worker, size - len(data))
            except BlockingIOError:
                await self._ready(self._from_worker)
                continue
            if not chunk:
                self.kill()
                raise SandboxDied(f"the sandbox exited{self._stderr_tail()}")
            data += chunk
        return bytes(data)

    @staticmethod
    async def _ready(fd: int, *, write: bool = False) -> None:
        """Wait until ``fd`` can be read (or written) on whatever loop is running now."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        (loop.add_writer if write else loop.add_reader)(fd, wake)
        try:
            await future
        finally:
            (loop.remove_writer if write else loop.remove_reader)(fd)

    def _stderr_tail(self) -> str:
        """The last of what bubblewrap or the supervisor wrote to stderr, to explain a failure."""
        if self._stderr < 0:
            return ""
        chunks = bytearray()
        try:
            while len(chunks) < 1 << 20 and (chunk := os.read(self._stderr, 65536)):
                chunks += chunk
        except (BlockingIOError, OSError):
            pass
        text = chunks.decode("utf-8", "replace").strip()[-2000:]
        return f": {text}" if text else ""
