"""The throwaway ``redis-server`` of the Redis tests, by the bare name the test folders import their shared
helpers with: :mod:`agentfly_env.resources.redis_server`, the one the chaos soak uses too."""

from agentfly_env.resources.redis_server import RedisServer, free_port

__all__ = ["RedisServer", "free_port"]
