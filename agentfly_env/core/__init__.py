"""The env contract: :class:`~agentfly_env.core.env.AgentEnv`, the records an episode leaves
(:mod:`~agentfly_env.core.types`), task sources, text spaces, scripted policies, the episode loop and its summary
(:mod:`~agentfly_env.core.episode`), composite envs (``Mix-v0``) and trajectory files.

Nothing here knows a tool, a pool or a server; every other layer builds on this one.
"""
