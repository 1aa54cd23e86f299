"""The OpenAI Agents SDK with its default model (the Responses API) pointed at the gateway: an agent with one
function tool, run once, printing what the tool was asked and the agent's final answer.

Run in the SDK's own venv (``make peers``) by tests/train/test_gateway_framework.py, with the episode's
endpoint in ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``OPENAI_MODEL``: the SDK's documented way to
point its default client elsewhere (``set_default_openai_client``), nothing else changed.
"""

import asyncio
import os

from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI


@function_tool
def get_weather(city: str) -> str:
    print(f"[debug] getting weather for {city}")
    return f"The weather in {city} is sunny."


async def main() -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"], max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    agent = Agent(
        name="Assistant",
        instructions="You only respond in haikus.",
        tools=[get_weather],
        model=os.environ["OPENAI_MODEL"],
    )
    result = await Runner.run(agent, "What's the weather in Tokyo?")
    print(result.final_output)


asyncio.run(main())
