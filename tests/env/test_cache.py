"""Tests for agentfly_env.tools.cache: the three backends, single-flight, keys, fallback and make_cache."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import socket
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis_server import RedisServer

from agentfly_env.tools.cache import (
    Cache,
    CacheFallbackWarning,
    MemoryCache,
    RedisCache,
    SQLiteCache,
    cache_key,
    make_cache,
)

# The Redis client is the `cache` extra: without it (a core-only install) this module is skipped.
pytest.importorskip("redis")
import redis.asyncio  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter (a separate OS process) and return its stdout."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def fallback_warnings(record: pytest.WarningsRecorder) -> list[warnings.WarningMessage]:
    return [w for w in record if issubclass(w.category, CacheFallbackWarning)]


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def any_cache(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cache]:
    """Each backend in turn, for the tests of the shared contract."""
    if request.param == "memory":
        cache: Cache = MemoryCache()
    elif request.param == "sqlite":
        cache = SQLiteCache(tmp_path / "cache.db")
    else:
        cache = RedisCache(request.getfixturevalue("redis_server").url)
    yield cache
    await cache.aclose()


# --- The contract, on every backend ---------------------------------------------------------


async def test_get_set_and_counts(any_cache: Cache) -> None:
    assert await any_cache.get("k") is None
    await any_cache.set("k", b"v1")
    await any_cache.set("k", b"v2")
    await any_cache.set("empty", b"")
    assert await any_cache.get("k") == b"v2"
    assert await any_cache.get("empty") == b""  # an empty value is a hit, not a miss
    stats = any_cache.stats()
    assert (stats.hits, stats.misses, stats.sets, stats.errors, stats.fallbacks) == (2, 1, 3, 0, 0)


async def test_ttl_expires(any_cache: Cache) -> None:
    await any_cache.set("short", b"s", ttl_s=1.0)  # long enough to be read back on a loaded machine
    await any_cache.set("forever", b"f")
    assert await any_cache.get("short") == b"s"
    await asyncio.sleep(1.1)
    assert await any_cache.get("short") is None
    assert await any_cache.get("forever") == b"f"


async def test_single_flight_computes_once(any_cache: Cache) -> None:
    calls = 0

    async def compute() -> bytes:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)  # long enough for all ten calls to arrive while computing
        return b"result"

    results = await asyncio.gather(*(any_cache.get_or_compute("q", compute) for _ in range(10)))
    assert calls == 1
    assert all(value == b"result" for value, _ in results)
    # Exactly the computing call reports a miss; the nine that waited count as hits.
    assert sorted(hit for _, hit in results) == [False] + [True] * 9
    stats = any_cache.stats()
    assert (stats.hits, stats.misses, stats.sets) == (9, 1, 1)

    assert await any_cache.get_or_compute("q", compute) == (b"result", True)  # now from the store
    assert calls == 1
    assert any_cache.stats().hits == 10


async def test_set_rejects_nonpositive_ttl(any_cache: Cache) -> None:
    async def compute() -> bytes:
        raise AssertionError("not reached: the TTL is checked first")

    for ttl in (0, -1.0):
        with pytest.raises(ValueError, match="ttl_s"):
            await any_cache.set("k", b"v", ttl_s=ttl)
        with pytest.raises(ValueError, match="ttl_s"):
            await any_cache.get_or_compute("k", compute, ttl_s=ttl)
    assert await any_cache.get("k") is None


# --- MemoryCache ----------------------------------------------------------------------------


async def test_memory_lru_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_entries=3)
    for key in "abc":
        await cache.set(key, key.encode())
    assert await cache.get("a") == b"a"  # a is now the most recently used; b the least
    await cache.set("d", b"d")
    assert await cache.get("b") is None
    await cache.set("e", b"e")  # evicts c (a was read after c was written)
    assert await cache.get("c") is None
    assert [await cache.get(key) for key in "ade"] == [b"a", b"d", b"e"]


def test_memory_rejects_bad_size() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        MemoryCache(max_entries=0)


async def test_single_flight_error_reaches_all_waiters_and_is_not_cached() -> None:
    cache = MemoryCache()
    calls = 0

    async def failing() -> bytes:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        raise LookupError("tool failed")

    pending = (cache.get_or_compute("k", failing) for _ in range(5))
    results = await asyncio.gather(*pending, return_exceptions=True)
    assert calls == 1
    assert all(isinstance(r, LookupError) for r in results)

    async def working() -> bytes:
        return b"ok"

    assert await cache.get_or_compute("k", working) == (b"ok", False)


async def test_failed_compute_without_waiters_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    cache = MemoryCache()

    async def failing() -> bytes:
        raise LookupError("tool failed")

    try:
        await cache.get_or_compute("k", failing)
    except LookupError:
        pass
    gc.collect()  # an unretrieved exception on the shared future would be logged when it is freed
    assert "never retrieved" not in caplog.text


async def test_single_flight_waiter_takes_over_when_computing_call_is_cancelled() -> None:
    cache = MemoryCache()
    started = asyncio.Event()
    calls = 0

    async def compute() -> bytes:
        nonlocal calls
        calls += 1
        started.set()
        await asyncio.sleep(0.05)
        return b"v"

    leader = asyncio.create_task(cache.get_or_compute("k", compute))
    await started.wait()
    waiters = [asyncio.create_task(cache.get_or_compute("k", compute)) for _ in range(3)]
    await asyncio.sleep(0)  # let the waiters start waiting on the leader
    leader.cancel()
    results = await asyncio.gather(*waiters)
    assert leader.cancelled()
    assert calls == 2  # the cancelled leader's, then one waiter's
    assert sorted(results) == [(b"v", False), (b"v", True), (b"v", True)]


async def test_single_flight_cancelled_waiter_does_not_disturb_the_others() -> None:
    cache = MemoryCache()

    async def compute() -> bytes:
        await asyncio.sleep(0.05)
        return b"v"

    leader = asyncio.create_task(cache.get_or_compute("k", compute))
    await asyncio.sleep(0)
    doomed, survivor = (asyncio.create_task(cache.get_or_compute("k", compute)) for _ in range(2))
    await asyncio.sleep(0)
    doomed.cancel()
    assert await leader == (b"v", False)
    assert await survivor == (b"v", True)
    with pytest.raises(asyncio.CancelledError):
        await doomed


# --- SQLiteCache ----------------------------------------------------------------------------


async def test_sqlite_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "cache.db"
    async with SQLiteCache(path) as first:
        await first.set("k", b"v")
        await first.set("gone", b"x", ttl_s=0.05)
    await asyncio.sleep(0.1)
    async with SQLiteCache(path) as second:
        assert await second.get("k") == b"v"
        assert await second.get("gone") is None  # the expiry is stored, not only kept in memory
    # WAL is recorded in the file; it lets readers and a writer of other processes overlap.
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


SQLITE_CHILD = """
import asyncio, sys
from agentfly_env.tools.cache import SQLiteCache

