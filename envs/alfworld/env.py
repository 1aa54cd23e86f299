"""``ALFWorldEnv``: household tasks in ALFWorld's text games, played through pooled TextWorld engines.

The model acts with the ``act`` tool (one game command, such as ``go to fridge 1``) and may ask for
``admissible_commands``. The first observation is the game's intro: the room, what is in it, and the
task. The reward is ALFWorld's win signal: 1 on the step that completes the task, which ends the
episode; a final ``<answer>`` ends it too (giving up), scored 1 only if the task is done. Commands the
game does not know get its own answer, "Nothing happens.", and are counted in
``info["step"].errors["invalid_command"]``. Each step's info also has ``won`` and the
``admissible_commands`` (as does the reset info, with the task: its game file, type and targets).

``action_mode="text"`` plays as ALFWorld's own ``step`` does: the whole turn is one game command
(``go to fridge 1``), there are no tools and no final answer, and the budget is ALFWorld's 50 steps
(``max_nb_steps_per_episode`` of its configs, as in ReAct), where in the default tool mode one turn may
send several commands. ``list_actions=True`` (text mode) ends every observation with the admissible
commands, numbered, and takes a reply that is one's number as that command
(:mod:`agentfly_env.tools.listed_actions`).

A game engine is leased from the pool for the whole episode. One that dies or misses its deadline
ends the episode as truncated (``info["step"].truncation_reason`` says why) and is replaced for the next.

``expert_action()`` replays the game's walkthrough while the episode follows it and otherwise asks
:func:`~agentfly_envs.alfworld.expert.next_command`, which finishes the task from any state.

Example:
    >>> import tempfile
    >>> env = ALFWorldEnv("valid_seen", cache_dir=tempfile.mkdtemp())
    >>> observation, info = env.reset(seed=0)
    >>> observation.startswith("-= Welcome to TextWorld, ALFRED! =-")
    True
    >>> env.step('<tool_call>{"name": "act", "arguments": {"command": "dance"}}</tool_call>')[0]
    'Nothing happens.'
    >>> env.close()
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any, Literal

from agentfly_env.core.manifest import DataSpec, Manifest, RewardSpec, tool_schemas
from agentfly_env.core.spaces import ToolCallSpace, ToolSpec
from agentfly_env.core.types import ToolCall
from agentfly_env.resources.pool import Lease
from agentfly_env.tools.listed_actions import PROMPT as LISTED_ACTIONS_PROMPT
from agentfly_env.tools.listed_actions import action_list, chosen_action
from agentfly_env.tools.parsing import CommandParser
from agentfly_env.tools.rewards import RewardResult, reward
from agentfly_env.tools.tool import tool
from agentfly_env.tools.tool_env import ToolEnv
from agentfly_env.tools.turn import TurnReport
from agentfly_envs.alfworld.engine import (
    ENGINE_POOL,
    Engine,
    EngineError,
    GameState,
    engine_pool,
)
from agentfly_envs.alfworld.expert import next_command
from agentfly_envs.alfworld.games import ALFWorldGames, GeneratedGames

__all__ = ["MANIFEST", "ALFWorldEnv", "act", "admissible_commands", "game_won"]

SYSTEM_PROMPT = (
    "You are in a household and must complete the task the game gives you. Act with the `act` tool, one "
    "game command per call, such as: go to <receptacle>, open <receptacle>, close <receptacle>, "
    "take <object> from <receptacle>, move <object> to <receptacle>, heat/cool/clean <object> with "
    "<receptacle>, use <object>, examine <something>, inventory, look. `admissible_commands` lists the "
    "commands that do something right now. The episode ends by itself as soon as the task is done; a final "
    "answer ends it early and counts as giving up."
)

TEXT_SYSTEM_PROMPT = (
    "You are in a household and must complete the task the game gives you. Each reply is one game "
    "command, such as: go to <receptacle>, open <receptacle>, close <receptacle>, take <object> from "
    "<receptacle>, move <object> to <receptacle>, heat/cool/clean <object> with <receptacle>, use <object>, "
    "examine <something>, inventory, look. The episode ends as soon as the task is done."
)
#: ALFWorld's step budget (``max_nb_steps_per_episode`` in its configs), the turn budget of the text mode.
STEP_LIMIT = 50
#: The handcoded expert's own step cap (``AlfredExpert``): the game set keeps every game it wins within it.
EXPERT_STEP_LIMIT = 200

_EXAMPLE_COMMANDS = ["look", "inventory", "go to countertop 1", "open fridge 1", "take apple 1 from countertop 1"]


class ALFWorldEnv(ToolEnv):
    """ALFWorld's household tasks as a multi-turn tool env.

    Args:
        split: ``train``, ``valid_seen`` or ``valid_unseen`` (``eval`` is ``valid_seen``; generated
            ``valid_unseen`` games use ALFRED's held-out floor plans, as ALFWorld's do).
        source: ``"generated"``: games generated from ALFWorld's domain, grammar and floor plans (the
            offline default); ``"alfworld"``: ALFWorld's own game files.
        data_path: For ``source="alfworld"``: the folder holding ``json_2.1.1`` (default
            ``$ALFWORLD_DATA``, else ``~/.cache/alfworld``, where ``alfworld-download`` puts them).
        task_types: Task types to play (default: all six, see
            :data:`~agentfly_envs.alfworld.generator.TASK_TYPES`).
        num_games: For generated games: games in the split (default: as many as ALFWorld has).
        scenes: For generated games: ALFRED scene numbers to draw floor plans from (default: the
            split's; e.g. ``range(1, 31)`` for kitchens only).
        game_seed: For generated games: the base seed of the whole set (episode seeds pick games in it).
        cache_dir: For generated games: where they are written (default
            :func:`~agentfly_envs.alfworld.games.cache_root`: ``$AGENTFLY_ALFWORLD_CACHE_DIR``, else
            ``alfworld`` in ``$AGENTFLY_CACHE_DIR``).
        pool: Name of the engine pool in the resource manager; envs with the same manager and name share
            its engines (size it in the manager's config, see
            :data:`~agentfly_envs.alfworld.engine.DEFAULT_POOL_CONFIG`).
        engine_timeout_s: Longest a command may take; an engine that misses it is stopped and the
            episode is truncated (``truncation_reason`` starts with ``engine``).
        load_timeout_s: Longest loading a game may take.
        action_mode: ``"tools"`` (default): ``act`` and ``admissible_commands`` calls, several a turn if
            the model likes, and a final answer to give up; ``"text"``: the turn is one game command, as
            in ALFWorld itself (``parser`` does not apply).
        list_actions: Text mode only: every observation ends with the commands admissible now, numbered,
            and a reply that is one's number plays that command (a reply in words still plays as written).
            Not ALFWorld's own observation, which lists nothing: the model is told what it would otherwise
            have to find (as valid-action agents and verl-agent's ALFWorld prompts are). ``Step.action`` keeps
            the reply as written; ``info["command"]`` is the command it played.
        **kwargs: Passed to :class:`~agentfly_env.tools.tool_env.ToolEnv` (``max_turns``, default 50, ALFWorld's
            step budget; ``parser``, ``resources``, ...).
    """

    def __init__(
        self,
        split: str = "train",
        *,
        source: Literal["generated", "alfworld"] = "generated",
        data_path: str | os.PathLike[str] | None = None,
        task_types: Sequence[str] | None = None,
        num_games: int | None = None,
        scenes: Sequence[int] | None = None,
        game_seed: int = 0,
        cache_dir: str | os.PathLike[str] | None = None,
        pool: str = ENGINE_POOL,
        engine_timeout_s: float = 60.0,
        load_timeout_s: float = 300.0,
        action_mode: Literal["tools", "text"] = "tools",
        list_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        if action_mode not in ("tools", "text"):
            raise ValueError(f"action_mode must be 'tools' or 'text', got {action_mode!r}")
        if list_actions and action_mode != "text":
            raise ValueError("list_actions applies to action_mode='text' (tool mode has admissible_commands)")
        if source == "generated":
            if data_path is not None:
                raise ValueError("data_path is for source='alfworld'; generated games go to cache_dir")
            games: GeneratedGames | ALFWorldGames = GeneratedGames(
                split, size=num_games, seed=game_seed, task_types=task_types, scenes=scenes, cache_dir=cache_dir
            )
        elif source == "alfworld":
            if num_games is not None or scenes is not None:
                raise ValueError("num_games and scenes are for generated games")
            path = data_path or os.environ.get("ALFWORLD_DATA") or os.path.expanduser("~/.cache/alfworld")
            games = ALFWorldGames(path, split, task_types=task_types)
        else:
            raise ValueError(f"source must be 'generated' or 'alfworld', got {source!r}")
        self.games = games
        self.pool_name = pool
        self.engine_timeout_s = engine_timeout_s
        self.load_timeout_s = load_timeout_s
        self.action_mode = action_mode
        self.list_actions = list_actions
        kwargs.setdefault("max_turns", STEP_LIMIT)
        tools = [act, admissible_commands]
        if action_mode == "text":
            if "parser" in kwargs:
                raise ValueError("parser= applies to action_mode='tools'; in text mode the turn is the command")
            parser = CommandParser("act", "command")
            listed = f" {LISTED_ACTIONS_PROMPT}" if list_actions else ""
            kwargs.setdefault("system_prompt", f"{TEXT_SYSTEM_PROMPT}{listed} {parser.instructions()}")
            kwargs.update(tools=[act], parser=parser, answer_mode="none", describe_tools=False, max_calls_per_turn=1)
        else:
            kwargs.setdefault("system_prompt", SYSTEM_PROMPT)
            kwargs["tools"] = tools
        super().__init__(tasks=games, reward=game_won, **kwargs)
        engine_pool(self.resources, name=pool)
        # Random play mostly acts, rarely gives up; ``_offer`` keeps the sampled commands admissible.
        self.action_space = ToolCallSpace(
            self.action_space.tools,
            self.parser.format_call,
            answers=self.format_answer if action_mode == "tools" else None,
            answer_probability=0.02,
        )
        self._turn_lock = asyncio.Lock()
        self._played: list[str] = []  # the admissible commands played, for the expert

    # ----------------------------------------------------------------- the game

    @property
    def engine(self) -> Engine:
        """The engine leased for this episode.

        Raises:
            RuntimeError: no episode holds one (before ``reset``, or after the episode ended).
        """
        lease: Lease[Engine] | None = self._leases.get(self.pool_name)
        if lease is None:
            raise RuntimeError(f"{self.env_id}: no game is running; call reset() first")
        return lease.resource

    @property
    def game_state(self) -> GameState:
        """The game's state after the last command."""
        state = self.engine.state
        assert state is not None
        return state

    async def play(self, command: str, turn: TurnReport) -> str:
        """Send one command to the game; what the ``act`` tool does. A command the game does not know
        counts as ``invalid_command``; an engine that fails cuts the episode short (and is replaced)."""
        # The calls of one turn run concurrently; the lock makes them act in the order they were made.
        async with self._turn_lock:
            if turn.truncation_reason is not None:
                return "Error: the game engine has stopped; this episode is over."
            engine = self.engine
            if engine.state is not None and engine.state.won:
                return "The task is already done."
            if self.list_actions and engine.state is not None:
                command = chosen_action(command.strip(), engine.state.admissible_commands)
                turn.info["command"] = command
            admissible = engine.state is not None and command.strip() in engine.state.admissible_commands
            try:
                state = await asyncio.to_thread(engine.step, command, self.engine_timeout_s)
            except EngineError as error:
                failure = f"engine_failed: {error}"
                turn.truncate(failure, engine_error=failure)
                await self._release(self.pool_name, broken=True)
                return f"Error: the game engine stopped ({error}); this episode is over."
            if admissible:
                self._played.append(command.strip())
            else:
                turn.count_error("invalid_command")
            return self._observation(state)

    def _observation(self, state: GameState) -> str:
        """The game's feedback, with the admissible commands listed under ``list_actions`` (until the game is won)."""
        if not self.list_actions or state.won:
            return state.feedback
        return state.feedback + action_list(state.admissible_commands)

    def _offer(self, state: GameState) -> None:
        """Let the action space sample the commands admissible now (random play stays plausible)."""
        self.action_space.tools = [
            ToolSpec(spec.name, spec.parameters, [{"command": c} for c in state.admissible_commands])
            if spec.name == "act" and state.admissible_commands
            else spec
            for spec in self.action_space.tools
        ]

    # ----------------------------------------------------------------- episode

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        _, info = await super()._reset(seed, options)
        self._played = []
        for attempt in range(2):  # an engine that died while idle, or while it started, is replaced once
            try:
                engine = await self._lease(self.pool_name)
                state = await asyncio.to_thread(engine.load, self.task["game_file"], self.load_timeout_s)
                break
            except BaseException as error:
                await self._release(self.pool_name, broken=isinstance(error, EngineError))
                if not isinstance(error, EngineError) or attempt:
                    raise
        self._offer(state)
        info.update(won=state.won, admissible_commands=list(state.admissible_commands))
        return self._observation(state), info

    async def _finish_turn(self, turn: TurnReport) -> None:
        if turn.truncation_reason is not None:  # the engine is gone
            return
        state = self.game_state
        turn.info.update(won=state.won, admissible_commands=list(state.admissible_commands))
        if state.won:
            turn.end_episode()
        self._offer(state)

    def expert_action(self) -> str:
        """The scripted expert: the game's walkthrough while the episode follows it; from any other
        state, :func:`~agentfly_envs.alfworld.expert.next_command` on the game's facts."""
        walkthrough = self.engine.walkthrough
        done = len(self._played)
        if self._played == walkthrough[:done] and done < len(walkthrough):
            command = walkthrough[done]
        else:
            facts, names = self.engine.facts(timeout_s=self.engine_timeout_s)
            command = next_command(facts, names, self.task["task_type"], self.task.get("pddl_params", {}))
        return self.parser.format_call(ToolCall("act", {"command": command}))


# No tool deadline: the engine's own (``engine_timeout_s``) stops a stuck engine and ends the episode.
@tool(timeout_s=None, examples=[{"command": command} for command in _EXAMPLE_COMMANDS])
async def act(command: str, env: ALFWorldEnv, turn: TurnReport) -> str:
    """Do one thing in the household and see what happens.

    Args:
        command: A game command, e.g. "go to countertop 1", "take apple 1 from countertop 1", "open fridge 1".
    """
    return await env.play(command, turn)


@tool
def admissible_commands(env: ALFWorldEnv) -> str:
    """List the commands that do something right now, one per line."""
    return "\n".join(env.game_state.admissible_commands)


@reward(name="won")
def game_won(env: ALFWorldEnv) -> RewardResult:
    """ALFWorld's reward: 1 when the task is done, else 0."""
    won = env.game_state.won
    return RewardResult(float(won), {"won": float(won)}, success=won)


MANIFEST = Manifest(
    id="AgentFly/ALFWorld-v0",
    family="alfworld",
    description="ALFWorld's household tasks (six types) as text games, played through pooled TextWorld engines.",
    benchmark="ALFWorld (Shridhar et al., 2021)",
    link="https://github.com/alfworld/alfworld",
    tools=tool_schemas(act, admissible_commands),
    reward=RewardSpec(
        range=(0.0, 1.0),
        measures="ALFWorld's win signal: whether the task is done",
        paid="once: 1 on the step that completes the task, which ends the episode; a final answer ends it early "
        "(1 only if the task is done); an episode cut at the turn budget earns 0",
        success="the game is won",
    ),
    seeded=True,
    max_turns=STEP_LIMIT,
    extra="alfworld",
    data=(
        DataSpec(
            name="games generated from ALFWorld's PDDL domain, grammar and goal library and ALFRED's floor plans, "
            "as the alfworld package ships them (ALFWorld's released games with source='alfworld')",
            size="3,553 train games (as ALFWorld's release), each made on first use and cached, about 100 KB",
            licence="MIT",
        ),
    ),
    parity="python benchmarks/alfworld_parity.py --seeds 20",
    expert="replays the game's walkthrough (ALFWorld's handcoded expert's path), one command a turn; off it, plans "
    "the next command from the game's facts",
    # The game set keeps every game the handcoded expert wins within its own 200 steps (as alfworld-generate does),
    # while ALFWorld evaluates with 50: some walkthroughs are longer than the evaluation budget (seed 0's is 51).
    expert_turns=EXPERT_STEP_LIMIT,
)
