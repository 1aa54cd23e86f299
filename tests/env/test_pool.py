"""Tests for agentfly_env.resources.pool: bounds, fairness, reuse hooks, failure handling and a stress run."""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from agentfly_env.resources.pool import (
    PoolClosedError,
    PoolConfig,
    PoolStats,
    PoolTimeoutError,
    ResourceManager,
    ResourcePool,
    ResourceSpec,
    default_manager,
)

_ids = itertools.count()


@dataclass(eq=False)
class Res:
    """A fake backend that remembers who holds it."""

    id: int = field(default_factory=lambda: next(_ids))
    owner: int | None = None
    tainted: bool = False
    destroyed: bool = False


@dataclass
class Tracker:
    """Spec hooks that count what the pool did to its resources."""

    create_delay: float = 0.0
    live: int = 0
    max_live: int = 0
    created: list[Res] = field(default_factory=list)
    destroyed: list[Res] = field(default_factory=list)

    async def create(self) -> Res:
        self.live += 1
        self.max_live = max(self.max_live, self.live)
        await asyncio.sleep(self.create_delay)
        res = Res()
        self.created.append(res)
        return res

    def destroy(self, res: Res) -> None:
        assert not res.destroyed, "destroyed twice"
        res.destroyed = True
        self.live -= 1
        self.destroyed.append(res)

    def spec(self, **hooks: object) -> ResourceSpec[Res]:
        return ResourceSpec(create=self.create, destroy=self.destroy, **hooks)  # type: ignore[arg-type]


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Waits for ``predicate()`` to hold, failing the test if it does not within ``timeout`` (a guard against
    hanging, not a measure: it holds within milliseconds when the pool works)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.001)


# -- basics -------------------------------------------------------------------------------------


async def test_never_more_than_size_alive() -> None:
    tracker = Tracker(create_delay=0.005)
    pool = ResourcePool(tracker.spec(), PoolConfig(size=3))
    holding = 0
    most_held = 0

    async def use() -> None:
        nonlocal holding, most_held
        async with pool.lease():
            holding += 1
            most_held = max(most_held, holding)
            await asyncio.sleep(0.005)
            holding -= 1

    await asyncio.gather(*(use() for _ in range(20)))
    assert most_held == 3
    assert tracker.max_live == 3
    assert pool.stats().created == 3
    assert pool.stats().leases == 20
    await pool.close()


async def test_waiters_are_served_fifo_and_newcomers_cannot_barge() -> None:
    pool = ResourcePool(ResourceSpec(create=Res), PoolConfig(size=1))
    first = await pool.acquire()
    order: list[str] = []

    async def wait_turn(tag: str) -> None:
        async with pool.lease(timeout=2):
            order.append(tag)
            await asyncio.sleep(0.001)

    tasks = []
    for tag in "abcde":
        tasks.append(asyncio.create_task(wait_turn(tag)))
        await asyncio.sleep(0)
    await until(lambda: pool.stats().waiting == 5)
    await first.release()
    # The freed resource already belongs to "a": a newcomer must queue, not take it.
    with pytest.raises(PoolTimeoutError):
        async with pool.lease(timeout=0):
            pass
    await asyncio.gather(*tasks)
    assert order == list("abcde")
    await pool.close()


async def test_idle_resources_are_reused_most_recent_first() -> None:
    pool = ResourcePool(ResourceSpec(create=Res), PoolConfig(size=4))
    a, b = await pool.acquire(), await pool.acquire()
    res_a, res_b = a.resource, b.resource
    await a.release()
    await b.release()
    async with pool.lease() as again:
        assert again is res_b
    async with pool.lease() as again:
        assert again is res_b
    assert pool.stats().created == 2
    assert pool.stats().idle == 2
    assert res_a is not res_b
    await pool.close()


