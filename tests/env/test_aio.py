"""run_sync and gather start coroutines eagerly; everything a coroutine can observe stays as in the loop.

The reference is the plain path: ``loop.run_until_complete`` for :func:`run_sync` and
``asyncio.gather`` for :func:`gather`, each run on a fresh loop, and compared outcome by outcome.

Every test runs twice: on the fast path (asyncio's internals, as on CPython 3.11) and on the public path
the module takes where those internals differ (decided with each private function taken away, on a loop
that notes any private attribute the module reads of it: none may be). test_aio_guard.py takes each
internal away in turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import sys
import threading
import weakref

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfly_env.core import aio
from agentfly_env.core.aio import gather, run_sync

variable: contextvars.ContextVar[str] = contextvars.ContextVar("variable", default="unset")


class WatchedLoop(asyncio.SelectorEventLoop):
    """An asyncio loop that notes each private attribute the module reads of it."""

    def __init__(self) -> None:
        self.private_reads: set[str] = set()
        super().__init__()

    def __getattribute__(self, name):
        if name[:1] == "_" and name[:2] != "__" and sys._getframe(1).f_code.co_filename == aio.__file__:
            object.__getattribute__(self, "private_reads").add(name)
        return super().__getattribute__(name)


def take_every_function_away(patch: pytest.MonkeyPatch) -> None:
    for module, name in aio._INTERNAL_FUNCTIONS:
        patch.delattr(module, name)


@contextlib.contextmanager
def public_path(take_away=take_every_function_away):
    """The module as decided on an interpreter without what ``take_away`` removes, with this thread's loop a
    :class:`WatchedLoop`; yields why the fast path is off. Afterwards the module decides again, on this
    interpreter, and this thread's loop is the one it had."""
    saved = dict(aio._thread_state.__dict__)
    aio._thread_state.__dict__.clear()
    watched = WatchedLoop()
    try:
        with pytest.MonkeyPatch.context() as patch:
            take_away(patch)
            aio._configure()  # the decision taken at import, here without the internal
        assert not aio._EAGER and aio._EAGER_OFF
        # What the public path may call: nothing private is bound.
        assert aio._get_running_loop is aio._no_running_loop_is_none
        assert aio._set_running_loop is aio._enter_task is aio._leave_task is None
        assert aio._register_task is aio._unregister_task is None
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(asyncio, "new_event_loop", lambda: watched)
            run_sync(asyncio.sleep(0))
        assert aio._thread_state.loop is watched
        yield aio._EAGER_OFF
        assert not watched.private_reads
    finally:
        aio._configure()
        watched.close()
        aio._thread_state.__dict__.clear()
        aio._thread_state.__dict__.update(saved)
    assert aio._EAGER, aio._EAGER_OFF


@pytest.fixture(params=["fast", "public"])
def path(request):
    if request.param == "fast":
        assert aio._EAGER, aio._EAGER_OFF  # CPython 3.11, the tested version, takes the fast path
        yield request.param
        return
    with public_path():
        yield request.param


pytestmark = pytest.mark.usefixtures("path")


def thread_loop() -> asyncio.AbstractEventLoop:
    run_sync(asyncio.sleep(0))  # makes sure this thread's loop exists
    return aio._thread_state.loop


async def value(x):
    return x


# ----------------------------------------------------------------- run_sync, one coroutine


def test_results_and_exceptions_come_back_unchanged():
    error = ValueError("boom")

    async def fail():
        raise error

    assert run_sync(value(7)) == 7
    with pytest.raises(ValueError) as raised:
        run_sync(fail())
    assert raised.value is error


def test_the_coroutine_runs_in_its_own_task_on_the_persistent_loop():
    seen = []

    async def look():
        seen.append((asyncio.get_running_loop(), asyncio.current_task(), asyncio.get_running_loop().is_running()))
        await asyncio.sleep(0)  # and after a real suspension
        seen.append((asyncio.get_running_loop(), asyncio.current_task(), asyncio.get_running_loop().is_running()))

    run_sync(look())
    run_sync(look())
    loop = thread_loop()
    assert all(running is loop and ok for running, _, ok in seen)
    tasks = [task for _, task, _ in seen]
    assert all(isinstance(task, asyncio.Task) for task in tasks)
    assert tasks[0] is tasks[1] and tasks[2] is tasks[3] and tasks[0] is not tasks[2]
    # Outside the call the loop is not running and is not the running loop.
    assert not loop.is_running()
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def test_the_first_step_runs_once_and_the_loop_continues_it():
    steps = []

    async def two_steps():
        steps.append("before")
        await asyncio.sleep(0.01)
        steps.append("after")
        return len(steps)

    assert run_sync(two_steps()) == 2
    assert steps == ["before", "after"]


