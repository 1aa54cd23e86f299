"""The calculator agent as a command of its own: what ``agentfly-train --agent-command`` runs once per episode.

A process, not a function: it reads the task's text on stdin and the endpoint from the variables every SDK reads
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``OPENAI_MODEL``), plays the same agent as ``calculator_agent.py``,
and prints its answer as its last line. Anything that does that trains unchanged, in its own venv or language::

    agentfly-train --config agent-calculator --agent-command "python examples/calculator_agent_command.py"
"""

import os
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).parent))
from calculator_agent import solve  # noqa: E402

if __name__ == "__main__":
    task = SimpleNamespace(prompt=sys.stdin.read())
    llm = SimpleNamespace(
        base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"], model=os.environ["OPENAI_MODEL"]
    )
    answer = (solve(task, llm) or "").strip()
    print(answer or "(no answer)")  # a reply with no text is a wrong answer (the env scores it), not a failed episode
