"""Env suites register their ``AgentFly/*`` ids themselves; the core only finds them.

The core holds no list of envs: its own ids (:data:`CORE_ENVS`) are made of other envs (a mixture of
them, or one served elsewhere). A suite (this project's ``agentfly_envs``, or any third-party package)
declares a function in the ``agentfly.envs`` entry-point group of its distribution::

    [project.entry-points."agentfly.envs"]
    envs = "agentfly_envs:register"

and that function calls :func:`register` for each of its ids. ``import agentfly_env`` runs
:func:`register_envs`, which calls every installed suite's function (Gymnasium 1.x has no plugin
auto-loading of its own), so ``gym.make("AgentFly/Math-v0")`` works after the import, and
``gym.make("agentfly_env:AgentFly/Math-v0")`` works without it.

Entry points are strings, so registering stays light: an env's package (and its heavy dependencies)
loads only when that env is made. An id's manifest (:class:`~agentfly_env.core.manifest.Manifest`: what it
rewards, needs and reproduces) is given with it, as an object or a ``"module:attribute"`` string loaded only
when asked for (:func:`~agentfly_env.core.manifest.manifest_of`).

Example:
    >>> import gymnasium as gym
    >>> import agentfly_env
    >>> "AgentFly/Math-v0" in agentfly_env.registered_ids()
    True
"""

from __future__ import annotations

import warnings
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

import gymnasium as gym

if TYPE_CHECKING:  # the manifest module reads this one's table: a type here, no import
    from agentfly_env.core.manifest import Manifest

__all__ = [
    "CORE_ENVS",
    "ENTRY_POINT_GROUP",
    "MANIFESTS",
    "MIXTURE_ID",
    "REMOTE_ID",
    "register",
    "register_envs",
    "registered_ids",
]

#: The entry-point group through which env suites announce themselves.
ENTRY_POINT_GROUP = "agentfly.envs"
#: A mixture of other envs (:mod:`agentfly_env.core.mixture`), whichever suites provide them.
MIXTURE_ID = "AgentFly/Mix-v0"
#: The core's client id: an env served over OpenEnv's protocol (:mod:`agentfly_env.serve.remote`); it needs a
#: ``url``, so :func:`registered_ids` (the envs to play as they are) leaves it out.
REMOTE_ID = "AgentFly/Remote-v0"
#: The core's own ids: envs made of other envs, whichever suites provide those.
CORE_ENVS = {MIXTURE_ID: "agentfly_env.core.mixture:MixtureEnv", REMOTE_ID: "agentfly_env.serve.remote:RemoteEnv"}
#: id -> its manifest, or the ``"module:attribute"`` that holds it; read through
#: :func:`~agentfly_env.core.manifest.manifest_of`.
MANIFESTS: dict[str, Manifest | str] = {}


def register(env_id: str, entry_point: str, *, manifest: Manifest | str | None = None, **kwargs: Any) -> None:
    """Register one env id with Gymnasium, as a suite's registration function does (idempotent).

    No ``max_episode_steps``: the env owns its turn budget and reports why it truncated. The env is
    made with ``env_id`` among its keyword arguments, so it knows the id it was made under.

    Args:
        env_id: ``"AgentFly/<Name>-v<N>"`` (or any Gymnasium id).
        entry_point: ``"package.module:EnvClass"``; imported only when the env is made.
        manifest: The id's :class:`~agentfly_env.core.manifest.Manifest`, or ``"package.module:NAME"``
            where it is (imported only when asked for); ``agentfly-env validate`` fails an id without one.
        kwargs: Default keyword arguments of the env.
    """
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=entry_point, kwargs={"env_id": env_id, **kwargs})
    if manifest is not None:
        MANIFESTS.setdefault(env_id, manifest)


def register_envs() -> None:
    """Run the registration function of every installed suite (the ``agentfly.envs`` group; idempotent).

    An entry point names a function (called) or a module (importing it is the registration). A suite
    that fails to load or register is skipped with a warning, so one broken plug-in does not break
    ``import agentfly_env``. The core's own ids are registered first.
    """
    for env_id, entry_point in CORE_ENVS.items():
        register(env_id, entry_point)
    for plugin in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = plugin.load()
            if callable(loaded):
                loaded()
        except Exception as exc:  # a third-party plug-in may raise anything
            warnings.warn(
                f"env suite {plugin.name!r} ({plugin.value}) failed to register: {exc!r}",
                RuntimeWarning,
                stacklevel=2,
            )


def registered_ids() -> list[str]:
    """Every ``AgentFly/*`` id known to Gymnasium, whichever suite registered it (but ``REMOTE_ID``)."""
    return sorted(env_id for env_id in gym.registry if env_id.startswith("AgentFly/") and env_id != REMOTE_ID)