def test_contextvars_are_copied_in_and_not_leaked_out():
    async def change():
        before = variable.get()
        variable.set("inside")
        await asyncio.sleep(0)
        return before, variable.get()

    async def change_without_suspending():
        before = variable.get()
        variable.set("inside")
        return before, variable.get()

    token = variable.set("caller")
    try:
        assert run_sync(change()) == ("caller", "inside")
        assert run_sync(change_without_suspending()) == ("caller", "inside")
        assert variable.get() == "caller"
    finally:
        variable.reset(token)


def test_asyncio_timeout_works_with_and_without_suspending():
    async def quick():
        async with asyncio.timeout(5):
            return "quick"

    async def slow():
        async with asyncio.timeout(0.01):
            await asyncio.sleep(5)

    assert run_sync(quick()) == "quick"
    with pytest.raises(TimeoutError):
        run_sync(slow())


def test_cancelled_timers_do_not_pile_up():
    async def quick():
        async with asyncio.timeout(30):  # one timer per call, cancelled on exit
            return 1

    loop = thread_loop()
    for _ in range(2000):
        run_sync(quick())
    assert len(loop._scheduled) <= 1


def test_a_due_timer_takes_the_plain_path_and_runs_in_the_call():
    def program(loop, fired):
        loop.call_later(0, fired.append, "timer")

        async def look():
            return list(fired)

        return look()

    reference: list[str] = []
    reference_loop = asyncio.new_event_loop()
    try:
        expected = reference_loop.run_until_complete(program(reference_loop, reference))
    finally:
        reference_loop.close()
    fired: list[str] = []
    assert run_sync(program(thread_loop(), fired)) == expected
    assert fired == reference == ["timer"]


def test_a_lock_made_in_one_call_is_usable_under_contention_in_later_ones():
    lock = run_sync(_make_lock())

    async def contend():
        async def hold(tag, log):
            async with lock:
                log.append(tag)
                await asyncio.sleep(0)

        log = []
        await asyncio.gather(hold("a", log), hold("b", log))
        return log

    assert run_sync(contend()) == ["a", "b"]
    assert run_sync(contend()) == ["a", "b"]


async def _make_lock():
    lock = asyncio.Lock()
    async with lock:  # binds it to the running loop
        pass
    return lock


def test_background_tasks_start_before_the_call_returns_as_with_run_until_complete():
    def program(log):
        async def background():
            log.append("background started")
            await asyncio.sleep(0)
            log.append("background resumed")

        async def main():
            log.append("main")
            main.task = asyncio.get_running_loop().create_task(background())
            return "done"

        return main

    reference_log: list[str] = []
    reference_loop = asyncio.new_event_loop()
    try:
        main = program(reference_log)
        assert reference_loop.run_until_complete(main()) == "done"
        reference_loop.run_until_complete(main.task)
    finally:
        reference_loop.close()

    log: list[str] = []
    main = program(log)
    assert run_sync(main()) == "done"
    assert log == reference_log[: len(log)] == ["main", "background started"]
    run_sync(_wait(main.task))
    assert log == reference_log


async def _wait(task):
    await task


def test_async_generators_are_owned_by_the_loop():
    async def ticks():
        yield 1
        yield 2

    async def first():
        generator = ticks()
        return generator, await generator.__anext__()

    loop = thread_loop()
    generator, first_value = run_sync(first())
    assert first_value == 1 and generator in loop._asyncgens
    run_sync(generator.aclose())


def test_keyboard_interrupt_propagates_and_leaves_the_loop_usable():
    async def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sync(interrupted())
    assert not thread_loop().is_running()
    assert run_sync(value(3)) == 3


def test_run_sync_inside_run_sync_goes_to_a_helper_thread():
    async def outer():
        return run_sync(inner()), threading.current_thread().name

    async def inner():
        return threading.current_thread().name

    inner_thread, outer_thread = run_sync(outer())
    assert inner_thread == "agentfly-run-sync" and outer_thread != inner_thread


def test_the_helper_threads_loop_is_closed_when_the_call_ends():
    async def outer():
        return run_sync(inner())

    async def inner():
        return asyncio.get_running_loop()

    assert run_sync(outer()).is_closed()


def test_a_threads_loop_goes_when_nothing_holds_it():
    loops = []

    def in_thread():
        run_sync(gather_in_a_task())
        loops.append(weakref.ref(aio._thread_state.loop))

    async def gather_in_a_task():
        return await gather(value(1), value(2))

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    gc.collect()
    assert loops and loops[0]() is None  # not kept by its parked hosts


