"""Tasks are read-only and shared; a seed draws the same task on every machine."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys

import msgspec
import numpy as np
import pytest
from gymnasium.utils.passive_env_checker import data_shares_objects
from hypothesis import given
from hypothesis import strategies as st

from agentfly_env import ListTasks, OptionsError, ToolEnv, reward
from agentfly_env.core.readonly import ReadOnlyDict, ReadOnlyList, ReadOnlyView, read_only
from agentfly_env.core.types import EpisodeStart, Trajectory

READ_ONLY = "is read-only .*change a copy"

json_data = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@reward
def exact(prediction, answer):
    return float(prediction == answer)


def make_env(tasks: ListTasks | None = None) -> ToolEnv:
    tasks = tasks or ListTasks([{"id": "sum", "prompt": "2 + 3?", "answer": "5", "metadata": {"terms": [2, 3]}}])
    return ToolEnv(tools=[], tasks=tasks, reward=exact)


@pytest.mark.parametrize(
    "change",
    [
        lambda task: task.__setitem__("answer", "6"),
        lambda task: task.__delitem__("answer"),
        lambda task: task.update(answer="6"),
        lambda task: task.setdefault("extra", 1),
        lambda task: task.pop("answer"),
        lambda task: task.popitem(),
        lambda task: task.clear(),
        lambda task: task.__ior__({"answer": "6"}),
        lambda task: task["metadata"].__setitem__("terms", []),
        lambda task: task["metadata"]["terms"].append(4),
        lambda task: task["metadata"]["terms"].__setitem__(0, 9),
        lambda task: task["metadata"]["terms"].extend([4]),
        lambda task: task["metadata"]["terms"].sort(),
        lambda task: task["metadata"]["terms"].__iadd__([4]),
    ],
)
def test_changing_the_task_in_info_fails_loudly_and_changes_nothing(change):
    env = make_env()
    _, info = env.reset(seed=0)
    for task in (info["task"], info["start"].task):
        with pytest.raises(TypeError, match=READ_ONLY):
            change(task)
    assert env.reset(seed=0)[1]["task"] == {
        "id": "sum",
        "prompt": "2 + 3?",
        "answer": "5",
        "metadata": {"terms": [2, 3]},
    }


def test_the_records_share_the_sources_task_and_info_gets_a_read_only_view_of_it():
    env = make_env()
    _, info = env.reset(seed=0)
    assert info["start"].task is env.trajectory.task is env.task is env.tasks[0]  # no copy per episode
    again = env.reset(seed=0)[1]["task"]
    assert again == info["task"] == env.task == dict(env.task) and isinstance(again["metadata"], ReadOnlyDict)
    assert isinstance(again, ReadOnlyView) and again is not info["task"]  # a new view per reset, of one task
    assert again["metadata"] is info["task"]["metadata"] is env.task["metadata"]
    assert not data_shares_objects(again, info["task"])  # Gymnasium's rule: no dict shared by two infos
    assert len(again) == 4 and list(again) == list(env.task) and "answer" in again and again.get("x", 1) == 1
    mine, deep, shallow = dict(info["task"]), copy.deepcopy(info["task"]), copy.copy(info["task"])
    mine["answer"] = shallow["answer"] = "6"
    deep["metadata"]["terms"].append(4)
    assert type(deep) is dict and type(deep["metadata"]) is dict and type(deep["metadata"]["terms"]) is list
    assert info["task"]["answer"] == "5" and info["task"]["metadata"]["terms"] == [2, 3]
    loaded = pickle.loads(pickle.dumps(info["task"]))
    assert type(loaded) is ReadOnlyView and loaded == info["task"] and repr(loaded) == repr(env.task)


def test_a_task_given_in_options_is_frozen_as_a_copy():
    given_task = {"prompt": "1 + 1?", "answer": "2", "tests": ["a"]}
    env = make_env()
    _, info = env.reset(options={"task": given_task})
    given_task["tests"].append("b")  # the caller's dict stays theirs
    assert info["task"]["tests"] == ["a"] and isinstance(info["task"]["tests"], ReadOnlyList)


def test_a_plain_agent_env_task_is_frozen_too():
    from agentfly_env.core.env import AgentEnv
    from agentfly_env.core.types import Step

    class Own(AgentEnv):
        async def _reset(self, seed, options):
            return "go", {"task": {"id": "own", "steps": [1]}}

        async def _step(self, action):
            return Step(observation="", reward=0.0, terminated=True), {}

    _, info = Own().reset(seed=0)
    with pytest.raises(TypeError, match=READ_ONLY):
        info["task"]["steps"].append(2)
    env = Own()
    _, info = env.reset()
    assert isinstance(info["task"], ReadOnlyView) and isinstance(info["start"].task, ReadOnlyDict)


def test_records_with_a_read_only_task_encode_and_decode_as_plain_data():
    env = make_env()
    _, info = env.reset(seed=0)
    env.step("<answer>5</answer>")
    for codec in (msgspec.json, msgspec.msgpack):
        start = codec.decode(codec.encode(info["start"]), type=EpisodeStart)
        trajectory = codec.decode(codec.encode(env.trajectory), type=Trajectory)
        assert start == info["start"] and trajectory.task == info["task"] and trajectory.steps == env.trajectory.steps
        assert type(start.task) is dict  # decoded: the receiver's own data
    assert json.loads(json.dumps(info["start"].task)) == info["task"]
    assert json.loads(json.dumps(dict(info["task"]))) == info["task"]  # the view itself is not a dict


@given(json_data)
def test_read_only_data_equals_encodes_and_pickles_as_the_plain_data(data):
    frozen = read_only(data)
    assert frozen == data and read_only(frozen) is frozen
    assert msgspec.json.encode(frozen) == msgspec.json.encode(data)
    assert msgspec.to_builtins(frozen) == data
    loaded = pickle.loads(pickle.dumps(frozen))
    assert loaded == data and type(loaded) is type(frozen)  # a pickled task loads read-only
    assert copy.deepcopy(frozen) == data


def test_seeded_draws_are_pinned():
    """``rng.integers`` on the env's PCG64: these ids are what these seeds give, everywhere."""
    tasks = ListTasks([{"prompt": str(n)} for n in range(1000)])
    assert [tasks.sample(np.random.default_rng(seed))["id"] for seed in range(8)] == [
        "850", "473", "837", "811", "726", "670", "445", "944"
    ]  # fmt: skip
    env = make_env(tasks)
    assert [env.reset(seed=seed)[1]["task"]["id"] for seed in range(8)] == [
        "850", "473", "837", "811", "726", "670", "445", "944"
    ]  # fmt: skip


