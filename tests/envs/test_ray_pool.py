"""Env pools (agentfly_env.resources.distributed) on the local and Ray backends, and how the Ray one fails.

Episodes are driven the way the OpenRLHF plug-in drives them: lease, ``areset``, ``astep`` until the
episode ends, release (``broken=True`` after a ``ResourceBrokenError``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import pytest
import ray
from ray.exceptions import RayActorError

from agentfly_env.core.env import EnvStateError
from agentfly_env.core.types import ToolCall
from agentfly_env.resources.distributed import (
    ActorPlacementError,
    EnvActorDiedError,
    EnvActorTimeoutError,
    EnvHandle,
    RayEnvHandle,
    make_env_pool,
)
from agentfly_env.resources.pool import ResourceBrokenError, ResourcePool
from agentfly_env.tools.parsing import get_parser

ENV_ID = "AgentFly/Math-v0"
ENV_KWARGS = {"difficulty": 0}
EPISODES = 200
PARSER = get_parser("hermes")


@pytest.fixture(params=["local", "ray"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        request.getfixturevalue("ray_cluster")
    return request.param


def policy(seed: int, turn: int, observation: str, info: dict[str, Any]) -> str:
    """Calculator first, then answer what it said; every third seed answers wrong, so rewards vary."""
    if turn == 0:
        return PARSER.format_call(ToolCall("calculator", {"expression": info["task"]["metadata"]["expression"]}))
    return f"<answer>{observation if seed % 3 else 'wrong'}</answer>"


@dataclass
class Episode:
    seed: int
    order: int  # when it got its lease
    handle: EnvHandle
    steps: list[tuple[Any, ...]] = field(default_factory=list)  # (obs, info), then each astep result
    error: ResourceBrokenError | None = None


_lease_order = itertools.count()


async def play(
    pool: ResourcePool[EnvHandle], seed: int, sabotage: Callable[[EnvHandle], None] | None = None
) -> Episode:
    lease = await pool.acquire(timeout=60)
    episode = Episode(seed, next(_lease_order), lease.resource)
    env = lease.resource
    try:
        observation, info = await env.areset(seed=seed)
        episode.steps.append((observation, info))
        if sabotage is not None:
            sabotage(env)
        for turn in itertools.count():
            step = await env.astep(policy(seed, turn, observation, info))
            episode.steps.append(step)
            observation, _, terminated, truncated, info = step
            if terminated or truncated:
                break
    except ResourceBrokenError as error:
        episode.error = error
    finally:
        await lease.release(broken=episode.error is not None)
    return episode


def play_reference(seed: int) -> list[tuple[Any, ...]]:
    """The same episode on a plain ``gym.make`` env through its sync API: no pool, no Ray."""
    env = gym.make(ENV_ID, **ENV_KWARGS)
    observation, info = env.reset(seed=seed)
    steps: list[tuple[Any, ...]] = [(observation, info)]
    for turn in itertools.count():
        step = env.step(policy(seed, turn, observation, info))
        steps.append(step)
        observation, _, terminated, truncated, info = step
        if terminated or truncated:
            return steps


@pytest.fixture(scope="module")
def reference() -> dict[int, list[tuple[Any, ...]]]:
    return {seed: play_reference(seed) for seed in range(EPISODES)}


async def play_all(pool: ResourcePool[EnvHandle], seeds: range) -> list[Episode]:
    # Bounded: a hang anywhere fails the test instead of stalling the suite.
    return await asyncio.wait_for(asyncio.gather(*(play(pool, seed) for seed in seeds)), 120)


async def test_concurrent_episodes_match_a_plain_env(backend, reference):
    async with make_env_pool(ENV_ID, ENV_KWARGS, backend=backend, size=4) as pool:
        episodes = await play_all(pool, range(EPISODES))
    stats = pool.stats()
    assert all(episode.error is None for episode in episodes)
    assert all(episode.steps[-1][2] or episode.steps[-1][3] for episode in episodes)  # every episode ended
    assert (stats.created, stats.leases, stats.failures, stats.destroyed, stats.alive) == (4, EPISODES, 0, 4, 0)
    handles = {id(episode.handle): episode.handle for episode in episodes}.values()
    assert len(handles) == 4
    # Same seeds, same observations, rewards and infos (ToolCall/ToolResult Structs included) as the
    # plain env: Ray's pickling loses nothing and the backends are interchangeable.
    assert {episode.seed: episode.steps for episode in episodes} == reference
    assert {episode.steps[-1][1] for episode in episodes} == {0.0, 1.0}
    if backend == "ray":  # closing the pool killed its actors
        for handle in handles:
            await until_dead(handle)


async def until_dead(handle: RayEnvHandle, timeout: float = 30) -> None:
    """Return once Ray reports the actor dead; ``ray.kill`` is asynchronous, so a call right after it may
    still be served."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                await handle.actor.ping.remote()
            except RayActorError:
                return
            await asyncio.sleep(0.05)


