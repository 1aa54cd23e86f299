"""``SearchEnv``: answer questions by searching a corpus over several turns (Search-R1 style).

The model calls ``retrieve`` (and optionally ``web_search``) as often as it needs, then answers in
``<answer>...</answer>``. The reward is exact match (or F1) after SQuAD normalisation against any
golden answer; both are in ``info["step"].reward_components``. Tool results are cached (memory by default,
Redis or SQLite through ``cache=``); each step's ``info["cache"]`` has the step's hits and misses and
the cache's running totals, including Redis fallbacks.

Of two answers in one turn the first counts, as in Search-R1, whose rollout ends a turn at its first
``</answer>`` (see ``benchmarks/search_parity.py``).

By default the corpus and questions are generated (see :mod:`agentfly_envs.search.generate`); give
``corpus=`` and ``qa=`` for real data in the wiki-18 and QA JSONL layouts.

Example:
    >>> import tempfile
    >>> env = SearchEnv(num_entities=60, index_dir=tempfile.mkdtemp(), progress=False)
    >>> obs, info = env.reset(seed=0)
    >>> obs
    'Question: Which organisation employed Yaistaind Taideth?'
    >>> obs, reward, terminated, truncated, info = env.step(env.expert_action())
    >>> obs.splitlines()[0], info["cache"]["step_misses"]
    ('Doc 1 [id 51] (Title: Yaistaind Taideth)', 1)
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentfly_env.core.manifest import DataSpec, Manifest, RewardSpec, tool_schemas
from agentfly_env.core.tasks import ListTasks
from agentfly_env.core.types import Step, ToolCall
from agentfly_env.tools.cache import Cache, MemoryCache, cache_key, make_cache
from agentfly_env.tools.rewards import RewardResult, reward
from agentfly_env.tools.tool_env import ToolEnv
from agentfly_envs.search.answers import exact_match, f1_score, normalize_answer
from agentfly_envs.search.corpus import CorpusFile, CorpusSource
from agentfly_envs.search.generate import ATTRIBUTES, encyclopedia, hop_query, read_fact
from agentfly_envs.search.index import ensure_index
from agentfly_envs.search.qa import load_qa, qa_task
from agentfly_envs.search.retrieval import RetrievalMode, make_retriever, parse_hits
from agentfly_envs.search.scoped_cache import ScopedCache
from agentfly_envs.search.tools import retrieve_tool, web_search_tool
from agentfly_envs.search.web import SearchProvider, make_provider, parse_web_results

__all__ = ["MANIFEST", "SearchEnv"]

SYSTEM_PROMPT = (
    "Answer the question. You do not know the facts it asks about: look them up in the knowledge "
    "corpus with the search tools, as often as you need, following each clue to the next search. "
    "Answer with the shortest phrase that answers the question (a name, a year, a number)."
)
SEARCH_TOOLS = ("retrieve", "web_search")
#: Share of generated questions held out for the test split.
TEST_SHARE = 10


@functools.lru_cache(maxsize=16)
def _generated_tasks(num_entities: int, seed: int, max_hops: int, split: str) -> ListTasks:
    """The generated questions of one split, shared by every env made with the same arguments."""
    tasks = []
    for record in encyclopedia(num_entities, seed).questions(max_hops):
        digest = int(hashlib.blake2b(str(record.id).encode(), digest_size=4).hexdigest(), 16)
        if (digest % TEST_SHARE == 0) == (split == "test"):
            tasks.append(qa_task(record))
    return ListTasks(tasks)


@functools.lru_cache(maxsize=16)
def _file_tasks(path: Path, size: int, mtime_ns: int) -> ListTasks:
    """A QA file's questions, read once per process (and again if the file changes)."""
    return ListTasks(load_qa(path))


