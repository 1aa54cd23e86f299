"""Shared pytest fixtures."""

from collections.abc import Iterator

import pytest
from redis_server import RedisServer


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh redis-server on a free loopback port, stopped after the test even if it fails."""
    with RedisServer() as server:
        yield server