async def main():
    async with SQLiteCache(sys.argv[1]) as cache:
        print((await cache.get("from-parent")).decode())
        await cache.set("from-child", b"hello parent")
asyncio.run(main())
"""


async def test_sqlite_is_shared_with_another_process(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    async with SQLiteCache(path) as cache:
        await cache.set("from-parent", b"hello child")
        assert await asyncio.to_thread(run_python, SQLITE_CHILD, str(path)) == "hello child"
        assert await cache.get("from-child") == b"hello parent"


SQLITE_WRITER = """
import asyncio, sys
from agentfly_env.tools.cache import SQLiteCache

async def main():
    async with SQLiteCache(sys.argv[1]) as cache:
        for i in range(500):
            await cache.set(f"{sys.argv[2]}-{i}", str(i).encode())
        print(cache.stats().errors)
asyncio.run(main())
"""


def test_sqlite_two_processes_write_concurrently(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", SQLITE_WRITER, str(path), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("a", "b")
    ]
    for writer in writers:
        out, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
        assert out.strip() == "0", err  # no SQLite error (e.g. "database is locked") was absorbed

    async def read_all() -> list[bytes | None]:
        async with SQLiteCache(path) as cache:
            return [await cache.get(f"{name}-{i}") for name in "ab" for i in range(500)]

    assert asyncio.run(read_all()) == [str(i).encode() for _ in "ab" for i in range(500)]


async def test_sqlite_max_entries_evicts_oldest_writes(tmp_path: Path) -> None:
    async with SQLiteCache(tmp_path / "cache.db", max_entries=3) as cache:
        for key in "abcde":
            await cache.set(key, key.encode())
        assert [await cache.get(key) for key in "abcde"] == [None, None, b"c", b"d", b"e"]


async def test_sqlite_failure_is_a_miss_with_one_warning(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path)  # a directory: SQLite cannot open it as a database
    with pytest.warns(CacheFallbackWarning) as record:
        await cache.set("k", b"v")
        assert await cache.get("k") is None
    assert len(fallback_warnings(record)) == 1
    stats = cache.stats()
    assert (stats.errors, stats.misses) == (2, 1)
    await cache.aclose()


# --- cache_key ------------------------------------------------------------------------------

KEY_PATTERN = re.compile(r"search:[0-9a-f]{32}")
KEY_PARTS = ("capital of France", {"k": 3, "filters": {"lang": "en", "year": [2020, 2021]}}, 1.5, None, True)


def test_cache_key_format_and_sensitivity() -> None:
    key = cache_key("search", *KEY_PARTS)
    assert KEY_PATTERN.fullmatch(key)
    assert key == cache_key("search", *KEY_PARTS)
    assert cache_key("search", 1) != cache_key("search", "1")
    assert cache_key("search", "a", "b") != cache_key("search", ["a", "b"])
    assert cache_key("search", "a") != cache_key("retrieve", "a")


def test_cache_key_ignores_dict_order() -> None:
    assert cache_key("t", {"a": 1, "b": {"x": 1, "y": 2}}) == cache_key("t", {"b": {"y": 2, "x": 1}, "a": 1})


def test_cache_key_is_stable_across_processes() -> None:
    # A different hash seed in the child: the key must not depend on Python's hash().
    child = run_python(
        "from agentfly_env.tools.cache import cache_key; import sys, json; "
        "print(cache_key('search', *json.loads(sys.argv[1])))",
        '["capital of France", {"filters": {"year": [2020, 2021], "lang": "en"}, "k": 3}, 1.5, null, true]',
        env={"PYTHONHASHSEED": "12345"},
    )
    assert child == cache_key("search", *KEY_PARTS)


def test_cache_key_rejects_unencodable_parts() -> None:
    with pytest.raises(TypeError):
        cache_key("t", object())


json_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=20)  # no lone surrogates
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | json_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(json_text, children, max_size=4),
    max_leaves=20,
)


def reverse_dict_order(value: object) -> object:
    if isinstance(value, dict):
        return {k: reverse_dict_order(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reverse_dict_order(v) for v in value]
    return value


@settings(deadline=None)  # no per-example deadline: a loaded CI machine must not make this flaky
@given(st.lists(json_values, max_size=4))
def test_cache_key_accepts_any_json(parts: list[object]) -> None:
    key = cache_key("search", *parts)
    assert KEY_PATTERN.fullmatch(key)
    assert cache_key("search", *(reverse_dict_order(p) for p in parts)) == key


# --- RedisCache -----------------------------------------------------------------------------


async def test_redis_stores_under_prefix_with_ttl(redis_server: RedisServer) -> None:
    raw = redis.asyncio.Redis.from_url(redis_server.url)
    async with RedisCache(redis_server.url, prefix="test:") as cache:
        await cache.set("k", b"v", ttl_s=100)
        await cache.set("tiny", b"v", ttl_s=0.0001)  # rounds up to 1 ms instead of failing
        assert await raw.get("test:k") == b"v"
        assert 90_000 < await raw.pttl("test:k") <= 100_000  # milliseconds, read back within 10 s
        await raw.set("test:external", b"written elsewhere")
        assert await cache.get("external") == b"written elsewhere"
        assert cache.stats().errors == 0
    await raw.aclose()


REDIS_CHILD = """
import asyncio, sys
from agentfly_env.tools.cache import RedisCache

