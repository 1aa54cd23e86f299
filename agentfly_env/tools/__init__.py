"""Tools and the envs made of them: ``@tool`` (:mod:`~agentfly_env.tools.tool`), ``@reward``, the parsers
that read tool calls out of model text, the tool-result cache, and :class:`~agentfly_env.tools.tool_env.ToolEnv`.
"""
