"""Driving the async API from sync code.

Example:
    >>> async def double(x):
    ...     return 2 * x
    >>> run_sync(double(21))
    42
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

_thread_state = threading.local()


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


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, on one event loop kept per thread.

    A persistent loop (rather than ``asyncio.run`` per call) keeps pools and connections that are bound
    to a loop usable across calls, and costs microseconds instead of a loop's creation. Called from a
    thread whose loop is already running (a notebook), it runs the coroutine on a helper thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop = getattr(_thread_state, "loop", None)
        if loop is None or loop.is_closed():
            loop = _thread_state.loop = new_event_loop()
        return loop.run_until_complete(coroutine)
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


async def call_function(function: Callable[..., Any], kwargs: Mapping[str, Any], *, blocking: bool = False) -> Any:
    """Call a sync or coroutine function from async code: awaited, in a worker thread, or inline.

    ``blocking`` sends a sync function to a worker thread, for slow calls that must not hold up the
    event loop; a quick sync function is called inline, which costs nothing.
    """
    if inspect.iscoroutinefunction(function):
        return await function(**kwargs)
    if blocking:
        return await asyncio.to_thread(function, **kwargs)
    return function(**kwargs)
