"""Fixtures of the trainer's tests (agentfly_train; the `train` extra)."""

import pytest

from agentfly_train.models import bundled_gguf, convert_gguf, load_tokenizer


@pytest.fixture(scope="session")
def smollm2_dir(request, tmp_path_factory) -> str:
    """The bundled SmolLM2 converted to safetensors, cached across test runs by pytest (``.pytest_cache``;
    with ``-p no:cacheprovider``, converted once per run into a temporary folder)."""
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("agentfly-models") if cache is not None else tmp_path_factory.mktemp("agentfly-models")
    return str(convert_gguf(bundled_gguf(), folder))


@pytest.fixture(scope="session")
def tokenizer(smollm2_dir):
    """SmolLM2's real tokenizer and chat template."""
    return load_tokenizer(smollm2_dir)
