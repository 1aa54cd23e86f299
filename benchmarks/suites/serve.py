"""``agentfly-bench --suite serve``: session density of ``agentfly-serve`` against OpenEnv's own server.

OpenEnv's density method (its scaling tutorial): an env whose step sleeps (1 s here), and batches of
concurrent sessions, each one connect, reset, one step and close over ``/ws``; the batch doubles until
fewer than 95% of its sessions succeed or the p99 of a session's total time passes 5 s. The largest
batch that passed is the server's ceiling. Both servers run at once, each in its own process on
loopback, and each batch size is played on one, then the other, by the same client (this process,
the ``websockets`` library, no compression):

- **ours**: ``agentfly-serve`` (``python -m agentfly_env.serve.cli``) serving :class:`SleepEnv`;
- **OpenEnv**: the ``openenv`` package's ``create_app`` under uvicorn, in openenv's own venv
  (``_openenv_peer.py``; ``make peers``), serving the same sleeping echo env written in OpenEnv's
  idiom, with an async step (its best case: no thread held while it sleeps).

Per batch: success rate; p50/p99 of the session setup (connect plus reset), of the step's added
latency (its time over the sleep) and of the whole session; sessions per second; the server's memory
per session (its peak RSS during the batch over its RSS when it started, per session) and its CPU time
per session. Per server: the ceiling and the ceiling per core. Each size is played twice per server
(once with ``--quick``) and the better run kept. A session gets ``session_timeout_s`` in all; the whole
run stops raising the batch when its time budget is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentfly_bench.suites._peers import REPO_ROOT, peer_python
from agentfly_env.core.env import AgentEnv
from agentfly_env.core.types import Step
from agentfly_env.registration import register

DESCRIPTION = "session density of agentfly-serve vs OpenEnv's own server (1-s sleeping env, OpenEnv's method)"

SLEEP_ID = "AgentFlyBench/Sleep-v0"
SERVED_ID = f"{__name__}:{SLEEP_ID}"  # the module prefix makes the serving process register it
PEER_SCRIPT = Path(__file__).with_name("_openenv_peer.py")
HOW_TO_GET_OPENENV = (
    "openenv's venv is missing: run `make peers` (creates .venv-peers/openenv with openenv==0.10.0, which "
    "pins other versions of what vLLM uses), or set AGENTFLY_OPENENV_PYTHON to a Python that has it"
)
SUCCESS_FLOOR, P99_CEILING_S = 0.95, 5.0


class SleepEnv(AgentEnv):
    """Echoes each action after sleeping ``wait`` seconds (reward 1.0; ``"bye"`` ends the episode)."""

    def __init__(self, wait: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wait = wait

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "Say something.", {}

    async def _step(self, action: str) -> tuple[Step, dict[str, Any]]:
        await asyncio.sleep(self.wait)
        return Step(observation=f"You said: {action}", reward=1.0, terminated=action == "bye"), {}


register(SLEEP_ID, f"{__name__}:SleepEnv")


def openenv_python() -> Path | None:
    """The Python of openenv's venv: ``AGENTFLY_OPENENV_PYTHON``, else ``.venv-peers/openenv`` here or in the repo."""
    return peer_python("openenv", "AGENTFLY_OPENENV_PYTHON")


# ---------------------------------------------------------------------------------------- the servers


