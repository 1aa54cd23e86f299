"""WebShop: index build time and size, search/click/reset latency, expert episodes/s, and rank-bm25 alongside.

* **Index build** for generated catalogs of 1k, 100k and 1M products (quick: 1k and 10k), each into a
  fresh cache directory: the total, the part spent making the products' documents (the generator's
  cost) and the rest (tantivy's), and the size on disk.
* **Latency** at 100k products (quick: 10k): the index alone on goal instructions, then whole env steps
  (``search[...]`` and each kind of click) and resets, one call at a time.
* **Throughput**: episodes/s of the scripted expert with 64 (and 1,024) concurrent envs on one event loop.
* **Baseline**, same call, same queries: rank-bm25's ``BM25Okapi`` over the same documents (what a
  plain Python port would use), its build time and query latency, and how often each engine returns the
  goal's product in its top 50.
* **Cold start** of ``gym.make("AgentFly/WebShop-v0")`` in a fresh process with an empty cache, then warm.

Example::

    agentfly-bench --suite webshop            # the full run (several minutes: the 1M build dominates)
    agentfly-bench --suite webshop --quick    # a smoke run
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentfly_bench.measure import memory_mib, summarize
from agentfly_env import AgentVectorEnv, run_sync
from agentfly_envs.webshop import GeneratedCatalog, WebShopEnv, open_index
from agentfly_envs.webshop.index import MANIFEST, document_text

DESCRIPTION = "WebShop: index build (1k/100k/1M), search/click/reset latency, expert episodes/s, rank-bm25 baseline"

_WORDS = re.compile(r"\w+")


def _directory_mib(path: Path) -> float:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file()) / 2**20


def index_build(size: int, cache_dir: Path) -> dict[str, Any]:
    """Build the index of a generated catalog of ``size`` products from nothing."""
    catalog = GeneratedCatalog(size)
    started, cpu = time.perf_counter(), time.process_time()
    index = open_index(catalog, cache_dir)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    manifest = index.manifest
    return {
        "products": size,
        "build_s": wall,
        "cpu_s": cpu,
        "documents_s": manifest["documents_s"],
        "index_s": manifest["build_s"] - manifest["documents_s"],
        "size_mib": _directory_mib(index.path),
        "memory": memory_mib(),
        "manifest": str(index.path / MANIFEST),
    }


def latencies(env: WebShopEnv, episodes: int) -> dict[str, Any]:
    """Reset, search-step and click-step latency (by kind of click) over expert episodes, plus a tour of
    pagination and sub-pages in each."""
    times: dict[str, list[float]] = {
        "reset": [],
        "search": [],
        "click_product": [],
        "click_option": [],
        "click_next": [],
        "click_sub_page": [],
        "click_back": [],
        "click_buy": [],
    }

    def timed(kind: str, action: str) -> tuple[Any, ...]:
        started = time.perf_counter()
        outcome = run_sync(env.astep(action))
        times[kind].append(time.perf_counter() - started)
        return outcome

    for seed in range(episodes):
        started = time.perf_counter()
        run_sync(env.areset(seed=seed))
        times["reset"].append(time.perf_counter() - started)
        terminated = truncated = False
        while not (terminated or truncated):
            assert env.session is not None
            page = env.session.page
            action = env.expert_action()
            value = action[action.index("[") + 1 : -1].lower()
            if page == "search":
                kind = "search"
            elif page == "results":
                kind = "click_next" if value == "next >" else "click_product"
            elif value == "buy now":
                # A tour before buying: a sub-page and back (the expert itself never needs them).
                timed("click_sub_page", "click[Description]")
                timed("click_back", "click[< Prev]")
                kind = "click_buy"
            else:
                kind = "click_option"
            _, _, terminated, truncated, _ = timed(kind, action)
    return {kind: summarize(samples) for kind, samples in times.items()}


def search_comparison(
    catalog: GeneratedCatalog, env: WebShopEnv, queries: int, baseline_queries: int
) -> dict[str, Any]:
    """tantivy (the env's index) and rank-bm25 on the same goal instructions and the same documents."""
    from rank_bm25 import BM25Okapi

    goals = catalog.goals()[:queries]
    ours, ours_cpu, hits = [], [], 0
    for goal in goals:
        started, cpu = time.perf_counter(), time.thread_time()
        found = env.index.search(goal["instruction_text"])
        ours_cpu.append(time.thread_time() - cpu)
        ours.append(time.perf_counter() - started)
        hits += catalog.ordinal(goal["asin"]) in found
    started = time.perf_counter()
    corpus = [_WORDS.findall(document_text(product).lower()) for product in catalog.products()]
    bm25 = BM25Okapi(corpus)
    baseline_build = time.perf_counter() - started
    del corpus
    theirs, baseline_hits = [], 0
    for goal in goals[:baseline_queries]:
        started = time.perf_counter()
        scores = bm25.get_scores(_WORDS.findall(goal["instruction_text"].lower()))
        top = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:50]
        theirs.append(time.perf_counter() - started)
        baseline_hits += catalog.ordinal(goal["asin"]) in top
    return {
        "products": len(catalog),
        "tantivy": {
            **summarize(ours),
            "cpu_p50_us": summarize(ours_cpu)["p50_us"],
            "target_in_top50": hits / len(goals),
        },
        "rank_bm25": {
            **summarize(theirs),
            "build_s": baseline_build,
            "target_in_top50": baseline_hits / max(1, len(theirs)),
        },
    }


