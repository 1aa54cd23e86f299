"""The OpenRLHF backend: AgentFly envs inside OpenRLHF 0.11.2 on vLLM and Ray (GPU machines).

- :mod:`~agentfly_train.backends.openrlhf.executor`: the ``AgentExecutor`` that plays ``AgentFly/*`` envs in
  OpenRLHF's own multi-turn loop, stepping them through a pool (Ray actors on a cluster).
- :mod:`~agentfly_train.backends.openrlhf.program_executor`: the executor when an agent program plays
  (``--agent PATH.py:FUNC``, ``--agent-command CMD``): the program runs against the token-exact gateway,
  hosted in each rollout actor over OpenRLHF's vLLM engine.
- :mod:`~agentfly_train.backends.openrlhf.settings`: the plug-in's settings file, and the agent file
  OpenRLHF loads with ``--train.agent_func_path``, which binds the right executor to it; both written by
  the launcher. :mod:`~agentfly_train.backends.openrlhf.agent` and
  :mod:`~agentfly_train.backends.openrlhf.program_agent` are agent files with the default settings.
- :mod:`~agentfly_train.backends.openrlhf.launcher`: ``agentfly-train --backend openrlhf`` builds the
  ``openrlhf.cli.train_ppo_ray`` command from the same config the local backend reads.

Only ``openrlhf.utils.agent`` is imported from OpenRLHF here (it imports on a CPU machine); the rest of
OpenRLHF needs vLLM and DeepSpeed and runs in the processes OpenRLHF starts.

Example:
    >>> AGENT_FILE.name, AGENT_FILE.exists(), PROGRAM_AGENT_FILE.name, PROGRAM_AGENT_FILE.exists()
    ('agent.py', True, 'program_agent.py', True)
"""

from __future__ import annotations

from pathlib import Path

#: An agent file with the default settings, as ``--train.agent_func_path`` takes it.
AGENT_FILE = Path(__file__).with_name("agent.py")
#: The agent file for agent programs with the default settings (which name no program).
PROGRAM_AGENT_FILE = Path(__file__).with_name("program_agent.py")
