"""``AgentFly/ALFWorld-v0``: ALFWorld's household tasks, played through TextWorld's PDDL engine.

ALFWorld (Shridhar et al., 2021) turns ALFRED's household tasks into text games: TextWorld plays a
PDDL problem with ALFWorld's domain and grammar, the agent reads what it sees and types commands, and
the game says when the task is done. Six task types: pick and place, look at an object in light,
clean, heat or cool an object and place it, and pick two objects and place them.

* Games: ALFWorld's own game files (``source="alfworld"``, from ``$ALFWORLD_DATA``), or, offline by
  default, games generated from the domain, grammar, goal library and ALFRED floor plans that the
  ``alfworld`` package ships (:mod:`~agentfly_envs.alfworld.generator`), cached on disk
  (:mod:`~agentfly_envs.alfworld.games`).
* Engines: TextWorld's ``PddlEnv`` in worker processes of a resource pool
  (:mod:`~agentfly_envs.alfworld.engine`).
* The env: tools ``act`` and ``admissible_commands``, reward 1 on the winning step
  (:mod:`~agentfly_envs.alfworld.env`).

Example:
    >>> import gymnasium as gym, tempfile, agentfly_env
    >>> env = gym.make("AgentFly/ALFWorld-v0", task_types=["pick_heat_then_place_in_recep"], cache_dir=tempfile.mkdtemp())
    >>> observation, info = env.reset(seed=1)
    >>> info["task"]["task_type"], "heat" in info["task"]["prompt"] or "hot" in info["task"]["prompt"]
    ('pick_heat_then_place_in_recep', True)
    >>> env.close()
"""

from agentfly_env.extras import requires_extra

with requires_extra("alfworld", "alfworld", "textworld", "fast_downward", feature="AgentFly/ALFWorld-v0"):
    from agentfly_envs.alfworld.engine import (
        ENGINE_POOL,
        Engine,
        EngineError,
        GameState,
        engine_pool,
    )
    from agentfly_envs.alfworld.env import MANIFEST, ALFWorldEnv, act, admissible_commands, game_won
    from agentfly_envs.alfworld.games import ALFWorldGames, GeneratedGames
    from agentfly_envs.alfworld.generator import TASK_TYPES, generate_game

__all__ = [
    "ENGINE_POOL",
    "MANIFEST",
    "TASK_TYPES",
    "ALFWorldEnv",
    "ALFWorldGames",
    "Engine",
    "EngineError",
    "GameState",
    "GeneratedGames",
    "act",
    "admissible_commands",
    "engine_pool",
    "game_won",
    "generate_game",
]
