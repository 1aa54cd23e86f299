"""An agent file for OpenRLHF 0.11.2's ``--train.agent_func_path``: AgentFly envs as its agent, with default settings.

OpenRLHF loads an agent file by path and builds ``AgentExecutor()``; the implementation is the ordinary module
:mod:`agentfly_train.backends.openrlhf.executor` (see there for the episode protocol, the label format and the
settings). ``agentfly-train --backend openrlhf`` does not pass this file: it writes its own, ``agentfly_agent.py``,
bound to the run's settings file (:mod:`~agentfly_train.backends.openrlhf.settings`). This one reads no settings
file: it plays with the :class:`~agentfly_train.backends.openrlhf.settings.Settings` defaults (envs in Ray actors
when Ray runs, 16 per env and engine, OpenRLHF's own per-turn sampling, the envs' own turn limits, no per-tool logs).

Example:
    By hand with other settings: ``write_plugin(folder, Settings(...))`` writes a settings file and an agent file
    bound to it, and returns the agent file to pass (a generated ``agentfly_agent.py`` copied beside a settings
    file reads that one). With the defaults: ``python -m openrlhf.cli.train_ppo_ray --train.agent_func_path
    $(python -c "from agentfly_train.backends.openrlhf import AGENT_FILE; print(AGENT_FILE)") ...``

    >>> AgentExecutor.__mro__[1].__name__, AgentExecutor().settings.pool
    ('MultiTurnAgentExecutor', 'auto')
"""

from agentfly_train.backends.openrlhf.executor import AgentExecutor, AgentInstance

__all__ = ["AgentExecutor", "AgentInstance"]
