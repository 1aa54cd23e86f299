"""The AgentFly env suite: Math, WebShop, Code, ScienceWorld, ALFWorld and Search.

The suite registers its own ids. pyproject.toml names :func:`register` in the ``agentfly.envs``
entry-point group, and ``import agentfly_env`` calls it (see :mod:`agentfly_env.registration`); a
third-party suite adds its ids the same way. Registering imports none of the envs: each one's
package, and the engine its extra installs (``pip install 'agentfly-gym[<extra>]'``), loads when
the env is made.

Each family's package exports ``MANIFEST``, the :class:`~agentfly_env.core.manifest.Manifest` of its id, kept
beside the env's code; it is registered by name with the id, so it too loads only when asked for
(``agentfly-env list``, ``describe``, ``validate``).

Example:
    >>> import agentfly_env  # runs register() through the entry point
    >>> ENVS["AgentFly/ALFWorld-v0"]
    'agentfly_envs.alfworld:ALFWorldEnv'
"""

from __future__ import annotations

__all__ = ["ENVS", "register"]

#: id -> entry point. Add a line here when a new env lands; the test suite picks it up by itself.
ENVS: dict[str, str] = {
    "AgentFly/Math-v0": "agentfly_envs.math:MathEnv",
    "AgentFly/WebShop-v0": "agentfly_envs.webshop:WebShopEnv",
    "AgentFly/Code-v0": "agentfly_envs.code:CodeEnv",
    "AgentFly/ScienceWorld-v0": "agentfly_envs.scienceworld:ScienceWorldEnv",
    "AgentFly/ALFWorld-v0": "agentfly_envs.alfworld:ALFWorldEnv",
    "AgentFly/Search-v0": "agentfly_envs.search:SearchEnv",
}


def register() -> None:
    """Register every id of the suite with Gymnasium (idempotent)."""
    # Imported here, not at the top: ``import agentfly_envs`` stays free of the core, so the core's
    # import (which calls this function) never meets a half-initialised suite package.
    from agentfly_env.registration import register as register_env

    for env_id, entry_point in ENVS.items():
        package = entry_point.partition(":")[0]
        register_env(env_id, entry_point, manifest=f"{package}:MANIFEST")
