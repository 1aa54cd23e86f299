"""The ``code_interpreter`` tool: a stateful, sandboxed Python session per episode.

Within an episode, variables, imports, functions and files in ``/tmp`` persist from call to call;
the next episode starts from a fresh session (the pool resets the sandbox). The model reads what
the code printed, the value of a final expression (as in a REPL), and a traceback trimmed to its own
code. When things go wrong it is told so plainly, and the episode goes on:

* the code raised: the traceback, as output; the session keeps its state;
* the Python process died (a segfault, ``os._exit``, a CPU limit): a ``tool_error`` saying why; the
  sandbox started a fresh session;
* the call outran its timeout: a ``timeout`` error; the env gives the sandbox back as broken, the
  pool kills it and the next call gets a new one;
* the sandbox itself died: a ``resource_broken`` error, handled the same way.

Example:
    >>> from agentfly_env.resources.pool import ResourceManager
    >>> tool = code_interpreter_tool(ResourceManager(), {"timeout_s": 5})
    >>> tool.name, tool.resource, tool.timeout_s, tool.parameters["required"]
    ('code_interpreter', 'code_sandbox', 5.0, ['code'])
"""

from __future__ import annotations

from typing import Any

from agentfly_env.resources.pool import ResourceManager
from agentfly_env.tools.tool import Tool
from agentfly_envs.code.pool import SANDBOX_POOL, sandbox_pool
from agentfly_envs.code.sandbox import Sandbox, SandboxConfig

__all__ = ["CODE_EXAMPLES", "SessionCrashed", "code_interpreter_tool"]

#: What the action space samples: small, deterministic programs.
CODE_EXAMPLES = [
    {"code": "print(2 + 2)"},
    {"code": "import math\nmath.factorial(10)"},
    {"code": "squares = [n * n for n in range(10)]\nsum(squares)"},
    {"code": "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n[fib(n) for n in range(10)]"},
    {"code": "words = 'the quick brown fox'.split()\nsorted(words, key=len)"},
]


class SessionCrashed(RuntimeError):
    """The Python process died while running the code; the sandbox replaced it with a fresh one."""


async def _run_code(code: str, resource: Sandbox) -> str:
    """Run Python code in a sandboxed session and see what it printed.

    Variables, imports and functions persist between calls in the same episode. The value of a
    last expression is shown, as in a Python REPL. There is no network; files can be written
    under /tmp only.

    Args:
        code: Python source to run, e.g. "import math\\nprint(math.sqrt(2))".
    """
    # The tool's own timeout bounds the call: on expiry the cancelled run kills the sandbox.
    result = await resource.run(code, timeout_s=None)
    if result.crashed:
        raise SessionCrashed(result.to_text())
    return result.to_text()


def code_interpreter_tool(
    resources: ResourceManager | None,
    sandbox: SandboxConfig | dict[str, Any] | None = None,
    *,
    pool: str = SANDBOX_POOL,
    max_output_chars: int | None = 16_384,
) -> Tool:
    """The ``code_interpreter`` tool, with its sandbox pool registered on ``resources``.

    Args:
        resources: The env's resource manager; the pool ``pool`` is made there on first use. None: no pool,
            a tool that only describes itself (its schema, for the env's manifest).
        sandbox: The sandbox's options (:class:`~agentfly_envs.code.sandbox.SandboxConfig` or a dict);
            its ``timeout_s`` is the tool's: past it the sandbox is killed and replaced.
        pool: Name of the sandbox pool (see :func:`~agentfly_envs.code.pool.sandbox_pool`).
        max_output_chars: What the model reads is cut to this many characters, with a marker.

    Raises:
        SandboxUnavailable: bubblewrap is missing and the options refuse to run without it.
    """
    config = SandboxConfig.of(sandbox)
    if resources is not None:
        sandbox_pool(resources, config, name=pool)
    return Tool(
        _run_code,
        name="code_interpreter",
        resource=pool,
        timeout_s=config.timeout_s,
        max_output_chars=max_output_chars,
        examples=CODE_EXAMPLES,
    )
