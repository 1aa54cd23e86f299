"""smolagents' ``ToolCallingAgent`` as shipped (its own ~1,100-token system prompt, ``tool_choice: "required"`` on
every call, its ``final_answer`` tool) over its ``OpenAIServerModel``, run as an agent command in smolagents' own
venv (``make peers``). Only ``max_steps`` is set (2, not 20: a call and the answer), to keep a test of a model that
never answers short. See _framework_calculator.py."""

import os
import sys

from _framework_calculator import answer_line
from _framework_calculator import calculate as evaluate
from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression, e.g. 12 * 34.
    """
    return evaluate(expression)


def main() -> None:
    model = OpenAIServerModel(
        model_id=os.environ["OPENAI_MODEL"],
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        client_kwargs={"max_retries": 0},
    )
    agent = ToolCallingAgent(tools=[calculate], model=model, max_steps=2, verbosity_level=0)
    print(answer_line(agent.run(sys.stdin.read())))


main()
