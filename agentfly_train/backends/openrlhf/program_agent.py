"""An agent file for OpenRLHF 0.11.2's ``--train.agent_func_path`` when an agent program plays: the program
executor, with default settings.

OpenRLHF loads an agent file by path and builds ``AgentExecutor()``: here the program executor,
:class:`~agentfly_train.backends.openrlhf.program_executor.ProgramExecutor` (see its module for the episode, the
row it returns and the settings). ``agentfly-train --backend openrlhf --agent PATH.py:FUNC`` (or
``--agent-command CMD``) does not pass this file: it writes its own, ``agentfly_agent.py``, bound to the run's
settings file, whose ``agent`` names the program (:mod:`~agentfly_train.backends.openrlhf.settings`). This one
reads no settings file, and the :class:`~agentfly_train.backends.openrlhf.settings.Settings` defaults name no
program: building its executor says so.

Example:
    By hand: write the settings beside an agent file bound to them, and pass that file::

        from agentfly_train.backends.openrlhf.settings import Settings, write_plugin
        from agentfly_train.config import AgentConfig

        settings = Settings(agent=AgentConfig(program="/abs/agent.py:solve"))
        print(write_plugin("/runs/x/openrlhf", settings))  # --train.agent_func_path /runs/x/openrlhf/agentfly_agent.py

    >>> AgentExecutor.__name__, AgentExecutor.__mro__[1].__name__
    ('ProgramExecutor', 'AgentExecutorBase')
"""

from agentfly_train.backends.openrlhf.program_executor import ProgramExecutor as AgentExecutor

__all__ = ["AgentExecutor"]
