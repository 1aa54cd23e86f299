"""The search tools, bound to a retriever or a provider: ``retrieve`` and ``web_search``.

Each is built for one env's settings (top-k, passage length) and declared ``cache=True``: the env
caches results by tool, arguments and its :class:`~agentfly_envs.search.scoped_cache.ScopedCache`
scope (corpus, retriever, settings). Any :class:`~agentfly_env.tools.tool_env.ToolEnv` can use them.

Example:
    >>> import asyncio, tempfile
    >>> from agentfly_envs.search.generate import Encyclopedia
    >>> from agentfly_envs.search.index import ensure_index
    >>> from agentfly_envs.search.retrieval import BM25Retriever
    >>> world = Encyclopedia(num_entities=60, seed=0)
    >>> retriever = BM25Retriever(ensure_index(world.corpus(), tempfile.mkdtemp(), progress=False))
    >>> retrieve = retrieve_tool(retriever, top_k=2)
    >>> retrieve.name, retrieve.cache, retrieve.required
    ('retrieve', True, ['query'])
    >>> asyncio.run(retrieve.call({"query": "Waigrox Guild founder"})).output.splitlines()[0]
    'Doc 1 [id 14] (Title: Waigrox Guild)'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentfly_env.tools.tool import Tool
from agentfly_envs.search.retrieval import Retriever, format_hits
from agentfly_envs.search.web import SearchProvider, format_web_results

__all__ = ["retrieve_tool", "web_search_tool"]


def _check(top_k: int, passage_chars: int) -> None:
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if passage_chars < 20:
        raise ValueError(f"passage_chars must be at least 20, got {passage_chars}")


def _examples(queries: Sequence[str]) -> list[dict[str, Any]]:
    return [{"query": query} for query in queries]


def retrieve_tool(
    retriever: Retriever | None, *, top_k: int = 3, passage_chars: int = 600, example_queries: Sequence[str] = ()
) -> Tool:
    """The ``retrieve`` tool: the ``top_k`` best passages, each cut to ``passage_chars``.

    Args:
        retriever: Where passages come from; None: a tool that only describes itself (its schema, for the
            env's manifest), which cannot be called.
        top_k: Passages per call.
        passage_chars: Longest passage text shown.
        example_queries: Plausible queries for the action space's ``sample()``.
    """
    _check(top_k, passage_chars)

    async def retrieve(query: str) -> str:
        """Search the knowledge corpus; returns the best passages with their ids and titles.

        Args:
            query: What to look for: a question, or a name and the fact you need.
        """
        return format_hits(await retriever.search(query, top_k), passage_chars)

    return Tool(retrieve, name="retrieve", cache=True, examples=_examples(example_queries))


def web_search_tool(
    provider: SearchProvider, *, top_k: int = 3, snippet_chars: int = 600, example_queries: Sequence[str] = ()
) -> Tool:
    """The ``web_search`` tool over a :class:`~agentfly_envs.search.web.SearchProvider`.

    Args:
        provider: The search backend; its description heads every answer.
        top_k: Results per call.
        snippet_chars: Longest snippet shown.
        example_queries: Plausible queries for the action space's ``sample()``.
    """
    _check(top_k, snippet_chars)

    async def web_search(query: str) -> str:
        """Search the web (through the configured provider); returns titles, URLs and snippets.

        Args:
            query: The search query.
        """
        return format_web_results(await provider.search(query, top_k), provider.description, snippet_chars)

    return Tool(web_search, name="web_search", cache=True, examples=_examples(example_queries))
