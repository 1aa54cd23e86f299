"""``agentfly-bench --suite search``: AgentFly/Search-v0 at scale.

- **scale**: for generated corpora of 100k, 300k and 1M passages (10k and 100k with ``--quick``) written
  as wiki-18 JSONL: the corpus hash, the BM25 index build (in a child process, so its peak memory is
  its own) with its size on disk, and query latency p50/p99 over the corpus's own questions. The
  largest corpus is built again with a quarter of the writer's heap, to show what bounds the
  build's memory. The baseline, in the same call, is rank-bm25 (pure-Python BM25) on the smallest.
- **cache**: latency of an env step whose ``retrieve`` call hits the cache (embedded memory, SQLite,
  Redis on a local ``redis-server``), of a step that misses (BM25 runs), and of a bare ``get``.
- **episodes**: expert episodes per second with 64 concurrent envs on one event loop, with the
  embedded cache and with one shared Redis; the baseline is Gymnasium's ``SyncVectorEnv``.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import redis
from gymnasium.vector import AutoresetMode
from rich.console import Console
from rich.table import Table

from agentfly_bench.measure import summarize
from agentfly_env import AgentVectorEnv, run_sync
from agentfly_env.core.types import ToolCall
from agentfly_env.tools.cache import Cache, RedisCache, SQLiteCache
from agentfly_envs.search import SearchEnv
from agentfly_envs.search.corpus import CorpusFile, write_corpus
from agentfly_envs.search.generate import Encyclopedia
from agentfly_envs.search.index import ensure_index, open_index

DESCRIPTION = "Search-v0: BM25 build, size and query latency at 100k/1M passages; cache hits, Redis vs embedded; episodes/s at 64 envs"

# The build runs in a child process so that its memory is its own. Peak RSS (VmHWM, which exec
# resets, unlike getrusage's maxrss) counts the pages of the memory-mapped segments that merges
# read; peak anonymous RSS (sampled from /proc every 20 ms) is the memory the build allocates,
# which the writer's heap budget bounds.
BUILD_CHILD = """
import sys, threading, time
from agentfly_bench.measure import proc_kib
from agentfly_envs.search.corpus import CorpusFile
from agentfly_envs.search.index import ensure_index
peak_anon_kib = 0
def sample():
    global peak_anon_kib
    while True:
        peak_anon_kib = max(peak_anon_kib, proc_kib("self", "RssAnon"))
        time.sleep(0.02)
threading.Thread(target=sample, daemon=True).start()
source = CorpusFile(sys.argv[1])
started = time.perf_counter()
source.fingerprint(sys.argv[2])
hashed = time.perf_counter()
ensure_index(source, sys.argv[2], heap_mb=int(sys.argv[3]), progress=False)
built = time.perf_counter()
peak_kib = proc_kib("self", "VmHWM")
print(hashed - started, built - hashed, peak_anon_kib, peak_kib)
"""
#: The writer's memory budget in the scale runs (ensure_index's default).
HEAP_MB = 256


def _dir_mib(path: Path) -> float:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file()) / 2**20


def _build_in_child(corpus: Path, index_dir: Path, heap_mb: int) -> dict[str, float]:
    """Hash and index ``corpus`` in a child process: its times and peak memory."""
    child = subprocess.Popen(
        [sys.executable, "-c", BUILD_CHILD, str(corpus), str(index_dir), str(heap_mb)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    output = child.stdout.read()
    if child.wait() != 0:
        raise RuntimeError(f"index build of {corpus.name} failed (exit {child.returncode})")
    hash_s, build_s, peak_anon_kib, peak_kib = (float(value) for value in output.split())
    return {
        "hash_s": hash_s,
        "build_s": build_s,
        "build_heap_mb": heap_mb,
        "build_peak_rss_mib": peak_kib / 1024,
        "build_peak_anon_rss_mib": peak_anon_kib / 1024,
    }


def bench_scale(
    passages: int, work: Path, queries: int, baseline: bool, heaps: tuple[int, ...]
) -> list[dict[str, Any]]:
    """Write a corpus of ``passages``; for each writer heap budget, index it and time queries."""
    world = Encyclopedia(passages, seed=0)
    corpus = work / f"corpus-{passages}.jsonl"
    started = time.perf_counter()
    write_corpus(world.passages(), corpus)
    write_s = time.perf_counter() - started
    texts = [record.question for record in world.questions()[:queries]]
    rows = []
    for heap_mb in heaps:
        index_dir = work / f"indexes-{passages}-{heap_mb}"
        row: dict[str, Any] = {
            "passages": passages,
            "corpus_mib": corpus.stat().st_size / 2**20,
            "write_corpus_s": write_s,
            **_build_in_child(corpus, index_dir, heap_mb),
        }
        index = ensure_index(CorpusFile(corpus), index_dir, progress=False)  # opens what the child built
        for text in texts[:20]:
            index.search(text, 3)  # warm the page cache, as a long-running env would be
        samples = []
        for text in texts:
            begun = time.perf_counter()
            index.search(text, 3)
            samples.append(time.perf_counter() - begun)
        row.update(index_mib=_dir_mib(index.path), query=summarize(samples))
        if baseline and not rows:
            row["rank_bm25"] = bench_rank_bm25(world, texts[:20])
        shutil.rmtree(index_dir, ignore_errors=True)
        rows.append(row)
    corpus.unlink()
    return rows


def bench_rank_bm25(world: Encyclopedia, texts: list[str]) -> dict[str, Any]:
    """The pure-Python baseline: rank-bm25's BM25Okapi over the same passages and queries."""
    from rank_bm25 import BM25Okapi

    started = time.perf_counter()
    tokenized = [f"{p.title} {p.text}".lower().split() for p in world.passages()]
    model = BM25Okapi(tokenized)
    build_s = time.perf_counter() - started
    samples = []
    for text in texts:
        begun = time.perf_counter()
        model.get_top_n(text.lower().split(), tokenized, n=3)
        samples.append(time.perf_counter() - begun)
    return {"build_s": build_s, "query": summarize(samples)}


