"""Bounded asyncio pools of expensive backends (JVMs, sandbox workers, game engines).

A :class:`ResourcePool` owns up to ``size`` resources and lends them to env episodes one at a
time. It creates them lazily (or ahead of time with ``prewarm``), resets and health-checks them
before reuse, recycles them after ``max_uses`` leases, evicts the ones left idle too long and
destroys the ones a lease broke. A :class:`ResourceManager` holds named pools sized by config.

Example:
    >>> manager = ResourceManager({"scratch": {"size": 2, "prewarm": 1}})
    >>> pool = manager.register("scratch", ResourceSpec(create=list, reset=list.clear))
    >>> async def episode() -> list[str]:
    ...     async with manager:  # start() prewarms, close() destroys
    ...         async with manager.lease("scratch", timeout=5) as buffer:
    ...             buffer.append("step")  # an exception here would destroy the buffer
    ...         return buffer
    >>> asyncio.run(episode())
    ['step']
    >>> pool.stats().created, pool.stats().leases
    (1, 1)

Design notes:
    * Waiters are served strictly FIFO: a freed resource (or freed capacity) is handed straight
      to the oldest waiter's future, so a newcomer can never barge past the queue. A leaser whose
      reused resource fails its reset or check keeps its turn: it gets another idle one or
      creates a replacement in the capacity it already holds.
    * The fast path (an idle resource, nothing to reset or check) is synchronous: no task,
      future, ``wait_for`` or thread is created.
    * A lease timeout covers the whole acquire: waiting, creating, resetting and checking.
    * An async (or offloaded) create runs in its own task, shielded from the leaser: a leaser
      that times out or is cancelled mid-create does not waste an expensive start-up; the new
      resource goes to the next waiter or to the idle stack.
    * Capacity is held from the moment creation starts until the destroy hook has finished, so
      never more than ``size`` backends exist at once, counting those starting or stopping.
    * Idle eviction is a background reaper task, started by :meth:`ResourcePool.start` or by the
      first resource going idle, and cancelled by :meth:`ResourcePool.close`. It sleeps until the
      oldest idle resource expires, and never shrinks the pool below ``prewarm`` live resources,
      so prewarmed capacity stays warm.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import EllipsisType, TracebackType
from typing import Any, Generic, TypeVar

import msgspec

__all__ = [
    "LatencyStats",
    "Lease",
    "PoolClosedError",
    "PoolConfig",
    "PoolStats",
    "PoolTimeoutError",
    "ResourceManager",
    "ResourcePool",
    "ResourceSpec",
    "default_manager",
]

logger = logging.getLogger(__name__)

R = TypeVar("R")

Timeout = float | None | EllipsisType
"""A lease timeout in seconds; ``None`` waits forever, ``...`` uses the pool's default."""

_LATENCY_WINDOW = 1024


class ResourceBrokenError(RuntimeError):
    """Raised by a stateful tool whose leased resource died or can no longer be trusted.

    The env gives the resource back to its pool as broken (the pool destroys it and makes a new one
    for the next call) and tells the model that the session's earlier state is lost.
    """


@dataclass
class ResourceSpec(Generic[R]):
    """How to make, reuse and destroy one kind of resource.

    Each hook may be a plain function or a coroutine function (or return an awaitable).
    """

    create: Callable[[], R | Awaitable[R]]
    """Makes a new resource."""
    reset: Callable[[R], None | Awaitable[None]] | None = None
    """Run before a resource is handed out again (not on its first lease); raising discards it."""
    check: Callable[[R], bool | Awaitable[bool]] | None = None
    """Health check before reuse, after ``reset``; a falsy result or an exception discards it."""
    destroy: Callable[[R], None | Awaitable[None]] | None = None
    """Releases the backend; errors are logged and counted, never raised to the leaser."""
    blocking: bool = False
    """Run the sync hooks in a worker thread (``asyncio.to_thread``) so slow ones never block the
    event loop. Coroutine-function hooks are awaited on the loop either way."""


