"""``AgentFly/Math-v0``: procedurally generated reasoning tasks with a calculator tool.

Tasks come from `reasoning-gym <https://github.com/open-thought/reasoning-gym>`_, which runs offline and
ships 100+ generators (arithmetic, algebra, countdown, logic, ...) each with its own answer scorer.
Every one of them is reachable through the ``dataset`` option; ``difficulty`` picks the generator's
curriculum level. The reward is the generator's own scorer on the final ``<answer>``.

Example:
    >>> import gymnasium as gym, agentfly_env
    >>> env = gym.make("AgentFly/Math-v0", dataset="basic_arithmetic", difficulty=0)
    >>> obs, info = env.reset(seed=3)
    >>> sorted(tool["function"]["name"] for tool in info["tools"])
    ['calculator']

A seed gives the same task on every machine (with this reasoning-gym): it picks the split's index with
``rng.integers`` on the env's PCG64 generator (:meth:`~agentfly_env.core.tasks.TaskSource.sample`), and the split's
own seed generates the item. Tasks are read-only and shared between episodes
(:mod:`agentfly_env.core.readonly`):

    >>> env.reset(seed=0)[1]["task"]["id"]
    'basic_arithmetic/8506'
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

from agentfly_env.core.manifest import DataSpec, Manifest, RewardSpec, tool_schemas
from agentfly_env.core.readonly import read_only
from agentfly_env.core.tasks import TaskSource
from agentfly_env.core.types import ToolCall
from agentfly_env.extras import requires_extra
from agentfly_env.resources.pool import default_manager
from agentfly_env.tools.rewards import RewardResult, reward
from agentfly_env.tools.tool import tool
from agentfly_env.tools.tool_env import ToolEnv
from agentfly_envs.math.calculator import CalculatorError, evaluate

with requires_extra("math", "reasoning_gym", feature="AgentFly/Math-v0"):
    import reasoning_gym
    from reasoning_gym.factory import CURRICULA, DATASETS

__all__ = ["MANIFEST", "MathEnv", "ReasoningGymTasks", "calculator", "dataset_names"]

SYSTEM_PROMPT = (
    "You are solving a reasoning problem. Think step by step; use the calculator for arithmetic you "
    "are not sure of. Give only the final answer inside the answer tags."
)

#: Seeds of the two splits are far apart, so train and eval tasks never coincide by accident.
SPLIT_SEED_OFFSET = {"train": 0, "eval": 1_000_003}

#: Tasks made from generated items are kept, up to this many per dataset configuration (a default split
#: whole), in one cache shared by every task source with that configuration: the envs of a vector, or of
#: a pool, generate each item once between them, and share the read-only task made from it.
TASK_CACHE_SIZE = 16_384
_task_caches: weakref.WeakValueDictionary[str, Callable[[int], dict[str, Any]]] = weakref.WeakValueDictionary()


@tool(examples=[{"expression": "12 * (3 + 4)"}, {"expression": "2**10 - 1"}, {"expression": "sqrt(144) / 3"}])
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly.

    Supports + - * / // % ** and parentheses, sqrt, log, exp, sin, cos, tan, floor, ceil, abs,
    round, factorial, gcd, lcm, min, max, pi and e.

    Args:
        expression: The expression, e.g. "12 * (3 + 4) / 7".
    """
    try:
        return evaluate(expression)
    except CalculatorError as error:
        return f"Error: {error}"


def dataset_names() -> list[str]:
    """Every reasoning-gym dataset this env can serve."""
    return sorted(DATASETS)


