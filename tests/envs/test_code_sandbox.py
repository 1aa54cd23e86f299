"""The sandbox: sessions, every escape and abuse contained (and the pool serving afterwards), the pool, no bubblewrap.

Limits are small here (1.5 s calls, 256 MB address space) so abuse is cut short quickly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfly_envs
from agentfly_env.resources.pool import ResourceManager, ResourcePool
from agentfly_envs.code import (
    DEFAULT_POOL_CONFIG,
    SANDBOX_POOL,
    ExecResult,
    Sandbox,
    SandboxConfig,
    SandboxDied,
    SandboxError,
    SandboxTimeout,
    SandboxUnavailable,
    sandbox_pool,
)
from agentfly_envs.code import sandbox as sandbox_module
from agentfly_envs.code.sandbox import _UidPool, child_pids, host_interpreter, processes_running_as
from agentfly_envs.code.worker import encode_frame, read_frame

#: The async tests share one event loop, so they can share one pool.
MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")
CONFIG = SandboxConfig(
    timeout_s=1.5, memory_mb=256, cpu_time_s=20, max_processes=32, max_file_mb=8, tmp_mb=32, max_output_bytes=4096
)
PROJECT = Path(agentfly_envs.__file__).resolve().parent.parent


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool():
    """One pool of two sandboxes for the module: each abuse must leave it able to serve."""
    manager = ResourceManager({SANDBOX_POOL: {"size": 2, "prewarm": 2}})
    pool = sandbox_pool(manager, CONFIG)
    await manager.start()
    yield pool
    await manager.close()


async def episode(pool: ResourcePool[Sandbox], *codes: str) -> list[ExecResult | SandboxError]:
    """Run codes in one leased sandbox, as an env does; a sandbox error ends the episode as broken."""
    outcomes: list[ExecResult | SandboxError] = []
    lease = await pool.acquire(timeout=30)
    for code in codes:
        try:
            outcomes.append(await lease.resource.run(code))
        except SandboxError as error:
            await lease.release(broken=True)
            return [*outcomes, error]
    await lease.release()
    return outcomes


async def assert_serves(pool: ResourcePool[Sandbox]) -> None:
    """The pool's next episode runs code normally, in a fresh session."""
    fresh, answer = await episode(pool, "'secret' in globals()", "print(6 * 7)")
    assert fresh.value == "False"
    assert answer.stdout == "42\n" and answer.ok


