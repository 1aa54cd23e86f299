"""The file OpenRLHF 0.11.2 loads with ``--train.agent_func_path`` when an agent program plays the episodes.

OpenRLHF loads this file by path and builds ``AgentExecutor()``: here the program executor,
:class:`~agentfly_train.backends.openrlhf.program_executor.ProgramExecutor` (see its module for the episode, the
row it returns and the settings). ``agentfly-train --backend openrlhf --agent PATH.py:FUNC`` (or
``--agent-command CMD``) passes this path, and the program in ``AGENTFLY_AGENT``.

Example:
    By hand: ``AGENTFLY_AGENT='{"program": "/abs/agent.py:solve"}' python -m openrlhf.cli.train_ppo_ray
    --train.agent_func_path $(python -c "from agentfly_train.backends.openrlhf import PROGRAM_AGENT_FILE;
    print(PROGRAM_AGENT_FILE)") ...``

    >>> AgentExecutor.__name__, AgentExecutor.__mro__[1].__name__
    ('ProgramExecutor', 'AgentExecutorBase')
"""

from agentfly_train.backends.openrlhf.program_executor import ProgramExecutor as AgentExecutor

__all__ = ["AgentExecutor"]