async def test_reset_runs_before_reuse_but_not_first_use() -> None:
    events: list[tuple[str, int]] = []

    def reset(res: Res) -> None:
        events.append(("reset", res.id))

    pool = ResourcePool(ResourceSpec(create=Res, reset=reset), PoolConfig(size=1))
    async with pool.lease() as res:
        events.append(("use", res.id))
    async with pool.lease() as res:
        events.append(("use", res.id))
    assert events == [("use", res.id), ("reset", res.id), ("use", res.id)]
    await pool.close()


async def test_failed_check_replaces_the_resource() -> None:
    tracker = Tracker()
    verdicts = iter([False, True])
    pool = ResourcePool(tracker.spec(check=lambda res: next(verdicts)), PoolConfig(size=1))
    async with pool.lease() as first:
        pass
    async with pool.lease() as second:  # check says False: first is destroyed, a new one made
        assert second is not first
    assert tracker.destroyed == [first]
    async with pool.lease() as third:  # check says True: reused
        assert third is second
    stats = pool.stats()
    assert (stats.created, stats.destroyed, stats.failures) == (2, 1, 1)
    await pool.close()


async def test_leaser_that_draws_an_unfit_resource_keeps_its_place_in_line() -> None:
    destroyed: list[Res] = []

    async def slow_destroy(res: Res) -> None:
        await asyncio.sleep(0.01)
        destroyed.append(res)

    verdicts = iter([False])
    spec = ResourceSpec(create=Res, check=lambda res: next(verdicts, True), destroy=slow_destroy)
    pool = ResourcePool(spec, PoolConfig(size=1))
    held = await pool.acquire()
    stale = held.resource
    order: list[str] = []

    async def wait_turn(tag: str) -> None:
        async with pool.lease(timeout=2) as res:
            order.append(tag)
            assert res is not stale

    tasks = []
    for tag in "abc":
        tasks.append(asyncio.create_task(wait_turn(tag)))
        await asyncio.sleep(0)
    await until(lambda: pool.stats().waiting == 3)
    await held.release()  # "a" draws the stale resource; its check fails
    await asyncio.gather(*tasks)
    assert order == ["a", "b", "c"]
    assert destroyed == [stale]
    assert (pool.stats().created, pool.stats().alive) == (2, 1)
    await pool.close()


async def test_lease_cancelled_during_check_destroys_the_resource() -> None:
    tracker = Tracker()
    checking = asyncio.Event()

    async def hanging_check(res: Res) -> bool:
        checking.set()
        await asyncio.sleep(10)
        return True

    pool = ResourcePool(tracker.spec(check=hanging_check), PoolConfig(size=1))
    async with pool.lease() as first:
        pass
    task = asyncio.create_task(pool.acquire())
    await checking.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tracker.destroyed == [first]  # half-checked: not trusted, not reused
    assert (pool.stats().alive, pool.stats().idle) == (0, 0)
    await pool.close()


async def test_close_while_replacing_an_unfit_resource_makes_no_new_one() -> None:
    async def slow_destroy(res: Res) -> None:
        await asyncio.sleep(0.02)

    pool = ResourcePool(ResourceSpec(create=Res, check=lambda res: False, destroy=slow_destroy), PoolConfig(size=1))
    async with pool.lease():
        pass
    task = asyncio.create_task(pool.acquire())
    await until(lambda: pool.stats().destroyed == 0 and pool.stats().failures == 1)  # check failed
    await pool.close()
    with pytest.raises(PoolClosedError):
        await task
    stats = pool.stats()
    assert (stats.created, stats.destroyed, stats.alive) == (1, 1, 0)


@pytest.mark.parametrize("hook", ["reset", "check"])
async def test_raising_reset_or_check_replaces_the_resource(hook: str) -> None:
    tracker = Tracker()

    def broken(res: Res) -> bool:
        raise OSError("backend died")

    pool = ResourcePool(tracker.spec(**{hook: broken}), PoolConfig(size=1))
    async with pool.lease() as first:
        pass
    async with pool.lease() as second:
        assert second is not first
    assert first.destroyed
    assert pool.stats().failures == 1
    await pool.close()


