"""A bytes cache for tool results, shared across episodes, processes and machines.

One interface (:class:`Cache`), three backends:

* :class:`MemoryCache` - in-process LRU; the default and the fastest (a hit costs about a µs).
* :class:`SQLiteCache` - one SQLite file in WAL mode; survives restarts and is shared by the
  processes of one machine.
* :class:`RedisCache` - shared by many processes and machines. When Redis cannot be reached (at
  start or mid-run) it warns once with :class:`CacheFallbackWarning` and serves from an embedded
  fallback cache, so a cache outage never raises into an episode. The Redis client is the ``cache``
  extra (``pip install 'agentfly-gym[cache]'``), imported only when a Redis cache is built; without
  it, building one raises :class:`~agentfly_env.extras.MissingExtraError` naming the extra (a
  missing package is a setup error, not an outage: it does not fall back).

Keys come from :func:`cache_key`, which is stable across processes and Python runs; values are
bytes (callers encode with msgspec). :func:`make_cache` builds a cache from a spec string such as
``"sqlite:///var/cache/agentfly.db"`` or ``"redis://localhost:6379/0"``, or from the
``AGENTFLY_CACHE`` environment variable.

A cache is used from one event loop at a time.

Example:
    >>> import asyncio, msgspec
    >>> async def demo():
    ...     cache = make_cache("memory")
    ...     key = cache_key("search", {"query": "capital of France", "k": 3})
    ...     async def search() -> bytes:
    ...         return msgspec.json.encode(["Paris"])
    ...     first = await cache.get_or_compute(key, search, ttl_s=3600)
    ...     second = await cache.get_or_compute(key, search, ttl_s=3600)
    ...     await cache.aclose()
    ...     return first[1], second[1], cache.stats().hits
    >>> asyncio.run(demo())
    (False, True, 1)
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
import logging
import math
import os
import sqlite3
import time
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

import msgspec

from agentfly_env.extras import requires_extra

if TYPE_CHECKING:
    import redis.asyncio

__all__ = [
    "Cache",
    "CacheFallbackWarning",
    "CacheStats",
    "MemoryCache",
    "RedisCache",
    "SQLiteCache",
    "cache_key",
    "make_cache",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

ENV_VAR = "AGENTFLY_CACHE"


class CacheFallbackWarning(RuntimeWarning):
    """A cache backend failed; the cache now degrades (misses, or serves from its fallback)."""


class CacheStats(msgspec.Struct):
    """Counters of one cache instance (a snapshot; see :meth:`Cache.stats`).

    Every :meth:`Cache.get` and every :meth:`Cache.get_or_compute` call counts exactly one hit or
    one miss. A ``get_or_compute`` call that waited for a concurrent call computing the same key
    counts as a hit: it was answered without computing.

    Attributes:
        backend: ``"memory"``, ``"sqlite"`` or ``"redis"``.
        hits: Lookups answered with a value.
        misses: Lookups that found nothing.
        sets: Values stored.
        errors: Backend failures (SQLite or Redis errors), each absorbed instead of raised.
        fallbacks: Calls a :class:`RedisCache` served from its fallback cache.
    """

    backend: str
    hits: int = 0
    misses: int = 0
    sets: int = 0
    errors: int = 0
    fallbacks: int = 0


def cache_key(namespace: str, *parts: object) -> str:
    """Build a cache key that is the same in every process and Python run.

    ``parts`` are encoded as JSON with msgspec (dict keys and struct fields sorted, so insertion
    order does not matter) and hashed with BLAKE2b; Python's randomised ``hash()`` is not used.

    Args:
        namespace: A readable prefix, usually the tool name; kept verbatim in the key.
        *parts: Anything msgspec can encode as JSON (str, numbers, bools, None, lists, dicts with
            str keys, Structs, dataclasses, ...).

    Returns:
        ``"<namespace>:<32 hex chars>"``.

    Raises:
        TypeError: If a part cannot be encoded as JSON.

    Example:
        >>> cache_key("search", {"q": "x", "k": 3}) == cache_key("search", {"k": 3, "q": "x"})
        True
    """
    payload = msgspec.json.encode(parts, order="sorted")
    return f"{namespace}:{hashlib.blake2b(payload, digest_size=16).hexdigest()}"


def _check_ttl(ttl_s: float | None) -> None:
    if ttl_s is not None and not ttl_s > 0:
        raise ValueError(f"ttl_s must be positive or None, got {ttl_s!r}")


def _expires_at(ttl_s: float | None) -> float | None:
    """The wall-clock expiry for a TTL; wall time, not monotonic, so other processes agree."""
    return None if ttl_s is None else time.time() + ttl_s


class Cache(abc.ABC):
    """A cache of bytes values keyed by strings; backend failures are absorbed, never raised.

    Subclasses implement ``_get``/``_set`` (and ``aclose`` if they hold resources); this class
    does the counting, TTL validation and single-flight :meth:`get_or_compute`.
    """

    def __init__(self, backend: str) -> None:
        self._stats = CacheStats(backend=backend)
        self._inflight: dict[str, asyncio.Future[bytes]] = {}
        self._warned = False

    async def get(self, key: str) -> bytes | None:
        """Return the value stored under ``key``, or None if absent, expired or unreadable."""
        value = await self._get(key)
        if value is None:
            self._stats.misses += 1
        else:
            self._stats.hits += 1
        return value

    async def set(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        """Store ``value`` under ``key``, expiring after ``ttl_s`` seconds (None: never).

        Raises:
            ValueError: If ``ttl_s`` is not positive (a caller bug, not a backend failure).
        """
        _check_ttl(ttl_s)
        await self._set(key, value, ttl_s)
        self._stats.sets += 1

    async def get_or_compute(
        self,
        key: str,
        compute: Callable[[], Awaitable[bytes]],
        ttl_s: float | None = None,
    ) -> tuple[bytes, bool]:
        """Return the cached value for ``key``, computing and storing it on a miss.

        Concurrent calls for the same key in this process compute once: the first call looks up
        and computes, the others wait for its result and count as hits. An exception from
        ``compute`` reaches every waiting call; if the computing call is cancelled, a waiting call
        takes over.

        Args:
            key: The cache key, usually from :func:`cache_key`.
            compute: Produces the value on a miss.
            ttl_s: Expiry of a newly computed value in seconds (None: never).

        Returns:
            ``(value, was_hit)``; ``was_hit`` is False only for the call that ran ``compute``.

        Raises:
            ValueError: If ``ttl_s`` is not positive (checked before computing).
        """
        _check_ttl(ttl_s)
        while (pending := self._inflight.get(key)) is not None:
            try:
                # shield: a cancelled waiter must not cancel the future the others wait on.
                value = await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if pending.cancelled() and task is not None and not task.cancelling():
                    continue  # the computing call was cancelled, not this one: take over.
                raise
            self._stats.hits += 1
            return value, True

        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            value = await self.get(key)
            was_hit = value is not None
            if value is None:
                value = await compute()
            # Release the waiters before the (possibly remote) write; calls arriving during the
            # write still find the finished future and return at once.
            future.set_result(value)
            if not was_hit:
                await self.set(key, value, ttl_s)
            return value, was_hit
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # mark retrieved: no "never retrieved" log when nobody waits.
            raise
        finally:
            del self._inflight[key]

    async def aclose(self) -> None:
        """Release the backend's resources; the cache must not be used afterwards."""

    def stats(self) -> CacheStats:
        """A snapshot of this cache's counters."""
        return msgspec.structs.replace(self._stats)

    async def __aenter__(self) -> Cache:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @abc.abstractmethod
    async def _get(self, key: str) -> bytes | None:
        """Backend lookup; returns None on a miss or a backend failure."""

    @abc.abstractmethod
    async def _set(self, key: str, value: bytes, ttl_s: float | None) -> None:
        """Backend store; absorbs backend failures."""

    def _record_failure(self, exc: BaseException, consequence: str) -> None:
        """Count a backend failure; warn the first time only, so an outage does not flood logs."""
        self._stats.errors += 1
        if self._warned:
            logger.debug("%s cache error: %r", self._stats.backend, exc)
            return
        self._warned = True
        warnings.warn(
            f"{self._stats.backend} cache failed ({exc!r}); {consequence}. This warning is shown once per cache.",
            CacheFallbackWarning,
            stacklevel=2,
        )


