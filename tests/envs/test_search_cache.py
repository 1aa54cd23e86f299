"""AgentFly/Search-v0's tool cache: hits and misses in info, scoping, and a real Redis that is shared and dies."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from redis_server import RedisServer

from agentfly_env.tools.cache import CacheFallbackWarning, MemoryCache, RedisCache
from agentfly_envs.search import SearchEnv

REPO_ROOT = Path(__file__).resolve().parents[2]
QUERY = '<tool_call>{"name": "retrieve", "arguments": {"query": "Which river flows past the town?"}}</tool_call>'


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("search-cache-index")


def make_env(index_dir: Path, **kwargs) -> SearchEnv:
    return SearchEnv(index_dir=index_dir, progress=False, **kwargs)


def test_the_same_query_twice_hits_and_info_counts_it(index_dir: Path) -> None:
    env = make_env(index_dir)
    env.reset(seed=0)
    first, *_, info = env.step(QUERY)
    assert (info["cache"]["step_hits"], info["cache"]["step_misses"]) == (0, 1)
    assert not info["step"].tool_results[0].cached
    second, *_, info = env.step(QUERY)
    assert second == first and info["step"].tool_results[0].cached
    assert info["cache"] | {} == info["cache"]  # plain data, loggable as is
    assert (info["cache"]["step_hits"], info["cache"]["step_misses"]) == (1, 0)
    assert (info["cache"]["hits"], info["cache"]["misses"], info["cache"]["sets"]) == (1, 1, 1)
    assert info["cache"]["backend"] == "memory" and not info["cache"]["degraded"]
    # Two calls in one turn: both counted.
    _, *_, info = env.step(QUERY + QUERY.replace("river", "charter"))
    assert (info["cache"]["step_hits"], info["cache"]["step_misses"]) == (1, 1)

    env.reset()  # an unseeded reset keeps the env's cache warm across episodes
    *_, info = env.step(QUERY)
    assert info["cache"]["step_hits"] == 1
    env.reset(seed=0)  # a seeded reset replays the episode exactly: the env's own cache starts afresh
    *_, info = env.step(QUERY)
    assert (info["cache"]["step_misses"], info["cache"]["hits"]) == (1, 0)
    assert env.stats()["cache"]["misses"] == 1
    env.close()


def test_a_call_with_bad_arguments_is_no_cache_lookup(index_dir: Path) -> None:
    env = make_env(index_dir)
    env.reset(seed=0)
    for bad in ('{"q": "river"}', '{"query": 7}', "{}"):
        *_, info = env.step(f'<tool_call>{{"name": "retrieve", "arguments": {bad}}}</tool_call>')
        assert info["step"].tool_results[0].error == "invalid_arguments"
        assert (info["cache"]["hits"], info["cache"]["misses"], info["cache"]["sets"]) == (0, 0, 0)
        assert (info["cache"]["step_hits"], info["cache"]["step_misses"]) == (0, 0)
    *_, info = env.step(QUERY)
    assert (info["cache"]["hits"], info["cache"]["misses"], info["cache"]["sets"]) == (0, 1, 1)
    env.close()


def test_entries_are_shared_only_between_envs_with_the_same_settings(index_dir: Path) -> None:
    shared = MemoryCache()
    first, same, fewer = (make_env(index_dir, cache=shared, top_k=k) for k in (3, 3, 2))
    for env in (first, same, fewer):
        env.reset(seed=0)
    first.step(QUERY)
    assert same.step(QUERY)[-1]["cache"]["step_hits"] == 1
    assert fewer.step(QUERY)[-1]["cache"]["step_misses"] == 1  # another top-k: another entry
    first.close()  # a cache passed in belongs to the caller: closing an env leaves it open
    assert same.step(QUERY)[-1]["cache"]["step_hits"] == 1
    env = make_env(index_dir, cache=shared)
    env.reset(seed=0)  # a shared cache is not the env's to reset
    assert env.step(QUERY)[-1]["cache"]["step_hits"] == 1


SECOND_PROCESS = """
import sys
from agentfly_envs.search import SearchEnv
env = SearchEnv(index_dir=sys.argv[1], cache=sys.argv[2], progress=False)
env.reset(seed=0)
*_, info = env.step(sys.argv[3])
print(info["cache"]["step_hits"], info["step"].tool_results[0].cached, info["cache"]["backend"])
env.close()
"""


def test_a_second_process_sees_the_first_ones_entries_in_redis(index_dir: Path, redis_server: RedisServer) -> None:
    env = make_env(index_dir, cache=redis_server.url)
    env.reset(seed=0)
    *_, info = env.step(QUERY)
    assert info["cache"]["step_misses"] == 1 and info["cache"]["backend"] == "redis"
    keys = redis.Redis.from_url(redis_server.url).keys("agentfly:*")
    assert len(keys) == 1 and b"tool:retrieve:" in keys[0]
    result = subprocess.run(
        [sys.executable, "-c", SECOND_PROCESS, str(index_dir), redis_server.url, QUERY],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "True", "redis"]
    env.close()


async def play_round(envs: list[SearchEnv], seeds: list[int], *, after_first_step=None) -> list[dict]:
    """One expert episode per env, stepped together; ``after_first_step`` runs between steps 1 and 2."""
    await asyncio.gather(*(env.areset(seed=seed) for env, seed in zip(envs, seeds, strict=True)))
    last_infos: list[dict] = [{} for _ in envs]
    rewards: list[float | None] = [None] * len(envs)
    step = 0
    while any(reward is None for reward in rewards):
        active = [i for i, reward in enumerate(rewards) if reward is None]
        outcomes = await asyncio.gather(*(envs[i].astep(envs[i].expert_action()) for i in active))
        for i, (_, reward, terminated, truncated, info) in zip(active, outcomes, strict=True):
            assert not truncated
            last_infos[i] = info
            if terminated:
                rewards[i] = reward
        step += 1
        if step == 1 and after_first_step is not None:
            after_first_step()
    assert rewards == [1.0] * len(envs), "an episode was lost or answered wrongly"
    return last_infos


async def test_killing_redis_mid_run_loses_no_episode(index_dir: Path, redis_server: RedisServer) -> None:
    # Generous timeouts (URL options override the client's 0.5 s): on a loaded machine a slow moment in
    # the warm-up round must not count as a Redis failure. A killed server refuses at once anyway.
    url = f"{redis_server.url}?socket_timeout=5&socket_connect_timeout=5&timeout=5"
    envs = [make_env(index_dir, cache=url) for _ in range(6)]
    shared = RedisCache(url)  # envs can also share one client
    envs += [make_env(index_dir, cache=shared) for _ in range(2)]
    seeds = list(range(100, 108))
    infos = await play_round(envs, seeds)  # warm Redis
    assert all(info["cache"]["errors"] == 0 and not info["cache"]["degraded"] for info in infos)
    with pytest.warns(CacheFallbackWarning):
        # Same questions again: the first step hits Redis, then the server dies under the episodes.
        infos = await play_round(envs, seeds, after_first_step=redis_server.kill)
        # Two-hop episodes searched again after the kill: they noticed, and went on from the fallback.
        assert any(info["cache"]["degraded"] and info["cache"]["fallbacks"] > 0 for info in infos)
        infos = await play_round(envs, [s + 50 for s in seeds])  # whole episodes on a dead server
    assert all(info["cache"]["backend"] == "redis" and info["cache"]["degraded"] for info in infos)
    assert all(info["cache"]["errors"] >= 1 and info["cache"]["fallbacks"] > 0 for info in infos)
    for env in envs:
        await env.aclose()
    await shared.aclose()