async def test_max_uses_recycles() -> None:
    tracker = Tracker()
    pool = ResourcePool(tracker.spec(), PoolConfig(size=1, max_uses=2))
    seen = []
    for _ in range(5):
        async with pool.lease() as res:
            seen.append(res)
    assert [seen.index(r) for r in seen] == [0, 0, 2, 2, 4]
    assert len(tracker.destroyed) == 2 and tracker.destroyed == [seen[0], seen[2]]
    await pool.close()


async def test_idle_resources_are_evicted_down_to_prewarm() -> None:
    tracker = Tracker()
    # An idle TTL a loaded machine does not outlast between the releases and the first check.
    pool = ResourcePool(tracker.spec(), PoolConfig(size=4, prewarm=1, idle_ttl_s=0.5))
    await pool.start()
    leases = [await pool.acquire() for _ in range(3)]
    for lease in leases:
        await lease.release()
    assert pool.stats().idle == 3
    await until(lambda: pool.stats().idle == 1)
    await asyncio.sleep(0.6)  # the floor holds: the last one is kept warm
    stats = pool.stats()
    assert (stats.idle, stats.destroyed, tracker.live) == (1, 2, 1)
    await asyncio.wait_for(pool.close(), 1)
    assert tracker.live == 0


async def test_idle_eviction_without_start_and_nothing_left_running_after_close() -> None:
    tracker = Tracker()
    pool = ResourcePool(tracker.spec(), PoolConfig(size=2, idle_ttl_s=0.05))
    async with pool.lease():
        pass
    started = time.monotonic()
    await until(lambda: tracker.live == 0)
    assert time.monotonic() - started >= 0.04  # not evicted early
    await asyncio.wait_for(pool.close(), 1)
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_prewarm_creates_in_parallel() -> None:
    tracker = Tracker()
    all_creating = asyncio.Barrier(4)

    async def create() -> Res:
        # Passes only once the 4 creates are in flight at once; in series, the first would time out.
        await asyncio.wait_for(all_creating.wait(), 10)
        return await tracker.create()

    pool = ResourcePool(ResourceSpec(create=create, destroy=tracker.destroy), PoolConfig(size=6, prewarm=4))
    await pool.start()
    assert (pool.stats().idle, pool.stats().created) == (4, 4)  # start() returned once all 4 were made
    await pool.start()  # idempotent
    assert pool.stats().created == 4
    await pool.close()
    assert tracker.live == 0


async def test_prewarm_of_blocking_sync_hooks_runs_in_parallel_threads() -> None:
    all_creating = threading.Barrier(4, timeout=10)

    def create() -> int:
        all_creating.wait()  # passes only once 4 threads are creating at once
        return threading.get_ident()

    pool = ResourcePool(ResourceSpec(create=create, blocking=True), PoolConfig(size=4, prewarm=4))
    await pool.start()
    assert pool.stats().idle == 4
    await pool.close()


@pytest.mark.parametrize("mode", ["sync", "async", "blocking", "blocking-async"])
async def test_sync_and_async_hooks(mode: str) -> None:
    calls: list[tuple[str, int]] = []

    def record(name: str) -> None:
        calls.append((name, threading.get_ident()))

    if mode.endswith("async"):

        async def create() -> Res:
            await asyncio.sleep(0)
            record("create")
            return Res()

        async def reset(res: Res) -> None:
            await asyncio.sleep(0)
            record("reset")

        async def check(res: Res) -> bool:
            await asyncio.sleep(0)
            record("check")
            return True

        async def destroy(res: Res) -> None:
            await asyncio.sleep(0)
            record("destroy")

    else:

        def create() -> Res:
            record("create")
            return Res()

        def reset(res: Res) -> None:
            record("reset")

        def check(res: Res) -> bool:
            record("check")
            return True

        def destroy(res: Res) -> None:
            record("destroy")

    spec = ResourceSpec(create=create, reset=reset, check=check, destroy=destroy, blocking=mode.startswith("blocking"))
    pool = ResourcePool(spec, PoolConfig(size=1))
    async with pool.lease() as first:
        assert isinstance(first, Res)
    async with pool.lease() as second:
        assert second is first
    await pool.close()
    assert [name for name, _ in calls] == ["create", "reset", "check", "destroy"]
    # Only sync hooks of a blocking spec leave the loop's thread; coroutine functions never do.
    on_loop = {ident == threading.get_ident() for _, ident in calls}
    assert on_loop == ({False} if mode == "blocking" else {True})


