"""Driving the async API from sync code, and starting coroutines eagerly.

Most env steps finish without waiting on anything (a parse, a calculator, a scorer). Running them
through a full event-loop iteration (``run_until_complete``: a task scheduled, the selector polled, a
done callback scheduled, a second iteration to stop) costs more than the step itself, and so does
creating an :class:`asyncio.Task` for each (its first step scheduled, a weak reference registered). So
:func:`run_sync` and :func:`gather` start each coroutine *eagerly*, in a task lent to it: its first step
runs at once, with the loop marked as running, inside a *host* task, a real task of the loop kept parked
for this. A step that returns without suspending never touches the loop's machinery, and the host waits
for the next coroutine; one that awaits something real keeps its host, which the loop then runs: the host
continues the coroutine from where it stopped, so nothing runs twice, and it is that coroutine's task
from then on (a new host is made for the next one).

What the coroutine sees is what it sees in the loop: it runs inside a task no other running coroutine
shares (``asyncio.current_task()``, ``asyncio.timeout``, ``TaskGroup`` and cancellation work, before and
after a suspension), in a copy of the caller's context (contextvars), with ``asyncio.get_running_loop()``
returning the persistent loop (locks, pools and connections bind to it as before), and its exceptions
propagate unchanged. One thing differs from a task of its own: coroutines that finish without suspending
may be lent the same host one after the other (``current_task()`` kept past the coroutine's end may be
the next one's). Where the loop's state could make the order of callbacks differ (callbacks already
waiting, a timer due, a debug loop, a loop with a task factory, a loop that is not an
:class:`asyncio.BaseEventLoop`), the plain path runs instead. One thing is left for later: a call that
does not suspend does not poll the selector, so I/O that other tasks of the loop wait on is served the
next time the loop runs (a call that suspends, or a timer that falls due).

The fast path and Python versions: it leans on asyncio's private internals (CPython 3.11's): the loop's
``_ready`` queue and ``_scheduled`` timer heap (with their handles' ``_run``, ``_when``, ``_cancelled`` and
``_scheduled``), a few more loop attributes (``_debug``, ``_task_factory``, ``_thread_id``, ``_stopping``,
``_timer_cancelled_count``, ``_clock_resolution``, the async-generator hooks), ``Task._log_destroy_pending``,
and ``asyncio.events._get_running_loop``/``_set_running_loop`` and ``asyncio.tasks._enter_task``/
``_leave_task``/``_register_task``/``_unregister_task``. It exists for speed, measured on CPython 3.11 (one
core, median of rounds): ``run_sync`` of a coroutine that does not suspend 2.2 us against 9.5 us on the plain
path, a sync ``ToolEnv.step`` with a no-op tool 19.4 us against 28.3 us, ``gather`` of 8 such coroutines
(inside ``run_sync``) 10.1 us against 47.2 us. Whether it runs is decided once, at import, by what the
interpreter has, not by its version number: :func:`_configure` checks that each function above exists, that a
new :class:`asyncio.BaseEventLoop` has each attribute with the expected type and a timer and a callback land
where expected, then drives the fast path itself on a loop of its own, in a thread of its own, and checks what
a coroutine sees (its task, the running loop, a host lent twice, a suspension, an exception, a gather).
Anything missing or different, and the module takes the plain, public path for good:
``loop.run_until_complete`` and ``asyncio.gather``, the very reference the fast path is tested against, so
every guarantee above holds unchanged (each coroutine then gets a task of its own); what it gives up is only
the speed. ``_EAGER`` says which path runs and ``_EAGER_OFF`` why the fast one does not. Only CPython 3.11 is
tested (see ``pyproject.toml``). Decided with it: no sync twin of each env's step and no loosening of what
:func:`run_sync` guarantees, whichever path runs.

Example:
    >>> async def double(x):
    ...     return 2 * x
    >>> run_sync(double(21))
    42
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import inspect
import sys
import threading
from asyncio import base_events, events, tasks
from collections.abc import Callable, Coroutine, Generator, Mapping
from contextvars import Context, copy_context
from inspect import CO_COROUTINE
from types import CoroutineType, FunctionType, MethodType
from typing import Any, TypeVar

T = TypeVar("T")

_thread_state = threading.local()
_current_task = asyncio.current_task
_Task = asyncio.Task
_get_ident = threading.get_ident
_get_asyncgen_hooks = sys.get_asyncgen_hooks
_set_asyncgen_hooks = sys.set_asyncgen_hooks
_MIN_SCHEDULED_TIMER_HANDLES = getattr(base_events, "_MIN_SCHEDULED_TIMER_HANDLES", 100)
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = getattr(base_events, "_MIN_CANCELLED_TIMER_HANDLES_FRACTION", 0.5)

# The private functions the fast path calls: bound by _configure when they are there and behave as expected.
_INTERNAL_FUNCTIONS = (
    (events, "_get_running_loop"),
    (events, "_set_running_loop"),
    (tasks, "_enter_task"),
    (tasks, "_leave_task"),
    (tasks, "_register_task"),
    (tasks, "_unregister_task"),
)
# The private attributes of a new asyncio loop the fast path reads or writes, and what each must be.
_LOOP_ATTRIBUTES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "_ready": ("a deque", lambda value: type(value) is collections.deque),
    "_scheduled": ("a list", lambda value: type(value) is list),
    "_timer_cancelled_count": ("an int", lambda value: type(value) is int),
    "_clock_resolution": ("a float", lambda value: type(value) is float),
    "_debug": ("a bool", lambda value: type(value) is bool),
    "_task_factory": ("None", lambda value: value is None),
    "_thread_id": ("None", lambda value: value is None),
    "_stopping": ("a bool", lambda value: type(value) is bool),
    "_asyncgen_firstiter_hook": ("callable", callable),
    "_asyncgen_finalizer_hook": ("callable", callable),
}
_MISSING = object()


def _no_running_loop_is_none() -> asyncio.AbstractEventLoop | None:
    """The running loop of this thread, or None: ``events._get_running_loop`` by public means."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# Which path runs, and the internals the fast one uses: set once, by _configure, at the end of this module.