def expert_throughput(size: int, cache_dir: Path, num_envs: int, episodes: int) -> dict[str, Any]:
    """Episodes/s (and steps/s) of the scripted expert, ``num_envs`` envs stepped together."""
    vec = AgentVectorEnv.make("AgentFly/WebShop-v0", num_envs, num_products=size, cache_dir=str(cache_dir), split="all")
    try:
        started = time.perf_counter()
        vec.reset(seed=list(range(num_envs)))
        next_seed, done, steps, reward = num_envs, 0, 0, 0.0
        while done < episodes:
            actions = {i: env.expert_action() for i, env in enumerate(vec.envs)}
            result = vec.step(actions)
            steps += len(result.indices)
            ended = [i for i, end in zip(result.indices, result.terminated | result.truncated, strict=True) if end]
            done += len(ended)
            reward += float(sum(result.rewards[result.indices.index(i)] for i in ended))
            if ended:
                vec.reset(seed=list(range(next_seed, next_seed + len(ended))), indices=ended)
                next_seed += len(ended)
        elapsed = time.perf_counter() - started
    finally:
        vec.close()
    return {
        "envs": num_envs,
        "products": size,
        "episodes": done,
        "episodes_per_s": done / elapsed,
        "steps_per_s": steps / elapsed,
        "mean_reward": reward / done,
    }


def cold_start(cache_dir: Path) -> dict[str, float]:
    """Seconds for ``gym.make`` of the default env in a new process: empty cache, then warm."""
    code = (
        "import time, gymnasium as gym, agentfly_env; t = time.perf_counter(); "
        f"env = gym.make('AgentFly/WebShop-v0', cache_dir={str(cache_dir)!r}); env.reset(seed=0); print(time.perf_counter() - t)"
    )
    timings = {}
    for name in ("cold_s", "warm_s"):
        output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        timings[name] = float(output.strip().splitlines()[-1])
    return timings


