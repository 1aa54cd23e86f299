"""The throwaway ``redis-server`` of the Redis tests: :mod:`agentfly_bench.redis_server` (the chaos
soak starts, kills and restarts one too)."""

from agentfly_bench.redis_server import RedisServer, free_port

__all__ = ["RedisServer", "free_port"]
