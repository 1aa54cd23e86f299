"""Expensive backends and where they run: the resource pool (:mod:`~agentfly_env.resources.pool`), files
built once across processes, and env pools as Ray actors (:mod:`~agentfly_env.resources.distributed`).
"""
