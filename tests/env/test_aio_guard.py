"""The fast path's guard: with any one of asyncio's internals it uses taken away (deleted, or there but
behaving otherwise), the module decides, as it does at import, to take the public path, and run_sync and
gather keep their contract there: the contract tests of test_aio.py, run on that path.
"""

from __future__ import annotations

import asyncio
from asyncio import events, tasks

import pytest
import test_aio as contract  # the contract tests and the public path's harness (tests/env is on sys.path)

from agentfly_env.core import aio


def deleted(owner, name):
    def take_away(patch):
        patch.delattr(owner, name)

    return take_away


def replaced(owner, name, value):
    def take_away(patch):
        patch.setattr(owner, name, value)

    return take_away


def loop_attribute(name, change):
    """New asyncio loops without ``name`` (``change`` None) or with ``change(value)`` in its place."""

    def take_away(patch):
        init = asyncio.SelectorEventLoop.__init__

        def changed_init(self, *args, **kwargs):
            init(self, *args, **kwargs)
            if change is None:
                delattr(self, name)
            else:
                setattr(self, name, change(getattr(self, name)))

        patch.setattr(asyncio.SelectorEventLoop, "__init__", changed_init)

    return take_away


# What is taken away, and what the module then says about why the fast path is off.
TAKEN_AWAY = {
    **{f"{module.__name__}.{name} deleted": (deleted(module, name), name) for module, name in aio._INTERNAL_FUNCTIONS},
    **{  # an attribute of each loop, or a method of their class
        f"loop.{name} deleted": (
            deleted(asyncio.BaseEventLoop, name) if name in vars(asyncio.BaseEventLoop) else loop_attribute(name, None),
            name,
        )
        for name in aio._LOOP_ATTRIBUTES
    },
    "loop._ready a list": (loop_attribute("_ready", list), "_ready"),
    "loop._scheduled a tuple": (loop_attribute("_scheduled", tuple), "_scheduled"),
    "loop._debug an int": (loop_attribute("_debug", int), "_debug"),
    "Handle._run deleted": (deleted(asyncio.Handle, "_run"), "_run"),
    "TimerHandle._when deleted": (deleted(asyncio.TimerHandle, "_when"), "_when"),
    "TimerHandle._scheduled deleted": (deleted(asyncio.TimerHandle, "_scheduled"), "_scheduled"),
    "_enter_task does nothing": (replaced(tasks, "_enter_task", lambda loop, task: None), "task"),
    "_unregister_task does nothing": (replaced(tasks, "_unregister_task", lambda task: None), "task"),
    "_get_running_loop says None": (replaced(events, "_get_running_loop", lambda: None), "loop"),
}

CONTRACT = [
    contract.test_results_and_exceptions_come_back_unchanged,
    contract.test_the_coroutine_runs_in_its_own_task_on_the_persistent_loop,
    contract.test_the_first_step_runs_once_and_the_loop_continues_it,
    contract.test_contextvars_are_copied_in_and_not_leaked_out,
    contract.test_asyncio_timeout_works_with_and_without_suspending,
    contract.test_cancellation_from_inside_reaches_the_caller,
    contract.test_run_sync_inside_run_sync_goes_to_a_helper_thread,
    contract.test_gather_gives_every_running_coroutine_a_task_of_its_own_and_restores_the_caller,
    contract.test_gather_runs_the_envs_that_suspend_concurrently,
    contract.test_gather_retrieves_every_exception,
]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # a probe loop that cannot close
@pytest.mark.parametrize("taken_away", list(TAKEN_AWAY))
def test_without_an_internal_the_public_path_runs_and_keeps_the_contract(taken_away):
    take_away, named = TAKEN_AWAY[taken_away]
    with contract.public_path(take_away) as why:
        print(taken_away, "->", why)
        assert named in why
        for test in CONTRACT:
            test()


def test_on_this_interpreter_the_fast_path_runs():
    aio._configure()
    assert aio._EAGER and aio._EAGER_OFF is None
    assert aio._enter_task is tasks._enter_task and aio._set_running_loop is events._set_running_loop
