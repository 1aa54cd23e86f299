"""Fixtures of the trainer's tests (agentfly_train; the `train` extra)."""

import pytest

from agentfly_train.models import load_tokenizer


@pytest.fixture(scope="session")
def tokenizer(smollm2_dir):
    """SmolLM2's real tokenizer and chat template."""
    return load_tokenizer(smollm2_dir)
