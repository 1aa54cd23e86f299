"""The calculator agent on Anthropic's Messages API: the ``anthropic`` client, trainable as it is.

The same agent as ``calculator_agent.py`` (its system prompt, its own ``calculate`` tool, at most three model
calls, the number of the final reply as the answer), written as a Claude-style loop: the tool as an Anthropic
tool definition (``input_schema``), the model's ``tool_use`` blocks run and answered with ``tool_result``
blocks, the model's turn sent back as it came. Train it on AgentFly/Math-v0's 3-digit multiplication::

    agentfly-train --config agent-calculator-messages

The gateway renders a Messages request with the model's chat template as it renders a chat completion, so
the model sees the same prompt as ``calculator_agent.py``'s, and the same scripted ``expert`` plays it in the
warm start.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anthropic

sys.path.insert(0, str(Path(__file__).parent))
from calculator_agent import MAX_CALLS, SYSTEM_PROMPT, calculate, expert  # noqa: E402

__all__ = ["TOOLS", "calculate", "expert", "solve"]

TOOLS = [
    {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression.",
        "input_schema": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    }
]


def solve(task, llm) -> str:
    """Ask the model, run its tool calls, and return the number in its final reply ("" when it gives none)."""
    client = anthropic.Anthropic(base_url=llm.anthropic_base_url, api_key=llm.api_key, max_retries=0)
    messages = [{"role": "user", "content": task.prompt}]
    for _ in range(MAX_CALLS):
        reply = client.messages.create(
            model=llm.model, system=SYSTEM_PROMPT, messages=messages, tools=TOOLS, max_tokens=64
        )
        calls = [block for block in reply.content if block.type == "tool_use"]
        if not calls:
            text = "".join(block.text for block in reply.content if block.type == "text")
            numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
            return numbers[-1] if numbers else ""
        messages.append({"role": "assistant", "content": reply.content})  # the model's turn, sent back as it came
        results = []
        for call in calls:
            try:
                result = calculate(**call.input)
            except TypeError as error:
                result = f"error: {error}"
            results.append({"type": "tool_result", "tool_use_id": call.id, "content": result})
        messages.append({"role": "user", "content": results})
    return ""
