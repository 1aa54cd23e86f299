"""Envs in async Ray actors: the ``ray`` backend of :func:`~agentfly_env.resources.distributed.make_env_pool`.

Each actor holds one env and awaits its ``areset``/``astep`` on the actor's event loop; the caller
gets a :class:`RayEnvHandle` whose methods await Ray's object refs, so a trainer's event loop (vLLM's,
say) never blocks. The pool leases one actor per episode, pings it before reuse and kills it when a
lease comes back broken. Every failure is bounded in time:

* the actor dies (killed, crashed, out of memory, node lost): the call raises
  :class:`EnvActorDiedError`, a :class:`~agentfly_env.resources.pool.ResourceBrokenError`;
* a call hangs: :class:`EnvActorTimeoutError` (also a ``ResourceBrokenError``) after ``call_timeout_s``;
* no node can host the actor: :class:`ActorPlacementError` after ``placement_timeout_s``, naming what
  was requested and what the cluster has.

Errors the env itself raises (``EnvStateError``, ``TypeError``, ...) come through as Ray's
``RayTaskError``, which is also an instance of the env's exception class. Ray is imported when the
first actor is made, so this module imports without it.

Example:
    >>> from agentfly_env.resources.distributed import make_env_pool
    >>> pool = make_env_pool("AgentFly/Math-v0", {"difficulty": 0}, backend="ray", size=4,
    ...                      ray_options={"call_timeout_s": 60})
    >>> async def episode(seed: int) -> float:
    ...     lease = await pool.acquire(timeout=120)
    ...     broken = False
    ...     try:
    ...         obs, info = await lease.resource.areset(seed=seed)
    ...         obs, reward, terminated, truncated, info = await lease.resource.astep("<answer>0</answer>")
    ...         return reward
    ...     except ResourceBrokenError:  # the actor died or hung: the pool replaces it
    ...         broken = True
    ...         raise
    ...     finally:
    ...         await lease.release(broken=broken)
    >>> import asyncio
    >>> import ray; ray.init(num_cpus=2)  # doctest: +SKIP
    >>> asyncio.run(episode(seed=0))  # doctest: +SKIP
    0.0
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentfly_env.resources.distributed.handle import make_env
from agentfly_env.resources.pool import ResourceBrokenError, ResourceSpec

if TYPE_CHECKING:
    from ray.actor import ActorHandle

__all__ = [
    "ActorPlacementError",
    "EnvActor",
    "EnvActorDiedError",
    "EnvActorTimeoutError",
    "RayEnvHandle",
    "RayEnvOptions",
    "create_env_actor",
    "ray_env_spec",
]

logger = logging.getLogger(__name__)


class EnvActorDiedError(ResourceBrokenError):
    """The Ray actor holding the env died (killed, crashed, out of memory, node lost); the episode is lost."""


class EnvActorTimeoutError(ResourceBrokenError, TimeoutError):
    """A call on the env actor ran past ``call_timeout_s``: the actor is stuck or its node unreachable."""


class ActorPlacementError(TimeoutError):
    """No env actor was placed and started within ``placement_timeout_s``; the message says why."""


@dataclass(frozen=True)
class RayEnvOptions:
    """Where env actors run and how long their calls may take.

    Example:
        >>> RayEnvOptions(num_cpus=0.5, resources={"env_node": 1}).remote_options()["resources"]
        {'env_node': 1}
    """

    num_cpus: float | None = None
    """CPUs reserved per actor. None keeps Ray's actor default: 1 CPU to place it, none held while it
    runs, so many mostly-waiting env actors share a node."""
    num_gpus: float | None = None
    """GPUs reserved per actor (envs rarely need one)."""
    resources: Mapping[str, float] = field(default_factory=dict)
    """Custom resources per actor, e.g. ``{"env_node": 1}`` to pin envs to the nodes that offer it."""
    scheduling_strategy: Any = "SPREAD"
    """Ray's scheduling strategy: ``"SPREAD"`` puts actors on different nodes where it can."""
    actor_options: Mapping[str, Any] = field(default_factory=dict)
    """Any other ``ActorClass.options`` (``runtime_env``, ``memory``, ...); these win over the fields above."""
    placement_timeout_s: float = 120.0
    """Seconds for an actor to be placed and to build its env (``gym.make`` included)."""
    call_timeout_s: float | None = 300.0
    """Seconds one ``areset``/``astep`` may take before the actor counts as stuck (None: no limit)."""
    check_timeout_s: float = 10.0
    """Seconds for the health-check ping before a reused actor is lent again."""
    close_timeout_s: float = 10.0
    """Seconds the env gets to close cleanly before its actor is killed."""

    def __post_init__(self) -> None:
        for name in ("placement_timeout_s", "call_timeout_s", "check_timeout_s", "close_timeout_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")

    def remote_options(self) -> dict[str, Any]:
        """The keyword arguments of ``ActorClass.options`` for one env actor."""
        # No restarts: a restarted actor has lost its episode anyway; the pool makes a fresh one.
        options: dict[str, Any] = {"scheduling_strategy": self.scheduling_strategy, "max_restarts": 0}
        if self.num_cpus is not None:
            options["num_cpus"] = self.num_cpus
        if self.num_gpus is not None:
            options["num_gpus"] = self.num_gpus
        if self.resources:
            options["resources"] = dict(self.resources)
        return {**options, **self.actor_options}

    def requested_resources(self) -> dict[str, float]:
        """What placing one actor takes, in the names ``ray.cluster_resources()`` uses."""
        options = self.remote_options()
        requested = {"CPU": 1.0 if options.get("num_cpus") is None else float(options["num_cpus"])}
        if options.get("num_gpus"):
            requested["GPU"] = float(options["num_gpus"])
        if options.get("memory"):
            requested["memory"] = float(options["memory"])
        requested.update(options.get("resources") or {})
        return requested