def start_ticks(pid: int) -> str | None:
    """When a process started (clock ticks after boot; with its pid, it names one process), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (FileNotFoundError, ProcessLookupError):
        return None


# ----------------------------------------------------------------------------- sessions


@MODULE_LOOP
async def test_a_session_keeps_state_across_calls(pool):
    defined, imported, used, value = await episode(
        pool,
        "secret = 41\ndef bump(x):\n    return x + 1",
        "import fractions",
        "print(bump(secret))",
        "fractions.Fraction(1, 3) * 3",
    )
    assert defined.to_text() == "(no output)" and imported.ok
    assert used.stdout == "42\n"
    assert value.value == "Fraction(1, 1)"


@MODULE_LOOP
async def test_sessions_are_clean_across_episodes(pool):
    first = await episode(
        pool,
        "import math, subprocess\nmath.pi = 3\nsecret = 1\nopen('/tmp/left-behind', 'w').write('x')",
        "sleeper = subprocess.Popen(['sleep', '60'])\nsleeper.pid",
    )
    assert all(outcome.ok for outcome in first), first
    for _ in range(2):  # whichever sandbox the pool lends next: nothing of the first episode is there
        (after,) = await episode(
            pool,
            "import math, os\n"
            "commands = [open(f'/proc/{p}/comm').read().strip() for p in os.listdir('/proc') if p.isdigit()]\n"
            "math.pi, 'secret' in globals(), os.listdir('/tmp'), sorted(commands)",
        )
        pi, has_secret, tmp_files, commands = eval(after.value)
        assert (pi, has_secret, tmp_files) == (3.141592653589793, False, [])
        assert commands == ["python3.11", "python3.11"] or commands == sorted(
            [Path(sys.executable).resolve().name[:15]] * 2
        )


@MODULE_LOOP
async def test_output_value_and_traceback_are_reported_like_a_repl(pool):
    (result,) = await episode(
        pool, "import sys\nprint('out')\nprint('err', file=sys.stderr)\ndef f(x):\n    return 1 / x\nf(0)"
    )
    assert result.stdout == "out\n" and result.stderr == "err\n"
    assert result.error.startswith('Traceback (most recent call last):\n  File "<cell 1>", line 6, in <module>')
    assert "    return 1 / x" in result.error and result.error.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "worker.py" not in result.error  # trimmed to the model's code
    (syntax,) = await episode(pool, "def broken(:\n    pass")
    assert "SyntaxError" in syntax.error and "worker.py" not in syntax.error


@MODULE_LOOP
async def test_forked_children_and_replaced_streams_do_not_confuse_the_session(pool):
    child, hidden, closed, visible = await episode(
        pool,
        "import os, sys\npid = os.fork()\nif pid == 0:\n    print('in child')\n    sys.exit(3)\nos.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])",
        "import io\nsys.stdout = io.StringIO()\nprint('hidden')",
        "sys.stdout = sys.__stdout__\nsys.stdout.close()",
        "print('visible')",
    )
    assert child.stdout == "in child\n" and child.value == "3"  # the child exits with its own status, silently
    assert hidden.to_text() == "(no output)" and closed.ok
    assert visible.stdout == "visible\n"


# ----------------------------------------------------------------------------- escapes and abuse


@MODULE_LOOP
async def test_no_network_not_even_the_hosts_loopback(pool):
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        outside, host = await episode(
            pool,
            "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)",
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)",
        )
        assert "Network is unreachable" in outside.error
        assert "OSError" in host.error or "ConnectionRefusedError" in host.error
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing reached the host's listening socket
    finally:
        server.close()
    await assert_serves(pool)


@MODULE_LOOP
async def test_secrets_project_and_home_are_invisible(pool):
    home = Path.home()
    home_file = next((path for path in sorted(home.iterdir()) if path.is_file()), PROJECT / "README.md")
    project_file = PROJECT / "pyproject.toml"
    assert Path("/etc/shadow").exists() and project_file.exists() and home_file.exists()  # there on the host
    results = await episode(
        pool,
        "open('/etc/shadow').read()",
        f"open({str(project_file)!r}).read()",
        f"open({str(home_file)!r}).read()",
        f"import os\nos.path.exists({str(PROJECT)!r}), sorted(os.listdir('/etc'))",
        "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit()), open('/proc/1/cmdline').read()",
        f"import os\nos.listdir({str(home)!r}) if os.path.isdir({str(home)!r}) else None",
    )
    for result in results[:3]:
        assert "FileNotFoundError" in result.error, result
    project_seen, etc = eval(results[3].value)
    assert project_seen is False and "shadow" not in etc and "passwd" in etc
    pids, init = eval(results[4].value)
    assert len(pids) == 2 and pids[0] == 1 and "worker.py" in init  # the supervisor and this session only
    prefix = host_interpreter().prefix
    # The home is absent, or (when the interpreter lives in it) holds only the way to the interpreter.
    inside = [Path(prefix).relative_to(home).parts[0]] if prefix.startswith(f"{home}/") else None
    assert (eval(results[5].value) if results[5].value is not None else None) == inside
    await assert_serves(pool)


@MODULE_LOOP
async def test_only_tmp_is_writable(pool):
    targets = ["/escape", "/usr/escape", "/etc/escape", f"{host_interpreter().prefix}/escape", "/opt/agentfly/escape"]
    results = await episode(
        pool, *(f"open({path!r}, 'w').write('x')" for path in targets), "open('/tmp/ok', 'w').write('ok')"
    )
    for path, result in zip(targets, results):
        assert "Read-only file system" in result.error or "Permission denied" in result.error, (path, result)
        assert not Path(path).exists()
    assert results[-1].value == "2"


@MODULE_LOOP
async def test_the_session_runs_unprivileged(pool):
    (result,) = await episode(
        pool,
        "import os, pwd\n"
        "os.getuid(), [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0], pwd.getpwuid(os.getuid()).pw_name",
    )
    uid, capabilities, name = eval(result.value)
    assert capabilities == "0000000000000000" and name == "sandbox"
    if os.geteuid() == 0:  # a uid of its own, not root
        assert CONFIG.uid_base <= uid < CONFIG.uid_base + CONFIG.uid_count
    else:  # the caller's, in a user namespace
        assert uid == os.geteuid()


@MODULE_LOOP
async def test_fork_bomb_is_stopped_by_the_process_limit(pool):
    (result,) = await episode(pool, "import os\nwhile True:\n    os.fork()")
    assert "BlockingIOError" in result.error or result.crashed
    await assert_serves(pool)


@MODULE_LOOP
async def test_a_10_gb_allocation_raises_memory_error_and_the_session_lives_on(pool):
    _, allocated, after = await episode(pool, "kept = 'still here'", "blob = bytearray(10 * 2**30)", "kept")
    assert allocated.error.rstrip().endswith("MemoryError")
    assert after.value == "'still here'"
    await assert_serves(pool)


@MODULE_LOOP
async def test_an_infinite_loop_is_killed_and_its_sandbox_replaced(pool):
    before = pool.stats()
    started = asyncio.get_running_loop().time()
    (timeout,) = await episode(pool, "while True:\n    pass")
    assert isinstance(timeout, SandboxTimeout) and isinstance(timeout, TimeoutError)
    assert asyncio.get_running_loop().time() - started < CONFIG.timeout_s + 5
    assert pool.stats().destroyed == before.destroyed + 1
    async with pool.lease(timeout=30) as first, pool.lease(timeout=30) as second:  # the whole pool at once
        outputs = await asyncio.gather(first.run("print(1)"), second.run("print(2)"))
    assert [result.stdout for result in outputs] == ["1\n", "2\n"]
    assert pool.stats().created == before.created + 1  # one new sandbox took the killed one's place
    await assert_serves(pool)


@MODULE_LOOP
async def test_100_mb_of_output_is_cut_with_a_marker(pool):
    (result,) = await episode(pool, "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)")
    assert result.stdout_bytes == 100_000_000
    assert len(result.stdout) < CONFIG.max_output_bytes + 200
    assert result.stdout.endswith(
        f"[output truncated: 100000000 bytes in total, the first {CONFIG.max_output_bytes} shown]"
    )
    (flood,) = await episode(pool, "import os\nos.write(2, b'y' * 30_000_000)")  # below Python, on the descriptor
    assert flood.stderr_bytes == 30_000_000 and "[output truncated" in flood.stderr
    await assert_serves(pool)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "SIGKILL"),
        ("import os, signal\nos.killpg(0, signal.SIGKILL)", "SIGKILL"),
        ("import os\nos._exit(3)", "exited with status 3"),
        ("import ctypes\nctypes.string_at(0)", "segmentation fault"),
    ],
    ids=["kill-self", "kill-own-group", "os-exit", "segfault"],
)
@MODULE_LOOP
async def test_a_dying_session_is_replaced_by_a_fresh_one(pool, code, reason):
    before, died, after = await episode(pool, "secret = 1", code, "'secret' in globals()")
    assert before.ok and reason in died.crashed and not died.ok
    assert "A fresh session replaced it" in died.to_text()
    assert after.value == "False"
    if reason == "segmentation fault":
        assert "<cell 2>" in died.stderr and "worker.py" not in died.stderr  # faulthandler's stack, trimmed
    await assert_serves(pool)


@pytest.mark.parametrize("target", [1, -1], ids=["init", "everything"])
@MODULE_LOOP
async def test_the_supervisor_cannot_be_killed_from_inside(pool, target):
    killed, alive = await episode(pool, f"import os, signal\nos.kill({target}, signal.SIGKILL)", "print('alive')")
    assert killed.ok or "PermissionError" in killed.error or "No such process" in killed.error  # nothing it may kill
    assert alive.stdout == "alive\n"


@MODULE_LOOP
async def test_sys_exit_is_reported_and_the_session_keeps_its_state(pool):
    _, exited, after = await episode(pool, "kept = 7", "import sys\nsys.exit(3)", "kept")
    assert exited.error == "SystemExit(3) was raised; the session ignores it and keeps running."
    assert after.value == "7"


@MODULE_LOOP
async def test_tampering_with_the_result_pipe_restarts_the_session(pool):
    forged, after = await episode(pool, "import os\nos.write(4, b'\\xff\\xff\\xff\\xff garbage')", "print('ok')")
    assert "broke the protocol" in forged.crashed
    assert after.stdout == "ok\n"


@MODULE_LOOP
async def test_file_size_and_tmp_size_are_limited(pool):
    big_file, full_tmp = await episode(
        pool,
        "open('/tmp/big', 'wb').write(b'x' * (16 << 20))",
        "for i in range(8):\n    open(f'/tmp/part{i}', 'wb').write(b'x' * (7 << 20))",
    )
    assert "File too large" in big_file.error
    assert "No space left on device" in full_tmp.error


@MODULE_LOOP
async def test_a_cpu_time_limit_ends_the_session():
    sandbox = await Sandbox.start(SandboxConfig(cpu_time_s=1, timeout_s=20))
    try:
        burned = await sandbox.run("while True:\n    pass")
        assert "CPU time limit (SIGXCPU)" in burned.crashed
        assert (await sandbox.run("1 + 1")).value == "2"
    finally:
        await sandbox.close()


@MODULE_LOOP
async def test_a_sandbox_killed_from_outside_reports_itself_dead():
    """As when the OOM killer picks the supervisor: mid-call, and for the calls after."""
    sandbox = await Sandbox.start(CONFIG)
    try:
        (supervisor,) = child_pids(sandbox.pid)
        call = asyncio.ensure_future(sandbox.run("import time\ntime.sleep(1)"))
        await asyncio.sleep(0.2)
        os.kill(supervisor, signal.SIGKILL)
        with pytest.raises(SandboxDied, match="exited"):
            await call
        assert not sandbox.alive
        with pytest.raises(SandboxDied, match="not running"):
            await sandbox.run("print(1)")
    finally:
        await sandbox.close()
    assert not Path(f"/proc/{supervisor}").exists()


# ----------------------------------------------------------------------------- the pool


@MODULE_LOOP
async def test_32_concurrent_sessions_over_4_workers_all_served_none_leaked():
    manager = ResourceManager({SANDBOX_POOL: {"size": 4, "prewarm": 4}})
    pool = sandbox_pool(manager, CONFIG)
    await manager.start()
    sandboxes: set[Sandbox] = set()

    async def session(number: int) -> tuple[str | None, str | None]:
        async with pool.lease(timeout=60) as sandbox:
            sandboxes.add(sandbox)
            fresh = await sandbox.run("'secret' in globals()")
            await sandbox.run(f"secret = {number}")
            await asyncio.sleep(0.01)  # let other sessions interleave
            return fresh.value, (await sandbox.run("secret")).value

    results = await asyncio.gather(*(session(number) for number in range(32)))
    assert results == [("False", str(number)) for number in range(32)]
    stats = pool.stats()
    assert (stats.leases, stats.in_use, stats.alive, stats.created, stats.failures) == (32, 0, 4, 4, 0)
    assert len(sandboxes) == 4
    pids, uids = {sandbox.pid for sandbox in sandboxes}, {sandbox.uid for sandbox in sandboxes}
    # The sessions' processes, by start time: once close gives the uids back, another process may take them.
    sessions = {pid: start_ticks(pid) for pid in processes_running_as(uids)}
    await manager.close()
    assert pool.stats().alive == 0 and not any(sandbox.alive for sandbox in sandboxes)
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    if os.geteuid() == 0:  # and nothing those sandboxes' sessions started is left
        assert len(uids) == 4 and len(sessions) >= 4
        assert [pid for pid, started in sessions.items() if start_ticks(pid) == started] == []


UNUSED_UID = 65400  # no account, and outside the default range that other tests' sandboxes take


def test_a_sandbox_uid_is_reserved_host_wide_until_it_is_given_back():
    """Two processes' sandboxes never share a uid (they would share its process limit)."""
    take_in_another_process = [
        sys.executable,
        "-c",
        f"from agentfly_envs.code.sandbox import _UidPool\nprint(_UidPool().take({UNUSED_UID}, 1))",
    ]
    here = _UidPool()
    assert here.take(UNUSED_UID, 1) == UNUSED_UID
    try:
        refused = subprocess.run(take_in_another_process, capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0 and f"all 1 sandbox uids from {UNUSED_UID} are in use" in refused.stderr
        with pytest.raises(SandboxUnavailable, match="in use"):
            _UidPool().take(UNUSED_UID, 1)  # another host in this process is refused too
    finally:
        here.give(UNUSED_UID)
    taken = subprocess.run(take_in_another_process, capture_output=True, text=True, timeout=60, check=True)
    assert taken.stdout.strip() == str(UNUSED_UID)


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root host can start a process as another uid")
def test_a_uid_that_a_process_still_runs_as_is_not_given_out():
    """An orphan of a killed host, still dying, keeps its uid from the next sandbox."""
    orphan = subprocess.Popen(["sleep", "60"], user=UNUSED_UID)
    try:
        pool = _UidPool()
        assert processes_running_as({UNUSED_UID}) == {orphan.pid: UNUSED_UID}
        assert pool.take(UNUSED_UID, 2) == UNUSED_UID + 1
        pool.give(UNUSED_UID + 1)
    finally:
        orphan.kill()
        orphan.wait()


def test_a_uid_lock_directory_that_others_can_write_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "uids"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setattr(sandbox_module, "UID_LOCK_DIR", shared)
    with pytest.raises(SandboxUnavailable, match="only uid .* can write"):
        _UidPool().take(UNUSED_UID, 1)


@MODULE_LOOP
async def test_a_pool_name_cannot_be_shared_by_different_options():
    manager = ResourceManager()
    assert sandbox_pool(manager, CONFIG) is sandbox_pool(manager, CONFIG)
    with pytest.raises(ValueError, match="another pool name"):
        sandbox_pool(manager, SandboxConfig(timeout_s=99))
    assert sandbox_pool(manager, SandboxConfig(timeout_s=99), name="other") is not manager.pool(SANDBOX_POOL)
    assert manager.pool(SANDBOX_POOL).config == DEFAULT_POOL_CONFIG


# ----------------------------------------------------------------------------- without bubblewrap


@MODULE_LOOP
async def test_without_bubblewrap_the_default_refuses_and_says_how_to_install_it():
    config = SandboxConfig(bwrap="/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        await Sandbox.start(config)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        sandbox_pool(ResourceManager(), config)


@MODULE_LOOP
async def test_without_bubblewrap_a_subprocess_can_run_with_limits_and_a_loud_warning():
    config = SandboxConfig(bwrap="/nonexistent/bwrap", if_missing="subprocess", memory_mb=256, timeout_s=5)
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation|plain rlimited subprocess"):
        sandbox = await Sandbox.start(config)
    try:
        assert not sandbox.isolated
        kept, allocated, where = await asyncio.gather(
            sandbox.run("x = 1"), sandbox.run("bytearray(10 * 2**30)"), sandbox.run("import os\nos.getcwd()")
        )
        assert kept.ok and allocated.error.rstrip().endswith("MemoryError")
        tmp = eval(where.value)
        assert tmp.startswith("/") and Path(tmp).name.startswith("agentfly-sandbox-") and Path(tmp).is_dir()
        await sandbox.reset()
        assert (await sandbox.run("'x' in globals()")).value == "False"
    finally:
        await sandbox.close()
    assert not Path(tmp).exists()


# ----------------------------------------------------------------------------- bad input, properties


def test_bad_options_are_clear():
    with pytest.raises(ValueError, match="memory_mb must be positive"):
        SandboxConfig(memory_mb=0)
    with pytest.raises(ValueError, match="invalid sandbox options"):
        SandboxConfig.of({"memory": 1})
    with pytest.raises(ValueError, match="invalid sandbox options"):
        SandboxConfig.of({"if_missing": "ignore"})
    assert SandboxConfig.of({"timeout_s": 3}) == SandboxConfig(timeout_s=3)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=20),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(),
            lambda inner: st.lists(inner, max_size=3),
            max_leaves=8,
        ),
        max_size=5,
    )
)
def test_worker_frames_round_trip(message):
    read, write = os.pipe()
    try:
        frame = encode_frame(message)
        os.write(write, frame)
        os.close(write)
        write = -1
        assert read_frame(read, limit=len(frame)) == json_roundtrip(message)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def json_roundtrip(message):
    import json

    return json.loads(json.dumps(message, ensure_ascii=False).encode("utf-8", "replace"))


@settings(max_examples=200)
@given(
    st.builds(
        ExecResult,
        stdout=st.text(),
        stderr=st.text(),
        value=st.none() | st.text(),
        error=st.none() | st.text(),
        crashed=st.none() | st.text(),
    )
)
def test_any_result_reads_as_text(result):
    text = result.to_text()
    assert isinstance(text, str) and text
    assert not result.crashed or "A fresh session replaced it" in text


def test_the_interpreter_is_the_hosts():
    interpreter = host_interpreter()
    assert Path(interpreter.executable).resolve() == Path(sys.executable).resolve()
    assert interpreter.executable.startswith(interpreter.prefix + "/")