class MemoryCache(Cache):
    """In-process LRU cache with per-entry TTL.

    Expired entries are dropped when looked up, or evicted as least recently used.

    Args:
        max_entries: Entries kept; setting one more evicts the least recently used.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        super().__init__("memory")
        self._max_entries = max_entries
        self._entries: OrderedDict[str, tuple[bytes, float | None]] = OrderedDict()

    async def _get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        value, expires_at = entry
        if expires_at is not None and expires_at <= time.time():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    async def _set(self, key: str, value: bytes, ttl_s: float | None) -> None:
        self._entries[key] = (value, _expires_at(ttl_s))
        self._entries.move_to_end(key)
        if len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    async def aclose(self) -> None:
        self._entries.clear()


class SQLiteCache(Cache):
    """A cache in one SQLite file: survives restarts, shared by the processes of one machine.

    The database runs in WAL mode with a busy timeout, so several processes can read and write
    the same file. All sqlite3 calls run on one worker thread, off the event loop. SQLite errors
    are counted in ``stats().errors``, warned about once and answered as a miss / a dropped write.

    Args:
        path: The database file; parent directories are created.
        max_entries: If set, at most this many entries are kept, evicting the oldest writes first
            (by insertion order, not last read: a read stays a pure read). Overwritten keys leave
            gaps in that order, so the table may hold somewhat fewer entries than the bound.
    """

    _BUSY_TIMEOUT_S = 5.0
    _PURGE_EVERY_SETS = 1_000  # expired rows are deleted in batches, not on the read path.

    def __init__(self, path: str | os.PathLike[str], max_entries: int | None = None) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError(f"max_entries must be at least 1 or None, got {max_entries}")
        super().__init__("sqlite")
        self.path = Path(path)
        self._max_entries = max_entries
        self._sets_since_purge = 0
        self._conn: sqlite3.Connection | None = None  # opened and used on the worker thread only.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentfly-sqlite-cache")

    async def _get(self, key: str) -> bytes | None:
        return await self._run(self._get_sync, key, time.time(), default=None)

    async def _set(self, key: str, value: bytes, ttl_s: float | None) -> None:
        self._sets_since_purge += 1
        purge = self._sets_since_purge >= self._PURGE_EVERY_SETS
        if purge:
            self._sets_since_purge = 0
        await self._run(self._set_sync, key, value, _expires_at(ttl_s), purge, default=None)

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._close_sync)
        self._executor.shutdown(wait=True)

    async def _run(self, fn: Callable[..., T], *args: object, default: T) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        except sqlite3.Error as exc:
            self._record_failure(exc, "failed lookups count as misses and failed writes are dropped")
            return default

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit (isolation_level=None): each statement is its own short transaction, so
            # another process never waits on a transaction this one left open.
            conn = sqlite3.connect(self.path, timeout=self._BUSY_TIMEOUT_S, isolation_level=None)
            try:
                self._enable_wal(conn)
                # NORMAL is safe with WAL (it only risks the last writes on power loss): fine for a cache.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at REAL)"
                )
                conn.execute(
                    "CREATE INDEX IF NOT EXISTS cache_expires_at ON cache(expires_at) WHERE expires_at IS NOT NULL"
                )
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite answers "database is
        # locked" at once, without the busy handler, when another process opens the file at the
        # same moment; so retry here until the busy timeout. WAL then persists in the file.
        deadline = time.monotonic() + self._BUSY_TIMEOUT_S
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise
            time.sleep(0.01)

    def _get_sync(self, key: str, now: float) -> bytes | None:
        row = (
            self._connection()
            .execute(
                "SELECT value FROM cache WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)",
                (key, now),
            )
            .fetchone()
        )
        return None if row is None else row[0]

    def _set_sync(self, key: str, value: bytes, expires_at: float | None, purge: bool) -> None:
        conn = self._connection()
        # REPLACE deletes and reinserts, so rowid order is write order (used for eviction).
        conn.execute(
            "INSERT OR REPLACE INTO cache (key, value, expires_at) VALUES (?, ?, ?)",
            (key, value, expires_at),
        )
        if self._max_entries is not None:
            # Two index lookups instead of a COUNT(*) scan; see the class docstring for the gaps.
            conn.execute(
                "DELETE FROM cache WHERE rowid <= (SELECT max(rowid) FROM cache) - ?",
                (self._max_entries,),
            )
        if purge:
            conn.execute("DELETE FROM cache WHERE expires_at <= ?", (time.time(),))

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _import_redis() -> ModuleType:
    """The Redis client (the ``cache`` extra), imported on first use so the core imports without it."""
    with requires_extra("cache", "redis", feature="A Redis cache (redis:// or rediss://)"):
        import redis.asyncio
        import redis.asyncio.retry
        import redis.backoff
        import redis.exceptions
    return redis


class RedisCache(Cache):
    """A cache in Redis, shared by many processes and machines, with an embedded fallback.

    Construction never blocks or raises for an unreachable server: connections are opened on
    first use. When a Redis call fails (connection refused or lost, timeout, server error), the
    cache warns once (:class:`CacheFallbackWarning`), marks itself degraded and serves every call
    from ``fallback`` instead. While degraded, one call per ``retry_after_s`` probes Redis again
    (the others keep using the fallback, so a dead server costs one failed call per period);
    when the probe succeeds, calls go to Redis again. Entries written to the fallback meanwhile
    stay there and are not copied to Redis.

    Redis-py's own retries are disabled: the fallback is the retry, and a failure is noticed
    within one ``socket_timeout_s`` instead of after several backed-off attempts.

    Args:
        url: ``redis://[[user]:password@]host[:port][/db]`` (or ``rediss://`` for TLS).
        prefix: Prepended to every key, to share one Redis with other applications.
        fallback: Serves calls while Redis is unusable; defaults to a new :class:`MemoryCache`.
            This cache owns it and closes it in :meth:`aclose`.
        max_connections: Size of the connection pool.
        socket_timeout_s: Limit for connecting, for each command, and for waiting for a free
            pooled connection; a call exceeding it counts as a Redis failure.
        retry_after_s: Seconds between probes of a failed Redis; None never goes back to Redis.

    Raises:
        MissingExtraError: When the ``redis`` package (the ``cache`` extra) is not installed.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "agentfly:",
        fallback: Cache | None = None,
        max_connections: int = 64,
        socket_timeout_s: float = 0.5,
        retry_after_s: float | None = 30.0,
    ) -> None:
        redis = _import_redis()
        super().__init__("redis")
        # Failures that mean "Redis is not usable right now". RedisError covers connection and timeout
        # errors as well as server-side refusals (OOM, READONLY); OSError covers raw socket errors,
        # including the built-in TimeoutError.
        self._failures: tuple[type[BaseException], ...] = (redis.exceptions.RedisError, OSError)
        self.url = url
        self._prefix = prefix
        self._fallback = fallback if fallback is not None else MemoryCache()
        self._retry_after_s = retry_after_s
        self._degraded = False
        self._retry_at = 0.0  # time.monotonic() of the next probe while degraded.
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=socket_timeout_s,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=socket_timeout_s,
            retry=redis.asyncio.retry.Retry(redis.backoff.NoBackoff(), 0),
        )
        self._client: redis.asyncio.Redis = redis.asyncio.Redis(connection_pool=pool)

    @property
    def degraded(self) -> bool:
        """Whether calls are currently served by the fallback."""
        return self._degraded

    async def _get(self, key: str) -> bytes | None:
        return await self._dispatch(
            lambda: self._client.get(self._prefix + key),
            lambda: self._fallback.get(key),
        )

    async def _set(self, key: str, value: bytes, ttl_s: float | None) -> None:
        # PX takes whole milliseconds; round up so a tiny TTL does not become 0 (an error).
        px = None if ttl_s is None else max(1, math.ceil(ttl_s * 1000))
        await self._dispatch(
            lambda: self._client.set(self._prefix + key, value, px=px),
            lambda: self._fallback.set(key, value, ttl_s),
        )

    async def aclose(self) -> None:
        try:
            await self._client.aclose()
            await self._client.connection_pool.disconnect()
        except self._failures as exc:
            logger.debug("ignoring error while closing the redis cache: %r", exc)
        await self._fallback.aclose()

    def _should_try_redis(self) -> bool:
        if not self._degraded:
            return True
        if self._retry_after_s is None or time.monotonic() < self._retry_at:
            return False
        # This call is the probe; push the next one out so concurrent calls keep to the fallback.
        self._retry_at = time.monotonic() + self._retry_after_s
        return True

    async def _dispatch(self, redis_op: Callable[[], Awaitable[T]], fallback_op: Callable[[], Awaitable[T]]) -> T:
        if self._should_try_redis():
            try:
                result = await redis_op()
            except self._failures as exc:
                self._degraded = True
                if self._retry_after_s is not None:
                    self._retry_at = time.monotonic() + self._retry_after_s
                self._record_failure(exc, f"serving from the {self._fallback.stats().backend} fallback cache")
            else:
                if self._degraded:
                    self._degraded = False
                    # No URL in the message: it may hold a password.
                    logger.info("redis cache is reachable again; leaving the fallback")
                return result
        self._stats.fallbacks += 1
        return await fallback_op()