async def test_blocking_hooks_keep_the_loop_responsive() -> None:
    async def loop_ran_during_create(blocking: bool) -> bool:
        creating, loop_ran = threading.Event(), threading.Event()
        seen: list[bool] = []

        def create() -> Res:
            creating.set()
            # The loop's ticker answers within milliseconds if the loop is free; when this hook blocks
            # the loop itself (the control), nothing can answer and the wait runs out.
            seen.append(loop_ran.wait(timeout=10 if blocking else 0.2))
            return Res()

        async def ticker() -> None:
            while True:
                await asyncio.sleep(0.001)
                if creating.is_set():
                    loop_ran.set()

        pool = ResourcePool(ResourceSpec(create=create, blocking=blocking), PoolConfig(size=1))
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        async with pool.lease():
            pass
        task.cancel()
        await pool.close()
        return seen == [True]

    assert await loop_ran_during_create(blocking=True)
    assert not await loop_ran_during_create(blocking=False)  # the control: a sync hook blocks the loop


async def test_fast_path_schedules_nothing_and_is_fast() -> None:
    pool = ResourcePool(ResourceSpec(create=Res), PoolConfig(size=4))
    async with pool.lease():
        pass  # one idle resource from now on
    loop = asyncio.get_running_loop()
    scheduled: list[str] = []

    def counting(name: str, real):
        def wrapper(*args, **kwargs):
            scheduled.append(name)
            return real(*args, **kwargs)

        return wrapper

    loop.set_task_factory(counting("task", lambda loop, coro, **kw: asyncio.Task(coro, loop=loop, **kw)))
    loop.create_future = counting("future", loop.create_future)  # type: ignore[method-assign]
    loop.call_at = counting("timer", loop.call_at)  # type: ignore[method-assign]
    samples = []
    try:
        for _ in range(10_000):
            started = time.perf_counter()
            async with pool.lease():
                pass
            samples.append(time.perf_counter() - started)
    finally:
        loop.set_task_factory(None)
        del loop.create_future, loop.call_at
    assert scheduled == []
    assert statistics.median(samples) <= 20e-6
    assert pool.stats().created == 1
    await pool.close()


# -- failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize("error", [ValueError("bad move"), asyncio.CancelledError()])
async def test_exception_inside_lease_destroys_the_resource(error: BaseException) -> None:
    tracker = Tracker()
    pool = ResourcePool(tracker.spec(), PoolConfig(size=1))
    with pytest.raises(type(error)):
        async with pool.lease() as broken:
            raise error
    assert tracker.destroyed == [broken]
    async with pool.lease() as fresh:
        assert fresh is not broken
    stats = pool.stats()
    assert (stats.failures, stats.in_use, stats.created, stats.destroyed) == (1, 0, 2, 1)
    await pool.close()


async def test_task_cancelled_while_holding_destroys_the_resource() -> None:
    tracker = Tracker()
    pool = ResourcePool(tracker.spec(), PoolConfig(size=1))
    holding = asyncio.Event()

    async def hold() -> None:
        async with pool.lease():
            holding.set()
            await asyncio.sleep(10)

    task = asyncio.create_task(hold())
    await holding.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(tracker.destroyed) == 1
    assert pool.stats().in_use == 0
    await pool.close()