@contextlib.contextmanager
def local_redis() -> Iterator[str | None]:
    """A throwaway ``redis-server`` on a free loopback port (None when the binary is missing)."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 5
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        client.close()
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


async def _cached_step_latency(cache: Cache | str, index_dir: Path, repeats: int) -> dict[str, Any]:
    """Step latency when ``retrieve`` hits, and a bare ``get`` of the stored entry."""
    env = SearchEnv(index_dir=index_dir, progress=False, cache=cache, max_turns=repeats + 2)
    await env.areset(seed=0)
    action = env.parser.format_call(ToolCall("retrieve", {"query": env.task["question"]}))
    await env.astep(action)  # the miss that stores it
    hits = []
    for _ in range(repeats):
        started = time.perf_counter()
        *_, info = await env.astep(action)
        hits.append(time.perf_counter() - started)
    assert info["cache"]["step_hits"] == 1, "the timed steps must be cache hits"
    inner = env.cache.inner  # type: ignore[union-attr]
    gets = []
    for _ in range(repeats):
        started = time.perf_counter()
        await inner.get("absent")
        gets.append(time.perf_counter() - started)
    stats = info["cache"]
    await env.aclose()
    if isinstance(cache, Cache):
        await cache.aclose()
    return {"step_hit": summarize(hits), "get": summarize(gets), "backend": stats["backend"]}


async def _miss_step_latency(index_dir: Path, repeats: int) -> dict[str, Any]:
    """Step latency when every ``retrieve`` misses (distinct questions): BM25 runs each time."""
    env = SearchEnv(index_dir=index_dir, progress=False, max_turns=repeats + 1)
    await env.areset(seed=0)
    misses = []
    for index in range(repeats):
        action = env.parser.format_call(ToolCall("retrieve", {"query": env.tasks[index]["question"]}))
        started = time.perf_counter()
        *_, info = await env.astep(action)
        misses.append(time.perf_counter() - started)
    assert info["cache"]["hits"] == 0
    await env.aclose()
    return {"step_miss": summarize(misses)}


def bench_cache(index_dir: Path, redis_url: str | None, repeats: int) -> dict[str, Any]:
    results = {
        "memory": run_sync(_cached_step_latency("memory", index_dir, repeats)),
        "sqlite": run_sync(_cached_step_latency(SQLiteCache(index_dir / "bench-cache.db"), index_dir, repeats)),
        "uncached": run_sync(_miss_step_latency(index_dir, repeats)),
    }
    if redis_url is not None:
        results["redis"] = run_sync(_cached_step_latency(RedisCache(redis_url), index_dir, repeats))
    return results


def _episodes_agentfly(num_envs: int, episodes: int, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    vec = AgentVectorEnv([lambda: SearchEnv(**env_kwargs) for _ in range(num_envs)])
    try:
        vec.reset(seed=0)
        done, started = 0, time.perf_counter()
        while done < episodes:
            result = vec.step({i: env.expert_action() for i, env in enumerate(vec.envs)})
            ended = [i for i, end in zip(result.indices, result.terminated | result.truncated, strict=True) if end]
            done += len(ended)
            if ended:
                vec.reset(indices=ended)
        elapsed = time.perf_counter() - started
        stats = vec.envs[0].stats()["cache"]
        return {"episodes_per_s": done / elapsed, "episodes": done, "cache_env0": stats}
    finally:
        vec.close()


def _episodes_gym_sync(num_envs: int, episodes: int, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    vec = gym.make_vec(
        "AgentFly/Search-v0",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED},
        **env_kwargs,
    )
    try:
        vec.reset(seed=0)
        done, started = 0, time.perf_counter()
        while done < episodes:
            _, _, terminated, truncated, _ = vec.step(vec.call("expert_action"))
            ended = terminated | truncated
            done += int(ended.sum())
            if ended.any():
                vec.reset(options={"reset_mask": ended})
        return {"episodes_per_s": done / (time.perf_counter() - started), "episodes": done}
    finally:
        vec.close()


def bench_episodes(index_dir: Path, redis_url: str | None, num_envs: int, episodes: int) -> dict[str, Any]:
    base = {"index_dir": index_dir, "progress": False}
    results = {
        "agentfly_memory": _episodes_agentfly(num_envs, episodes, base),
        "gym_sync_memory": _episodes_gym_sync(num_envs, episodes, base),
    }
    if redis_url is not None:
        redis.Redis.from_url(redis_url).flushdb()
        results["agentfly_redis"] = _episodes_agentfly(num_envs, episodes, {**base, "cache": redis_url})
    return results


def run(quick: bool) -> dict[str, Any]:
    sizes = [10_000, 100_000] if quick else [100_000, 300_000, 1_000_000]
    work = Path(tempfile.mkdtemp(prefix="agentfly-bench-search-"))
    try:
        scale = []
        for position, size in enumerate(sizes):
            # The largest corpus is built twice: with a quarter of the heap, memory should drop by
            # about the difference while the corpus stays the same (the writer's budget bounds it).
            heaps = (HEAP_MB, HEAP_MB // 4) if position == len(sizes) - 1 else (HEAP_MB,)
            scale += bench_scale(size, work, queries=300 if quick else 2_000, baseline=position == 0, heaps=heaps)
        index_dir = work / "default"
        SearchEnv(index_dir=index_dir, progress=False).close()  # build the default corpus's index once
        with local_redis() as redis_url:
            cache = bench_cache(index_dir, redis_url, repeats=300 if quick else 3_000)
            episodes = bench_episodes(index_dir, redis_url, num_envs=64, episodes=300 if quick else 2_000)
        return {
            "scale": scale,
            "cache": cache,
            "episodes": episodes,
            "redis": redis_url is not None,
            "default_index_passages": open_index(next(index_dir.glob("bm25-*"))).num_docs,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(title="Search-v0: BM25 index at scale (tantivy)")
    columns = (
        "passages",
        "corpus MiB",
        "hash s",
        "heap MB",
        "build s",
        "peak RSS MiB",
        "peak anon MiB",
        "index MiB",
        "query p50 ms",
        "query p99 ms",
        "rank-bm25 p50 ms (ours x)",
    )
    for column in columns:
        table.add_column(column, justify="right", no_wrap=column == "passages")
    for row in results["scale"]:
        baseline = row.get("rank_bm25")
        table.add_row(
            f"{row['passages']:,}",
            f"{row['corpus_mib']:.0f}",
            f"{row['hash_s']:.2f}",
            str(row["build_heap_mb"]),
            f"{row['build_s']:.1f}",
            f"{row['build_peak_rss_mib']:.0f}",
            f"{row['build_peak_anon_rss_mib']:.0f}",
            f"{row['index_mib']:.0f}",
            f"{row['query']['p50_us'] / 1000:.3f}",
            f"{row['query']['p99_us'] / 1000:.3f}",
            f"{baseline['query']['p50_us'] / 1000:.1f} ({baseline['query']['p50_us'] / row['query']['p50_us']:.0f}x)"
            if baseline
            else "-",
        )
    console.print(table)

    table = Table(title="Search-v0: step latency with a cached retrieve (µs)")
    for column in ("cache", "step p50", "step p99", "get p50"):
        table.add_column(column, justify="right" if column != "cache" else "left")
    for name, row in results["cache"].items():
        step = row.get("step_hit") or row["step_miss"]
        label = "no hit (BM25 runs)" if name == "uncached" else f"{name} hit"
        get = f"{row['get']['p50_us']:.1f}" if "get" in row else "-"
        table.add_row(label, f"{step['p50_us']:.1f}", f"{step['p99_us']:.1f}", get)
    console.print(table)

    table = Table(title="Search-v0: expert episodes/s, 64 concurrent envs")
    table.add_column("runner")
    table.add_column("episodes/s", justify="right")
    table.add_column("vs gym-sync", justify="right")
    table.add_column("env 0 cache hits", justify="right")
    baseline = results["episodes"]["gym_sync_memory"]["episodes_per_s"]
    for name, row in results["episodes"].items():
        stats = row.get("cache_env0")
        hits = f"{stats['hits']}/{stats['hits'] + stats['misses']}" if stats else "-"
        table.add_row(name, f"{row['episodes_per_s']:,.0f}", f"{row['episodes_per_s'] / baseline:.2f}x", hits)
    console.print(table)
    if not results["redis"]:
        console.print("redis-server not found: the Redis rows were skipped")