def test_seeded_draws_agree_across_processes():
    script = (
        "import numpy as np\nfrom agentfly_env.core.tasks import ListTasks\n"
        "tasks = ListTasks([{'prompt': str(n)} for n in range(1000)])\n"
        "print(','.join(tasks.sample(np.random.default_rng(seed))['id'] for seed in range(50)))"
    )
    others = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        ).stdout.strip()
        for hash_seed in ("0", "12345")
    }
    tasks = ListTasks([{"prompt": str(n)} for n in range(1000)])
    assert others == {",".join(tasks.sample(np.random.default_rng(seed))["id"] for seed in range(50))}


def test_draws_cover_every_task_and_stay_in_range():
    tasks = ListTasks([{"prompt": str(n)} for n in range(7)])
    rng = np.random.default_rng(0)
    drawn = [tasks.sample(rng)["id"] for _ in range(700)]
    assert set(drawn) == {str(n) for n in range(7)}
    assert max(drawn.count(str(n)) for n in range(7)) < 140  # about 100 each


OPTION_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["prompt", "id", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(options=st.dictionaries(st.sampled_from(["task", "task_index", "seed", "other"]), OPTION_VALUES, max_size=3))
def test_reset_options_give_a_task_or_an_options_error_naming_the_option(options):
    tasks = ListTasks([{"prompt": "first"}, {"prompt": "second"}])
    try:
        task = tasks.select(options, np.random.default_rng(0))
    except OptionsError as error:
        assert error.option in options and error.option in str(error)
    else:
        assert isinstance(task["prompt"], str)
        if "task_index" in options and "task" not in options:
            assert task["prompt"] == ("first", "second")[options["task_index"]]
