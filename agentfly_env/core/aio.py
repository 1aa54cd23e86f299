"""Driving the async API from sync code, and starting coroutines eagerly.

Most env steps finish without waiting on anything (a parse, a calculator, a scorer). Running them
through a full event-loop iteration (``run_until_complete``: a task scheduled, the selector polled, a
done callback scheduled, a second iteration to stop) costs more than the step itself. So
:func:`run_sync` and :func:`gather` start each coroutine *eagerly*: its task is created as usual and
its first step runs at once, with the loop marked as running. A step that returns without
suspending never touches the loop's machinery; one that awaits something real is left to the loop,
which continues the same task from where it stopped, so nothing runs twice.

What the coroutine sees is what it sees in the loop: it runs inside its own
:class:`asyncio.Task` (``asyncio.current_task()``, ``asyncio.timeout``, ``TaskGroup`` and cancellation
work), in a copy of the caller's context (contextvars), with ``asyncio.get_running_loop()`` returning
the persistent loop (locks, pools and connections bind to it as before), and its exceptions propagate
unchanged. This is Python 3.12's eager task start, done by hand on 3.11. Where the loop's state could
make the order of callbacks differ (callbacks already waiting, a timer due, a debug loop, a loop that
is not an :class:`asyncio.BaseEventLoop`), the plain path runs instead. One thing is left for later:
a call that does not suspend does not poll the selector, so I/O that other tasks of the loop wait on
is served the next time the loop runs (a call that suspends, or a timer that falls due).

Example:
    >>> async def double(x):
    ...     return 2 * x
    >>> run_sync(double(21))
    42
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import sys
import threading
from asyncio import base_events, events
from collections.abc import Callable, Coroutine, Mapping
from inspect import CO_COROUTINE
from types import CoroutineType, FunctionType, MethodType
from typing import Any, TypeVar

T = TypeVar("T")

_thread_state = threading.local()
_get_running_loop = events._get_running_loop
_set_running_loop = events._set_running_loop
_enter_task = asyncio.tasks._enter_task
_leave_task = asyncio.tasks._leave_task
_current_task = asyncio.current_task
_Task = asyncio.Task
_get_ident = threading.get_ident
_get_asyncgen_hooks = sys.get_asyncgen_hooks
_set_asyncgen_hooks = sys.set_asyncgen_hooks
_MIN_SCHEDULED_TIMER_HANDLES = getattr(base_events, "_MIN_SCHEDULED_TIMER_HANDLES", 100)
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = getattr(base_events, "_MIN_CANCELLED_TIMER_HANDLES_FRACTION", 0.5)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop that, from Python 3.12 on, starts tasks eagerly.

    Most env steps finish without waiting on anything (a parse, a calculator); an eager task runs
    them to the end at creation, with no scheduling round trip, which is most of what ``gather``
    over hundreds of envs costs.
    """
    loop = asyncio.new_event_loop()
    eager = getattr(asyncio, "eager_task_factory", None)
    if eager is not None:
        loop.set_task_factory(eager)
    return loop