class ReasoningGymTasks(TaskSource):
    """A reasoning-gym dataset as a task source.

    Args:
        dataset: The reasoning-gym dataset name (see :func:`dataset_names`).
        size: Number of tasks in the split.
        seed: Dataset seed; the split's offset is added so train and eval differ.
        split: ``"train"`` or ``"eval"``.
        difficulty: Curriculum level (0 is easiest), or None for the dataset's default config.
        config: Overrides of the dataset's config fields (e.g. ``{"max_terms": 3}``).
    """

    def __init__(
        self,
        dataset: str = "basic_arithmetic",
        *,
        size: int = 10_000,
        seed: int = 0,
        split: Literal["train", "eval"] = "train",
        difficulty: int | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        if dataset not in DATASETS:
            raise ValueError(f"unknown reasoning-gym dataset {dataset!r}; known: {', '.join(dataset_names())}")
        if split not in SPLIT_SEED_OFFSET:
            raise ValueError(f"split must be one of {list(SPLIT_SEED_OFFSET)}, got {split!r}")
        self.dataset_name = dataset
        dataset_class, config_class = DATASETS[dataset]
        fields = {"seed": seed + SPLIT_SEED_OFFSET[split], "size": size, **(config or {})}
        if difficulty is not None:
            if dataset not in CURRICULA:
                raise ValueError(f"dataset {dataset!r} has no curriculum, so `difficulty` cannot be set")
            curriculum = reasoning_gym.factory.create_curriculum(dataset)
            curriculum.set_global_level(difficulty)
            dataset_config = curriculum.generate_configuration(fields)
        else:
            dataset_config = config_class(**fields)
        if hasattr(dataset_config, "validate"):
            dataset_config.validate()
        self.dataset = dataset_class(config=dataset_config)
        # Items are generated on demand and some generators take tens of ms each: keep the tasks made of
        # them. The same configuration generates the same items, so sources that share it share the cache.
        key = f"{dataset}:{dataset_config!r}"
        self._task = _task_caches.get(key)
        if self._task is None:
            self._task = _task_caches[key] = functools.lru_cache(maxsize=TASK_CACHE_SIZE)(self._make_task)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        """The task of item ``index``, read-only and shared (see :mod:`agentfly_env.core.readonly`)."""
        return self._task(index)

    def _make_task(self, index: int) -> dict[str, Any]:
        entry = self.dataset[index]
        return read_only(
            {
                "id": f"{self.dataset_name}/{index}",
                "prompt": entry["question"],
                "answer": entry["answer"],
                "metadata": entry.get("metadata", {}),
                "dataset": self.dataset_name,
            }
        )

    def score(self, prediction: str | None, task: dict[str, Any]) -> float:
        """The dataset's own scorer on a final answer."""
        entry = {"question": task["prompt"], "answer": task["answer"], "metadata": task.get("metadata", {})}
        return float(self.dataset.score_answer(prediction, entry))


class MathEnv(ToolEnv):
    """Reasoning problems with tools; the episode ends on ``<answer>...</answer>``.

    Args:
        dataset: reasoning-gym dataset name; default ``basic_arithmetic``.
        difficulty: Curriculum level, or None for the dataset's default config.
        config: Overrides of the dataset's config fields.
        split: ``"train"`` or ``"eval"``.
        size: Tasks per split.
        dataset_seed: Seed of the generated dataset (episode seeds pick tasks within it).
        tools: Names of the tools to offer: ``"calculator"`` and/or ``"code_interpreter"`` (a stateful,
            sandboxed Python session, like the code agent of the AgentFly paper; it needs bubblewrap).
        sandbox: Options of the Python tool's sandbox (see :class:`~agentfly_envs.code.SandboxConfig`).
        **kwargs: Passed to :class:`~agentfly_env.tools.tool_env.ToolEnv` (``max_turns``, ``parser``, ...).
    """

    AVAILABLE_TOOLS = ("calculator", "code_interpreter")

    def __init__(
        self,
        dataset: str = "basic_arithmetic",
        *,
        difficulty: int | None = None,
        config: dict[str, Any] | None = None,
        split: Literal["train", "eval"] = "train",
        size: int = 10_000,
        dataset_seed: int = 0,
        tools: Sequence[str] = ("calculator",),
        sandbox: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = [name for name in tools if name not in self.AVAILABLE_TOOLS]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; available: {sorted(self.AVAILABLE_TOOLS)}")
        offered = [calculator] if "calculator" in tools else []
        if "code_interpreter" in tools:
            from agentfly_envs.code import code_interpreter_tool  # sandbox machinery only when asked for

            kwargs["resources"] = kwargs.get("resources") or default_manager()
            offered.append(code_interpreter_tool(kwargs["resources"], sandbox))
        self.task_source = ReasoningGymTasks(
            dataset, size=size, seed=dataset_seed, split=split, difficulty=difficulty, config=config
        )
        kwargs.setdefault("max_turns", 6)
        kwargs.setdefault("system_prompt", SYSTEM_PROMPT)
        super().__init__(
            tools=offered,
            tasks=self.task_source,
            reward=reward(self._score, name="reasoning_gym"),
            **kwargs,
        )
        tag = re.escape(self.answer_tag)
        self._last_answer_pattern = re.compile(rf"<{tag}>\s?(.*?)\s?</{tag}>", re.DOTALL)  # extract_answer's

    def find_answer(self, action: str, calls: Sequence[ToolCall]) -> str | None:
        """The turn's final answer as reasoning-gym's ``extract_answer`` reads one (its pattern, compiled
        once here; a test holds the two equal): of several ``<answer>`` tags in a turn, the last counts
        (ToolEnv's default takes the first)."""
        if self.answer_mode == "tag":
            found = self._last_answer_pattern.findall(action)
            return found[-1].strip() if found else None
        return super().find_answer(action, calls)

    def _score(self, prediction: str | None, task: dict[str, Any]) -> RewardResult:
        score = self.task_source.score(prediction, task)
        return RewardResult(score, {"correct": score})

    def expert_action(self) -> str:
        """A scripted expert: work the expression out with the calculator (or Python), then answer.

        Used by the demo, the benchmark and the tests, it makes the env do real work on every step.
        """
        expression = self.task.get("metadata", {}).get("expression")
        calculated = any(step.tool_calls for step in self.trajectory.steps) if self.trajectory else False
        if expression and not calculated:
            if "calculator" in self.tools:
                return self.parser.format_call(ToolCall("calculator", {"expression": str(expression)}))
            if "code_interpreter" in self.tools:
                return self.parser.format_call(ToolCall("code_interpreter", {"code": f"print({expression})"}))
        return self.format_answer(str(self.task["answer"]))


MANIFEST = Manifest(
    id="AgentFly/Math-v0",
    family="math",
    description="Reasoning problems from reasoning-gym's generators (basic arithmetic by default) with a calculator.",
    benchmark="reasoning-gym (Stojanovski et al., 2025)",
    link="https://github.com/open-thought/reasoning-gym",
    tools=tool_schemas(calculator),
    reward=RewardSpec(
        range=(0.0, 1.0),
        measures="the dataset's own scorer on the final answer: 1.0 for the answer exactly, the answer's share of "
        "the text for a longer text that contains it, else 0",
        paid="once, on the turn that gives the <answer>; an episode cut at the turn budget earns 0",
        success="a score of 1.0",
    ),
    seeded=True,
    max_turns=6,
    extra="math",
    data=(
        DataSpec(
            name="reasoning-gym's basic_arithmetic generator (dataset= picks any of its 100+)",
            size="10,000 generated tasks per split (train, eval)",
            licence="Apache-2.0",
        ),
    ),
    parity="python -m pytest tests/envs/test_math_env.py -k reasoning_gym",
    expert="works the task's expression out with the calculator, then answers the task's answer",
)