async def test_killed_actors_are_replaced_mid_episode_or_idle(ray_cluster, reference):
    victim = 7

    def kill(env: EnvHandle) -> None:
        assert isinstance(env, RayEnvHandle)
        ray.kill(env.actor)

    # No call timeout: the death must be reported by Ray, not noticed by a timer.
    pool = make_env_pool(ENV_ID, ENV_KWARGS, backend="ray", size=2, prewarm=2, ray_options={"call_timeout_s": None})
    async with pool:
        # Mid-episode: killed between areset and astep while the other actor plays on.
        episodes = await asyncio.wait_for(
            asyncio.gather(*(play(pool, seed, kill if seed == victim else None) for seed in range(20))), 120
        )
        mid_run = pool.stats()
        failed = [episode for episode in episodes if episode.error is not None]
        assert [episode.seed for episode in failed] == [victim]
        dead = failed[0]
        # Idle: both idle actors die; the next lease's pings find out and it gets a new actor.
        idle = {id(episode.handle): episode.handle for episode in episodes if episode.handle is not dead.handle}
        assert len(idle) == 2
        for handle in idle.values():
            ray.kill(handle.actor)
            await until_dead(handle)
        after_idle = await asyncio.wait_for(play(pool, 0), 60)
        idle_replaced = pool.stats()

    assert isinstance(dead.error, EnvActorDiedError) and "died during astep()" in str(dead.error)
    assert dead.handle.broken
    # The dead actor served nobody after its episode; a third actor took its place.
    served = [episode.order for episode in episodes if episode.handle is dead.handle]
    assert max(served) == dead.order
    assert (mid_run.created, mid_run.failures, mid_run.destroyed) == (3, 1, 1)
    for episode in episodes:
        if episode is not dead:
            assert episode.steps == reference[episode.seed]

    assert after_idle.error is None and after_idle.handle not in idle.values()
    assert all(handle.broken for handle in idle.values())
    assert after_idle.steps == reference[0]
    assert (idle_replaced.created, idle_replaced.failures, idle_replaced.destroyed) == (4, 3, 3)


async def test_a_stuck_actor_times_out_and_is_replaced(ray_cluster):
    pool = make_env_pool(ENV_ID, ENV_KWARGS, backend="ray", size=1, ray_options={"call_timeout_s": 1})
    async with pool:
        lease = await pool.acquire(timeout=60)
        stuck = lease.resource
        await stuck.areset(seed=0)
        os.kill(stuck.location["pid"], signal.SIGSTOP)  # a frozen process, like a node that stopped answering
        with pytest.raises(EnvActorTimeoutError, match="took longer than call_timeout_s=1s") as caught:
            await asyncio.wait_for(stuck.astep("<answer>1</answer>"), 30)
        assert isinstance(caught.value, ResourceBrokenError)
        await lease.release(broken=True)  # kills the frozen actor
        replacement = await asyncio.wait_for(play(pool, 0), 60)
        stats = pool.stats()
    assert replacement.error is None and replacement.handle is not stuck
    assert (stats.created, stats.failures) == (2, 1)


@pytest.mark.parametrize(
    ("ray_options", "lacking"), [({"num_gpus": 1}, "GPU"), ({"resources": {"tpu_pod": 2}}, "tpu_pod")]
)
async def test_an_actor_that_cannot_be_placed_fails_clearly(ray_cluster, ray_options, lacking):
    options = {**ray_options, "placement_timeout_s": 1}
    pool = make_env_pool(ENV_ID, ENV_KWARGS, backend="ray", size=1, ray_options=options)
    async with pool:
        with pytest.raises(ActorPlacementError) as caught:
            await asyncio.wait_for(pool.acquire(timeout=30), 30)
        stats = pool.stats()
    message = str(caught.value)
    assert "within 1s" in message and f"lacks {lacking}" in message
    assert "'CPU': 2.0" in message  # what the cluster has
    assert (stats.alive, stats.created, stats.failures) == (0, 0, 1)


async def test_an_env_that_fails_to_build_in_its_actor_is_reported(ray_cluster):
    pool = make_env_pool(ENV_ID, {"dataset": "no_such_dataset"}, backend="ray", size=1)
    async with pool:
        with pytest.raises(EnvActorDiedError, match="(?s)died while starting.*no_such_dataset"):
            await asyncio.wait_for(pool.acquire(timeout=60), 60)
        assert pool.stats().alive == 0


def test_bad_arguments_are_refused_before_any_env_is_made():
    with pytest.raises(gym.error.Error):
        make_env_pool("AgentFly/Nope-v0", backend="local", size=1)
    with pytest.raises(ValueError, match="backend must be"):
        make_env_pool(ENV_ID, backend="dask", size=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ray_options only apply"):
        make_env_pool(ENV_ID, backend="local", size=1, ray_options={"num_cpus": 1})
    with pytest.raises(ValueError, match="unknown pool config key"):
        make_env_pool(ENV_ID, backend="local", size=1, max_use=3)
    with pytest.raises(ValueError, match="call_timeout_s must be > 0"):
        make_env_pool(ENV_ID, backend="ray", size=1, ray_options={"call_timeout_s": 0})


async def test_an_episode_left_open_is_ended_before_its_env_is_lent_again(backend):
    """The next leaser of an env cannot step (and collect the reward of) the episode its last user left open."""
    async with make_env_pool(ENV_ID, ENV_KWARGS, backend=backend, size=1) as pool:
        async with pool.lease(timeout=60) as env:
            _, info = await env.areset(seed=1)  # and left open
        answer = f"<answer>{info['task']['answer']}</answer>"
        async with pool.lease(timeout=60) as env:
            with pytest.raises(EnvStateError, match="reset"):
                await env.astep(answer)
            await env.areset(seed=1)
            assert (await env.astep(answer))[1] == 1.0  # its own episode plays as usual
    assert (pool.stats().created, pool.stats().failures) == (1, 0)
