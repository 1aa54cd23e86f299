"""A view of a shared cache under a scope, so that envs whose results differ never share entries.

A search result depends on more than the tool's arguments: on the corpus, the retriever, top-k and
the passage length. The env's cache keys only name the tool and its arguments, so each search env
wraps its cache in a :class:`ScopedCache` whose scope hashes all of that; envs with equal settings
(in one process, or in many processes sharing a Redis) share entries, others never collide.

Example:
    >>> import asyncio
    >>> from agentfly_env.tools.cache import MemoryCache
    >>> async def demo():
    ...     shared = MemoryCache()
    ...     small, large = ScopedCache(shared, "top3"), ScopedCache(shared, "top10")
    ...     await small.set("tool:retrieve:x", b"3 passages")
    ...     return await small.get("tool:retrieve:x"), await large.get("tool:retrieve:x")
    >>> asyncio.run(demo())
    (b'3 passages', None)
"""

from __future__ import annotations

from agentfly_env.tools.cache import Cache, CacheStats

__all__ = ["ScopedCache"]


class ScopedCache(Cache):
    """Stores every key of this view as ``<scope>/<key>`` in an inner cache.

    Hits, misses and sets are this view's own; errors and fallbacks (Redis trouble) are the inner
    cache's, which a Redis outage affects as a whole.

    Args:
        inner: The cache that stores the entries (memory, SQLite, Redis).
        scope: What the cached values depend on beyond the key, as a short stable string.
        owns_inner: Close ``inner`` with this view (True when the view created it).
    """

    def __init__(self, inner: Cache, scope: str, *, owns_inner: bool = True) -> None:
        super().__init__(inner.stats().backend)
        self.inner = inner
        self.scope = scope
        self.owns_inner = owns_inner

    @property
    def degraded(self) -> bool:
        """Whether the inner cache serves from a fallback (a Redis cache that lost its server)."""
        return bool(getattr(self.inner, "degraded", False))

    async def _get(self, key: str) -> bytes | None:
        return await self.inner.get(f"{self.scope}/{key}")

    async def _set(self, key: str, value: bytes, ttl_s: float | None) -> None:
        await self.inner.set(f"{self.scope}/{key}", value, ttl_s)

    def stats(self) -> CacheStats:
        own, inner = super().stats(), self.inner.stats()
        own.errors, own.fallbacks = inner.errors, inner.fallbacks
        return own

    async def aclose(self) -> None:
        if self.owns_inner:
            await self.inner.aclose()