@dataclass
class PoolConfig:
    """How many resources a pool keeps and for how long.

    Example:
        >>> PoolConfig.from_dict({"size": 8, "idle_ttl_s": 300})
        PoolConfig(size=8, prewarm=0, max_uses=None, idle_ttl_s=300.0, acquire_timeout_s=30.0)
    """

    size: int = 4
    """Most resources alive at once: leased, idle, being created and being destroyed."""
    prewarm: int = 0
    """Resources created in parallel by ``start()``; idle eviction never goes below this many."""
    max_uses: int | None = None
    """Destroy a resource after this many leases (``None``: reuse forever)."""
    idle_ttl_s: float | None = None
    """Destroy resources idle for longer than this, down to ``prewarm`` (``None``: never)."""
    acquire_timeout_s: float | None = 30.0
    """Default lease timeout, covering the wait, creation, reset and check (``None``: forever)."""

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size}")
        if not 0 <= self.prewarm <= self.size:
            raise ValueError(f"prewarm must be between 0 and size ({self.size}), got {self.prewarm}")
        if self.max_uses is not None and self.max_uses < 1:
            raise ValueError(f"max_uses must be >= 1 or None, got {self.max_uses}")
        if self.idle_ttl_s is not None and self.idle_ttl_s <= 0:
            raise ValueError(f"idle_ttl_s must be > 0 or None, got {self.idle_ttl_s}")
        if self.acquire_timeout_s is not None and self.acquire_timeout_s < 0:
            raise ValueError(f"acquire_timeout_s must be >= 0 or None, got {self.acquire_timeout_s}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, defaults: PoolConfig | None = None) -> PoolConfig:
        """Builds a config from a mapping, e.g. one section of a YAML file.

        Args:
            data: Field values; keys left out keep the value from ``defaults``.
            defaults: The config ``data`` overrides field by field (the class defaults if None).

        Raises:
            ValueError: A key is not a ``PoolConfig`` field (all unknown keys are named), a value
                has the wrong type, or a value is out of range.
        """
        cls._check_keys(data)
        base = dataclasses.asdict(defaults) if defaults is not None else {}
        return msgspec.convert({**base, **data}, cls)

    @classmethod
    def _check_keys(cls, data: Mapping[str, Any]) -> None:
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ValueError(f"unknown pool config key(s) {', '.join(unknown)}; valid keys: {', '.join(known)}")


class LatencyStats(msgspec.Struct, frozen=True):
    """Acquire latency in seconds over the most recent leases (a bounded window)."""

    p50: float
    p99: float
    mean: float
    samples: int


class PoolStats(msgspec.Struct, frozen=True):
    """A snapshot of one pool's state and lifetime counters.

    ``alive`` counts every resource holding capacity: ``in_use`` + ``idle`` + those being created,
    reset, checked or destroyed. ``failures`` counts create, reset, check and destroy errors,
    failed health checks and broken releases.
    """

    name: str
    size: int
    alive: int
    in_use: int
    idle: int
    waiting: int
    created: int
    destroyed: int
    leases: int
    timeouts: int
    failures: int
    acquire_latency_s: LatencyStats


class PoolTimeoutError(TimeoutError):
    """No resource could be leased within the timeout."""


class PoolClosedError(RuntimeError):
    """The pool was closed before (or while) a lease was requested."""


class _Slot(Generic[R]):
    """One live resource and its bookkeeping."""

    __slots__ = ("resource", "uses", "idle_since")

    def __init__(self, resource: R) -> None:
        self.resource = resource
        self.uses = 0
        self.idle_since = 0.0


# Handed to a waiter instead of a resource: "one unit of capacity is yours, create a resource".
_CREATE: Any = object()


class Lease(Generic[R]):
    """The right to use one pooled resource until :meth:`release`.

    Use it as an async context manager: a clean exit returns the resource to the pool, an
    exception (``CancelledError`` included) destroys it and propagates.

    Example:
        >>> async def use(pool: ResourcePool[list[int]]) -> list[int]:
        ...     lease = await pool.acquire(timeout=5)
        ...     try:
        ...         lease.resource.append(1)
        ...         return lease.resource
        ...     finally:
        ...         await lease.release()
        >>> asyncio.run(use(ResourcePool(ResourceSpec(create=list))))
        [1]
    """

    __slots__ = ("_pool", "_timeout", "_slot", "_released")

    def __init__(self, pool: ResourcePool[R], timeout: float | None) -> None:
        self._pool = pool
        self._timeout = timeout
        self._slot: _Slot[R] | None = None
        self._released = False

    @property
    def resource(self) -> R:
        """The leased resource.

        Raises:
            RuntimeError: The lease is not held (not yet acquired, or already released).
        """
        if self._slot is None:
            raise RuntimeError("the lease is not held")
        return self._slot.resource

    async def release(self, *, broken: bool = False) -> None:
        """Gives the resource back; idempotent, so it is safe in ``finally`` blocks.

        Args:
            broken: The resource is unfit for reuse: destroy it (waits for the destroy hook) and
                count a failure.
        """
        slot = self._slot
        if slot is None:
            return
        self._slot = None
        self._released = True
        await self._pool._release(slot, broken)

    async def __aenter__(self) -> R:
        if self._slot is None:
            if self._released:
                raise RuntimeError("a released lease cannot be entered again")
            pool = self._pool
            start = time.perf_counter()
            self._slot = pool._take_now(start) or await pool._take_waiting(self._timeout, start)
        return self._slot.resource

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release(broken=exc_type is not None)


class ResourcePool(Generic[R]):
    """A bounded, fair pool of reusable resources.

    Example:
        >>> async def main() -> dict[str, int]:
        ...     async with ResourcePool(ResourceSpec(create=dict), PoolConfig(size=2), name="tables") as pool:
        ...         async with pool.lease(timeout=5) as table:
        ...             table["hits"] = 1
        ...         async with pool.lease(timeout=5) as table:  # the same, warm table
        ...             return table
        >>> asyncio.run(main())
        {'hits': 1}
    """

    def __init__(self, spec: ResourceSpec[R], config: PoolConfig | None = None, *, name: str = "pool") -> None:
        self.name = name
        self.config = config if config is not None else PoolConfig()
        self._spec = spec
        # Resolve offloading once so each hook call is a plain call on the hot paths.
        self._create = self._offload(spec.create)
        self._reset = self._offload(spec.reset)
        self._check = self._offload(spec.check)
        self._destroy = self._offload(spec.destroy)
        self._needs_prep = spec.reset is not None or spec.check is not None
        self._idle: deque[_Slot[R]] = deque()  # a LIFO stack (warm caches); the left end is oldest
        self._waiters: deque[asyncio.Future[Any]] = deque()
        self._alive = 0  # capacity held: in use + idle + creating + preparing + destroying
        self._destroying = 0
        self._in_use = 0
        self._created = 0
        self._destroyed = 0
        self._leases = 0
        self._timeouts = 0
        self._failures = 0
        self._latencies: deque[float] = deque(maxlen=_LATENCY_WINDOW)
        self._tasks: set[asyncio.Task[Any]] = set()  # background creates and destroys
        self._reaper: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False

    def _offload(self, hook: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if hook is None or not self._spec.blocking or _is_coroutine_function(hook):
            return hook
        return functools.partial(asyncio.to_thread, hook)

    async def __aenter__(self) -> ResourcePool[R]:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Creates ``prewarm`` resources in parallel; later calls do nothing once one succeeded.

        Raises:
            PoolClosedError: The pool is closed.
            Exception: The first create error, after every prewarm attempt has settled (the ones
                that succeeded stay idle, and calling ``start()`` again retries the rest).
        """
        if self._closed:
            raise PoolClosedError(f"pool {self.name!r} is closed")
        if self._started:
            return
        count = max(0, self.config.prewarm - self._alive)
        self._alive += count  # reserved now, so a concurrent start() or lease cannot overshoot
        results = await asyncio.gather(*(self._make() for _ in range(count)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for result in results:
            if isinstance(result, _Slot):
                self._return(result)
        self._ensure_reaper()
        if errors:
            raise errors[0]
        self._started = True

    def lease(self, timeout: Timeout = ...) -> Lease[R]:
        """A lease to use as ``async with pool.lease(timeout=5) as resource:``.

        Args:
            timeout: Seconds to wait for a resource, including creation, reset and check;
                ``None`` waits forever, ``...`` uses ``config.acquire_timeout_s``.

        Entering raises :class:`PoolTimeoutError` when the time runs out, :class:`PoolClosedError`
        when the pool is or gets closed, or the error of a failed ``create`` hook.
        """
        return Lease(self, self.config.acquire_timeout_s if timeout is ... else timeout)

    async def acquire(self, timeout: Timeout = ...) -> Lease[R]:
        """Leases a resource; the caller must ``await lease.release()`` (or use it in ``async with``).

        Args:
            timeout: As for :meth:`lease`.

        Raises:
            PoolTimeoutError, PoolClosedError: As for :meth:`lease`.
        """
        lease = self.lease(timeout)
        await lease.__aenter__()
        return lease

    async def close(self) -> None:
        """Closes the pool: waiters get :class:`PoolClosedError`, idle resources are destroyed.

        Leased resources are destroyed when released. Waits for pending creates and destroys, so
        nothing of the pool is left running; idempotent.
        """
        if not self._closed:
            self._closed = True
            if self._reaper is not None:
                self._reaper.cancel()
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_exception(PoolClosedError(f"pool {self.name!r} was closed while waiting"))
            while self._idle:
                self._discard(self._idle.pop())
        pending = [t for t in (self._reaper, *self._tasks) if t is not None and not t.done()]
        while pending:  # a create finishing now is destroyed in a new task: loop until quiet
            await asyncio.gather(*pending, return_exceptions=True)
            pending = [t for t in self._tasks if not t.done()]

    def stats(self) -> PoolStats:
        """A snapshot of the pool's state and counters."""
        window = sorted(self._latencies)
        n = len(window)
        latency = LatencyStats(
            p50=window[(n - 1) // 2] if n else 0.0,
            p99=window[(99 * n + 99) // 100 - 1] if n else 0.0,  # nearest rank
            mean=sum(window) / n if n else 0.0,
            samples=n,
        )
        return PoolStats(
            name=self.name,
            size=self.config.size,
            alive=self._alive,
            in_use=self._in_use,
            idle=len(self._idle),
            waiting=len(self._waiters),
            created=self._created,
            destroyed=self._destroyed,
            leases=self._leases,
            timeouts=self._timeouts,
            failures=self._failures,
            acquire_latency_s=latency,
        )

    # -- acquiring -------------------------------------------------------------------------

    def _take_now(self, start: float) -> _Slot[R] | None:
        """The fast path: the top idle resource, if it needs no reset or check.

        No waiter can be skipped: while anyone waits nothing is idle (see :meth:`_take`).
        """
        if self._closed:
            raise PoolClosedError(f"pool {self.name!r} is closed")
        idle = self._idle
        if not idle or (idle[-1].uses and self._needs_prep):
            return None
        slot = idle.pop()
        self._hand_out(slot, start)
        return slot

    async def _take_waiting(self, timeout: float | None, start: float) -> _Slot[R]:
        """The slow path: wait in line, create, or reset and check, all within ``timeout``."""
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                slot = await self._obtain()
        except TimeoutError:
            if not deadline.expired():  # a hook's own TimeoutError, not ours
                raise
            self._timeouts += 1
            raise PoolTimeoutError(
                f"pool {self.name!r}: no resource within {timeout:g}s ({self._in_use} in use, "
                f"{len(self._idle)} idle, {len(self._waiters)} waiting, "
                f"size {self.config.size})"
            ) from None
        self._hand_out(slot, start)
        return slot

    async def _obtain(self) -> _Slot[R]:
        if self._closed:
            raise PoolClosedError(f"pool {self.name!r} is closed")
        token = self._take()
        if token is None:
            token = await self._wait()
        while token is not _CREATE:
            if not (token.uses and self._needs_prep) or await self._prepare(token):
                return token
            token = await self._replace(token)
        return await self._make()

    def _take(self) -> _Slot[R] | Any:
        """An idle resource, else a unit of capacity (``_CREATE``), else None (must wait).

        This never jumps the queue: a freed resource or unit of capacity goes straight to the
        oldest waiter, so while anyone waits nothing is idle and all capacity is held.
        """
        if self._idle:
            return self._idle.pop()
        if self._alive < self.config.size:
            self._alive += 1
            return _CREATE
        return None

    async def _wait(self) -> _Slot[R] | Any:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # We were handed a resource in the same tick we were cancelled or timed out:
                # pass it on rather than lose it.
                self._give_back(waiter.result())
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:  # already popped (and skipped) by a releaser
                    pass
            raise

    def _hand_out(self, slot: _Slot[R], start: float) -> None:
        slot.uses += 1
        self._in_use += 1
        self._leases += 1
        self._latencies.append(time.perf_counter() - start)

    async def _make(self) -> _Slot[R]:
        """Turns one unit of held capacity into a new resource, or frees it and raises."""
        try:
            made = self._create()
        except Exception:
            self._create_failed()
            raise
        if not inspect.isawaitable(made):
            return self._new_slot(made)
        task = asyncio.create_task(self._finish_create(made))
        self._track(task)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(self._adopt)
            raise

    async def _finish_create(self, pending: Awaitable[R]) -> _Slot[R]:
        try:
            resource = await pending
        except Exception:
            self._create_failed()
            raise
        except BaseException:  # cancelled with the loop: not the hook's failure, but free the slot
            self._free_capacity()
            raise
        return self._new_slot(resource)

    def _new_slot(self, resource: R) -> _Slot[R]:
        self._created += 1
        return _Slot(resource)

    def _create_failed(self) -> None:
        self._failures += 1
        logger.warning("pool %r: create failed", self.name, exc_info=True)
        self._free_capacity()

    def _adopt(self, task: asyncio.Task[_Slot[R]]) -> None:
        """Keeps a resource whose creator was cancelled before it was ready."""
        if not task.cancelled() and task.exception() is None:
            self._return(task.result())

    async def _prepare(self, slot: _Slot[R]) -> bool:
        """Resets and checks a used resource; False (and a failure counted) if it is unfit."""
        resource = slot.resource
        try:
            if self._reset is not None:
                done = self._reset(resource)
                if inspect.isawaitable(done):
                    await done
            fit = True
            if self._check is not None:
                fit = self._check(resource)
                if inspect.isawaitable(fit):
                    fit = await fit
        except Exception:
            logger.warning("pool %r: reset or check failed", self.name, exc_info=True)
            fit = False
        except BaseException:
            self._discard(slot)  # interrupted mid-reset or mid-check: its state is unknown
            raise
        if not fit:
            self._failures += 1
        return bool(fit)

    async def _replace(self, slot: _Slot[R]) -> _Slot[R] | Any:
        """Destroys an unfit resource, keeping its capacity: returns another idle one or ``_CREATE``.

        Keeping the capacity (rather than freeing it and waiting again) means a leaser that drew
        a bad resource is not sent to the back of the line.
        """
        task = self._discard(slot, free=False)
        if task is not None:
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                task.add_done_callback(lambda _: self._free_capacity())
                raise
        if self._closed or self._idle:
            self._free_capacity()
            if self._closed:
                raise PoolClosedError(f"pool {self.name!r} was closed while leasing")
            return self._idle.pop()
        return _CREATE

    # -- returning and destroying ----------------------------------------------------------

    async def _release(self, slot: _Slot[R], broken: bool) -> None:
        self._in_use -= 1
        if broken:
            self._failures += 1
        max_uses = self.config.max_uses
        if broken or self._closed or (max_uses is not None and slot.uses >= max_uses):
            task = self._discard(slot)
            if task is not None:
                await asyncio.shield(task)  # if we are cancelled, close() still waits for it
        else:
            self._return(slot)

    def _give_back(self, token: _Slot[R] | Any) -> None:
        if token is _CREATE:
            self._free_capacity()
        else:
            self._return(token)

    def _return(self, slot: _Slot[R]) -> None:
        """Hands a healthy resource to the oldest waiter, or puts it on the idle stack."""
        if self._closed:
            self._discard(slot)
            return
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():  # skip waiters cancelled but not yet unwound
                waiter.set_result(slot)
                return
        if self.config.idle_ttl_s is not None:
            slot.idle_since = time.monotonic()
            self._ensure_reaper()
        self._idle.append(slot)

    def _free_capacity(self) -> None:
        """Gives a freed unit of capacity to the oldest waiter, or releases it."""
        if not self._closed:
            waiters = self._waiters
            while waiters:
                waiter = waiters.popleft()
                if not waiter.done():
                    waiter.set_result(_CREATE)
                    return
        self._alive -= 1

    def _discard(self, slot: _Slot[R], *, free: bool = True) -> asyncio.Task[None] | None:
        """Destroys a resource, then frees its capacity (unless ``free`` is False: the caller
        keeps it); returns the task if the destroy hook must be awaited."""
        if self._destroy is not None:
            try:
                pending = self._destroy(slot.resource)
            except Exception:
                self._destroy_failed()
            else:
                if inspect.isawaitable(pending):
                    self._destroying += 1
                    task = asyncio.create_task(self._finish_destroy(pending, free))
                    self._track(task)
                    return task
        self._destroyed_one(free)
        return None

    async def _finish_destroy(self, pending: Awaitable[None], free: bool) -> None:
        try:
            await pending
        except Exception:
            self._destroy_failed()
        finally:
            self._destroying -= 1
            self._destroyed_one(free)

    def _destroy_failed(self) -> None:
        self._failures += 1
        logger.warning("pool %r: destroy failed", self.name, exc_info=True)

    def _destroyed_one(self, free: bool) -> None:
        self._destroyed += 1
        if free:
            self._free_capacity()

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- idle eviction ---------------------------------------------------------------------

    def _ensure_reaper(self) -> None:
        if self._reaper is None and self.config.idle_ttl_s is not None and not self._closed:
            self._reaper = asyncio.get_running_loop().create_task(self._reap(self.config.idle_ttl_s))

    async def _reap(self, ttl: float) -> None:
        idle, floor = self._idle, self.config.prewarm
        while True:
            now = time.monotonic()
            while idle and self._alive - self._destroying > floor and idle[0].idle_since + ttl <= now:
                self._discard(idle.popleft())
            # Sleep until the oldest idle resource expires, or a full ttl if none may go now.
            evictable = idle and self._alive - self._destroying > floor
            await asyncio.sleep(idle[0].idle_since + ttl - now if evictable else ttl)


class ResourceManager:
    """Named resource pools, sized by a config mapping.

    Example:
        >>> manager = ResourceManager({"jvm": {"size": 2, "max_uses": 50}})
        >>> pool = manager.register("jvm", ResourceSpec(create=object), default=PoolConfig(size=1, prewarm=1))
        >>> pool.config.size, pool.config.max_uses, pool.config.prewarm
        (2, 50, 1)
    """

    def __init__(self, config: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Checks the config's keys now, so a typo fails at start-up rather than at register.

        Args:
            config: Per-pool overrides of :class:`PoolConfig` fields, keyed by pool name.

        Raises:
            ValueError: A section has a key that is not a ``PoolConfig`` field.
        """
        self._config = {name: dict(section) for name, section in (config or {}).items()}
        for name, section in self._config.items():
            try:
                PoolConfig._check_keys(section)
            except ValueError as exc:
                raise ValueError(f"pool {name!r}: {exc}") from None
        self._pools: dict[str, ResourcePool[Any]] = {}
        self._shared_settings: dict[str, Any] = {}  # what each shared pool's resources were made with

    def configure(self, config: Mapping[str, Mapping[str, Any]]) -> None:
        """Size pools after the manager was made (the process-wide :func:`default_manager`, say), before they are
        registered: each section is merged over the one the manager has.

        Example:
            >>> manager = ResourceManager()
            >>> manager.configure({"jvm": {"size": 8}})
            >>> manager.register("jvm", ResourceSpec(create=object), default=PoolConfig(size=1)).config.size
            8

        Raises:
            ValueError: a section has a key that is not a ``PoolConfig`` field, or names a pool already registered
                with other values (a running pool is not resized).
        """
        for name, section in config.items():
            try:
                PoolConfig._check_keys(section)
            except ValueError as exc:
                raise ValueError(f"pool {name!r}: {exc}") from None
            pool = self._pools.get(name)
            if pool is not None and any(getattr(pool.config, key) != value for key, value in section.items()):
                raise ValueError(f"pool {name!r} is already running with {pool.config}; configure it before first use")
            self._config[name] = {**self._config.get(name, {}), **section}

    def register(self, name: str, spec: ResourceSpec[R], default: PoolConfig | None = None) -> ResourcePool[R]:
        """Creates the pool ``name``; its config section overrides ``default`` field by field.

        A pool registered after :meth:`start` is usable at once (resources are made on demand);
        call :meth:`start` again to prewarm it.

        Raises:
            ValueError: ``name`` is already registered, or its config is invalid.
        """
        if name in self._pools:
            raise ValueError(f"pool {name!r} is already registered")
        try:
            config = PoolConfig.from_dict(self._config.get(name, {}), defaults=default)
        except ValueError as exc:
            raise ValueError(f"pool {name!r}: {exc}") from None
        pool = ResourcePool(spec, config, name=name)
        self._pools[name] = pool
        return pool

    def shared_pool(
        self,
        name: str,
        make_spec: Callable[[Any], ResourceSpec[R]],
        settings: Any = None,
        *,
        default_settings: Any = None,
        default: PoolConfig | None = None,
        kind: str = "resources",
    ) -> ResourcePool[R]:
        """The pool ``name`` that every env asking for it shares, registered on first use.

        The first caller registers it with ``make_spec(settings or default_settings)``; a later caller
        gets the same pool, and its ``settings`` (None: whatever the pool has) must match. A pool that
        was registered by other means is handed out as it is.

        Args:
            name: The pool's name; its config section sizes it (over ``default``).
            make_spec: Builds the resources' spec from the settings (how a sandbox or a JVM starts).
            settings: How this caller wants the resources made; None accepts the pool's.
            default_settings: The settings of a pool registered without any.
            default: The pool config under the manager's section.
            kind: What the resources are, for the error message ("sandboxes", "JVMs").

        Raises:
            ValueError: the pool was made with other settings.
        """
        if name not in self._pools:
            chosen = default_settings if settings is None else settings
            pool = self.register(name, make_spec(chosen), default)
            self._shared_settings[name] = chosen
            return pool
        existing = self._shared_settings.get(name)  # None: registered by other means, used as it is
        if settings is not None and existing is not None and settings != existing:
            raise ValueError(f"pool {name!r} already runs {kind} with {existing}; use another pool name for {settings}")
        return self._pools[name]

    def pool(self, name: str) -> ResourcePool[Any]:
        """The pool registered as ``name``.

        Raises:
            KeyError: No such pool; the message lists the registered names.
        """
        try:
            return self._pools[name]
        except KeyError:
            raise KeyError(f"no pool named {name!r}; registered: {', '.join(sorted(self._pools)) or 'none'}") from None

    def lease(self, name: str, timeout: Timeout = ...) -> Lease[Any]:
        """``async with manager.lease("jvm", timeout=5) as jvm:``; see :meth:`ResourcePool.lease`."""
        return self.pool(name).lease(timeout)

    async def start(self) -> None:
        """Starts (prewarms) every registered pool in parallel."""
        await asyncio.gather(*(pool.start() for pool in self._pools.values()))

    async def close(self) -> None:
        """Closes every pool, even if closing one of them fails; then raises the first error."""
        results = await asyncio.gather(*(pool.close() for pool in self._pools.values()), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    def stats(self) -> dict[str, PoolStats]:
        """Each pool's :meth:`ResourcePool.stats`, by name."""
        return {name: pool.stats() for name, pool in self._pools.items()}

    async def __aenter__(self) -> ResourceManager:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


_default_manager: ResourceManager | None = None


def default_manager() -> ResourceManager:
    """The process-wide manager for envs that are not given one; created empty on first use.

    Register pools on it before the envs that use them run. Its pools, like any, belong to one
    event loop at a time: close it (``await default_manager().close()``) before that loop ends.
    """
    global _default_manager
    if _default_manager is None:
        _default_manager = ResourceManager()
    return _default_manager


def _is_coroutine_function(fn: Callable[..., Any]) -> bool:
    """True for coroutine functions, including callable objects with an ``async __call__``."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004