async def test_create_failure_propagates_and_frees_the_slot() -> None:
    attempts = 0

    async def flaky_create() -> Res:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0.01)
        if attempts == 1:
            raise ConnectionError("JVM did not start")
        return Res()

    pool = ResourcePool(ResourceSpec(create=flaky_create), PoolConfig(size=1))
    first = asyncio.create_task(pool.acquire(timeout=1))
    await asyncio.sleep(0)
    second = asyncio.create_task(pool.acquire(timeout=1))  # waits for the only slot
    with pytest.raises(ConnectionError, match="JVM did not start"):
        await first
    lease = await second  # the freed slot went to the waiter, which created its own
    await lease.release()
    stats = pool.stats()
    assert (stats.failures, stats.created, stats.alive, stats.idle) == (1, 1, 1, 1)
    await pool.close()


async def test_a_hooks_own_timeout_error_is_not_a_pool_timeout() -> None:
    def create() -> Res:
        raise TimeoutError("engine handshake")

    pool = ResourcePool(ResourceSpec(create=create), PoolConfig(size=1))
    with pytest.raises(TimeoutError, match="engine handshake") as info:
        await pool.acquire(timeout=1)
    assert not isinstance(info.value, PoolTimeoutError)
    assert pool.stats().timeouts == 0
    await pool.close()


async def test_timeout_error_is_clear() -> None:
    pool = ResourcePool(ResourceSpec(create=Res), PoolConfig(size=1, acquire_timeout_s=0.05), name="jvm")
    held = await pool.acquire()
    started = time.perf_counter()
    with pytest.raises(PoolTimeoutError) as info:
        await pool.acquire()  # the config's default timeout
    assert 0.04 <= time.perf_counter() - started < 1
    assert isinstance(info.value, TimeoutError)
    message = str(info.value)
    assert "'jvm'" in message and "0.05s" in message
    assert "1 in use" in message and "0 waiting" in message and "size 1" in message
    assert pool.stats().timeouts == 1 and pool.stats().waiting == 0
    await held.release()
    await pool.close()


async def test_timeout_during_create_keeps_the_new_resource() -> None:
    tracker = Tracker(create_delay=0.1)
    pool = ResourcePool(tracker.spec(), PoolConfig(size=1))
    with pytest.raises(PoolTimeoutError):
        await pool.acquire(timeout=0.02)
    await until(lambda: pool.stats().idle == 1)  # the create finished and was kept, not leaked
    async with pool.lease(timeout=0) as res:
        assert res is tracker.created[0]
    assert pool.stats().created == 1
    await pool.close()


async def test_cancelled_waiter_does_not_lose_a_handed_resource() -> None:
    pool = ResourcePool(ResourceSpec(create=Res), PoolConfig(size=1))
    held = await pool.acquire()
    res = held.resource
    first = asyncio.create_task(pool.acquire(timeout=5))
    await asyncio.sleep(0)
    second = asyncio.create_task(pool.acquire(timeout=5))
    await until(lambda: pool.stats().waiting == 2)
    await held.release()  # hands the resource to the first waiter's future...
    first.cancel()  # ...which is cancelled before it ever runs again
    lease = await asyncio.wait_for(second, 1)
    assert first.cancelled()
    assert lease.resource is res
    await lease.release()
    stats = pool.stats()
    assert (stats.in_use, stats.idle, stats.waiting, stats.created) == (0, 1, 0, 1)
    await pool.close()


async def test_close_fails_waiters_and_destroys_resources() -> None:
    tracker = Tracker()
    pool = ResourcePool(tracker.spec(), PoolConfig(size=2))
    idle = await pool.acquire()
    held = await pool.acquire()
    await idle.release()
    held_res = held.resource
    # The idle one is taken by the first waiter, so one stays queued.
    taker = asyncio.create_task(pool.acquire(timeout=5))
    waiter = asyncio.create_task(pool.acquire(timeout=5))
    await until(lambda: pool.stats().waiting == 1)
    await pool.close()
    with pytest.raises(PoolClosedError):
        await waiter
    taken = await taker
    assert not held_res.destroyed  # in use: destroyed on release, not under the user's feet
    await held.release()
    await taken.release()
    assert held_res.destroyed and tracker.live == 0
    with pytest.raises(PoolClosedError):
        await pool.acquire()
    with pytest.raises(PoolClosedError):
        await pool.start()
    stats = pool.stats()
    assert stats.created == stats.destroyed == 2 and stats.alive == 0


