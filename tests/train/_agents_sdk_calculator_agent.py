"""The OpenAI Agents SDK on its default model (the Responses API): an ``Agent`` with one function tool, run by
``Runner.run``, as an agent command in the SDK's own venv (``make peers``); the SDK's documented way to point its
default client elsewhere (``set_default_openai_client``). A turn cut at the trainer's token limit (``incomplete``) is
the SDK's ``ModelBehaviorError``, which the agent takes as no answer. See _framework_calculator.py."""

import asyncio
import os
import sys

from _framework_calculator import SYSTEM_PROMPT, answer_line
from _framework_calculator import calculate as evaluate
from agents import (
    Agent,
    MaxTurnsExceeded,
    ModelBehaviorError,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI


@function_tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return evaluate(expression)


async def main() -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"], max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    agent = Agent(name="Calculator", instructions=SYSTEM_PROMPT, tools=[calculate], model=os.environ["OPENAI_MODEL"])
    try:
        result = await Runner.run(agent, sys.stdin.read(), max_turns=4)
    except MaxTurnsExceeded:  # a model that keeps calling tools: the agent gives up, as an app would
        print("none")
        return
    except ModelBehaviorError as error:
        # A reply cut at the token limit is a Responses ``incomplete`` response (as OpenAI and vLLM answer one),
        # which the SDK refuses: the model gave no answer. Any other misbehaviour is an error.
        if "reason='max_output_tokens'" not in str(error):
            raise
        print("none")
        return
    print(answer_line(result.final_output))


asyncio.run(main())
