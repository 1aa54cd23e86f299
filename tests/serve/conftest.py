"""Tests of ``agentfly-serve`` and ``AgentFly/Remote-v0`` (agentfly_env.serve, agentfly_env.serve.remote; the
``serve`` extra, and Math-v0 from the suite as the env they carry).

No fixtures of their own: the server in a thread is ../serving.py's :func:`serving`.
"""
