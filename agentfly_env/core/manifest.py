"""What an env is, in one typed record: its :class:`Manifest` (what it rewards, what it needs, how faithful it is).

A manifest belongs to a registered id and is given where the id is registered::

    agentfly_env.register("AgentFly/Mine-v0", "my_suite.env:MineEnv", manifest="my_suite.env:MANIFEST")

``manifest`` is a :class:`Manifest`, or, like the entry point, a ``"module:attribute"`` string loaded only
when the manifest is asked for, so registering stays light. The suite's own envs each keep theirs beside
their code, as ``MANIFEST`` in the env's package. :func:`manifest_of` is the one rule that finds an id's
manifest; ``agentfly-env list``, ``describe`` and ``validate`` (:mod:`agentfly_env.runners.catalog`) read it.

A manifest describes the env as its registration makes it (default arguments): its tools are the schemas
of the env's own :class:`~agentfly_env.tools.tool.Tool` objects (:func:`tool_schemas`, never written out by
hand), and ``agentfly-env validate`` holds them, the turn budget and the expert to the env itself.

Example:
    >>> manifest = Manifest(
    ...     id="AgentFly/Echo-v0",
    ...     family="echo",
    ...     description="Say the word you are given.",
    ...     benchmark=None,
    ...     link=None,
    ...     tools=(),
    ...     reward=RewardSpec(range=(0.0, 1.0), measures="the word, exactly", paid="once, on the answer",
    ...                       success="the word, exactly"),
    ...     seeded=True,
    ...     max_turns=2,
    ...     extra=None,
    ...     data=(DataSpec(name="ten words", size="10 words", licence="Apache-2.0"),),
    ...     parity=None,
    ...     expert="answers the word",
    ... )
    >>> manifest.tool_names, manifest.reward.max
    ((), 1.0)
    >>> msgspec.convert(msgspec.to_builtins(manifest), Manifest) == manifest
    True
"""

from __future__ import annotations

import importlib
from typing import Any

import msgspec

from agentfly_env.extras import DISTRIBUTION
from agentfly_env.registration import MANIFESTS

__all__ = ["DataSpec", "Manifest", "RewardSpec", "manifest_of", "tool_schemas"]


class RewardSpec(msgspec.Struct, frozen=True, kw_only=True):
    """An env's reward, in words and bounds.

    Attributes:
        range: The least and the most an episode's return (the sum of its step rewards) can be.
        measures: What the reward measures.
        paid: When it is paid (once at the end, every turn, ...), and what a cut episode gets.
        success: What counts as solving the task (``Step.success`` on the last step).
    """

    range: tuple[float, float]
    measures: str
    paid: str
    success: str

    @property
    def max(self) -> float:
        """The most an episode can earn: what the scripted expert must reach."""
        return self.range[1]


class DataSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One data set (or packaged model) an env uses as registered.

    Attributes:
        name: What it is and where it comes from.
        size: How much of it there is (items, and bytes where it is a file).
        licence: Its licence (an SPDX id where there is one).
    """

    name: str
    size: str
    licence: str


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """What one registered env id is: every field is required, ``None`` saying "none" where allowed.

    Attributes:
        id: The registered id.
        family: The env family (``"math"``, ``"webshop"``, ...); the ids of one family share an engine.
        description: One line.
        benchmark: The original benchmark it reproduces (name and paper), None for an env of its own.
        link: The benchmark's (or the env's) own repository or documentation; never a package index.
        tools: The tools' OpenAI function schemas, from the env's own tools (:func:`tool_schemas`).
        reward: The reward's range, what it measures and when it is paid, and what success means.
        seeded: Whether a seed fixes the episode (same seed, same task, same observations).
        max_turns: The default turn budget.
        expert_turns: The budget the expert is validated with when some of its tasks take longer than
            ``max_turns`` (a benchmark whose task set keeps tasks past its own evaluation budget, as ALFWorld's
            does); None: ``max_turns``.
        extra: The extra that installs the env's dependencies (``pip install 'DIST[extra]'``), None for none.
        distribution: The distribution whose extra that is (a plug-in names its own).
        data: The data sets (and models) it uses as registered, with size and licence.
        parity: The command that shows its fidelity to the original, None for an env of its own.
        expert: How its scripted expert (``expert_action()``) plays, None when it has none.
    """

    id: str
    family: str
    description: str
    benchmark: str | None
    link: str | None
    tools: tuple[dict[str, Any], ...]
    reward: RewardSpec
    seeded: bool
    max_turns: int
    extra: str | None
    distribution: str = DISTRIBUTION
    data: tuple[DataSpec, ...]
    parity: str | None
    expert: str | None
    expert_turns: int | None = None

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(schema["function"]["name"] for schema in self.tools)

    @property
    def install(self) -> str | None:
        """The command that installs the env's extra (None when it needs none)."""
        return None if self.extra is None else f"pip install '{self.distribution}[{self.extra}]'"


def tool_schemas(*tools: Any) -> tuple[dict[str, Any], ...]:
    """The OpenAI function schemas of ``tools`` (:class:`~agentfly_env.tools.tool.Tool` objects), as an env
    built with them lists them in ``info["tools"]``: a manifest's ``tools``.

    Example:
        >>> from agentfly_env.tools.tool import tool
        >>> @tool
        ... def shout(word: str) -> str:
        ...     '''Say a word loudly.'''
        ...     return word.upper()
        >>> tool_schemas(shout)[0]["function"]["name"]
        'shout'
    """
    return tuple(item.schema for item in tools)


def manifest_of(env_id: str) -> Manifest | None:
    """The manifest registered with ``env_id`` (loading it if it was given as ``"module:attribute"``), or
    None when the id was registered without one.

    Raises:
        agentfly_env.extras.MissingExtraError: The manifest's module needs an extra that is not installed.
        TypeError: What the registration names is not a :class:`Manifest`.
    """
    reference = MANIFESTS.get(env_id)
    if reference is None or isinstance(reference, Manifest):
        return reference
    module, _, attribute = str(reference).partition(":")
    loaded = getattr(importlib.import_module(module), attribute)
    if not isinstance(loaded, Manifest):
        raise TypeError(f"{env_id}: the manifest {reference!r} is a {type(loaded).__name__}, not a Manifest")
    return loaded