class EnvActor:
    """The body of an env actor: one env, awaited on the actor's event loop.

    Kept a plain class (made remote with ``ray.remote`` on first use) so this module imports without Ray.
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
        import ray

        self.env = make_env(env_id, env_kwargs)
        context = ray.get_runtime_context()
        self.location = {"actor_id": context.get_actor_id(), "node_id": context.get_node_id(), "pid": os.getpid()}

    async def ping(self) -> dict[str, Any]:
        """Where the actor runs; answering at all is the health check."""
        return self.location

    async def ready(self) -> dict[str, Any]:
        """End the env's open episode, if any (:meth:`~agentfly_env.core.env.AgentEnv.aend_episode`), and
        answer as :meth:`ping` does: the pool's check before it lends the env again."""
        await self.env.aend_episode()
        return self.location

    async def areset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
        return await self.env.areset(seed=seed, options=options)

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return await self.env.astep(action)

    async def aclose(self) -> None:
        await self.env.aclose()


@functools.cache
def _remote_env_actor() -> Any:
    import ray

    return ray.remote(EnvActor)


class RayEnvHandle:
    """An env in a Ray actor, with the env's own async API; nothing here blocks the event loop.

    Attributes:
        actor: The Ray actor handle (``ray.kill(handle.actor)`` ends the env abruptly).
        env_id: The env it holds.
        location: ``actor_id``, ``node_id`` and ``pid`` of the actor.
        broken: A call found the actor dead or stuck; it fails its health check from then on.
    """

    def __init__(self, actor: ActorHandle, env_id: str, options: RayEnvOptions, location: dict[str, Any]) -> None:
        from ray.exceptions import RayActorError

        self.actor = actor
        self.env_id = env_id
        self.location = location
        self.broken = False
        self._options = options
        self._actor_error = RayActorError  # ActorDiedError and ActorUnavailableError
        self._closed = False

    def __repr__(self) -> str:
        return f"RayEnvHandle({self.env_id}, actor {self.location['actor_id']}, pid {self.location['pid']})"

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The env's ``areset`` in the actor.

        Raises:
            EnvActorDiedError, EnvActorTimeoutError: The actor is gone or stuck; release the lease
                with ``broken=True``.
        """
        return await self._call("areset", seed, options)

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The env's ``astep`` in the actor; raises as :meth:`areset` does."""
        return await self._call("astep", action)

    async def _call(self, method: str, *args: Any) -> Any:
        ref = getattr(self.actor, method).remote(*args)
        deadline = asyncio.timeout(self._options.call_timeout_s)
        try:
            async with deadline:
                return await ref
        except self._actor_error as error:
            self.broken = True
            raise EnvActorDiedError(f"{self!r} died during {method}(): {error}") from error
        except TimeoutError:
            if not deadline.expired():  # the env's own TimeoutError, raised in the actor
                raise
            self.broken = True
            raise EnvActorTimeoutError(
                f"{self!r}: {method}() took longer than call_timeout_s={self._options.call_timeout_s:g}s"
            ) from None

    async def healthy(self) -> bool:
        """Whether the actor answers within ``check_timeout_s`` (the pool's check before reuse), having ended
        the episode its last user left open, so the next one cannot step it without a reset."""
        if self.broken:
            return False
        try:
            async with asyncio.timeout(self._options.check_timeout_s):
                await self.actor.ready.remote()
        except (self._actor_error, TimeoutError) as error:
            logger.warning("%r failed its health check: %s", self, str(error) or "no answer in time")
            self.broken = True
        return not self.broken

    async def aclose(self) -> None:
        """Lets the env close cleanly (its own backends stop), then kills the actor; idempotent."""
        if self._closed:
            return
        self._closed = True
        import ray

        if not self.broken:
            try:
                async with asyncio.timeout(self._options.close_timeout_s):
                    await self.actor.aclose.remote()
            except Exception as error:  # still kill it: the actor must not outlive its pool
                logger.warning("%r did not close cleanly: %r", self, error)
        ray.kill(self.actor)