def test_a_debug_loop_takes_the_plain_path():
    loop = thread_loop()
    loop.set_debug(True)
    try:
        assert run_sync(value(5)) == 5
        assert run_sync(asyncio.sleep(0, "slept")) == "slept"
    finally:
        loop.set_debug(False)


def test_awaitables_that_are_not_coroutines_take_the_plain_path():
    loop = thread_loop()
    future = loop.create_future()
    loop.call_soon(future.set_result, "future")
    assert run_sync(future) == "future"


def test_a_task_factory_of_the_loop_is_honoured():
    made = []

    def factory(loop, coroutine, **kwargs):
        task = asyncio.Task(coroutine, loop=loop, **kwargs)
        made.append(task)
        return task

    async def twice(x):
        await asyncio.sleep(0)
        return 2 * x

    async def main():
        return await gather(value(1), twice(2)), asyncio.current_task()

    loop = thread_loop()
    loop.set_task_factory(factory)
    try:
        assert run_sync(value(5)) == 5
        results, main_task = run_sync(main())
    finally:
        loop.set_task_factory(None)
    assert results == [1, 4]
    assert main_task in made and len(made) == 4  # value(5), main() and the two gathered


def test_each_thread_has_its_own_loop():
    loops = []

    def in_thread():
        run_sync(value(1))
        loops.append(aio._thread_state.loop)

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join()
    assert loops and loops[0] is not thread_loop()


def test_cancellation_from_inside_reaches_the_caller():
    async def cancel_myself():
        asyncio.current_task().cancel()
        await asyncio.sleep(0)

    with pytest.raises(asyncio.CancelledError):
        run_sync(cancel_myself())
    assert run_sync(value("after")) == "after"


def test_a_task_kept_and_cancelled_after_its_coroutine_ended_is_not_lent_again():
    async def mine():
        return asyncio.current_task()

    kept = run_sync(mine())
    kept.cancel()
    assert run_sync(value("next")) == "next"  # not cancelled by what was done to an earlier call's task
    assert run_sync(mine()) is not kept


# ----------------------------------------------------------------- gather


def test_asyncio_run_ends_after_an_eager_gather():
    async def main():
        results = await gather(value(1), value(2))
        return results, asyncio.current_task() in asyncio.all_tasks()

    # asyncio.run cancels every task of its loop as it ends and waits for them: a parked host is not one.
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(asyncio.run(main())), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and outcome == [([1, 2], True)]


async def _gather_in_task(coroutines):
    return await gather(*coroutines)


def test_gather_gives_every_running_coroutine_a_task_of_its_own_and_restores_the_caller():
    async def who(suspend):
        before = asyncio.current_task()
        if suspend:
            await asyncio.sleep(0)
        return before, asyncio.current_task()

    async def main():
        me = asyncio.current_task()
        seen = await gather(who(False), who(True), who(True), who(False))
        return me, seen, asyncio.current_task()

    me, seen, after = run_sync(main())
    assert after is me and all(isinstance(task, asyncio.Task) and task is not me for pair in seen for task in pair)
    assert all(before is after for before, after in seen)  # one task through a suspension
    # Alive at the same time (the two that suspended, and the last, which ran while they waited): never
    # the same task. The first had finished before any other started, so its task may be lent again.
    assert len({id(seen[1][0]), id(seen[2][0]), id(seen[3][0])}) == 3


def test_gather_runs_the_envs_that_suspend_concurrently():
    async def main():
        all_waiting = asyncio.Barrier(5)

        async def wait(tag):
            await asyncio.wait_for(all_waiting.wait(), 10)  # one at a time, the first would time out
            return tag

        return await gather(*(wait(i) for i in range(5)), value("now"))

    assert run_sync(main()) == [0, 1, 2, 3, 4, "now"]


def test_gather_takes_futures_too():
    async def main():
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_result, "future")
        return await gather(value(1), future)

    assert run_sync(main()) == [1, "future"]


def test_gather_of_nothing_is_an_empty_list():
    assert run_sync(_gather_in_task([])) == []


def test_gather_retrieves_every_exception():
    async def fail(i):
        raise ValueError(i)

    reported = []
    loop = thread_loop()
    loop.set_exception_handler(lambda loop, context: reported.append(context))
    try:
        with pytest.raises(ValueError, match="0"):
            run_sync(_gather_in_task([fail(0), fail(1), value(2)]))
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert not reported  # no "exception was never retrieved"