_EAGER = False
_EAGER_OFF: str | None = "not decided yet"  # why the fast path does not run (None when it does)
_get_running_loop: Callable[[], Any] = _no_running_loop_is_none
_set_running_loop: Any = None
_enter_task: Any = None
_leave_task: Any = None
_register_task: Any = None
_unregister_task: Any = None


def _can_start_eagerly(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether coroutines on this loop can start eagerly: the fast path runs on this interpreter (see the
    module's docstring), an asyncio loop (its ready queue and timers are known), not in debug mode (whose
    checks and slow-callback reports need the loop's own iterations), without a task factory (which wants
    to make every task itself)."""
    return (
        _EAGER
        and isinstance(loop, asyncio.BaseEventLoop)
        and hasattr(loop, "_ready")
        and not loop._debug
        and loop._task_factory is None
    )


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


class _Running:
    """A coroutine that suspended in its first step: its host ``task`` runs it now."""

    __slots__ = ("task",)

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task


class _Raised:
    """A coroutine whose first step raised ``error``."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Rest(Coroutine[Any, Any, Any]):
    """What a host task runs: the rest of the coroutine handed to it, which suspended in its first step.

    The host's own first step gives the task what the coroutine was waiting on (as if the coroutine had
    just yielded it); every later step goes to the coroutine, in the coroutine's context.
    """

    __slots__ = ("context", "coroutine", "handing", "waiting_on")

    def __init__(self) -> None:
        self.coroutine: Any = None
        self.context: Context | None = None
        self.waiting_on: Any = None  # what the coroutine yielded (a future, or None for a bare yield)
        self.handing = False  # the host's first step is still to give the task ``waiting_on``

    def send(self, value: Any) -> Any:
        if self.handing:
            self.handing = False
            return self.waiting_on
        return self.context.run(self.coroutine.send, value)  # type: ignore[union-attr]

    def throw(self, error: Any, *args: Any) -> Any:
        if self.handing:  # cancelled before it waited: the future goes too, as Task.cancel would do
            self.handing = False
            if isinstance(self.waiting_on, asyncio.Future):
                self.waiting_on.cancel()
        return self.context.run(self.coroutine.throw, error, *args)  # type: ignore[union-attr]

    def close(self) -> None:
        if self.coroutine is not None:
            self.coroutine.close()

    @property
    def __name__(self) -> str:  # what the task's repr shows
        return getattr(self.coroutine, "__qualname__", "idle host")

    def __await__(self) -> Generator[Any, None, Any]:
        raise TypeError("a host's coroutine is run by its task only")


class _Host:
    """A task of ``loop`` lent as the current task to coroutines started eagerly: created with its first
    step held back, which runs when a coroutine suspends and is handed over.

    A parked host is not one of ``asyncio.all_tasks()``: it has no coroutine of its own to wait for, and
    whoever cancels every task of a loop and waits for them (``asyncio.run`` as it ends) would wait forever.
    It joins them when a coroutine is handed over.
    """

    __slots__ = ("first_step", "rest", "task")

    def __init__(self, loop: Any) -> None:
        self.rest = _Rest()
        ready = loop._ready
        waiting = len(ready)
        self.task = _Task(self.rest, loop=loop)  # not loop.create_task: no factory may run it now
        if len(ready) != waiting + 1:
            raise RuntimeError("a new task did not schedule its first step")  # a Task that starts eagerly
        self.first_step = ready.pop()
        self.task._log_destroy_pending = False  # a parked host is pending by design
        _unregister_task(self.task)

    def run(self, loop: Any, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """The coroutine's first step, as this host's task: its result, :class:`_Raised` when it raised, or
        :class:`_Running` when it waits on something (this host has become its task, and its loop continues
        it). ``KeyboardInterrupt`` and the like propagate at once.
        """
        context = copy_context()
        task = self.task
        _enter_task(loop, task)
        try:
            waiting_on = context.run(coroutine.send, None)
        except StopIteration as stop:
            if task.cancelling():  # it cancelled its own task and returned: a task ends cancelled
                return _Raised(asyncio.CancelledError())
            return stop.value
        except (Exception, asyncio.CancelledError) as error:
            return _Raised(error)
        finally:
            _leave_task(loop, task)
        rest = self.rest
        rest.coroutine, rest.context, rest.waiting_on, rest.handing = coroutine, context, waiting_on, True
        _register_task(task)
        # The host's first step hands the task what the coroutine waits on: it ends the coroutine's first
        # step as a task of its own would end it (waiting on the future, or scheduled again for a bare yield).
        self.first_step._run()
        return _Running(task)


def _hosts_of(loop: Any) -> list[_Host]:
    """The parked hosts of ``loop``, free to lend: kept on the loop itself, so that a loop nobody holds any
    more goes with its hosts (a table keyed by loop would hold each one through its hosts' tasks)."""
    try:
        return loop._agentfly_free_hosts  # type: ignore[no-any-return]
    except AttributeError:
        free = loop._agentfly_free_hosts = []
        return free


def _lend(loop: Any, free: list[_Host]) -> _Host:
    """A host from ``free``, the loop's parked ones (a new one when none is left). The lender gives it back
    to ``free`` when the coroutine it was lent to finishes its first step; one kept as a task is not."""
    while free:
        host = free.pop()
        if not host.task.cancelling():  # a host whose task someone asked to cancel is not lent again
            return host
    return _Host(loop)


def _settled(loop: Any, outcome: Any) -> asyncio.Future[Any]:
    """A done future holding a first step's result or :class:`_Raised` exception."""
    future = loop.create_future()
    if type(outcome) is not _Raised:
        future.set_result(outcome)
    elif isinstance(outcome.error, asyncio.CancelledError):  # a task whose coroutine raised it is cancelled
        future.cancel()
    else:
        future.set_exception(outcome.error)
    return future


def _start_all(loop: Any, coroutines: tuple[Coroutine[Any, Any, Any], ...]) -> list[Any]:
    """Run each coroutine's first step at once, in order, inside the running loop: per coroutine its
    result, :class:`_Raised` or :class:`_Running`.

    One host serves every coroutine that finishes its first step; the task that called, if any, is set
    aside meanwhile, as Python 3.12's eager start does.
    """
    outer = _current_task(loop)
    if outer is not None:
        _leave_task(loop, outer)
    outcomes: list[Any] = []
    free = _hosts_of(loop)
    host = None
    try:
        for coroutine in coroutines:
            if host is None:
                host = _lend(loop, free)
            outcome = host.run(loop, coroutine)
            if type(outcome) is _Running:
                host = None
            outcomes.append(outcome)
    except BaseException:  # KeyboardInterrupt or SystemExit out of a step: the rest never start
        for coroutine in coroutines[len(outcomes) + 1 :]:
            coroutine.close()
        raise
    finally:
        if host is not None:
            free.append(host)
        if outer is not None:
            _enter_task(loop, outer)
    return outcomes


def _new_thread_loop(state: Any) -> asyncio.AbstractEventLoop:
    """A new persistent loop for this thread, and whether :func:`run_sync` may start coroutines on it
    eagerly (an asyncio loop, on an interpreter where the fast path runs)."""
    loop = state.loop = asyncio.new_event_loop()
    state.eager = _EAGER and isinstance(loop, asyncio.BaseEventLoop)
    if state.eager:
        state.hooks = (loop._asyncgen_firstiter_hook, loop._asyncgen_finalizer_hook)
        state.hosts = _hosts_of(loop)
    return loop


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
            loop = _new_thread_loop(state)
        if not (
            state.eager
            and type(coroutine) is CoroutineType
            and not loop._debug
            and loop._task_factory is None
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
        free = state.hosts
        try:
            host = _lend(loop, free)
            outcome = host.run(loop, coroutine)
        finally:
            loop._thread_id = None
            _set_running_loop(None)
            _set_asyncgen_hooks(*old_hooks)
        if type(outcome) is _Running:  # it waits on something: the loop continues it
            return loop.run_until_complete(outcome.task)
        free.append(host)
        if loop._stopping or not ((not loop._ready and not loop._scheduled) or _quiet(loop)):
            # Its step left callbacks behind: they run before the call returns, as in the loop's iteration.
            return loop.run_until_complete(_settled(loop, outcome))
        if type(outcome) is _Raised:
            raise outcome.error
        return outcome  # type: ignore[no-any-return]
    result: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(run_sync(coroutine))
        except BaseException as error:  # re-raised in the caller's thread
            errors.append(error)
        finally:  # the thread ends here: so does its loop (and its selector's file descriptors)
            loop = getattr(_thread_state, "loop", None)
            if loop is not None and not loop.is_closed():
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()

    worker = threading.Thread(target=target, name="agentfly-run-sync")
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return result[0]


async def gather(*coroutines: Coroutine[Any, Any, Any]) -> list[Any]:
    """``asyncio.gather(*coroutines)``, with each coroutine started eagerly (see the module's docstring).

    Other awaitables (futures) are left to ``asyncio.gather`` itself.

    Each coroutine runs in a task no other running coroutine shares, with its own copy of the context.
    The ones that finish without suspending are done before the next one starts; when all are, their
    results (or the first exception, in argument order, as ``asyncio.gather`` raises it) come back
    without yielding to the loop. Otherwise ``asyncio.gather`` waits for the rest.
    """
    loop = asyncio.get_running_loop()
    if not _can_start_eagerly(loop) or not all(type(coroutine) is CoroutineType for coroutine in coroutines):
        return await asyncio.gather(*coroutines)
    outcomes = _start_all(loop, coroutines)
    if any(type(outcome) is _Running for outcome in outcomes):
        return await asyncio.gather(
            *(outcome.task if type(outcome) is _Running else _settled(loop, outcome) for outcome in outcomes)
        )
    for outcome in outcomes:
        if type(outcome) is _Raised:  # the first in argument order, as gather raises it
            raise outcome.error
    return outcomes


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


# ----------------------------------------------------------------- which path runs: decided once, at import


def _nothing() -> None:
    pass


async def _probe_step(suspend: bool) -> tuple[Any, Any, Any, Any]:
    task = _current_task()
    if suspend:
        await asyncio.sleep(0)
    return asyncio.get_running_loop(), task, _current_task(), _get_running_loop()


async def _probe_raise(error: BaseException) -> None:
    raise error


async def _probe_gather() -> tuple[Any, list[Any], Any]:
    caller = _current_task()
    results = await gather(_probe_step(False), _probe_step(True))
    return caller, results, _current_task()


def _probe_shapes(loop: Any) -> str | None:
    """What a new asyncio loop, its callbacks and timers lack of what the fast path reads (None: nothing)."""
    for name, (kind, fits) in _LOOP_ATTRIBUTES.items():
        if not fits(getattr(loop, name, _MISSING)):
            return f"an asyncio loop's {name} is not {kind}"
    if not hasattr(_Task, "_log_destroy_pending"):
        return "asyncio.Task has no _log_destroy_pending"
    callback = loop.call_soon(_nothing)
    if len(loop._ready) != 1 or loop._ready[0] is not callback or not callable(getattr(callback, "_run", None)):
        return "loop.call_soon does not queue a handle with _run on loop._ready"
    loop._ready.clear()
    timer = loop.call_later(3600, _nothing)
    if loop._scheduled != [timer]:
        return "loop.call_later does not put its timer on loop._scheduled"
    for name, kind in (("_when", float), ("_cancelled", bool), ("_scheduled", bool)):
        if type(getattr(timer, name, None)) is not kind:
            return f"a timer's {name} is not a {kind.__name__}"
    timer.cancel()
    if timer._cancelled is not True or loop._timer_cancelled_count != 1:
        return "a cancelled timer is not counted in loop._timer_cancelled_count"
    if not _quiet(loop) or loop._scheduled or loop._timer_cancelled_count != 0:
        return "a cancelled timer is not dropped from loop._scheduled"
    return None


def _probe() -> str | None:
    """Why the fast path cannot run here (None: it can), found by driving it. Run in a thread of its own (no
    running loop, no current task), with the internals bound and ``_EAGER`` set."""
    loop = asyncio.SelectorEventLoop()
    try:
        reason = _probe_shapes(loop)
        if reason is not None:
            return reason
        loop.set_debug(False)  # PYTHONASYNCIODEBUG or -X dev would send every call down the plain path
        state = _thread_state
        state.loop = loop
        state.eager = True
        state.hooks = (loop._asyncgen_firstiter_hook, loop._asyncgen_finalizer_hook)
        state.hosts = _hosts_of(loop)
        first, second = run_sync(_probe_step(False)), run_sync(_probe_step(False))
        if not (first[0] is loop and first[3] is loop and type(first[1]) is _Task and first[1] is first[2]):
            return "a coroutine started eagerly does not see its loop and its own task"
        if second[1] is not first[1] or first[1] in asyncio.all_tasks(loop):
            return "a parked host is not lent again, or is one of the loop's tasks"
        suspended = run_sync(_probe_step(True))  # the parked host is lent, and kept as its task
        if suspended[1] is not suspended[2] or not suspended[1].done() or run_sync(_probe_step(False))[1] is first[1]:
            return "a coroutine that suspends does not keep its host as its task"
        error = ValueError("probe")
        try:
            run_sync(_probe_raise(error))
        except ValueError as raised:
            if raised is not error:
                return "an exception does not come back unchanged"
        else:
            return "an exception does not come back"
        caller, results, after = run_sync(_probe_gather())
        if after is not caller or any(task is caller for result in results for task in result[1:3]):
            return "gather does not give each coroutine a task of its own, or does not restore the caller's"
        if results[1][1] is not results[1][2]:
            return "in gather, a coroutine that suspends does not keep its task"
        if loop._ready or loop._scheduled:
            return "the fast path leaves callbacks behind"
        return None
    finally:
        try:
            loop.close()
        except Exception:  # a loop unlike 3.11's may not close: the reason found, not this, is the answer
            pass


def _configure() -> None:
    """Decide which path runs: bind the internals the fast path calls, then check them (see the module's
    docstring). Run once, at import; not while other threads call :func:`run_sync` or :func:`gather` (the
    tests run it again, with internals taken away)."""
    global _EAGER, _EAGER_OFF, _get_running_loop, _set_running_loop
    global _enter_task, _leave_task, _register_task, _unregister_task
    _EAGER = False
    found = {}
    reason = None
    for module, name in _INTERNAL_FUNCTIONS:
        function = getattr(module, name, None)
        if not callable(function):
            reason = f"{module.__name__}.{name} is missing"
            break
        found[name] = function
    if reason is None:
        _get_running_loop = found["_get_running_loop"]
        _set_running_loop = found["_set_running_loop"]
        _enter_task, _leave_task = found["_enter_task"], found["_leave_task"]
        _register_task, _unregister_task = found["_register_task"], found["_unregister_task"]
        _EAGER = True  # for the probe, which drives the fast path
        outcome: list[str | None] = []

        def probe() -> None:
            try:
                outcome.append(_probe())
            except Exception as error:  # an internal that is there but behaves otherwise
                outcome.append(f"the probe raised {error!r}")

        prober = threading.Thread(target=probe, name="agentfly-aio-probe", daemon=True)
        try:
            prober.start()
        except RuntimeError as error:  # a platform without threads
            reason = f"no thread to probe in: {error}"
        else:
            prober.join()
            reason = outcome[0] if outcome else "the probe did not finish"
    if reason is not None:
        _EAGER = False
        _get_running_loop = _no_running_loop_is_none
        _set_running_loop = _enter_task = _leave_task = _register_task = _unregister_task = None
    _EAGER_OFF = reason


_configure()