class Server:
    """A server in a child process: its URL, and its memory and CPU time read from /proc."""

    def __init__(self, name: str, process: subprocess.Popen[str], url: str) -> None:
        self.name, self.process, self.url = name, process, url
        self.base_rss = self.rss()

    def rss(self) -> int:
        """Resident memory in bytes."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@contextlib.contextmanager
def _child(name: str, command: list[str], port: int | None, timeout: float = 180.0) -> Iterator[Server]:
    """Start a server process; its port is ``port``, or the one it prints as ``PORT <n>``."""
    # stderr to a file, not a pipe: a server that logs much would block on a pipe nobody reads.
    log = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO_ROOT)
    try:
        if port is None:
            line = process.stdout.readline() if process.stdout else ""
            if not line.startswith("PORT "):
                raise RuntimeError(f"{name} did not start: {line}{_tail(log)}")
            port = int(line.split()[1])
        _wait_for_health(f"http://127.0.0.1:{port}/health", process, timeout, log)
        yield Server(name, process, f"ws://127.0.0.1:{port}/ws")
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _tail(log: Any) -> str:
    log.seek(0)
    return log.read()[-4000:]


def _wait_for_health(url: str, process: subprocess.Popen[str], timeout: float, log: Any) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited: {_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def ours(wait: float, max_sessions: int) -> contextlib.AbstractContextManager[Server]:
    port = _free_port()
    command = [sys.executable, "-m", "agentfly_env.serve.cli", SERVED_ID, "--port", str(port)]
    command += ["--env-kwargs", json.dumps({"wait": wait}), "--max-sessions", str(max_sessions)]
    return _child("ours", command, port)


def reference(python: Path, wait: float, max_sessions: int) -> contextlib.AbstractContextManager[Server]:
    command = [str(python), str(PEER_SCRIPT), "--wait", str(wait), "--max-sessions", str(max_sessions)]
    return _child("openenv", command, None)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ---------------------------------------------------------------------------------------- the client


async def _session(url: str, timeout: float) -> tuple[float, float, float]:
    """One session: connect, reset, one step, close. Returns (setup, step, total) seconds."""
    from websockets.asyncio.client import connect

    start = time.perf_counter()
    async with asyncio.timeout(timeout):
        async with connect(url, compression=None, open_timeout=None, ping_interval=None, proxy=None) as ws:
            await ws.send('{"type": "reset", "data": {}}')
            if json.loads(await ws.recv())["type"] != "observation":
                raise RuntimeError("the reset failed")
            ready = time.perf_counter()
            await ws.send('{"type": "step", "data": {"message": "hi"}}')
            if json.loads(await ws.recv())["type"] != "observation":
                raise RuntimeError("the step failed")
            stepped = time.perf_counter()
            await ws.send('{"type": "close"}')
    return ready - start, stepped - ready, stepped - start


async def _batch(server: Server, size: int, wait: float, timeout: float) -> dict[str, Any]:
    peak_rss = server.rss()
    done = asyncio.Event()

    async def sample_memory() -> None:
        nonlocal peak_rss
        while not done.is_set():
            peak_rss = max(peak_rss, server.rss())
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample_memory())
    cpu_before, started = server.cpu_s(), time.perf_counter()
    outcomes = await asyncio.gather(*(_session(server.url, timeout) for _ in range(size)), return_exceptions=True)
    wall = time.perf_counter() - started
    done.set()
    await sampler
    timings = [outcome for outcome in outcomes if isinstance(outcome, tuple)]
    errors = sorted({type(outcome).__name__ for outcome in outcomes if isinstance(outcome, BaseException)})
    setup, step, total = (sorted(column) for column in zip(*timings)) if timings else ([], [], [])
    return {
        "sessions": size,
        "success": len(timings) / size,
        "errors": errors,
        "setup_p50_s": _pct(setup, 50),
        "setup_p99_s": _pct(setup, 99),
        "step_added_p50_s": _pct(step, 50) - wait if step else None,
        "step_added_p99_s": _pct(step, 99) - wait if step else None,
        "total_p50_s": _pct(total, 50),
        "total_p99_s": _pct(total, 99),
        "sessions_per_s": len(timings) / wall,
        "memory_per_session_kib": (peak_rss - server.base_rss) / size / 1024,
        "cpu_ms_per_session": (server.cpu_s() - cpu_before) * 1000 / size,
        "wall_s": wall,
    }


def _pct(values: list[float], percent: int) -> float | None:
    """Nearest-rank percentile of sorted ``values``."""
    if not values:
        return None
    return values[max(0, (percent * len(values) + 99) // 100 - 1)]


def _passed(row: dict[str, Any]) -> bool:
    return row["success"] >= SUCCESS_FLOOR and (row["total_p99_s"] or 0.0) <= P99_CEILING_S


# ---------------------------------------------------------------------------------------- the suite


def run(
    quick: bool,
    *,
    wait: float = 1.0,
    sizes: list[int] | None = None,
    budget_s: float | None = None,
    reps: int | None = None,
    session_timeout_s: float = 60.0,
) -> dict[str, Any]:
    """Raise the batch on both servers, interleaved, until each fails the bar or the budget is spent.

    Each batch size is played ``reps`` times on each server and its best run kept (one that passes the
    bar, then the lowest total p99): on a machine shared with other jobs a run can stall for seconds
    for reasons of its neighbours', which only ever make a server look slower.
    """
    sizes = sizes or ([32, 128, 512] if quick else [32, 128, 512, 1024, 2048, 4096, 8192])
    budget_s = budget_s if budget_s is not None else (60.0 if quick else 300.0)
    reps = reps or (1 if quick else 2)
    _raise_open_files(2 * max(sizes) + 256)
    python = openenv_python()
    results: dict[str, Any] = {
        "config": {"wait_s": wait, "sizes": sizes, "budget_s": budget_s, "reps": reps, "cores": os.cpu_count()},
        "openenv_error": None if python else HOW_TO_GET_OPENENV,
        "rows": {"ours": [], "openenv": []},
    }
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(ours(wait, max(sizes)))]
        if python:
            servers.append(stack.enter_context(reference(python, wait, max(sizes))))
        results["config"]["base_rss_mib"] = {server.name: server.base_rss / 2**20 for server in servers}
        deadline = time.monotonic() + budget_s
        live = {server.name for server in servers}
        for size in sizes:
            for server in servers:
                if server.name not in live:
                    continue
                if time.monotonic() > deadline:
                    results["config"]["budget_spent_at"] = size
                    live.clear()
                    break
                runs = []
                for _ in range(reps):
                    runs.append(asyncio.run(_batch(server, size, wait, session_timeout_s)))
                    time.sleep(1.0)  # closed sockets drain before the next batch
                row = min(runs, key=lambda run: (not _passed(run), run["total_p99_s"] or float("inf")))
                row["reps_passed"] = sum(_passed(run) for run in runs)
                results["rows"][server.name].append(row)
                if not _passed(row):
                    live.discard(server.name)
    for name, rows in results["rows"].items():
        passed = [row["sessions"] for row in rows if _passed(row)]
        results[name] = {
            "ceiling": max(passed, default=0),
            "ceiling_per_core": max(passed, default=0) / (os.cpu_count() or 1),
            "limited_by": "budget or grid" if rows and _passed(rows[-1]) else "the 95% / 5 s bar",
        }
    return results


def _raise_open_files(wanted: int) -> None:
    """Each session holds a socket at both ends: lift the soft limit on open files (children inherit it)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def render(results: dict[str, Any], console: Console) -> None:
    config = results["config"]
    table = Table(
        title=f"Session density: connect + reset + one {config['wait_s']:g}-s step + close, concurrent sessions "
        f"({config['cores']} cores)"
    )
    columns = ["server", "sessions", "success", "setup p50/p99 s", "step added p50/p99 s", "total p99 s"]
    for column in [*columns, "sessions/s", "KiB/session", "CPU ms/session"]:
        table.add_column(column, justify="right" if column != "server" else "left")
    rows = [(row["sessions"], name, row) for name in ("ours", "openenv") for row in results["rows"][name]]
    for _, name, row in sorted(rows, key=lambda item: (item[0], item[1] != "ours")):
        table.add_row(
            name,
            f"{row['sessions']:,}",
            f"{row['success']:.1%}"
            + (f" ({', '.join(row['errors'])})" if row["errors"] else "")
            + (f", {row['reps_passed']}/{config['reps']} passed" if config["reps"] > 1 else ""),
            _pair(row["setup_p50_s"], row["setup_p99_s"]),
            _pair(row["step_added_p50_s"], row["step_added_p99_s"]),
            _fmt(row["total_p99_s"]),
            f"{row['sessions_per_s']:.0f}",
            f"{row['memory_per_session_kib']:.0f}",
            f"{row['cpu_ms_per_session']:.2f}",
        )
    console.print(table)
    for name in ("ours", "openenv"):
        if results["rows"][name]:
            summary = results[name]
            console.print(
                f"{name}: ceiling {summary['ceiling']:,} sessions ({summary['ceiling_per_core']:.0f} per core), "
                f"limited by {summary['limited_by']}"
            )
    if results["openenv_error"]:
        console.print(f"[yellow]{results['openenv_error']}[/yellow]")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _pair(p50: float | None, p99: float | None) -> str:
    return f"{_fmt(p50)} / {_fmt(p99)}"