# ----------------------------------------------------------------- property tests against the plain path

# A coroutine's plan: how it suspends (a list of "sleep" / "future" / "timeout" steps, possibly empty),
# then whether it returns or raises.
step_kinds = st.sampled_from(["sleep", "future", "timeout", "lock"])
plans = st.tuples(st.lists(step_kinds, max_size=3), st.sampled_from(["return", "raise", "cancel"]))


def build(plan, index, log, lock_box):
    suspensions, outcome = plan

    async def coroutine():
        log.append((index, "start", variable.get()))
        variable.set(f"set by {index}")
        for number, kind in enumerate(suspensions):
            if kind == "sleep":
                await asyncio.sleep(0)
            elif kind == "future":
                future = asyncio.get_running_loop().create_future()
                asyncio.get_running_loop().call_soon(future.set_result, number)
                await future
            elif kind == "timeout":
                async with asyncio.timeout(10):
                    await asyncio.sleep(0)
            else:
                lock = lock_box.setdefault("lock", asyncio.Lock())
                async with lock:
                    await asyncio.sleep(0)
            log.append((index, kind, variable.get()))
        if outcome == "raise":
            raise ValueError(index)
        if outcome == "cancel":
            raise asyncio.CancelledError(f"cancelled {index}")
        return index * 10

    return coroutine()


def outcome_of(run):
    try:
        return ("value", run())
    except (Exception, asyncio.CancelledError) as error:
        return ("error", type(error).__name__, str(error) if not isinstance(error, asyncio.CancelledError) else "")


def plain_task_factory(loop, coroutine, **kwargs):
    return asyncio.Task(coroutine, loop=loop, **kwargs)


@contextlib.contextmanager
def task_factory(loop, factory):
    loop.set_task_factory(factory)
    try:
        yield
    finally:
        loop.set_task_factory(None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans, factory=st.sampled_from([None, plain_task_factory]))
def test_run_sync_matches_run_until_complete(plan, factory):
    reference_log: list = []
    loop = asyncio.new_event_loop()
    try:
        with task_factory(loop, factory):
            expected = outcome_of(lambda: loop.run_until_complete(build(plan, 0, reference_log, {})))
    finally:
        loop.close()
    log: list = []
    with task_factory(thread_loop(), factory):
        assert outcome_of(lambda: run_sync(build(plan, 0, log, {}))) == expected
    assert log == reference_log
    assert not thread_loop()._ready


async def _settled():
    """Back once every other task of the loop has finished: by loop iterations, not by time (a loaded machine
    may run few iterations in a millisecond)."""
    for _ in range(10_000):
        if all(task.done() for task in asyncio.all_tasks() if task is not asyncio.current_task()):
            return
        await asyncio.sleep(0)
    raise AssertionError("tasks still running after 10,000 loop iterations")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans=st.lists(plans, max_size=6), factory=st.sampled_from([None, plain_task_factory]))
def test_gather_matches_asyncio_gather(plans, factory):
    def program(gather_function, log):
        lock_box: dict = {}

        async def main():
            variable.set("main")
            result = await gather_function(*(build(plan, i, log, lock_box) for i, plan in enumerate(plans)))
            return result, variable.get()

        return main()

    reference_log: list = []
    loop = asyncio.new_event_loop()
    try:
        with task_factory(loop, factory):
            expected = outcome_of(lambda: loop.run_until_complete(program(asyncio.gather, reference_log)))
            expected_log = list(reference_log)
            loop.run_until_complete(_settled())  # children that outlived a failed gather finish
    finally:
        loop.close()
    log: list = []
    with task_factory(thread_loop(), factory):
        assert outcome_of(lambda: run_sync(program(gather, log))) == expected
        assert log == expected_log
        run_sync(_settled())
    assert log == reference_log


def test_call_function_tells_sync_from_async_functions():
    class Scorer:
        def sync(self, x):
            return x + 1

        async def asynchronous(self, x):
            return x + 2

    scorer = Scorer()
    assert run_sync(aio.call_function(scorer.sync, {"x": 1})) == 2
    assert run_sync(aio.call_function(scorer.asynchronous, {"x": 1})) == 3
    assert run_sync(aio.call_function(lambda x: x * 3, {"x": 2})) == 6
    assert run_sync(aio.call_function(value, {"x": 4})) == 4
    assert run_sync(aio.call_function(functools.partial(value), {"x": 5})) == 5
    assert run_sync(aio.call_function(functools.partial(scorer.sync), {"x": 5})) == 6
    assert run_sync(aio.call_function(dict, {"a": 1})) == {"a": 1}