def make_cache(spec: str | Cache | None = None) -> Cache:
    """Build a cache from a spec.

    Args:
        spec: One of

            * a :class:`Cache` - returned as is;
            * None - the ``AGENTFLY_CACHE`` environment variable, or ``"memory"`` if unset/empty;
            * ``"memory"`` - :class:`MemoryCache`;
            * ``"sqlite://<path>"`` - :class:`SQLiteCache` (``sqlite:///abs/path.db`` is absolute,
              ``sqlite://rel.db`` relative to the working directory);
            * ``"redis://..."`` or ``"rediss://..."`` - :class:`RedisCache` with a memory fallback.

    Raises:
        ValueError: For any other spec.
        MissingExtraError: For a Redis spec without the ``cache`` extra installed.

    Example:
        >>> type(make_cache("sqlite:///tmp/agentfly-cache.db")).__name__
        'SQLiteCache'
    """
    if isinstance(spec, Cache):
        return spec
    if spec is None:
        spec = os.environ.get(ENV_VAR) or "memory"
    if isinstance(spec, str):
        if spec == "memory":
            return MemoryCache()
        if spec.startswith("sqlite://") and len(spec) > len("sqlite://"):
            return SQLiteCache(spec.removeprefix("sqlite://"))
        if spec.startswith(("redis://", "rediss://")):
            return RedisCache(spec)
    raise ValueError(
        f"unknown cache spec {spec!r}; expected a Cache instance, None (reads ${ENV_VAR}), "
        "'memory', 'sqlite:///path/to/cache.db' or 'redis://host:port/db'"
    )