def _can_start_eagerly(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether tasks on this loop can start eagerly: an asyncio loop (its ready queue and timers are
    known), not in debug mode (whose checks and slow-callback reports need the loop's own iterations)."""
    return isinstance(loop, asyncio.BaseEventLoop) and hasattr(loop, "_ready") and not loop._debug


def _quiet(loop: Any) -> bool:
    """Nothing waits to run: no ready callback and no timer due in the next iteration.

    Cancelled timers are dropped first, as each loop iteration does (``asyncio.timeout`` leaves one
    per call), so a loop that is only ever driven eagerly does not pile them up.
    """
    if loop._ready:
        return False
    scheduled = loop._scheduled
    if not scheduled:
        return True
    count = len(scheduled)
    if (
        count > _MIN_SCHEDULED_TIMER_HANDLES
        and loop._timer_cancelled_count / count > _MIN_CANCELLED_TIMER_HANDLES_FRACTION
    ):
        kept = []
        for handle in scheduled:
            if handle._cancelled:
                handle._scheduled = False
            else:
                kept.append(handle)
        heapq.heapify(kept)
        loop._scheduled = scheduled = kept
        loop._timer_cancelled_count = 0
    else:
        while scheduled and scheduled[0]._cancelled:
            loop._timer_cancelled_count -= 1
            heapq.heappop(scheduled)._scheduled = False
    return not scheduled or scheduled[0]._when >= loop.time() + loop._clock_resolution


def _first_step(loop: Any, task: asyncio.Task[Any], waiting: int) -> Any:
    """The handle of the task's first step, taken out of the loop's ready queue (which held ``waiting``
    callbacks before the task was created); None when a task factory (Python 3.12's eager one) ran it."""
    ready = loop._ready
    if len(ready) == waiting + 1 and getattr(ready[-1]._callback, "__self__", None) is task:
        return ready.pop()
    return None


def _start_all(loop: Any, coroutines: tuple[Coroutine[Any, Any, Any], ...]) -> list[asyncio.Task[Any]]:
    """Create each coroutine's task and run its first step at once, in order, inside the running loop.

    Each step runs as the loop would run it (its task entered as the current one, in its own context);
    the task that called, if any, is set aside meanwhile, as Python 3.12's eager start does.
    """
    ready = loop._ready
    factory = loop._task_factory
    outer = _current_task(loop)
    if outer is not None:
        _leave_task(loop, outer)
    tasks: list[asyncio.Task[Any]] = []
    try:
        for coroutine in coroutines:
            if factory is None:
                waiting = len(ready)
                task = _Task(coroutine, loop=loop)  # what loop.create_task does without a factory
                step = ready.pop() if len(ready) == waiting + 1 else None  # its first step, which it scheduled
            else:
                waiting = len(ready)
                task = loop.create_task(coroutine)
                step = _first_step(loop, task, waiting)
            tasks.append(task)
            if step is not None:
                step._run()
    except BaseException:  # KeyboardInterrupt or SystemExit out of a step: the rest never start
        for coroutine in coroutines[len(tasks) :]:
            coroutine.close()
        raise
    finally:
        if outer is not None:
            _enter_task(loop, outer)
    return tasks


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, on one event loop kept per thread.

    A persistent loop (rather than ``asyncio.run`` per call) keeps pools and connections that are bound
    to a loop usable across calls, and costs microseconds instead of a loop's creation. The coroutine
    starts eagerly (see the module's docstring): one that does not suspend costs no loop iteration.
    Called from a thread whose loop is already running (a notebook), it runs the coroutine on a helper
    thread.
    """
    if _get_running_loop() is None:
        state = _thread_state
        loop = getattr(state, "loop", None)
        if loop is None or loop.is_closed():
            loop = state.loop = new_event_loop()
            state.eager = _can_start_eagerly(loop)
            if state.eager:
                state.hooks = (loop._asyncgen_firstiter_hook, loop._asyncgen_finalizer_hook)
        if not (
            state.eager
            and type(coroutine) is CoroutineType
            and not loop._debug
            and loop._thread_id is None  # not running (run_sync from a callback of this very loop)
            and not loop._stopping
            and ((not loop._ready and not loop._scheduled) or _quiet(loop))
        ):
            return loop.run_until_complete(coroutine)
        # What run_forever sets up: the loop runs in this thread, owns the async generators that start,
        # and is the one asyncio.get_running_loop() returns.
        old_hooks = _get_asyncgen_hooks()
        loop._thread_id = _get_ident()
        _set_asyncgen_hooks(*state.hooks)
        _set_running_loop(loop)
        try:
            ready = loop._ready
            if loop._task_factory is None:
                task = _Task(coroutine, loop=loop)  # what loop.create_task does without a factory
                step = ready.pop() if len(ready) == 1 else None  # its first step, which it scheduled
            else:
                task = loop.create_task(coroutine)
                step = _first_step(loop, task, 0)
            if step is not None:
                try:
                    step._run()
                except BaseException:  # KeyboardInterrupt or SystemExit out of the step, as the loop raises it
                    if task.done() and not task.cancelled():
                        task.exception()
                    raise
        finally:
            loop._thread_id = None
            _set_running_loop(None)
            _set_asyncgen_hooks(*old_hooks)
        if task.done() and not loop._stopping and ((not ready and not loop._scheduled) or _quiet(loop)):
            return task.result()
        # The task waits on something, or its step left callbacks behind: the loop takes it from here, in
        # the order its own iterations would have run them.
        return loop.run_until_complete(task)
    result: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(run_sync(coroutine))
        except BaseException as error:  # re-raised in the caller's thread
            errors.append(error)

    worker = threading.Thread(target=target, name="agentfly-run-sync")
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return result[0]


async def gather(*coroutines: Coroutine[Any, Any, Any]) -> list[Any]:
    """``asyncio.gather(*coroutines)``, with each coroutine's task started eagerly.

    Other awaitables (futures) are left to ``asyncio.gather`` itself.

    Each coroutine still runs in its own task with its own copy of the context. The ones that finish
    without suspending are done before the next one starts; when all are, their results (or the first
    exception, in argument order, as ``asyncio.gather`` raises it) come back without yielding to the
    loop. Otherwise ``asyncio.gather`` waits for the rest.
    """
    loop = events.get_running_loop()
    if not _can_start_eagerly(loop) or not all(type(coroutine) is CoroutineType for coroutine in coroutines):
        return await asyncio.gather(*coroutines)
    tasks = _start_all(loop, coroutines)
    for task in tasks:
        if not task.done():
            return await asyncio.gather(*tasks)
    error: BaseException | None = None
    for task in tasks:  # like gather: every exception is retrieved, the first one is raised
        if task.cancelled():
            if error is None:
                error = task._make_cancelled_error()
        elif (exception := task.exception()) is not None and error is None:
            error = exception
    if error is not None:
        raise error
    return [task.result() for task in tasks]


def is_coroutine_function(function: Callable[..., Any]) -> bool:
    """``inspect.iscoroutinefunction``, answered from the code flags for plain functions and methods."""
    inner = function.__func__ if type(function) is MethodType else function
    if type(inner) is FunctionType and "_is_coroutine_marker" not in inner.__dict__:
        return bool(inner.__code__.co_flags & CO_COROUTINE)
    return inspect.iscoroutinefunction(function)


async def call_function(function: Callable[..., Any], kwargs: Mapping[str, Any], *, blocking: bool = False) -> Any:
    """Call a sync or coroutine function from async code: awaited, in a worker thread, or inline.

    ``blocking`` sends a sync function to a worker thread, for slow calls that must not hold up the
    event loop; a quick sync function is called inline, which costs nothing.
    """
    if is_coroutine_function(function):
        return await function(**kwargs)
    if blocking:
        return await asyncio.to_thread(function, **kwargs)
    return function(**kwargs)
