"""Fixtures shared by the test folders, which mirror the packages: env/ (the core), envs/ (the suite),
train/ (the trainer) and bench/ (the benchmarks), each with its own conftest.py.

This file is loaded for every test, including the core's on a core-only install, so it imports nothing
beyond the core and the standard library at the top; a fixture that needs an extra imports it in its
body. Helper modules shared by several folders (redis_server.py, docstring_examples.py) live next to
this file; pyproject's ``pythonpath = ["tests"]`` makes them importable from every folder.
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_server import RedisServer

#: The slowest files (each boots a vLLM engine or loads a model per module), slowest first: ``make test`` starts
#: them before the rest. Its workers take a whole file at a time (``--dist loadfile``), so a long file started last
#: would run on alone at the end; xdist's own order (most tests first) started them last.
SLOWEST_FILES = (
    "train/test_vllm.py",
    "train/test_gateway_framework.py",
    "train/test_train_learning.py",
    "train/test_openrlhf_vllm.py",
    "envs/test_alfworld.py",
    "train/test_train_cli.py",
    "train/test_agents.py",
    "train/test_sft.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker (``make test`` runs two), torch and vLLM get the worker's share of the cores as their
    OpenMP thread count (unless ``OMP_NUM_THREADS`` is set): with each taking every core, two workers' OpenMP
    threads, which spin while they wait, outnumber the cores. Measured on 2 cores, test_vllm.py and
    test_gateway_framework.py side by side: 236 s with the default, 195 s with one thread each. This runs before any
    test module imports torch, which reads the variable once."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // int(workers))))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Runs the tests of ``SLOWEST_FILES`` first, in that order; the rest keep theirs."""
    tests = Path(__file__).parent
    if missing := [name for name in SLOWEST_FILES if not (tests / name).is_file()]:
        raise pytest.UsageError(f"tests/conftest.py's SLOWEST_FILES names files that are gone: {missing}")
    rank = {tests / name: index for index, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh redis-server on a free loopback port, stopped after the test even if it fails.

    Used by the core's cache tests (env/) and by Search-v0's (envs/).
    """
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray cluster with 2 CPUs for the tests of one module.

    Used by the Ray env pools' tests (test_ray_pool.py) and by the OpenRLHF agent's (train/).
    """
    import logging

    import ray

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # silences a FutureWarning on every init
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()


@pytest.fixture(scope="session")
def smollm2_dir(request, tmp_path_factory) -> str:
    """The bundled SmolLM2 converted to safetensors, cached across test runs by pytest (``.pytest_cache``;
    with ``-p no:cacheprovider``, converted once per run into a temporary folder).

    Used by the trainer's tests (train/) and by the learning suite's (bench/).
    """
    from agentfly_train.models import bundled_gguf, convert_gguf

    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("agentfly-models") if cache is not None else tmp_path_factory.mktemp("agentfly-models")
    return str(convert_gguf(bundled_gguf(), folder))


@pytest.fixture(scope="session")
def tiny_model_dir(smollm2_dir, tmp_path_factory) -> str:
    """A two-layer random Llama with SmolLM2's tokenizer (and chat template), saved as a model folder: for tests of
    plumbing and output (the benchmark suites that train, the command line's fine-tune), quick to load and update.
    """
    from agentfly_train.models import load_tokenizer, random_model

    tokenizer = load_tokenizer(smollm2_dir)
    folder = tmp_path_factory.mktemp("tiny-model")
    random_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
