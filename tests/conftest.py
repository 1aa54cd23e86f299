"""Shared pytest fixtures."""

from collections.abc import Iterator

import pytest
from redis_server import RedisServer

from agentfly_train.models import bundled_gguf, convert_gguf, load_tokenizer


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh redis-server on a free loopback port, stopped after the test even if it fails."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def smollm2_dir(request) -> str:
    """The bundled SmolLM2 converted to safetensors, cached across test runs by pytest (``.pytest_cache``)."""
    return str(convert_gguf(bundled_gguf(), request.config.cache.mkdir("agentfly-models")))


@pytest.fixture(scope="session")
def tokenizer(smollm2_dir):
    """SmolLM2's real tokenizer and chat template."""
    return load_tokenizer(smollm2_dir)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray cluster with 2 CPUs for the tests of one module."""
    import logging

    import ray

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # silences a FutureWarning on every init
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()
