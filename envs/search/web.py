"""The ``web_search`` interface: pluggable search providers behind one tool.

No search API is reachable from this project's machines, so the one provider shipped,
:class:`LocalIndexProvider`, searches the local passage index and says so in every answer. Nothing
here ever invents a result: a provider returns what its backend returned, or raises, and the
model then reads the error.

**Adding a provider.** Subclass :class:`SearchProvider`, register a factory under a name, and
choose it when making the env::

    import os, httpx
    from agentfly_envs.search.web import SearchProvider, WebResult, register_provider

    class MyAPIProvider(SearchProvider):
        name = "my-api"
        description = "My search API"

        def __init__(self, api_key: str) -> None:
            self.api_key = api_key

        async def search(self, query: str, k: int) -> list[WebResult]:
            async with httpx.AsyncClient(timeout=10) as client:
                response = await client.get(
                    "https://search.example.com/v1/search",
                    params={"q": query, "count": k},
                    headers={"Authorization": f"Bearer {self.api_key}"},
                )
                response.raise_for_status()  # an outage is an error the model sees, never fake results
                return [WebResult(r["title"], r["url"], r["snippet"]) for r in response.json()["results"]][:k]

    # The factory gets the env's local retriever; providers for a remote API ignore it.
    register_provider("my-api", lambda retriever: MyAPIProvider(os.environ["MY_API_KEY"]))
    env = gym.make("AgentFly/Search-v0", tools=["retrieve", "web_search"], web_search_provider="my-api")

Results are cached like ``retrieve``'s (by provider, query and env settings), so a training run
pays for each distinct query once.

Example:
    >>> results = [WebResult("Velmouth", "local://passage/20", "Velmouth is a city in Aldaria.")]
    >>> text = format_web_results(results, "the local index", snippet_chars=200)
    >>> print(text)
    Results from the local index:
    1. Velmouth
       local://passage/20
       Velmouth is a city in Aldaria.
    >>> parse_web_results(text) == results
    True
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Sequence

import msgspec

from agentfly_envs.search.retrieval import Retriever, shorten

__all__ = [
    "PROVIDERS",
    "LocalIndexProvider",
    "SearchProvider",
    "WebResult",
    "format_web_results",
    "make_provider",
    "parse_web_results",
    "register_provider",
]

_RESULT = re.compile(r"^(\d+)\. (.*)\n   (\S+)\n   (.*)$", re.MULTILINE)


class WebResult(msgspec.Struct, frozen=True):
    """One search result: what a search engine shows."""

    title: str
    url: str
    snippet: str


class SearchProvider(abc.ABC):
    """A search backend for the ``web_search`` tool.

    Attributes:
        name: The registry name; part of the cache scope.
        description: Where results come from, shown to the model above them.
    """

    name: str
    description: str

    @abc.abstractmethod
    async def search(self, query: str, k: int) -> list[WebResult]:
        """Up to ``k`` results for ``query``, best first; raise on failure (never make results up)."""


class LocalIndexProvider(SearchProvider):
    """Results from the env's own retriever, labelled as local passages (``local://passage/<id>``).

    Args:
        retriever: The env's retriever.
    """

    name = "local"
    description = "the local passage index (offline; not the live web)"

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever

    async def search(self, query: str, k: int) -> list[WebResult]:
        return [
            WebResult(hit.title, f"local://passage/{hit.id}", hit.text) for hit in await self.retriever.search(query, k)
        ]


#: name -> factory(retriever) -> provider.
PROVIDERS: dict[str, Callable[[Retriever], SearchProvider]] = {"local": LocalIndexProvider}


def register_provider(name: str, factory: Callable[[Retriever], SearchProvider]) -> None:
    """Make a provider available by name (``web_search_provider=name``); re-registering replaces it."""
    PROVIDERS[name] = factory


def make_provider(spec: str | SearchProvider, retriever: Retriever) -> SearchProvider:
    """A provider instance from a registered name or an instance.

    Raises:
        ValueError: for an unknown name.
    """
    if isinstance(spec, SearchProvider):
        return spec
    factory = PROVIDERS.get(spec)
    if factory is None:
        raise ValueError(f"unknown web search provider {spec!r}; registered: {sorted(PROVIDERS)}")
    return factory(retriever)


def format_web_results(results: Sequence[WebResult], source: str, snippet_chars: int) -> str:
    """Results as the model reads them: numbered title, URL and snippet, under their source."""
    if not results:
        return f"No results from {source}. Try other keywords."
    lines = [f"Results from {source}:"]
    for number, result in enumerate(results, 1):
        lines += [
            f"{number}. {shorten(result.title, 200)}",
            f"   {result.url}",
            f"   {shorten(result.snippet, snippet_chars)}",
        ]
    return "\n".join(lines)


def parse_web_results(text: str) -> list[WebResult]:
    """Read :func:`format_web_results` output back."""
    return [WebResult(match.group(2), match.group(3), match.group(4)) for match in _RESULT.finditer(text)]
