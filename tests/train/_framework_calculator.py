"""What the framework agents of tests/train/test_gateway_framework.py share: the calculator task's tool and how an
agent command prints its answer.

Each ``_*_agent.py`` beside this file is one framework's calculator agent, run as an agent command
(``agentfly-train --agent-command``) in the framework's own venv (``make peers``): the task's text on stdin, the
endpoint in ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``OPENAI_MODEL`` (``ANTHROPIC_BASE_URL`` /
``ANTHROPIC_API_KEY``), its answer the last line it prints. Only the standard library and the example's
``calculate`` (pure Python) are used here, so every venv can import it.
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from calculator_agent import SYSTEM_PROMPT, calculate  # noqa: E402

__all__ = ["DESCRIPTION", "SYSTEM_PROMPT", "answer_line", "calculate"]

#: The tool's description, as every framework's agent gives it.
DESCRIPTION = "Evaluate an arithmetic expression."


def answer_line(text: object) -> str:
    """The line an agent prints as its answer: the last number in the agent's final output, else ``none`` (a line
    the env scores as wrong: a model that writes no number has answered, just not well)."""
    numbers = re.findall(r"-?\d+(?:\.\d+)?", str(text or ""))
    return numbers[-1] if numbers else "none"
