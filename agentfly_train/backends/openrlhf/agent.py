"""The file OpenRLHF 0.11.2 loads with ``--train.agent_func_path``: AgentFly envs as its agent.

OpenRLHF loads this file by path and builds ``AgentExecutor()``; the implementation is the ordinary
module :mod:`agentfly_train.backends.openrlhf.executor` (see there for the episode protocol, the label
format and the settings). ``agentfly-train --backend openrlhf`` passes this path for you.

Example:
    By hand: ``python -m openrlhf.cli.train_ppo_ray --train.agent_func_path $(python -c
    "from agentfly_train.backends.openrlhf import AGENT_FILE; print(AGENT_FILE)") ...``

    >>> AgentExecutor.__mro__[1].__name__
    'MultiTurnAgentExecutor'
"""

from agentfly_train.backends.openrlhf.executor import AgentExecutor, AgentInstance

__all__ = ["AgentExecutor", "AgentInstance"]
