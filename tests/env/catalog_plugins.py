"""Plug-in envs for ``agentfly-env``'s tests: one that keeps its manifest's word, and broken ones, each wrong in one way.

Importing the module registers them (``agentfly-env validate ID --import catalog_plugins``), under ``CatalogTest/``:
outside the ``AgentFly/`` ids that the suite's tests play one by one. Every env is the same small task (say a
word back, shouted) built from the core alone, so the tests pass on a core-only install.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec

from agentfly_env import (
    DataSpec,
    ListTasks,
    Manifest,
    RewardSpec,
    ToolCall,
    ToolEnv,
    register,
    reward,
    tool,
    tool_schemas,
)

WORDS = ("apple", "river", "stone", "cloud", "maple", "tiger", "lemon", "north")
TASKS = ListTasks(
    [{"id": f"word/{n}", "prompt": f"Shout the word {word!r}.", "answer": word.upper()} for n, word in enumerate(WORDS)]
)


@tool
def shout(word: str) -> str:
    """Say a word loudly.

    Args:
        word: The word to shout.
    """
    return word.upper()


@reward
def exact(prediction: str | None, answer: str) -> float:
    return float(prediction == answer)


@reward
def half(prediction: str | None, answer: str) -> float:
    return 0.5 * float(prediction == answer)


class Mute(ToolEnv):
    """Shout the word you are given (no scripted expert)."""

    pays = exact

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_turns", 3)
        super().__init__(tools=[shout], tasks=TASKS, reward=self.pays, **kwargs)


class Shout(Mute):
    """Shout the word you are given; the expert shouts it, then answers."""

    def expert_action(self) -> str:
        assert self.trajectory is not None
        if not self.trajectory.steps:
            return self.parser.format_call(ToolCall("shout", {"word": self.task["answer"].lower()}))
        return self.format_answer(self.task["answer"])


class HalfPay(Shout):
    """Pays half of what its manifest says an episode can earn."""

    pays = half


class Unseeded(Shout):
    """Gives the next word at every reset, whatever the seed."""

    _next = itertools.count()

    async def _reset(self, seed: int | None, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return await super()._reset(seed, {"task_index": next(self._next) % len(TASKS)})


class RaisesOnMalformed(Shout):
    """Raises on a turn that is neither a call nor an answer, where it should answer with an observation."""

    async def _step(self, action: str) -> Any:
        if "<tool_call>" not in action and "<answer>" not in action:
            raise ValueError(f"cannot read {action[:20]!r}")
        return await super()._step(action)


class Dawdles(Shout):
    """The expert shouts the word three times before it answers: four turns, one past the budget of three."""

    def expert_action(self) -> str:
        assert self.trajectory is not None
        if len(self.trajectory.steps) < 3:
            return self.parser.format_call(ToolCall("shout", {"word": self.task["answer"].lower()}))
        return self.format_answer(self.task["answer"])


MANIFEST = Manifest(
    id="CatalogTest/Shout-v0",
    family="shout",
    description="Shout the word you are given.",
    benchmark=None,
    link=None,
    tools=tool_schemas(shout),
    reward=RewardSpec(
        range=(0.0, 1.0),
        measures="the answer is the word, shouted",
        paid="once, on the answer",
        success="the word, shouted",
    ),
    seeded=True,
    max_turns=3,
    extra=None,
    data=(DataSpec(name="eight English words", size="8 words", licence="Apache-2.0"),),
    parity=None,
    expert="shouts the word with the tool, then answers it",
)


def manifest(env_id: str, **changes: Any) -> Manifest:
    """The shout env's manifest under another id, with ``changes``."""
    return msgspec.structs.replace(MANIFEST, id=env_id, **changes)


#: id -> (env class, its manifest): what each id gets wrong is in its name.
PLUGINS = {
    "CatalogTest/Shout-v0": (Shout, MANIFEST),
    "CatalogTest/HalfPay-v0": (HalfPay, manifest("CatalogTest/HalfPay-v0")),
    "CatalogTest/Unseeded-v0": (Unseeded, manifest("CatalogTest/Unseeded-v0")),
    "CatalogTest/NoExpert-v0": (Mute, manifest("CatalogTest/NoExpert-v0", expert=None)),
    "CatalogTest/RaisesOnMalformed-v0": (RaisesOnMalformed, manifest("CatalogTest/RaisesOnMalformed-v0")),
    "CatalogTest/WrongTools-v0": (Shout, manifest("CatalogTest/WrongTools-v0", tools=())),
    "CatalogTest/NoManifest-v0": (Shout, None),
    "CatalogTest/Dawdles-v0": (Dawdles, manifest("CatalogTest/Dawdles-v0")),
    "CatalogTest/DawdlesWithItsBudget-v0": (Dawdles, manifest("CatalogTest/DawdlesWithItsBudget-v0", expert_turns=4)),
    "CatalogTest/BadManifest-v0": (
        Shout,
        msgspec.structs.replace(
            MANIFEST,
            id="CatalogTest/Elsewhere-v0",
            family=" ",
            description="Shout the word\nyou are given.",
            benchmark="Shout (2025)",
            link="https://pypi.org/project/shout",
            extra="no-such-extra",
            max_turns=4,
            expert_turns=4,
        ),
    ),
}

for env_id, (env_class, env_manifest) in PLUGINS.items():
    register(env_id, f"{__name__}:{env_class.__name__}", manifest=env_manifest)