def measure(
    *,
    build_sizes: list[int],
    search_size: int,
    queries: int,
    baseline_queries: int,
    episodes: int,
    throughput_episodes: int,
    concurrency: tuple[int, ...] = (64, 1024),
) -> dict[str, Any]:
    """Every measurement, with the sizes and counts given (``run`` picks them)."""
    results: dict[str, Any] = {"build": [], "load_average": {"start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="agentfly-webshop-bench-") as scratch:
        root = Path(scratch)
        for size in sorted(set(build_sizes) | {search_size}):
            row = index_build(size, root / f"cache-{size}")
            if size in build_sizes:
                results["build"].append(row)
        cache = root / f"cache-{search_size}"
        catalog = GeneratedCatalog(search_size)
        env = WebShopEnv(num_products=search_size, cache_dir=str(cache), split="all")
        try:
            results["latency"] = {"products": search_size, **latencies(env, episodes)}
            results["search"] = search_comparison(catalog, env, queries, baseline_queries)
        finally:
            env.close()
        results["throughput"] = [
            expert_throughput(search_size, cache, n, max(throughput_episodes, 2 * n)) for n in concurrency
        ]
        results["cold_start"] = cold_start(root / "cold")
    results["memory"] = memory_mib()
    results["load_average"]["end"] = os.getloadavg()
    return results


def run(quick: bool) -> dict[str, Any]:
    if quick:
        return measure(
            build_sizes=[1_000, 10_000],
            search_size=10_000,
            queries=200,
            baseline_queries=20,
            episodes=50,
            throughput_episodes=256,
        )
    return measure(
        build_sizes=[1_000, 100_000, 1_000_000],
        search_size=100_000,
        queries=2_000,
        baseline_queries=20,
        episodes=300,
        throughput_episodes=2_000,
    )


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(title="WebShop: index build (generated catalogs, empty cache)")
    for column in ("products", "build s", "documents s", "tantivy s", "CPU s", "size MiB"):
        table.add_column(column, justify="right")
    for row in results["build"]:
        table.add_row(
            f"{row['products']:,}",
            f"{row['build_s']:.2f}",
            f"{row['documents_s']:.2f}",
            f"{row['index_s']:.2f}",
            f"{row['cpu_s']:.2f}",
            f"{row['size_mib']:.1f}",
        )
    console.print(table)
    console.print(
        "documents: generating the products and their text; tantivy: the rest of the build; "
        "CPU: all threads of the process, so a loaded machine shows in build s but less in CPU s"
    )

    search = results["search"]
    table = Table(title=f"WebShop: search latency on goal instructions, {search['products']:,} products (ms)")
    for column in ("engine", "p50", "p99", "queries", "target in top 50", "build s"):
        table.add_column(column, justify="right" if column != "engine" else "left")
    ours, theirs = search["tantivy"], search["rank_bm25"]
    table.add_row(
        "tantivy (ours)",
        f"{ours['p50_us'] / 1000:.3f}",
        f"{ours['p99_us'] / 1000:.3f}",
        str(ours["n"]),
        f"{ours['target_in_top50']:.0%}",
        "see above",
    )
    table.add_row(
        "rank-bm25",
        f"{theirs['p50_us'] / 1000:.1f}",
        f"{theirs['p99_us'] / 1000:.1f}",
        str(theirs["n"]),
        f"{theirs['target_in_top50']:.0%}",
        f"{theirs['build_s']:.1f}",
    )
    console.print(table)
    console.print(
        f"p50 ratio rank-bm25 / tantivy: {theirs['p50_us'] / ours['p50_us']:,.0f}x; "
        f"tantivy's CPU time per search, p50: {ours['cpu_p50_us'] / 1000:.3f} ms"
    )

    latency = results["latency"]
    table = Table(title=f"WebShop: env call latency, {latency['products']:,} products (ms)")
    for column in ("call", "n", "p50", "p90", "p99"):
        table.add_column(column, justify="right" if column != "call" else "left")
    for call, stats in latency.items():
        if call == "products" or not stats.get("n"):
            continue
        table.add_row(call, str(stats["n"]), *(f"{stats[key] / 1000:.3f}" for key in ("p50_us", "p90_us", "p99_us")))
    console.print(table)

    for throughput in results["throughput"]:
        console.print(
            f"expert, {throughput['envs']} concurrent envs, {throughput['products']:,} products: "
            f"{throughput['episodes_per_s']:,.0f} episodes/s, {throughput['steps_per_s']:,.0f} steps/s, "
            f"mean reward {throughput['mean_reward']:.3f} over {throughput['episodes']} episodes"
        )
    cold = results["cold_start"]
    console.print(
        f"gym.make + reset of the default env in a new process: {cold['cold_s']:.2f} s with an empty cache, "
        f"{cold['warm_s']:.2f} s warm (imports excluded)"
    )
    memory, load = results["memory"], results["load_average"]
    console.print(
        f"memory: this process {memory['self_mib']:.0f} MiB; load average (1, 5, 15 min) "
        f"at start {tuple(round(x, 1) for x in load['start'])}, at end {tuple(round(x, 1) for x in load['end'])}"
    )
