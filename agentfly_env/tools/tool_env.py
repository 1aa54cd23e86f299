"""``ToolEnv``: tools + a task source + a reward make an env.

Each turn, the model's text is parsed for tool calls (the parser is pluggable), the calls run
concurrently, and their results, bounded, become the next observation. The episode ends when the model
gives a final answer (``<answer>...</answer>``, or a ``finish`` tool call with ``answer_mode="tool"``);
the reward then scores it. A tool can also end the episode (buying in a shop, winning a game) or cut it
short (a dead backend) through the turn's :class:`~agentfly_env.tools.turn.TurnReport`, and
:meth:`ToolEnv._finish_turn` lets an env add what its own state says about the turn. Nothing the model writes raises: malformed calls, unknown tools, bad
arguments, tools that fail or time out each come back as an observation that says what went wrong,
and are counted in ``info["step"].errors``.

Example:
    >>> from agentfly_env import ToolEnv, ListTasks, tool, reward
    >>> @tool
    ... def double(x: int) -> int:
    ...     '''Double a number.'''
    ...     return 2 * x
    >>> @reward
    ... def correct(prediction, answer):
    ...     return float(prediction == answer)
    >>> env = ToolEnv(tools=[double], tasks=ListTasks([{"prompt": "Double 21.", "answer": "42"}]), reward=correct)
    >>> obs, info = env.reset(seed=0)
    >>> env.step('<tool_call>{"name": "double", "arguments": {"x": 21}}</tool_call>')[0]
    '42'
    >>> env.step("<answer>42</answer>")[1:3]
    (1.0, True)
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from agentfly_env.core.env import AgentEnv
from agentfly_env.core.readonly import read_only
from agentfly_env.core.spaces import ToolCallSpace
from agentfly_env.core.tasks import TaskSource
from agentfly_env.core.types import ParseResult, Step, ToolCall, ToolResult
from agentfly_env.resources.pool import Lease, ResourceManager, default_manager
from agentfly_env.tools.cache import Cache, make_cache
from agentfly_env.tools.parsing import Parser, get_parser
from agentfly_env.tools.rewards import Reward
from agentfly_env.tools.tool import Tool, tool
from agentfly_env.tools.turn import TurnReport

NO_ACTION = "no_action"


@tool(name="finish")
def finish_tool(answer: str) -> str:
    """Submit your final answer and end the episode.

    Args:
        answer: The final answer.
    """
    return answer


class AnswerFormat:
    """Writes a final answer as model text: ``<answer>...</answer>`` or a ``finish`` call.

    A small picklable object rather than a method of the env, so the action space that samples
    answers can travel to Gymnasium's worker processes without the env.
    """

    def __init__(self, mode: Literal["tag", "tool", "none"], tag: str, parser: Parser) -> None:
        if mode not in ("tag", "tool", "none"):
            raise ValueError(f"answer_mode must be 'tag', 'tool' or 'none', got {mode!r}")
        self.mode = mode
        self.tag = tag
        self.parser = parser

    def __call__(self, answer: str) -> str:
        if self.mode == "tool":
            return self.parser.format_call(ToolCall("finish", {"answer": answer}))
        return f"<{self.tag}>{answer}</{self.tag}>"

    @property
    def spec(self) -> dict[str, str]:
        """The format as data, for ``EpisodeStart.answer_format`` (a driver in another process rebuilds it)."""
        if self.mode == "tool":
            return {"mode": "tool", "parser": self.parser.name}
        return {"mode": self.mode, "tag": self.tag}


def answer_action(answer_format: dict[str, str], answer: str) -> str | None:
    """The action that gives ``answer`` as an episode's final answer, from ``EpisodeStart.answer_format``:
    the answer in the env's tag or ``finish`` call, the answer itself for an env whose action is the answer
    (an empty format), None for an env that takes no final answer (``answer_mode="none"``).

    Example:
        >>> answer_action({"mode": "tag", "tag": "answer"}, "42"), answer_action({}, "go north")
        ('<answer>42</answer>', 'go north')
    """
    if not answer_format:
        return answer
    mode = answer_format["mode"]
    if mode == "none":
        return None
    parser = get_parser(answer_format.get("parser", "hermes"))
    return AnswerFormat(mode, answer_format.get("tag", "answer"), parser)(answer)  # type: ignore[arg-type]


class ToolEnv(AgentEnv):
    """An env made of tools, a task source and a reward.

    Args:
        tools: The tools the model may call.
        tasks: Where tasks come from; reset options ``task`` / ``task_index`` pick one.
        reward: Scores the final answer; asks for context values by name (see :mod:`agentfly_env.tools.rewards`).
        parser: A :class:`~agentfly_env.tools.parsing.Parser` or its name: ``hermes`` (default), ``json``,
            ``react`` or ``bracket``.
        answer_mode: ``"tag"``: a final answer is ``<answer_tag>...</answer_tag>`` in the text;
            ``"tool"``: the model calls ``finish(answer=...)``; ``"none"``: there is no final answer,
            only a tool ends the episode (see :class:`~agentfly_env.tools.turn.TurnReport`).
        answer_tag: The tag name for ``answer_mode="tag"``.
        system_prompt: Task instructions; the tool list, call format and answer format are appended.
        describe_tools: Append them; off, ``system_prompt`` is the whole prompt (a compact one of your own:
            a small model's episodes get much shorter).
        success_threshold: A score at or above this counts as success when the reward does not say.
        reward_every_turn: Score every turn with the reward (prediction None until an answer), for
            rewards that pay progress as it is made; by default only the turn that ends is scored.
        tool_timeout_s: Overrides each tool's own timeout when set.
        max_calls_per_turn: Calls beyond this in one turn are not run; the model is told.
        cache: Cache for tools declared ``cache=True``: a :class:`~agentfly_env.tools.cache.Cache` or a spec
            such as ``"redis://localhost:6379/0"`` (default: in-process memory).
        resources: The manager whose pools lend stateful tools their resources.
        lease_timeout_s: How long to wait for a pooled resource before the call fails.
        **kwargs: Passed to :class:`~agentfly_env.core.env.AgentEnv` (``max_turns``, ...).
    """

    def __init__(
        self,
        *,
        tools: Sequence[Tool],
        tasks: TaskSource,
        reward: Reward,
        parser: str | Parser = "hermes",
        answer_mode: Literal["tag", "tool", "none"] = "tag",
        answer_tag: str = "answer",
        system_prompt: str = "Solve the task. Use the tools when they help.",
        describe_tools: bool = True,
        success_threshold: float = 1.0,
        reward_every_turn: bool = False,
        tool_timeout_s: float | None = None,
        max_calls_per_turn: int = 8,
        cache: Cache | str | None = None,
        resources: ResourceManager | None = None,
        lease_timeout_s: float | None = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.parser = get_parser(parser)
        self.format_answer = AnswerFormat(answer_mode, answer_tag, self.parser)
        self.answer_format = self.format_answer.spec
        self.tools: dict[str, Tool] = {}
        for item in [*tools, *([finish_tool] if answer_mode == "tool" else [])]:
            if item.name in self.tools:
                raise ValueError(f"two tools are named {item.name!r}")
            self.tools[item.name] = item
        self.tasks = tasks
        self.reward = reward
        self.answer_mode = answer_mode
        self.answer_tag = answer_tag
        self._answer_pattern = re.compile(rf"<{re.escape(answer_tag)}>(.*?)</{re.escape(answer_tag)}>", re.DOTALL)
        self.success_threshold = success_threshold
        self.reward_every_turn = reward_every_turn
        self.tool_timeout_s = tool_timeout_s
        self.max_calls_per_turn = max_calls_per_turn
        self.cache = make_cache(cache) if any(t.cache for t in self.tools.values()) else None
        self.resources = resources if resources is not None else default_manager()
        self.lease_timeout_s = lease_timeout_s
        self.tool_schemas = [t.schema for t in self.tools.values()]
        self.tool_format = self.parser.name if self.tool_schemas else ""
        self.system_prompt = self._build_system_prompt(system_prompt) if describe_tools else system_prompt.strip()
        self.action_space = ToolCallSpace(
            [t for t in self.tools.values() if t is not finish_tool],
            self.parser.format_call,
            answers=self.format_answer if answer_mode != "none" else None,
        )
        self.task: dict[str, Any] = {}
        self._leases: dict[str, Lease[Any]] = {}
        self._lease_lock = asyncio.Lock()

    # ----------------------------------------------------------------- prompts and answers

    def _build_system_prompt(self, instructions: str) -> str:
        listed = "\n".join(json.dumps(schema["function"], ensure_ascii=False) for schema in self.tool_schemas)
        how_to_answer = {
            "tool": "When you are done, call the `finish` tool with your final answer.",
            "tag": f"When you are done, give your final answer as <{self.answer_tag}>...</{self.answer_tag}>.",
            "none": "",
        }[self.answer_mode]
        parts = [instructions.strip()]
        if self.tool_schemas:
            parts += [f"You can call these tools:\n{listed}", self.parser.instructions()]
        parts.append(how_to_answer)
        return "\n\n".join(part for part in parts if part)

    def find_answer(self, action: str, calls: Sequence[ToolCall]) -> str | None:
        """The final answer in a turn, or None when the turn does not answer."""
        if self.answer_mode == "tag":
            match = self._answer_pattern.search(action)
            return match.group(1).strip() if match else None
        if self.answer_mode == "none":
            return None
        for call in calls:
            if call.name == "finish":
                try:
                    return str(finish_tool.bind_arguments(call.arguments)["answer"]).strip()
                except ValueError:
                    return None  # a malformed finish call is reported like any bad call
        return None

    # ----------------------------------------------------------------- episode

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.task = self.tasks.select(options, self.np_random)
        return self.task["prompt"], {"task": self.task}  # read-only from here on (see AgentEnv.areset)

    async def _step(self, action: str) -> tuple[Step, dict[str, Any]]:
        parsed = self.parser.parse(action)
        calls = parsed.calls
        turn = TurnReport()
        if parsed.errors:
            turn.count_error("parse_error", len(parsed.errors))
        answer = self.find_answer(action, calls)
        results: list[ToolResult] = []
        if answer is not None:
            turn.end_episode(await self.reward.compute(self._reward_context(answer)))
            turn.info["answer"] = answer
            observation = ""
        else:
            if len(calls) > self.max_calls_per_turn:
                turn.count_error("too_many_calls")
            results = await self._run_calls(calls[: self.max_calls_per_turn], turn)
            for item in results:
                if item.error is not None:
                    turn.count_error(item.error)
            if not calls and not parsed.errors:
                turn.count_error(NO_ACTION)
            observation = self._format_observation(results, parsed.errors, len(calls))
        await self._finish_turn(turn)
        return await self._record(observation, parsed, results, turn), turn.info

    async def _finish_turn(self, turn: TurnReport) -> None:
        """Called once a turn's calls (or its answer) are done: add what the env's own state says about
        the turn to its report (``info`` entries, an ending, a truncation). Does nothing by default."""

    async def _record(self, observation: str, parsed: ParseResult, results: list[ToolResult], turn: TurnReport) -> Step:
        """The step a turn makes: the one place where its reward, success and ending are decided."""
        step = Step(
            observation=observation,
            reward=0.0,
            tool_calls=list(parsed.calls),
            tool_results=results,
            parse_errors=list(parsed.errors),
            errors=dict(turn.errors),
        )
        if turn.truncation_reason is not None:  # an outside failure: no reward, whatever was reported
            step.truncation_reason = turn.truncation_reason
            return step
        result = turn.result
        if result is None and (turn.ends or self.reward_every_turn):
            result = await self.reward.compute(self._reward_context(None))
        if result is not None:
            step.reward = result.score
            step.success = result.success if result.success is not None else result.score >= self.success_threshold
            step.reward_components = dict(result.components) or {self.reward.name: result.score}
            if turn.ends:
                turn.info["reward_details"] = dict(result.details)
        step.terminated = turn.ends
        return step

    def _reward_context(self, prediction: str | None) -> dict[str, Any]:
        # The task's fields by name, then what every env offers; the task as the records hold it: read-only,
        # free for a source's frozen tasks.
        task = self.task
        return {**task, "prediction": prediction, "trajectory": self.trajectory, "task": read_only(task), "env": self}

    def _format_observation(self, results: list[ToolResult], parse_errors: Sequence[Any], n_calls: int) -> str:
        parts = [f"Error: {error.message}" for error in parse_errors]
        if n_calls > self.max_calls_per_turn:
            parts.append(f"Error: {n_calls} tool calls in one turn; only the first {self.max_calls_per_turn} were run.")
        if len(results) == 1 and not parts:
            return results[0].output
        parts += [f"[{item.name}] {item.output}" for item in results]
        if not parts:
            return (
                "No tool call or final answer found. "
                + (self.parser.instructions() if self.tool_schemas else "")
                + " "
                + f"To finish, answer like this: {self.format_answer('...')}"
            ).strip()
        return "\n".join(parts)

    # ----------------------------------------------------------------- running tools

    async def _run_calls(self, calls: Sequence[ToolCall], turn: TurnReport) -> list[ToolResult]:
        if len(calls) == 1:  # the common case, without gather's task overhead
            return [await self._run_call(calls[0], turn)]
        return list(await asyncio.gather(*(self._run_call(call, turn) for call in calls)))

    async def _run_call(self, call: ToolCall, turn: TurnReport) -> ToolResult:
        """Run one call and time it (``ToolResult.duration_s``): one clock read each side, for per-tool metrics."""
        started = time.perf_counter()
        result = await self._call_tool(call, turn)
        result.duration_s = time.perf_counter() - started
        return result

    async def _call_tool(self, call: ToolCall, turn: TurnReport) -> ToolResult:
        # A `finish` call gets here only when it could not be read as an answer: running it reports
        # what is wrong with its arguments, as for any tool.
        chosen = self.tools.get(call.name)
        if chosen is None:
            known = ", ".join(name for name in self.tools if name != "finish") or "none"
            return ToolResult(
                call.name, f"Error: unknown tool `{call.name}`. Available tools: {known}.", "unknown_tool", call.id
            )
        injected: dict[str, Any] = {"env": self, "task": self.task, "turn": turn}
        if chosen.resource is not None:
            try:
                injected["resource"] = await self._lease(chosen.resource)
            except Exception as error:  # pool exhausted, backend failed to start
                return ToolResult(call.name, f"Error: `{call.name}` is unavailable: {error}", "tool_error", call.id)
        # A cached tool (never a stateful one) looks its validated arguments up in the env's cache.
        result = await chosen.call(
            call.arguments, call_id=call.id, injected=injected, timeout_s=self.tool_timeout_s, cache=self.cache
        )
        if result.error in ("timeout", "resource_broken") and chosen.resource is not None:
            # A backend that missed its deadline may be wedged, a broken one is gone: replace it, and
            # say the state is gone.
            await self._release(chosen.resource, broken=True)
            result.output += " Its session was restarted; earlier state is lost."
        return result

    async def _lease(self, pool_name: str) -> Any:
        # The lock keeps two concurrent calls of one turn from leasing two resources for the episode.
        async with self._lease_lock:
            lease = self._leases.get(pool_name)
            if lease is None:
                lease = await self.resources.pool(pool_name).acquire(timeout=self.lease_timeout_s)
                self._leases[pool_name] = lease
            return lease.resource

    async def _release(self, pool_name: str, *, broken: bool = False) -> None:
        lease = self._leases.pop(pool_name, None)
        if lease is not None:
            await lease.release(broken=broken)

    async def _end_episode(self) -> None:
        for name in list(self._leases):
            await self._release(name)

    def stats(self) -> dict[str, Any]:
        """Cache and pool statistics of this env, for logs and benchmarks."""
        stats: dict[str, Any] = {"pools": {name: msgspec.to_builtins(s) for name, s in self.resources.stats().items()}}
        if self.cache is not None:
            stats["cache"] = msgspec.to_builtins(self.cache.stats())
        return stats
