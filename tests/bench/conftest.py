"""The benchmarks' tests (agentfly_bench; they run the suite's envs, so the `envs` extra).

A benchmark's test checks the suite's plumbing and output, not the measurement itself (that is what an
``agentfly-bench`` run is for), so the suites that train take :func:`tiny_model_dir`: a small random model with
SmolLM2's tokenizer, quick to load, sample and update. The shared fixtures are in ../conftest.py.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(smollm2_dir, tmp_path_factory) -> str:
    """A two-layer random Llama with SmolLM2's tokenizer (and chat template), saved as a model folder."""
    from agentfly_train.models import load_tokenizer, random_model

    tokenizer = load_tokenizer(smollm2_dir)
    folder = tmp_path_factory.mktemp("tiny-model")
    random_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
