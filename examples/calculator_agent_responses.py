"""The calculator agent on the OpenAI Agents SDK with its default model, which speaks the Responses API.

The same agent as ``calculator_agent.py`` (its system prompt as the agent's instructions, its own
``calculate`` tool, at most three model calls, the number of the final output as the answer), written as an
Agents SDK ``Agent`` run by ``Runner.run``. The SDK pins other versions than the trainer's, so it runs in a venv
of its own (``make peers``: ``.venv-peers/openai-agents``), as a command, once per episode: the task on stdin,
the endpoint in ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``OPENAI_MODEL``, the answer as the last line it
prints. Train it on AgentFly/Math-v0's 3-digit multiplication::

    agentfly-train --config agent-calculator-responses    # agent.command runs this file in the SDK's venv

or, where the SDK is installed in the trainer's venv, as a function: ``--agent
examples/calculator_agent_responses.py:solve``. Tracing is off: it would send the run to OpenAI.

The gateway renders a Responses request with the model's chat template as it renders a chat completion, so
the model sees the same prompt as ``calculator_agent.py``'s, and the same scripted ``expert`` plays it in the
warm start (this file imports the SDK only when it runs the agent, so the trainer loads ``expert`` without it).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).parent))
from calculator_agent import MAX_CALLS, SYSTEM_PROMPT, calculate, expert  # noqa: E402

__all__ = ["PARAMETERS", "calculate", "expert", "solve"]

#: ``calculate``'s parameters, as ``calculator_agent.py`` describes them (not the SDK's strict schema from a
#: signature: the same tool, so the same prompt).
PARAMETERS = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
#: What the command prints when the model gave no number.
NO_ANSWER = "(no number)"


async def solve(task, llm) -> str:
    """Run the agent on the task; the number in its final output ("" when it gives none)."""
    from agents import (
        Agent,
        FunctionTool,
        MaxTurnsExceeded,
        ModelBehaviorError,
        ModelSettings,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    async def run_calculate(context, arguments: str) -> str:
        try:
            return calculate(**json.loads(arguments))
        except (TypeError, json.JSONDecodeError) as error:
            return f"error: {error}"

    tool = FunctionTool(
        name="calculate",
        description="Evaluate an arithmetic expression.",
        params_json_schema=PARAMETERS,
        on_invoke_tool=run_calculate,
        strict_json_schema=False,
    )
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    # The SDK's default model (what a model name resolves to), made directly: a model name that is a path (a
    # checkpoint folder) would otherwise be read as a provider prefix.
    model = OpenAIResponsesModel(model=llm.model, openai_client=client)
    agent = Agent(
        name="Calculator",
        instructions=SYSTEM_PROMPT,
        tools=[tool],
        model=model,
        model_settings=ModelSettings(max_tokens=64),
    )
    try:
        result = await Runner.run(
            agent,
            task.prompt,
            max_turns=MAX_CALLS,
            run_config=RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model"),
        )
    except (MaxTurnsExceeded, ModelBehaviorError):  # still calling tools at the last turn, or a reply cut at
        return ""  # max_tokens (the SDK's error for an incomplete response): the model gave no answer
    numbers = re.findall(r"-?\d+(?:\.\d+)?", str(result.final_output or ""))
    return numbers[-1] if numbers else ""


if __name__ == "__main__":
    task = SimpleNamespace(prompt=sys.stdin.read())
    llm = SimpleNamespace(
        base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"], model=os.environ["OPENAI_MODEL"]
    )
    # The last line printed is the answer: a line the env scores as wrong when there is none (an empty one would
    # be no answer at all, a failed episode, left out of the update).
    print(asyncio.run(solve(task, llm)) or NO_ANSWER)