class SearchEnv(ToolEnv):
    """Retrieval QA over a local corpus with cached search tools.

    Args:
        corpus: A wiki-18 JSONL corpus (``.jsonl`` or ``.jsonl.gz``); None for the generated one.
        qa: A QA JSONL file with ``question`` and ``golden_answers``; required with ``corpus``.
        num_entities: Size of the generated encyclopedia (passages); ignored with ``corpus``.
        corpus_seed: Seed of the generated encyclopedia and its questions.
        max_hops: Longest generated questions, in hops (1 to 4).
        split: ``"train"`` (90%) or ``"test"`` (10%) of the generated questions; a QA file is used whole.
        retrieval: ``"bm25"`` (default), ``"dense"`` or ``"hybrid"`` (BM25 and dense fused by rank).
        embedding_model: Model for dense/hybrid: the packaged all-MiniLM-L6-v2 by default, or a
            sentence-transformers directory.
        device: Torch device of the embedding model (None: sentence-transformers' choice).
        top_k: Passages per search.
        passage_chars: Longest passage text shown per result.
        tools: Which search tools to offer: ``"retrieve"`` and/or ``"web_search"``.
        web_search_provider: A registered provider name (``"local"``: the local index) or a
            :class:`~agentfly_envs.search.web.SearchProvider`.
        reward_metric: ``"em"`` (default) or ``"f1"`` as the reward; both are always reported.
        index_dir: Where indexes are built and shared (default ``$AGENTFLY_SEARCH_INDEX_DIR``, else
            ``search`` in ``$AGENTFLY_CACHE_DIR``, else ``~/.cache/agentfly/search``).
        progress: Show progress bars while building indexes (None: only on a terminal).
        cache: Cache of tool results: a :class:`~agentfly_env.tools.cache.Cache` (shared, not closed by the
            env), or a spec such as ``"redis://localhost:6379/0"`` (default: ``$AGENTFLY_CACHE``, else
            an in-process memory cache of this env, which a seeded reset starts afresh so that seeded
            episodes replay exactly). Entries are scoped by corpus, retriever and settings.
        **kwargs: Passed to :class:`~agentfly_env.tools.tool_env.ToolEnv` (``max_turns`` defaults to 6,
            ``parser``, ``answer_mode``, ...).
    """

    def __init__(
        self,
        corpus: str | os.PathLike[str] | None = None,
        qa: str | os.PathLike[str] | None = None,
        *,
        num_entities: int = 2_000,
        corpus_seed: int = 0,
        max_hops: int = 2,
        split: Literal["train", "test"] = "train",
        retrieval: RetrievalMode = "bm25",
        embedding_model: str | None = None,
        device: str | None = None,
        top_k: int = 3,
        passage_chars: int = 600,
        tools: Sequence[str] = ("retrieve",),
        web_search_provider: str | SearchProvider = "local",
        reward_metric: Literal["em", "f1"] = "em",
        index_dir: str | os.PathLike[str] | None = None,
        progress: bool | None = None,
        cache: Cache | str | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = [name for name in tools if name not in SEARCH_TOOLS]
        if unknown or not tools:
            raise ValueError(f"tools must name some of {list(SEARCH_TOOLS)}, got {list(tools)}")
        if reward_metric not in ("em", "f1"):
            raise ValueError(f"reward_metric must be 'em' or 'f1', got {reward_metric!r}")
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if (corpus is None) != (qa is None):
            raise ValueError("give both corpus= and qa= (your own data), or neither (the generated encyclopedia)")

        source: CorpusSource
        if corpus is None:
            source = encyclopedia(num_entities, corpus_seed).corpus()
            task_source = _generated_tasks(num_entities, corpus_seed, max_hops, split)
        else:
            source = CorpusFile(corpus)
            qa_path = Path(qa).resolve()  # type: ignore[arg-type]
            stat = qa_path.stat()
            task_source = _file_tasks(qa_path, stat.st_size, stat.st_mtime_ns)
        self.corpus_source = source
        self.index = ensure_index(source, index_dir, progress=progress)
        self.retriever = make_retriever(
            retrieval, self.index, source, model=embedding_model, index_dir=index_dir, device=device, progress=progress
        )
        self.top_k = top_k
        self.passage_chars = passage_chars
        self.reward_metric = reward_metric
        examples = [task_source[i]["question"] for i in range(min(8, len(task_source)))]
        offered = []
        if "retrieve" in tools:
            offered.append(
                retrieve_tool(self.retriever, top_k=top_k, passage_chars=passage_chars, example_queries=examples)
            )
        self.web_provider = make_provider(web_search_provider, self.retriever) if "web_search" in tools else None
        if self.web_provider is not None:
            offered.append(
                web_search_tool(self.web_provider, top_k=top_k, snippet_chars=passage_chars, example_queries=examples)
            )
        scope = cache_key(
            "search",
            self.index.meta["fingerprint"],
            self.retriever.name,
            top_k,
            passage_chars,
            self.web_provider.name if self.web_provider is not None else None,
        )
        inner = make_cache(cache)
        # An in-process memory cache made for this env is its own state, like its RNG: a seeded
        # reset starts a fresh one, so a seeded episode replays exactly (cache flags and counts
        # included). Shared caches (a Cache passed in, Redis, SQLite) are never reset.
        self._private_cache = isinstance(inner, MemoryCache) and not isinstance(cache, Cache)
        cache_view = ScopedCache(inner, scope, owns_inner=not isinstance(cache, Cache))
        kwargs.setdefault("max_turns", 6)
        kwargs.setdefault("system_prompt", SYSTEM_PROMPT)
        super().__init__(
            tools=offered, tasks=task_source, reward=reward(self._score, name="answer"), cache=cache_view, **kwargs
        )

    # ----------------------------------------------------------------- reward and cache info

    def _score(self, prediction: str | None, golden_answers: list[str]) -> RewardResult:
        em, f1 = exact_match(prediction, golden_answers), f1_score(prediction, golden_answers)
        return RewardResult(em if self.reward_metric == "em" else f1, {"em": em, "f1": f1}, success=em == 1.0)

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if seed is not None and self._private_cache:
            assert isinstance(self.cache, ScopedCache)
            self.cache = ScopedCache(MemoryCache(), self.cache.scope)
        observation, info = await super()._reset(seed, options)
        info["corpus"] = {
            "passages": self.index.num_docs,
            "fingerprint": self.index.meta["fingerprint"],
            "retrieval": self.retriever.name,
        }
        return observation, info

    async def _step(self, action: str) -> tuple[Step, dict[str, Any]]:
        step, info = await super()._step(action)
        assert self.cache is not None
        # Calls whose arguments did not validate never reached the cache: neither hits nor misses.
        cached = [item for item in step.tool_results if item.name in self.tools and item.error != "invalid_arguments"]
        hits = sum(item.cached for item in cached)
        info["cache"] = {
            "step_hits": hits,
            "step_misses": len(cached) - hits,
            **msgspec.to_builtins(self.cache.stats()),
            "degraded": self.cache.degraded,  # type: ignore[attr-defined]
        }
        return step, info

    async def _close(self) -> None:
        assert self.cache is not None
        await self.cache.aclose()

    # ----------------------------------------------------------------- scripted expert

    def expert_action(self) -> str:
        """A scripted reader: search, read the fact off the subject's passage, follow it, answer.

        For generated questions it walks the hops in the task's metadata: the first search is the
        question itself, each later one the name just read plus a keyword; each value is read from
        the retrieved passage titled with the current subject, so a retrieval miss or a truncated
        passage makes it answer wrongly. For a QA file (no hop metadata) it searches the question
        once, then gives the first golden answer.
        """
        tool = "retrieve" if "retrieve" in self.tools else "web_search"
        outputs = [
            result.output
            for step in (self.trajectory.steps if self.trajectory is not None else [])
            for result in step.tool_results
            if result.name == tool and result.error is None
        ]
        metadata = self.task.get("metadata", {})
        hops = metadata.get("hops")
        generated = isinstance(hops, list) and hops and metadata.get("kind") in ATTRIBUTES and "subject" in metadata
        if not generated:
            if not outputs:
                return self.parser.format_call(ToolCall(tool, {"query": self.task["question"]}))
            return self.format_answer(self.task["golden_answers"][0])
        subject, kind = metadata["subject"], metadata["kind"]
        for attribute, output in zip(hops, outputs, strict=False):
            value = self._read(output, subject, kind, attribute)
            if value is None:
                return self.format_answer("unknown")
            subject, kind = value, ATTRIBUTES[kind][attribute].target
        if len(outputs) < len(hops):
            query = self.task["question"] if not outputs else hop_query(subject, kind, hops[len(outputs)])
            return self.parser.format_call(ToolCall(tool, {"query": query}))
        return self.format_answer(subject)

    @staticmethod
    def _read(output: str, subject: str, kind: str, attribute: str) -> str | None:
        """The value of ``attribute`` in the result titled ``subject``, if one was retrieved."""
        results = [(hit.title, hit.text) for hit in parse_hits(output)]
        results += [(result.title, result.snippet) for result in parse_web_results(output)]
        wanted = normalize_answer(subject)
        for title, text in results:
            if normalize_answer(title) == wanted and (value := read_fact(text, kind, attribute)) is not None:
                return value
        return None


MANIFEST = Manifest(
    id="AgentFly/Search-v0",
    family="search",
    description="Multi-hop questions answered by searching a local corpus with a cached BM25 retrieve tool.",
    benchmark="Search-R1 (Jin et al., 2025)",
    link="https://github.com/PeterGriffinJin/Search-R1",
    tools=tool_schemas(retrieve_tool(None)),
    reward=RewardSpec(
        range=(0.0, 1.0),
        measures="exact match of the answer with any golden answer after SQuAD normalisation (F1 with "
        "reward_metric='f1'; both are reported)",
        paid="once, on the turn that gives the <answer>; an episode cut at the turn budget earns 0",
        success="a reward of 1.0",
    ),
    seeded=True,
    max_turns=6,
    extra="search",
    data=(
        DataSpec(
            name="a fictional encyclopedia and its questions, generated offline in the wiki-18 and QA layouts "
            "(your own corpus and QA files with corpus= and qa=)",
            size="2,000 passages; their 1- and 2-hop questions, 90% train and 10% test",
            licence="Apache-2.0",
        ),
    ),
    parity="python -m pytest tests/envs/test_search_parity.py",
    expert="searches the question, reads each hop's fact off the retrieved passage, follows it, then answers what "
    "it read",
)
