"""``AgentFly/Search-v0``: multi-turn retrieval QA over a local corpus, with cached search tools.

The pieces, one module each: :mod:`~agentfly_envs.search.corpus` and :mod:`~agentfly_envs.search.qa`
(the wiki-18 and QA JSONL formats), :mod:`~agentfly_envs.search.generate` (the offline fictional
encyclopedia and its questions), :mod:`~agentfly_envs.search.index` (the tantivy BM25 index, built
once per corpus), :mod:`~agentfly_envs.search.dense` and :mod:`~agentfly_envs.search.retrieval`
(dense and hybrid retrieval), :mod:`~agentfly_envs.search.tools` and :mod:`~agentfly_envs.search.web`
(``retrieve``, ``web_search`` and its providers), :mod:`~agentfly_envs.search.answers` (EM and F1)
and :mod:`~agentfly_envs.search.env` (the env).

Example:
    >>> import gymnasium as gym, agentfly_env, tempfile
    >>> env = gym.make("AgentFly/Search-v0", num_entities=60, index_dir=tempfile.mkdtemp(), progress=False)
    >>> obs, info = env.reset(seed=1)
    >>> [tool["function"]["name"] for tool in info["tools"]]
    ['retrieve']
    >>> while True:
    ...     obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
    ...     if terminated or truncated:
    ...         break
    >>> reward, info["step"].reward_components
    (1.0, {'em': 1.0, 'f1': 1.0})
"""

from agentfly_env.extras import requires_extra

with requires_extra("search", "tantivy", feature="AgentFly/Search-v0"):
    from agentfly_envs.search.answers import exact_match, f1_score, normalize_answer
    from agentfly_envs.search.corpus import (
        CorpusFile,
        CorpusFormatError,
        CorpusSource,
        Passage,
        iter_corpus,
        write_corpus,
    )
    from agentfly_envs.search.env import MANIFEST, SearchEnv
    from agentfly_envs.search.generate import Encyclopedia
    from agentfly_envs.search.index import BM25Index, Hit, ensure_index
    from agentfly_envs.search.qa import QARecord, load_qa, write_qa
    from agentfly_envs.search.retrieval import BM25Retriever, DenseRetriever, HybridRetriever, Retriever, make_retriever
    from agentfly_envs.search.tools import retrieve_tool, web_search_tool
    from agentfly_envs.search.web import LocalIndexProvider, SearchProvider, WebResult, register_provider

__all__ = [
    "MANIFEST",
    "BM25Index",
    "BM25Retriever",
    "CorpusFile",
    "CorpusFormatError",
    "CorpusSource",
    "DenseRetriever",
    "Encyclopedia",
    "Hit",
    "HybridRetriever",
    "LocalIndexProvider",
    "Passage",
    "QARecord",
    "Retriever",
    "SearchEnv",
    "SearchProvider",
    "WebResult",
    "ensure_index",
    "exact_match",
    "f1_score",
    "iter_corpus",
    "load_qa",
    "make_retriever",
    "normalize_answer",
    "register_provider",
    "retrieve_tool",
    "web_search_tool",
    "write_corpus",
    "write_qa",
]
