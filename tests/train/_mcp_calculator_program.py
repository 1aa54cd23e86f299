"""An agent program that uses its episode's env tools over MCP (``task.tools_url``): it calls the env's
``calculator`` on the task's expression, asks the model once, and answers with the tool's result.

The tests of tests/train/test_agents.py run it inline (``AgentRollout``) and by path (``agent.program``).
"""

import openai
from mcp import Client


async def solve(task, llm) -> str:
    expression = task.prompt.removeprefix("Calculate ").rstrip(".")
    async with Client(task.tools_url) as tools:
        listed = [tool.name for tool in (await tools.list_tools()).tools]
        result = await tools.call_tool("calculator", {"expression": expression})
    client = openai.AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    await client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task.prompt}])
    assert listed == ["calculator"]
    return result.content[0].text
