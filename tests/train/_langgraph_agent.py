"""A LangGraph agent as its documentation writes one: ``create_react_agent`` over ``langchain_openai.ChatOpenAI``
with one tool, run as an agent command in LangGraph's own venv (``make peers``). See _framework_calculator.py."""

import os
import sys

from _framework_calculator import SYSTEM_PROMPT, answer_line
from _framework_calculator import calculate as evaluate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError
from langgraph.prebuilt import create_react_agent


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return evaluate(expression)


def main() -> None:
    model = ChatOpenAI(
        model=os.environ["OPENAI_MODEL"],
        base_url=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        max_retries=0,
    )
    agent = create_react_agent(model, [calculate], prompt=SYSTEM_PROMPT)
    try:  # a model that keeps calling tools: the agent gives up, as an app would
        state = agent.invoke({"messages": [("user", sys.stdin.read())]}, {"recursion_limit": 8})
    except GraphRecursionError:
        print("none")
        return
    print(answer_line(state["messages"][-1].content))


main()
