"""AgentFly envs over OpenEnv's protocol: ``agentfly-serve`` (the server) and the codec both sides share.

* :mod:`agentfly_env.serve.protocol`: the wire format (msgspec only); also what
  ``gym.make("AgentFly/Remote-v0", url=...)`` (:mod:`agentfly_env.serve.remote`) speaks.
* :mod:`agentfly_env.serve.server`: the ASGI app and its session limits (the ``serve`` extra:
  Starlette, uvicorn, websockets; mcp for the tools).
* :mod:`agentfly_env.serve.mcp`: an env's tools over MCP (``agentfly-serve ENV_ID --mcp``).
* :mod:`agentfly_env.serve.cli`: ``agentfly-serve ENV_ID``.

Nothing here is imported by ``import agentfly_env``, so the core stays free of web frameworks.
"""
