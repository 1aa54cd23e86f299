"""A calculator agent written only against the ``openai`` package, trainable as it is.

It has its own system prompt and its own ``calculate`` tool (not the env's): it sends the task to the
model with the tool, runs each call the model makes, sends the results back, and returns the number of
the model's final reply. Train it on AgentFly/Math-v0's 3-digit multiplication (the env scores the
answer; the program never sees the gold answer)::

    agentfly-train --config agent-calculator            # warm start, then GRPO; held-out success per stage
    agentfly-train eval --config agent-calculator --model runs/agent-calculator/final

or point it at any OpenAI-compatible server yourself: ``solve(task, llm)`` needs only ``task.prompt``
and ``llm.base_url`` / ``llm.api_key`` / ``llm.model``.

``expert`` is the warm start's scripted model: given the prompt the model would see, it answers as a
model that uses this program well would (one call, then the number), so the warm start's
demonstrations are in this program's own format.
"""

from __future__ import annotations

import ast
import json
import operator
import re

import openai

SYSTEM_PROMPT = "Use the calculate tool for arithmetic. Then reply with the result only."

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]

MAX_CALLS = 3

_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def calculate(expression: str) -> str:
    """The value of an arithmetic expression (numbers, + - * /, parentheses), or what is wrong with it."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("only numbers and + - * / are allowed")

    try:
        result = value(ast.parse(expression, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError) as error:
        return f"error: {error}"
    return str(int(result)) if float(result).is_integer() else str(result)


def solve(task, llm) -> str:
    """Ask the model, run its tool calls, and return the number in its final reply ("" when it gives none)."""
    client = openai.OpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.prompt}]
    for _ in range(MAX_CALLS):
        reply = client.chat.completions.create(model=llm.model, messages=messages, tools=TOOLS, max_tokens=64)
        message = reply.choices[0].message
        if not message.tool_calls:
            numbers = re.findall(r"-?\d+(?:\.\d+)?", message.content or "")
            return numbers[-1] if numbers else ""
        messages.append(message.model_dump(exclude_none=True))  # the model's turn, sent back as it came
        for call in message.tool_calls:
            try:
                result = calculate(**json.loads(call.function.arguments))
            except (TypeError, json.JSONDecodeError) as error:
                result = f"error: {error}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""


def expert(prompt: str) -> str:
    """The scripted model of the warm start: call ``calculate`` on the task's expression, then give its result."""
    task = prompt.rpartition("<|im_start|>user\n")[2]
    results = re.findall(r"<\|im_start\|>tool\n(.*?)<\|im_end\|>", task, re.DOTALL)
    if results:
        return results[-1].strip()
    expression = re.search(r"Calculate (.+?)\.?<\|im_end\|>", task)
    arguments = json.dumps({"expression": expression.group(1) if expression else task.strip()})
    return f'<tool_call>\n{{"name": "calculate", "arguments": {arguments}}}\n</tool_call>'