async def test_acquire_and_release_api() -> None:
    pool = ResourcePool(ResourceSpec(create=Res), PoolConfig(size=1))
    lease = await pool.acquire()
    res = lease.resource
    assert isinstance(res, Res)
    await lease.release()
    await lease.release()  # idempotent: no double return
    with pytest.raises(RuntimeError):
        lease.resource  # noqa: B018 - reading it is what raises
    with pytest.raises(RuntimeError):
        async with lease:
            pass
    assert (pool.stats().idle, pool.stats().alive) == (1, 1)
    async with await pool.acquire() as again:
        assert again is res
    lease = await pool.acquire()
    await lease.release(broken=True)
    assert (pool.stats().failures, pool.stats().destroyed) == (1, 1)
    await pool.close()


async def test_latency_stats() -> None:
    pool = ResourcePool(ResourceSpec(create=Res), PoolConfig(size=1))

    async def hold() -> None:
        async with pool.lease():
            await asyncio.sleep(0.05)

    await asyncio.gather(hold(), hold())  # the second waits ~0.05 s
    latency = pool.stats().acquire_latency_s
    assert latency.samples == 2
    assert latency.p50 <= latency.p99
    assert latency.p99 >= 0.04
    assert 0.02 <= latency.mean <= latency.p99
    await pool.close()


# -- the stress test ----------------------------------------------------------------------------


class Injected(Exception):
    """The error the stress test raises inside some leases."""