async def create_env_actor(env_id: str, env_kwargs: Mapping[str, Any], options: RayEnvOptions) -> RayEnvHandle:
    """Starts an env actor and waits until it is placed and its env built.

    Raises:
        ActorPlacementError: Not ready within ``options.placement_timeout_s`` (the actor is killed).
        EnvActorDiedError: The actor died while starting, e.g. ``gym.make`` raised (Ray's message
            holds the actor's traceback).
    """
    import ray
    from ray.exceptions import RayActorError

    actor = _remote_env_actor().options(**options.remote_options()).remote(env_id, dict(env_kwargs))
    try:
        async with asyncio.timeout(options.placement_timeout_s):
            location = await actor.ping.remote()
    except TimeoutError:
        ray.kill(actor)  # also withdraws a request still waiting for resources
        raise await asyncio.to_thread(_placement_error, env_id, options) from None
    except RayActorError as error:
        raise EnvActorDiedError(f"the env actor for {env_id!r} died while starting: {error}") from error
    except BaseException:  # cancelled: leave no actor behind
        ray.kill(actor)
        raise
    return RayEnvHandle(actor, env_id, options, location)


def _placement_error(env_id: str, options: RayEnvOptions) -> ActorPlacementError:
    """Says what was asked and what the cluster has (these calls query the GCS: run off the loop)."""
    import ray

    requested = options.requested_resources()
    available, total = _readable(ray.available_resources()), _readable(ray.cluster_resources())
    short = [name for name, amount in requested.items() if total.get(name, 0.0) < amount]
    why = (
        f"the cluster lacks {', '.join(f'{name} ({total.get(name, 0.0):g} in total)' for name in short)}"
        if short
        else "the cluster is busy, or the env is slow to build (raise placement_timeout_s)"
    )
    return ActorPlacementError(
        f"no env actor for {env_id!r} was placed and started within {options.placement_timeout_s:g}s: "
        f"each asks for {requested}; the cluster has {available} available of {total} in total; {why}"
    )


def _readable(resources: Mapping[str, float]) -> dict[str, float]:
    # node:<ip> markers are per-node bookkeeping, not something an actor asks for.
    return {name: amount for name, amount in sorted(resources.items()) if not name.startswith("node:")}


def ray_env_spec(env_id: str, env_kwargs: Mapping[str, Any], options: RayEnvOptions) -> ResourceSpec[RayEnvHandle]:
    """The pool hooks for env actors: start (placement-bounded), before reuse one round trip that ends the
    last user's episode and shows the actor alive (:meth:`RayEnvHandle.healthy`), close and kill."""
    return ResourceSpec(
        create=functools.partial(create_env_actor, env_id, env_kwargs, options),
        check=RayEnvHandle.healthy,
        destroy=RayEnvHandle.aclose,
    )
