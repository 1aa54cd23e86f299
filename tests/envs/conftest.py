"""The env suite's tests (agentfly_envs; the `envs` extra, `cache` for Search-v0's Redis tests).

Each env family's fixtures live in its own test module; redis_server is shared with the core's tests
and lives in ../conftest.py.
"""