async def test_stress_concurrent_leases_with_cancellations_errors_and_failing_checks() -> None:
    plan_rng, hook_rng = random.Random(20240501), random.Random(7)
    size, n = 8, 1000
    live = max_live = check_false = 0
    violations: list[str] = []

    def expect_sound(res: Res, where: str) -> None:
        if res.owner is not None:
            violations.append(f"{where}: {res.id} still held by lease {res.owner}")
        if res.tainted or res.destroyed:
            violations.append(f"{where}: {res.id} broken or destroyed, yet in circulation")

    async def create() -> Res:
        nonlocal live, max_live
        live += 1
        max_live = max(max_live, live)
        await asyncio.sleep(hook_rng.uniform(0, 0.002))
        return Res()

    async def destroy(res: Res) -> None:
        nonlocal live
        if res.owner is not None:
            violations.append(f"destroy: {res.id} still held by lease {res.owner}")
        res.destroyed = True
        await asyncio.sleep(0)
        live -= 1

    def reset(res: Res) -> None:
        expect_sound(res, "reset")

    async def check(res: Res) -> bool:
        nonlocal check_false
        res.tainted = True  # until the check completes: one interrupted half-way is suspect
        if hook_rng.random() < 0.05:
            asyncio.current_task().cancel()  # the leaser's task: cancelled mid-check
        await asyncio.sleep(0)
        res.tainted = False
        expect_sound(res, "check")
        healthy = hook_rng.random() >= 0.1
        check_false += not healthy
        return healthy

    spec = ResourceSpec(create=create, reset=reset, check=check, destroy=destroy)
    pool = ResourcePool(spec, PoolConfig(size=size), name="stress")
    loop = asyncio.get_running_loop()
    got: set[int] = set()
    waiting: dict[int, None] = {}  # lease tasks not yet served, oldest first

    async def worker(i: int, hold: float, inject: bool, timeout: float, cancel_holding: bool) -> str:
        waiting[i] = None
        try:
            async with pool.lease(timeout=timeout) as res:
                del waiting[i]
                got.add(i)
                expect_sound(res, "lease")
                res.owner = i
                if cancel_holding:
                    loop.call_later(hold * plan_rng.random(), asyncio.current_task().cancel)
                try:
                    await asyncio.sleep(hold)
                    if res.owner != i:
                        violations.append(f"lease {i}: {res.id} taken over by lease {res.owner}")
                    if inject:
                        raise Injected(i)
                except BaseException:
                    res.tainted = True  # the pool must never hand this one out again
                    raise
                finally:
                    res.owner = None
        finally:
            waiting.pop(i, None)
        if waiting and plan_rng.random() < 0.1:
            # Our release just handed the resource to the oldest waiter's future: cancel that
            # waiter before it runs, the classic way to lose a resource.
            tasks[next(iter(waiting))].cancel()
        return "ok"

    tasks = []
    cancel_at: list[tuple[float, int]] = []
    for i in range(n):
        timeout = plan_rng.uniform(0.001, 0.02) if plan_rng.random() < 0.2 else 10.0
        hold, inject, cancel = plan_rng.uniform(0, 0.003), plan_rng.random() < 0.1, plan_rng.random()
        # About 20% are cancelled: 8% while holding, 6% at a random moment of the run (mostly
        # while waiting, as the queue is long), the rest mid-check or just as they are served.
        tasks.append(asyncio.create_task(worker(i, hold, inject, timeout, cancel_holding=cancel < 0.08)))
        if cancel >= 0.94:
            cancel_at.append((plan_rng.uniform(0, 0.2), i))

    async def chaos() -> None:
        # Cancel from a task rather than a timer, so cancellations land between other tasks' steps
        # in the same loop iteration, e.g. just after a release handed a waiter its resource.
        pending = deque(sorted(cancel_at))
        start = loop.time()
        while pending:
            await asyncio.sleep(0)
            while pending and pending[0][0] <= loop.time() - start:
                tasks[pending.popleft()[1]].cancel()

    await asyncio.wait([*tasks, asyncio.create_task(chaos())], timeout=60)  # a guard against hanging

    outcomes: dict[str, int] = dict.fromkeys(["ok", "timeout", "injected", "cancelled"], 0)
    unexpected = []
    cancelled_holding = 0
    for i, task in enumerate(tasks):
        assert task.done(), "a lease task hung"
        if task.cancelled():
            outcomes["cancelled"] += 1
            cancelled_holding += i in got
        elif isinstance(task.exception(), PoolTimeoutError):
            outcomes["timeout"] += 1
            assert i not in got
        elif isinstance(task.exception(), Injected):
            outcomes["injected"] += 1
        elif task.exception() is None:
            outcomes["ok"] += 1
        else:
            unexpected.append(task.exception())
    assert unexpected == []
    assert sum(outcomes.values()) == n
    # Every kind of event actually happened, cancellations both while waiting and while holding.
    assert all(count > 0 for count in outcomes.values()), outcomes
    assert 0 < cancelled_holding < outcomes["cancelled"]
    assert check_false > 0

    await until(lambda: pool.stats().alive == pool.stats().idle)  # background creates/destroys done
    stats = pool.stats()
    cancelled_waiting = outcomes["cancelled"] - cancelled_holding
    assert stats.leases == len(got)
    assert stats.timeouts == outcomes["timeout"]
    assert stats.leases + stats.timeouts + cancelled_waiting == n
    assert stats.failures == check_false + outcomes["injected"] + cancelled_holding
    assert stats.in_use == 0 and stats.waiting == 0
    assert stats.created - stats.destroyed == stats.idle == live <= size
    assert max_live <= size
    assert violations == []

    await pool.close()
    stats = pool.stats()
    assert stats.created == stats.destroyed and live == 0 and stats.alive == 0


# -- config and manager -------------------------------------------------------------------------