async def main():
    async with RedisCache(sys.argv[1]) as cache:
        print((await cache.get("from-parent")).decode())
        await cache.set("from-child", b"hello parent")
        assert cache.stats().errors == 0
asyncio.run(main())
"""


async def test_redis_is_shared_with_another_process(redis_server: RedisServer) -> None:
    async with RedisCache(redis_server.url) as cache:
        await cache.set("from-parent", b"hello child")
        assert await asyncio.to_thread(run_python, REDIS_CHILD, redis_server.url) == "hello child"
        assert await cache.get("from-child") == b"hello parent"


async def test_redis_killed_mid_run_falls_back_without_raising(redis_server: RedisServer) -> None:
    # A generous socket timeout: 200 calls share 64 connections, and on a loaded machine waiting for
    # one can outlast the default 0.5 s (a failure before the kill). The kill itself fails calls at once.
    cache = RedisCache(redis_server.url, socket_timeout_s=10)
    server_killed = asyncio.Event()
    looked_up = 0  # of the calls that compute after the kill: a miss on the live server starts computing
    all_looked_up = asyncio.Event()

    async def compute(i: int) -> bytes:
        nonlocal looked_up
        if i >= 100:
            looked_up += 1
            if looked_up == 100:
                all_looked_up.set()
            await server_killed.wait()  # half the calls finish computing only after the kill
        return f"value-{i}".encode()

    def run(i: int) -> asyncio.Task[tuple[bytes, bool]]:
        return asyncio.create_task(cache.get_or_compute(f"k{i}", lambda: compute(i)))

    with pytest.warns(CacheFallbackWarning) as record:
        tasks = [run(i) for i in range(200)]
        await asyncio.gather(*tasks[:100])  # these looked up and stored in the live server
        # The others looked up in the live server too; on a loaded machine some lookups are still
        # waiting for a pooled connection when the first 100 calls are done.
        await all_looked_up.wait()
        assert cache.stats().fallbacks == 0
        redis_server.kill()
        server_killed.set()
        first = await asyncio.gather(*tasks)  # gather re-raises the first exception, if any
        assert first == [(f"value-{i}".encode(), False) for i in range(200)]
        mid = cache.stats()
        # The 100 stores after the kill all end in the fallback; those that tried Redis first
        # (before the first failure marked the cache degraded) are the errors.
        assert mid.fallbacks == 100
        assert 1 <= mid.errors <= 100

        again = await asyncio.gather(*(run(i) for i in range(200)))
    assert len(fallback_warnings(record)) == 1
    # Keys stored before the kill lived only in Redis: recomputed. The rest come from the fallback.
    assert again == [(f"value-{i}".encode(), i >= 100) for i in range(200)]
    final = cache.stats()
    assert final.errors == mid.errors  # degraded: no Redis calls until the back-off ends
    assert final.fallbacks == mid.fallbacks + 200 + 100  # 200 lookups, 100 stores of recomputed keys
    assert cache.degraded
    await cache.aclose()


async def test_redis_never_started_falls_back_on_first_call() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # a port that accepts connections, for now
        port = listener.getsockname()[1]
        cache = RedisCache(f"redis://127.0.0.1:{port}/0")
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # lazy: constructing did not connect
    # Now nothing listens there.
    with pytest.warns(CacheFallbackWarning, match="memory fallback") as record:
        assert await cache.get("k") is None
        await cache.set("k", b"v")
        assert await cache.get("k") == b"v"
    assert len(fallback_warnings(record)) == 1
    stats = cache.stats()
    assert (stats.backend, stats.errors, stats.fallbacks) == ("redis", 1, 3)
    assert (stats.hits, stats.misses, stats.sets) == (1, 1, 1)
    await cache.aclose()


async def test_redis_probes_after_backoff_and_recovers(redis_server: RedisServer) -> None:
    raw = redis.asyncio.Redis.from_url(redis_server.url)
    cache = RedisCache(redis_server.url, retry_after_s=1.0)  # a back-off a loaded machine does not outlast
    await cache.set("before", b"1")
    redis_server.kill()
    with pytest.warns(CacheFallbackWarning) as record:
        assert await cache.get("before") is None  # fails over: the fallback never saw it
        await cache.set("during", b"2")  # within the back-off: straight to the fallback
        assert cache.stats().errors == 1
        await asyncio.sleep(1.05)
        assert await cache.get("during") == b"2"  # the probe fails again, fallback answers
        assert cache.stats().errors == 2
        with RedisServer(port=redis_server.port):  # the server comes back, empty
            await asyncio.sleep(1.05)
            await cache.set("after", b"3")  # the probe succeeds: Redis again
            assert not cache.degraded
            assert await raw.get("agentfly:after") == b"3"
            assert await cache.get("during") is None  # fallback entries are not copied back
    assert len(fallback_warnings(record)) == 1
    stats = cache.stats()
    assert (stats.errors, stats.fallbacks) == (2, 3)
    await cache.aclose()
    await raw.aclose()


async def test_redis_without_retry_stays_on_fallback(redis_server: RedisServer) -> None:
    cache = RedisCache(redis_server.url, retry_after_s=None)
    redis_server.kill()
    with pytest.warns(CacheFallbackWarning):
        await cache.set("k", b"v")
    with RedisServer(port=redis_server.port):
        assert await cache.get("k") == b"v"  # still the fallback, although Redis is back
        assert cache.degraded
    assert cache.stats().errors == 1
    await cache.aclose()


def test_redis_server_helper_names_the_package_when_binary_is_missing() -> None:
    with pytest.raises(RuntimeError, match="apt-get install redis-server"):
        RedisServer(binary="no-such-redis-server").start()


# --- make_cache -----------------------------------------------------------------------------


async def test_make_cache_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTFLY_CACHE", raising=False)
    assert isinstance(make_cache(None), MemoryCache)
    assert isinstance(make_cache("memory"), MemoryCache)
    existing = MemoryCache()
    assert make_cache(existing) is existing

    sqlite = make_cache(f"sqlite://{tmp_path}/c.db")
    assert isinstance(sqlite, SQLiteCache) and sqlite.path == tmp_path / "c.db"
    await sqlite.aclose()

    remote = make_cache("redis://127.0.0.1:1/2")  # lazy: no server needed to build it
    assert isinstance(remote, RedisCache) and remote.url == "redis://127.0.0.1:1/2"
    await remote.aclose()

    monkeypatch.setenv("AGENTFLY_CACHE", f"sqlite://{tmp_path}/env.db")
    from_env = make_cache(None)
    assert isinstance(from_env, SQLiteCache) and from_env.path == tmp_path / "env.db"
    await from_env.aclose()


@pytest.mark.parametrize("spec", ["", "Memory", "sqlite://", "cache.db", "memcached://host:11211", 42])
def test_make_cache_rejects_bad_specs(spec: object) -> None:
    with pytest.raises(ValueError, match="expected a Cache instance"):
        make_cache(spec)  # type: ignore[arg-type]


def test_make_cache_rejects_bad_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTFLY_CACHE", "nope")
    with pytest.raises(ValueError, match="'nope'"):
        make_cache(None)
