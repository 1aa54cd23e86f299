"""``AgentFly/ScienceWorld-v0``: ScienceWorld's 30 science tasks on pooled simulator JVMs.

`ScienceWorld <https://sciworld.apps.allenai.org>`_ (PyPI ``scienceworld``) is a text simulation of a
house where an agent runs elementary science experiments (boil water, grow a plant, build a circuit,
test conductivity, ...). The package ships its Scala simulator as a JAR that runs on Java 17.

* :mod:`~agentfly_envs.scienceworld.engine`: one simulator JVM, started with a bounded heap and pinned
  hash codes, stepped through the fast path (no valid-action list per step), with deadlines.
* :mod:`~agentfly_envs.scienceworld.pool`: those JVMs in a :class:`~agentfly_env.resources.pool.ResourcePool`.
* :mod:`~agentfly_envs.scienceworld.tasks`: the 30 task types, 7,207 variations and their
  train/dev/test splits, as a task source.
* :mod:`~agentfly_envs.scienceworld.env`: the env, its tools, its reward and its expert.

Example:
    >>> import gymnasium as gym, agentfly_env
    >>> env = gym.make("AgentFly/ScienceWorld-v0", task=["boil", "4-1"], split="test")
    >>> env.unwrapped.task_source.names, env.unwrapped.max_turns
    (['boil', 'find-living-thing'], 50)
    >>> env.close()
"""

from agentfly_env.extras import requires_extra

with requires_extra("scienceworld", "scienceworld", "py4j", feature="AgentFly/ScienceWorld-v0"):
    from agentfly_envs.scienceworld.engine import (
        EngineFailure,
        GameState,
        JvmConfig,
        ScienceWorldEngine,
        SimulatorError,
    )
    from agentfly_envs.scienceworld.env import MANIFEST, ScienceWorldEnv
    from agentfly_envs.scienceworld.pool import DEFAULT_POOL_CONFIG, ENGINE_POOL, engine_pool, engine_spec
    from agentfly_envs.scienceworld.tasks import SPLITS, ScienceWorldTasks, resolve_task, task_names, variations

__all__ = [
    "DEFAULT_POOL_CONFIG",
    "ENGINE_POOL",
    "MANIFEST",
    "SPLITS",
    "EngineFailure",
    "GameState",
    "JvmConfig",
    "ScienceWorldEngine",
    "ScienceWorldEnv",
    "ScienceWorldTasks",
    "SimulatorError",
    "engine_pool",
    "engine_spec",
    "resolve_task",
    "task_names",
    "variations",
]