def test_pool_config_from_dict() -> None:
    assert PoolConfig.from_dict({}) == PoolConfig()
    base = PoolConfig(size=2, max_uses=5)
    assert PoolConfig.from_dict({"size": 3, "idle_ttl_s": 1}, defaults=base) == PoolConfig(
        size=3, max_uses=5, idle_ttl_s=1.0
    )
    with pytest.raises(ValueError, match="sizee, warm") as info:
        PoolConfig.from_dict({"sizee": 3, "warm": 1, "size": 2})
    assert "valid keys: size, prewarm" in str(info.value)
    with pytest.raises(ValueError, match="Expected `int`, got `str`"):
        PoolConfig.from_dict({"size": "8"})
    with pytest.raises(ValueError, match="prewarm must be between 0 and size"):
        PoolConfig.from_dict({"size": 2, "prewarm": 3})
    with pytest.raises(ValueError, match="size must be >= 1"):
        PoolConfig(size=0)


async def test_manager_config_overrides_defaults_field_by_field() -> None:
    tracker = Tracker()
    manager = ResourceManager({"jvm": {"size": 3, "prewarm": 2}})
    jvm = manager.register("jvm", tracker.spec(), default=PoolConfig(size=1, max_uses=7))
    plain = manager.register("plain", ResourceSpec(create=Res))
    assert jvm.config == PoolConfig(size=3, prewarm=2, max_uses=7)
    assert plain.config == PoolConfig()
    assert manager.pool("jvm") is jvm
    async with manager:
        assert tracker.live == 2  # prewarmed by start()
        async with manager.lease("jvm", timeout=1) as res:
            assert res in tracker.created
        stats = manager.stats()
        assert set(stats) == {"jvm", "plain"}
        assert isinstance(stats["jvm"], PoolStats) and stats["jvm"].leases == 1
    assert tracker.live == 0  # closed on exit
    with pytest.raises(PoolClosedError):
        await jvm.acquire()


def test_manager_unknown_pool_name() -> None:
    manager = ResourceManager()
    manager.register("jvm", ResourceSpec(create=Res))
    manager.register("engine", ResourceSpec(create=Res))
    with pytest.raises(KeyError, match="'sandbox'; registered: engine, jvm"):
        manager.pool("sandbox")
    with pytest.raises(KeyError, match="sandbox"):
        manager.lease("sandbox")
    with pytest.raises(ValueError, match="already registered"):
        manager.register("jvm", ResourceSpec(create=Res))


def test_manager_unknown_config_key() -> None:
    with pytest.raises(ValueError, match="pool 'jvm': unknown pool config key\\(s\\) max_use;"):
        ResourceManager({"jvm": {"size": 2, "max_use": 3}})
    manager = ResourceManager({"jvm": {"size": "two"}})
    with pytest.raises(ValueError, match="pool 'jvm': Expected `int`"):
        manager.register("jvm", ResourceSpec(create=Res))


def test_manager_configured_after_it_was_made_sizes_pools_not_yet_registered() -> None:
    manager = ResourceManager({"jvm": {"size": 3, "max_uses": 5}})
    manager.configure({"jvm": {"size": 6}, "engine": {"size": 16}})
    assert manager.register("jvm", ResourceSpec(create=Res)).config == PoolConfig(size=6, max_uses=5)
    assert manager.register("engine", ResourceSpec(create=Res), default=PoolConfig(size=4)).config.size == 16
    manager.configure({"engine": {"size": 16}})  # what it runs with already: nothing to change
    with pytest.raises(ValueError, match="pool 'engine' is already running with .*configure it before first use"):
        manager.configure({"engine": {"size": 8}})
    with pytest.raises(ValueError, match="pool 'sandbox': unknown pool config key\\(s\\) sise"):
        manager.configure({"sandbox": {"sise": 2}})


def test_default_manager_is_shared() -> None:
    manager = default_manager()
    assert isinstance(manager, ResourceManager)
    assert default_manager() is manager
