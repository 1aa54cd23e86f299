"""A tool loop on Anthropic's own client, streaming (``client.messages.stream``): the Messages API with a client
tool, each assistant turn sent back as it came (its content blocks), the tool's results as ``tool_result`` blocks.
Run as an agent command with the dev venv's Python (anthropic is pinned there). See _framework_calculator.py."""

import os
import sys

import anthropic
from _framework_calculator import DESCRIPTION, SYSTEM_PROMPT, answer_line, calculate

TOOLS = [
    {
        "name": "calculate",
        "description": DESCRIPTION,
        "input_schema": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    }
]
MAX_CALLS = 3


def main() -> None:
    client = anthropic.Anthropic(
        base_url=os.environ["ANTHROPIC_BASE_URL"], api_key=os.environ["ANTHROPIC_API_KEY"], max_retries=0
    )
    messages: list = [{"role": "user", "content": sys.stdin.read()}]
    for _ in range(MAX_CALLS):
        with client.messages.stream(
            model=os.environ["OPENAI_MODEL"], max_tokens=256, system=SYSTEM_PROMPT, tools=TOOLS, messages=messages
        ) as stream:
            for _event in stream:  # the events as they come, as a streaming app reads them
                pass
            message = stream.get_final_message()
        uses = [block for block in message.content if block.type == "tool_use"]
        if not uses:
            print(answer_line("".join(block.text for block in message.content if block.type == "text")))
            return
        messages.append({"role": "assistant", "content": message.content})
        results = []
        for use in uses:
            try:
                result = calculate(**use.input)
            except TypeError as error:
                result = f"error: {error}"
            results.append({"type": "tool_result", "tool_use_id": use.id, "content": result})
        messages.append({"role": "user", "content": results})
    print("none")


main()
