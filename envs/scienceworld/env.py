"""``ScienceWorldEnv``: ScienceWorld tasks as a tool env, each episode on a pooled simulator JVM.

At reset the env leases a JVM from its pool, loads the chosen task variation and looks around, as the
stock ``reset`` does; the first observation is the task description followed by that look. The model
then acts through tools:

* ``act(command)``: one action, one time step (``open door to kitchen``, ``focus on water``, ...).
* ``look()`` and ``inventory()``: ScienceWorld's free actions; no time passes.
* ``valid_actions(contains)``: the valid action-object combinations now, filtered; computed only when
  asked, since building the list is what makes the stock ``step`` slow.

The calls of one turn run one after another, in the order written: they act on one world.

Reward (per turn): the progress of ScienceWorld's task score since the previous turn, where progress is
the score clipped to 0..1, as the stock env's reward is the score's change per step. Rewards therefore
sum to the final progress less the progress at reset (a few variations start with a subgoal met): the
whole way to 1.0 for a completed task, part of it for an unfinished one, and down to 0 for a failed one
(a wrong ``focus``), so the turn that fails the task gives back what was earned. ``info`` carries
``score`` (the raw score, negative once failed), ``moves``, and, on the last turn, ``final_score``
(the final progress, 0..1). The episode terminates when the
task is completed (``info["step"].success`` is True) or failed, or when the model writes a final answer (it
stops where it stands); it is truncated at ``max_turns``, or when the JVM dies or hangs
(``truncation_reason == "engine_failure"``, the cause in ``info["engine_error"]``); the next episode
gets a fresh JVM.

``action_mode="text"`` plays as the stock env's ``step`` does: the whole turn is one command (``open
door to kitchen``), there are no tools and no final answer, and the budget is the stock env's: the
episode is truncated (``truncation_reason == "step_limit"``) on the turn after which the simulator's
move count exceeds ``env_step_limit`` (``envStepLimit``, 100 by default). Like the stock env's, the
count is the simulator's: free actions (``look around``, ``inventory``) and unknown commands add
nothing, ``wait1`` adds two. In the default tool mode one turn may run several commands. ``list_actions``
(text mode) ends every observation with the valid actions, numbered (all of them, or those that start with
given prefixes: a kitchen has about a thousand), and takes a reply that is one's number as that action
(:mod:`agentfly_env.tools.listed_actions`).

Example:
    >>> env = ScienceWorldEnv(task="1-1", split="dev", max_turns=30)  # no JVM yet: reset leases one
    >>> sorted(env.tools), env.task_source.names, len(env.task_source)
    (['act', 'inventory', 'look', 'valid_actions'], ['boil'], 7)
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from agentfly_env.core.aio import run_sync
from agentfly_env.core.manifest import DataSpec, Manifest, RewardSpec, tool_schemas
from agentfly_env.core.types import ParseResult, Step, ToolCall, ToolResult
from agentfly_env.tools.listed_actions import PROMPT as LISTED_ACTIONS_PROMPT
from agentfly_env.tools.listed_actions import action_list, chosen_action
from agentfly_env.tools.parsing import CommandParser
from agentfly_env.tools.rewards import RewardResult, reward
from agentfly_env.tools.tool import tool
from agentfly_env.tools.tool_env import ToolEnv
from agentfly_env.tools.turn import TurnReport
from agentfly_envs.scienceworld.engine import EngineFailure, GameState, JvmConfig, Loaded, ScienceWorldEngine
from agentfly_envs.scienceworld.pool import ENGINE_POOL, engine_pool
from agentfly_envs.scienceworld.tasks import ScienceWorldTasks, Split

__all__ = ["MANIFEST", "ScienceWorldEnv", "act", "inventory", "look", "valid_actions"]

T = TypeVar("T")

SYSTEM_PROMPT = (
    "You are an agent in ScienceWorld, a text simulation of a house and its surroundings where you carry "
    "out elementary science experiments. Act with `act`, one action per call; each takes one time step. "
    "Actions look like: look around, open door to kitchen, go to kitchen, pick up thermometer, "
    "look at stove, move metal pot to stove, activate stove, use thermometer on water, pour cup in pot, "
    "connect battery anode to orange wire, wait1 (one step), wait (ten steps), and focus on <thing>. "
    "Focus only on what the task tells you to: focusing on the wrong thing fails the task. "
    "`look` and `inventory` take no time; `valid_actions` lists what you can do right now. "
    "The episode ends when the task is complete or failed; a final answer ends it where it stands."
)

TEXT_SYSTEM_PROMPT = (
    "You are an agent in ScienceWorld, a text simulation of a house and its surroundings where you carry "
    "out elementary science experiments. Each reply is one action, such as: look around, open door to "
    "kitchen, go to kitchen, pick up thermometer, look at stove, move metal pot to stove, activate stove, "
    "use thermometer on water, pour cup in pot, connect battery anode to orange wire, wait1 (one step), "
    "wait (ten steps), inventory, and focus on <thing>. Focus only on what the task tells you to: focusing "
    "on the wrong thing fails the task. The episode ends when the task is complete or failed."
)
#: The stock env's ``envStepLimit``: the text mode's budget of simulator moves.
STEP_LIMIT = 100

#: The simulator's answer to a command it cannot parse (counted as ``unknown_command`` in ``info["step"].errors``).
UNKNOWN_COMMAND = "No known action matches that input."

_WHITESPACE = re.compile(r"\s+")
_VALID_ACTIONS_SHOWN = 150
_GOLD_CACHE_SIZE = 4096
# Gold paths by (task, variation, simplifications): planning one costs a second load. Kept only for
# deterministic JVMs, where a task always plans the same path.
_gold_cache: collections.OrderedDict[tuple[str, int, str], tuple[str, ...]] = collections.OrderedDict()


@tool(
    timeout_s=None,  # the engine enforces its own deadline and kills a JVM that misses it
    examples=[
        {"command": command}
        for command in (
            "look around",
            "open door to kitchen",
            "go to kitchen",
            "pick up thermometer",
            "look at stove",
            "open cupboard",
            "move metal pot to sink",
            "activate sink",
            "use thermometer on water",
            "focus on water",
            "inventory",
            "wait1",
            "task",
        )
    ],
)
async def act(command: str, env: Any, turn: TurnReport) -> str:
    """Do one action in the world; it takes one time step.

    Args:
        command: The action, e.g. "open door to kitchen", "pick up thermometer" or "focus on water".
    """
    return await env.act(command, turn)


@tool(timeout_s=None)
async def look(env: Any, turn: TurnReport) -> str:
    """Look around the current location (takes no time)."""
    return await env.engine_call(ScienceWorldEngine.look, turn=turn)


@tool(timeout_s=None)
async def inventory(env: Any, turn: TurnReport) -> str:
    """List what you carry (takes no time)."""
    return await env.engine_call(ScienceWorldEngine.inventory, turn=turn)


@tool(timeout_s=None, examples=[{}, {"contains": "door"}, {"contains": "thermometer"}])
async def valid_actions(env: Any, turn: TurnReport, contains: str = "") -> str:
    """List the actions that are valid right now.

    Args:
        contains: Show only actions containing this text (e.g. an object's name); empty shows all.
    """
    found = await env.engine_call(ScienceWorldEngine.valid_actions, turn=turn)
    needle = contains.strip().lower()
    matching = [item for item in found if needle in item]
    if not matching:
        return f"No valid action contains {contains!r}." if needle else "No action is valid right now."
    head = f"{len(matching)} valid actions" + (f" contain {contains!r}" if needle else "")
    if len(matching) > _VALID_ACTIONS_SHOWN:
        head += f"; the first {_VALID_ACTIONS_SHOWN} are shown (narrow them with `contains`)"
    return head + ":\n" + "\n".join(matching[:_VALID_ACTIONS_SHOWN])


class ScienceWorldEnv(ToolEnv):
    """ScienceWorld's 30 task types with their variations and splits, on pooled simulator JVMs.

    Reset options: ``task_name`` (a name, id or title) and ``variation`` pick one task (see
    :class:`~agentfly_envs.scienceworld.tasks.ScienceWorldTasks`); ``gold_path=True`` also plans the
    gold path during reset, which spares :meth:`expert_action` a second load.

    Args:
        task: Task names, ids (``"1-1"``) or titles to draw from; default all 30.
        split: ``"train"``, ``"dev"`` or ``"test"`` variations.
        simplifications: Comma-separated ScienceWorld simplifications, or ``"easy"`` for all.
        jvm: How the JVMs start (:class:`~agentfly_envs.scienceworld.engine.JvmConfig` or a mapping of
            its fields: heap size, determinism, deadlines); None takes the pool's. Only the env that
            registers the pool sets it.
        pool_name: The engine pool of the manager (``resources``) to lease JVMs from; size it in the
            manager's config under this name.
        valid_actions_in_info: Put the valid actions in ``info["valid_actions"]`` after every turn,
            as the stock env does (and at its cost: tens of milliseconds per turn).
        tools: Names of the tools to offer, from ``act``, ``look``, ``inventory``, ``valid_actions``.
        max_command_chars: Longer commands are refused without reaching the simulator.
        action_mode: ``"tools"`` (default): tool calls, several a turn if the model likes, and a final
            answer to stop; ``"text"``: the turn is one command, as in the stock env (``tools`` and
            ``parser`` do not apply).
        env_step_limit: Truncate the episode once the simulator's move count exceeds this, as the stock
            env's ``envStepLimit`` ends it; default 100 (the stock default) in text mode, none in tool mode.
        list_actions: Text mode only: ``True`` ends every observation with the valid action-object combinations,
            numbered, and plays a reply that is one's number as that action (a reply in words plays as written);
            a sequence of prefixes (``("go to", "focus on")``) lists only the valid actions that start with one
            of them. Not the stock observation, which lists nothing: the model is told what it would otherwise
            have to find (as the paper's valid-action agents are), at the cost of one valid-action query (tens
            of milliseconds) per turn. ``info["command"]`` is the action a turn played.
        expert_looks_before_focus: The scripted expert plays ``look around`` before each ``focus on`` of the
            gold path. ScienceWorld's gold paths focus straight away (their generator knows the world), so a
            model imitating them learns to name a thing it has not seen; with this the demonstration shows
            what the choice was made from. One more command per focus; the env itself is unchanged.
        reward_mode: ``"progress"`` (default, as the stock env scores: the task score's progress per turn) or
            ``"success"``: 1.0 on the turn that completes the task, 0.0 on every other. Progress pays for
            subgoals, and on tasks whose last step is a choice (``focus on`` the right animal) it pays a policy
            to stop before choosing whenever a guess is right less than half the time, since a wrong focus
            takes back what was earned; success pays only the finished task. ``info["step"]`` reports the
            progress either way.
        **kwargs: Passed to :class:`~agentfly_env.tools.tool_env.ToolEnv` (``max_turns`` default 50 in tool
            mode, 100 in text mode, where it only stops free actions played forever; ``parser``,
            ``resources``, ``lease_timeout_s`` default 600, ...).
    """

    AVAILABLE_TOOLS = {"act": act, "look": look, "inventory": inventory, "valid_actions": valid_actions}

    def __init__(
        self,
        task: str | Sequence[str] | None = None,
        *,
        split: Split = "train",
        simplifications: str = "",
        jvm: JvmConfig | dict[str, Any] | None = None,
        pool_name: str = ENGINE_POOL,
        valid_actions_in_info: bool = False,
        tools: Sequence[str] = ("act", "look", "inventory", "valid_actions"),
        max_command_chars: int = 300,
        action_mode: Literal["tools", "text"] = "tools",
        list_actions: bool | Sequence[str] = False,
        env_step_limit: int | None = None,
        expert_looks_before_focus: bool = False,
        reward_mode: Literal["progress", "success"] = "progress",
        **kwargs: Any,
    ) -> None:
        if reward_mode not in ("progress", "success"):
            raise ValueError(f"reward_mode must be 'progress' or 'success', got {reward_mode!r}")
        unknown = [name for name in tools if name not in self.AVAILABLE_TOOLS]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; available: {sorted(self.AVAILABLE_TOOLS)}")
        if action_mode not in ("tools", "text"):
            raise ValueError(f"action_mode must be 'tools' or 'text', got {action_mode!r}")
        if list_actions is not False and action_mode != "text":
            raise ValueError("list_actions applies to action_mode='text' (tool mode has valid_actions)")
        if isinstance(list_actions, str):
            raise TypeError("list_actions takes True or a sequence of prefixes, not one string")
        self.task_source = ScienceWorldTasks(task, split=split, simplifications=simplifications)
        self.action_mode = action_mode
        #: The prefixes of the actions listed (``("",)``: all of them), or None when nothing is listed.
        self.listed_prefixes = None if list_actions is False else ("",) if list_actions is True else tuple(list_actions)
        if action_mode == "text":
            if "parser" in kwargs:
                raise ValueError("parser= applies to action_mode='tools'; in text mode the turn is the command")
            tools = ("act",)
            parser = CommandParser("act", "command")
            kwargs.setdefault("max_turns", STEP_LIMIT)
            listed = f" {LISTED_ACTIONS_PROMPT}" if self.listed_prefixes is not None else ""
            kwargs.setdefault("system_prompt", f"{TEXT_SYSTEM_PROMPT}{listed} {parser.instructions()}")
            kwargs.update(parser=parser, answer_mode="none", describe_tools=False, max_calls_per_turn=1)
            env_step_limit = STEP_LIMIT if env_step_limit is None else env_step_limit
        self.env_step_limit = env_step_limit
        kwargs.setdefault("max_turns", 50)
        kwargs.setdefault("system_prompt", SYSTEM_PROMPT)
        kwargs.setdefault("lease_timeout_s", 600.0)
        super().__init__(
            tools=[self.AVAILABLE_TOOLS[name] for name in tools],
            tasks=self.task_source,
            reward=reward(self._turn_reward, name="scienceworld"),
            reward_every_turn=True,
            **kwargs,
        )
        self.pool_name = pool_name
        self.pool = engine_pool(self.resources, None if jvm is None else JvmConfig.from_value(jvm), name=pool_name)
        self.valid_actions_in_info = valid_actions_in_info
        self.max_command_chars = max_command_chars
        self.expert_looks_before_focus = expert_looks_before_focus
        self.reward_mode = reward_mode
        self._clear_episode()

    def _clear_episode(self) -> None:
        self.engine: ScienceWorldEngine | None = None
        self.state: GameState | None = None
        self.gold: tuple[str, ...] | None = None
        #: Why this episode's JVM failed (it was given back to be replaced); None while it works.
        self.failure: str | None = None
        self.commands_sent = 0
        self._rewarded = 0.0
        self._listed: list[str] = []  # the actions the last observation listed (list_actions)

    # ----------------------------------------------------------------- episode

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._clear_episode()
        _, info = await super()._reset(seed, options)
        await self.pool.start()  # prewarms the pool's JVMs in parallel on first use (if configured)
        loaded = await self._load(gold=bool(options.get("gold_path", False)))
        self.state = loaded.state
        self._rewarded = loaded.state.progress  # a few tasks start with a subgoal met: not the agent's doing
        self.task["prompt"] = info["task"]["prompt"] = loaded.description
        info.update(score=loaded.state.score, moves=loaded.state.moves)
        return f"{loaded.description}\n\n{loaded.state.observation}{await self._action_list()}", info

    async def _action_list(self, turn: TurnReport | None = None) -> str:
        """Under ``list_actions``, the listed valid actions an observation ends with (remembered, for a reply that
        is a number); else nothing."""
        if self.listed_prefixes is None or self._over():
            return ""
        valid = await self.engine_call(ScienceWorldEngine.valid_actions, turn=turn)
        self._listed = [action for action in valid if action.startswith(self.listed_prefixes)]
        return action_list(self._listed)

    def _gold_key(self) -> tuple[str, int, str] | None:
        if self.engine is None or not self.engine.config.deterministic:
            return None
        return self.task["task_name"], self.task["variation"], self.task["simplifications"]

    async def _load(self, *, gold: bool, retry: bool = True) -> Loaded:
        """Leases a JVM and loads the episode's task; a JVM that fails here, or dies while it starts
        (killed, the host out of memory), is replaced once."""
        try:
            self.engine = await self._lease(self.pool_name)
        except EngineFailure:  # the pool has freed the dead one's place
            if not retry:
                raise
            return await self._load(gold=gold, retry=False)
        key = self._gold_key()
        cached = _gold_cache.get(key) if key is not None else None
        task = self.task
        try:
            loaded = await self.engine.call(
                self.engine.load, task["task_name"], task["variation"], task["simplifications"], gold and cached is None
            )
        except EngineFailure:
            await self._release(self.pool_name, broken=True)
            self.engine = None
            if not retry:
                raise
            return await self._load(gold=gold, retry=False)
        except BaseException:
            await self._release(self.pool_name)
            self.engine = None
            raise
        self._remember_gold(cached or loaded.gold)
        return loaded

    def _remember_gold(self, gold: tuple[str, ...] | None) -> None:
        if gold is None:
            return
        self.gold = gold
        key = self._gold_key()
        if key is not None:
            _gold_cache[key] = gold
            _gold_cache.move_to_end(key)
            while len(_gold_cache) > _GOLD_CACHE_SIZE:
                _gold_cache.popitem(last=False)

    async def _run_calls(self, calls: Sequence[ToolCall], turn: TurnReport) -> list[ToolResult]:
        # One world: a turn's calls act one after another, in the order written.
        return [await self._run_call(call, turn) for call in calls]

    async def _finish_turn(self, turn: TurnReport) -> None:
        if self.valid_actions_in_info and self.engine is not None and not self._over():
            try:
                turn.info["valid_actions"] = await self.engine_call(ScienceWorldEngine.valid_actions, turn=turn)
            except EngineFailure:
                pass  # reported to the turn
        if turn.truncation_reason is not None:
            return
        if self._over():
            turn.end_episode()
        assert self.state is not None
        turn.info.update(score=self.state.score, moves=self.state.moves)
        if turn.ends:
            turn.info["final_score"] = self.state.progress

    async def _record(self, observation: str, parsed: ParseResult, results: list[ToolResult], turn: TurnReport) -> Step:
        step = await super()._record(observation, parsed, results, turn)
        limit, state = self.env_step_limit, self.state
        if limit is not None and state is not None and state.moves > limit and not step.terminated:
            step.truncation_reason = step.truncation_reason or "step_limit"
        return step

    def _over(self) -> bool:
        return self.state is not None and (self.state.completed or self.state.failed)

    def _turn_reward(self) -> RewardResult:
        """The progress gained since the last turn (or, under ``reward_mode="success"``, 1.0 on the turn the task
        is completed); success when the task is complete."""
        progress = self.state.progress if self.state is not None else 0.0
        gained, self._rewarded = progress - self._rewarded, progress
        completed = bool(self.state and self.state.completed)
        value = float(completed) if self.reward_mode == "success" else gained
        return RewardResult(value, {"progress": progress}, success=completed)

    async def _end_episode(self) -> None:
        self.engine = None
        await super()._end_episode()

    # ----------------------------------------------------------------- what the tools call

    async def engine_call(self, function: Callable[..., T], *args: Any, turn: TurnReport | None = None) -> T:
        """Calls a blocking :class:`ScienceWorldEngine` method on this episode's JVM, off the event loop.

        A JVM that fails is given back to be replaced, and the turn (when one is running) is cut short:
        ``truncation_reason == "engine_failure"``, the cause in ``info["engine_error"]``.

        Raises:
            EngineFailure: the JVM failed, or none is leased.
        """
        try:
            if self.engine is None:
                raise EngineFailure(self.failure or "no simulator is leased: the episode has not started")
            return await self.engine.call(function, self.engine, *args)
        except EngineFailure as error:
            if self.failure is None:
                self.failure = str(error)
                self.engine = None
                await self._release(self.pool_name, broken=True)
            if turn is not None:
                turn.truncate("engine_failure", engine_error=self.failure)
            raise

    async def act(self, command: str, turn: TurnReport) -> str:
        """Sends one command to the simulator and keeps the game state; used by the ``act`` tool. A
        command the simulator cannot parse counts as ``unknown_command``.

        Raises:
            ValueError: an empty or overlong command (the model is told; nothing reaches the JVM).
        """
        command = _WHITESPACE.sub(" ", command).strip()
        if self.listed_prefixes is not None:
            command = turn.info["command"] = chosen_action(command, self._listed)
        if not command:
            raise ValueError("the command is empty; try `look around`, or call valid_actions")
        if len(command) > self.max_command_chars:
            raise ValueError(f"the command has {len(command)} characters; at most {self.max_command_chars}")
        if self._over():
            return "The task is already over; this action was not taken."
        self.state = await self.engine_call(ScienceWorldEngine.step, command, turn=turn)
        self.commands_sent += 1
        if self.state.observation.strip() == UNKNOWN_COMMAND:
            turn.count_error("unknown_command")
        return self.state.observation + await self._action_list(turn)

    # ----------------------------------------------------------------- the scripted expert

    async def agold_path(self) -> tuple[str, ...] | None:
        """The task's gold action sequence, planned now if needed; None once the world has moved on.

        Planning reloads the task with ScienceWorld's gold-path generator, which rebuilds the same
        world: only done before the first ``act`` of the episode, when nothing has changed yet.
        """
        if self.gold is None and self.commands_sent == 0 and self.engine is not None and self.failure is None:
            key = self._gold_key()
            if key is not None and key in _gold_cache:
                self._remember_gold(_gold_cache[key])
            else:
                task = self.task
                try:
                    loaded = await self.engine_call(
                        ScienceWorldEngine.load, task["task_name"], task["variation"], task["simplifications"], True
                    )
                except EngineFailure:
                    return None  # the next step reports the failure
                self.state = loaded.state
                self._remember_gold(loaded.gold)
        return self.gold

    async def aexpert_action(self) -> str:
        """The expert's next turn: the next gold actions as ``act`` calls (see :meth:`expert_action`)."""
        gold = await self.agold_path() if "act" in self.tools else None
        remaining = self._expert_plan(gold)[self.commands_sent :] if gold is not None else ()
        if not remaining or self._over():
            return self.format_answer("done")
        # As many actions per turn as it takes to finish within the turn budget.
        turns_left = max(1, self.max_turns - self.turn)
        count = min(self.max_calls_per_turn, -(-len(remaining) // turns_left))
        calls = [ToolCall("act", {"command": command}) for command in remaining[:count]]
        text = "\n".join(self.parser.format_call(call) for call in calls)
        if count > 1 and len(self.parser.parse(text).calls) != count:  # a one-call-per-turn format
            text = self.parser.format_call(calls[0])
        return text

    def _expert_plan(self, gold: tuple[str, ...]) -> tuple[str, ...]:
        """The commands the expert plays: the gold path, with a look before each focus if the env asks for one.

        Example:
            >>> env = ScienceWorldEnv.__new__(ScienceWorldEnv)
            >>> env.expert_looks_before_focus = True
            >>> env._expert_plan(("go to outside", "focus on frog", "look around", "focus on egg"))
            ('go to outside', 'look around', 'focus on frog', 'look around', 'focus on egg')
        """
        if not self.expert_looks_before_focus:
            return gold
        plan: list[str] = []
        for command in gold:
            if command.startswith("focus on") and (not plan or plan[-1] != "look around"):
                plan.append("look around")
            plan.append(command)
        return tuple(plan)

    def expert_action(self) -> str:
        """A scripted expert: ScienceWorld's own gold action sequence for the task, played with ``act``
        (with a look before each focus under ``expert_looks_before_focus``).

        It packs several actions into a turn when the turn budget would not last otherwise. The gold
        path is planned at the first call of an episode (a blocking reload of about a second, unless
        ``gold_path=True`` was given at reset or the path is cached); an episode that has already
        acted without the expert gets a final answer instead.
        """
        return run_sync(self.aexpert_action())


MANIFEST = Manifest(
    id="AgentFly/ScienceWorld-v0",
    family="scienceworld",
    description="ScienceWorld's 30 elementary-science task types in its text simulator, on pooled JVMs.",
    benchmark="ScienceWorld (Wang et al., 2022)",
    link="https://github.com/allenai/ScienceWorld",
    tools=tool_schemas(*ScienceWorldEnv.AVAILABLE_TOOLS.values()),
    reward=RewardSpec(
        range=(-1.0, 1.0),
        measures="the progress of ScienceWorld's task score (clipped to 0..1), as the stock env scores",
        paid="every turn, the progress since the last one: a failed task (a wrong focus) takes back what was "
        "earned, and the return is the final progress less the progress at reset (1.0 from a start with no "
        "subgoal met)",
        success="the simulator says the task is completed",
    ),
    seeded=True,
    max_turns=50,
    extra="scienceworld",  # and Java 17, from the system's packages
    data=(
        DataSpec(
            name="ScienceWorld's simulator and its tasks, the JAR the scienceworld package ships",
            size="30 task types, 7,207 variations (train, dev, test); 7.4 MB",
            licence="Apache-2.0",
        ),
    ),
    parity="python -m pytest tests/envs/test_scienceworld_engine.py -k servers_own_step",
    expert="plays ScienceWorld's own gold action path for the variation with act, several actions a turn when the "
    "turn budget would not last",
)
