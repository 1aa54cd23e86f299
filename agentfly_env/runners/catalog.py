"""``agentfly-env``: which envs there are, what each one is, and whether one keeps its manifest's word.

Three verbs, each with ``--json`` for a program to read:

* ``list``: every registered env, plug-ins included, one line each: id, family, tools, reward range, the
  extra it needs and whether that is installed.
* ``describe ID``: the env's manifest (:class:`~agentfly_env.core.manifest.Manifest`) and one short episode
  played by its scripted expert.
* ``validate ID``: the static, runtime and semantic levels of :mod:`agentfly_env.runners.validation`, each
  check passed or failed with its reason; ``--import MODULE`` first imports a module that registers ID
  (an env of your own, before it is packaged).

Exit status: 0 when everything asked for holds (for ``validate``: every level passes), 1 when it does not
(``describe``: no manifest, or no episode could be played), 2 on a usage error (an unknown verb, option or id).

Examples::

    agentfly-env list
    agentfly-env describe AgentFly/Math-v0 --json
    agentfly-env validate AgentFly/Mine-v0 --import my_suite.envs --episodes 5
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import msgspec

from agentfly_env.core.episode import play_episode
from agentfly_env.core.manifest import Manifest, manifest_of
from agentfly_env.core.policies import expert_action, has_expert, random_action
from agentfly_env.core.types import Trajectory
from agentfly_env.extras import MissingExtraError, extra_installed
from agentfly_env.registration import MANIFESTS, REMOTE_ID, registered_ids
from agentfly_env.runners.validation import Report, validate

__all__ = ["CatalogEntry", "catalog", "catalog_ids", "main"]

#: How much of an observation or an action ``describe`` shows; ``--json`` gives them whole.
SHOWN_CHARS = 300
#: Turns of the example episode ``describe`` shows, then how many more there were.
SHOWN_TURNS = 6


class CatalogEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One line of ``agentfly-env list``.

    Attributes:
        id: The registered id.
        manifest: Whether its manifest could be read (``problem`` says why not).
        family: The manifest's family (None without a manifest).
        tools: Its tools' names.
        reward_range: The least and the most an episode can earn (None without a manifest).
        extra: The extra it needs (from the manifest, or from the error its missing extra raised).
        installed: Whether that extra is installed (None when nothing can be said).
        problem: Why the manifest could not be read: none registered, or an extra missing.
    """

    id: str
    manifest: bool
    family: str | None = None
    tools: tuple[str, ...] = ()
    reward_range: tuple[float, float] | None = None
    extra: str | None = None
    installed: bool | None = None
    problem: str | None = None


def catalog_ids() -> list[str]:
    """The ids the catalog lists: the ``AgentFly/*`` ids and every other id registered with a manifest."""
    return sorted({*registered_ids(), *MANIFESTS} - {REMOTE_ID})


def catalog() -> list[CatalogEntry]:
    """One entry per id of :func:`catalog_ids`, read from its manifest without making the env.

    Example:
        >>> import agentfly_env
        >>> math = next(entry for entry in catalog() if entry.id == "AgentFly/Math-v0")
        >>> math.family, math.tools, math.reward_range, math.extra, math.installed
        ('math', ('calculator',), (0.0, 1.0), 'math', True)
    """
    entries = []
    for env_id in catalog_ids():
        try:
            manifest = manifest_of(env_id)
        except MissingExtraError as error:
            entries.append(
                CatalogEntry(id=env_id, manifest=False, extra=error.extra, installed=False, problem=str(error))
            )
            continue
        if manifest is None:
            entries.append(CatalogEntry(id=env_id, manifest=False, problem="no manifest registered"))
            continue
        entries.append(
            CatalogEntry(
                id=env_id,
                manifest=True,
                family=manifest.family,
                tools=manifest.tool_names,
                reward_range=manifest.reward.range,
                extra=manifest.extra,
                installed=True if manifest.extra is None else extra_installed(manifest.extra, manifest.distribution),
            )
        )
    return entries


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="agentfly-env", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="{list,describe,validate}")
    listing = verbs.add_parser("list", help="every registered env, one line each")
    describe = verbs.add_parser("describe", help="an env's manifest and one episode of its expert")
    describe.add_argument("env_id", metavar="ID")
    describe.add_argument("--seed", type=int, default=0, help="the example episode's seed (default 0)")
    check = verbs.add_parser("validate", help="the static, runtime and semantic checks of an env")
    check.add_argument("env_id", metavar="ID")
    check.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (it registers ID); may be given more than once",
    )
    check.add_argument(
        "--episodes",
        type=_positive,
        default=3,
        metavar="N",
        help="seeds the semantic level plays with each policy (default 3)",
    )
    for command in (listing, describe, check):
        command.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)

    if args.__dict__.get("modules") and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module of the working directory, as `python -m` finds one
    for module in getattr(args, "modules", []):
        try:
            importlib.import_module(module)
        except Exception as error:  # the user's module may raise anything: a usage error, said as such
            parser.error(f"--import {module}: {type(error).__name__}: {error}")
    if args.verb == "list":
        entries = catalog()
        print(_json(entries) if args.json else _list_text(entries))
        return 0
    if args.env_id not in gym.registry:
        parser.error(f"unknown env id {args.env_id!r}; registered: {', '.join(catalog_ids())}")
    if args.verb == "describe":
        return _describe(args.env_id, args.seed, as_json=args.json)
    report = validate(args.env_id, episodes=args.episodes)
    print(_json(report) if args.json else _report_text(report))
    return 0 if report.passed else 1


def _positive(text: str) -> int:
    value = int(text)  # argparse turns the ValueError into a usage error
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _json(value: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


# ---------------------------------------------------------------------------------------------- list


def _list_text(entries: Sequence[CatalogEntry]) -> str:
    rows = [
        (
            entry.id,
            entry.family or "",
            ", ".join(entry.tools) or "-",
            "" if entry.reward_range is None else "reward {:g}..{:g}".format(*entry.reward_range),
            "no extra" if entry.extra is None else f"extra {_extra_text(entry.extra, entry.installed)}",
        )
        for entry in entries
        if entry.manifest
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))] if rows else [0]
    lines = {row[0]: "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows}
    # An id whose manifest could not be read says why, in the line's place (the missing extra names itself).
    lines.update(
        {entry.id: f"{entry.id.ljust(widths[0])}  ({entry.problem})" for entry in entries if not entry.manifest}
    )
    return "\n".join(lines[entry.id] for entry in entries)


#: How ``list`` and ``describe`` say whether an extra is installed (None: nothing can be said).
_INSTALLED = {True: "installed", False: "not installed", None: "unknown"}


def _extra_text(extra: str, installed: bool | None) -> str:
    """``math (installed)``."""
    return f"{extra} ({_INSTALLED[installed]})"


# ---------------------------------------------------------------------------------------------- describe


def _describe(env_id: str, seed: int, *, as_json: bool) -> int:
    try:
        manifest = manifest_of(env_id)
        problem = None if manifest is not None else "no manifest registered"
    except MissingExtraError as error:
        manifest, problem = None, str(error)
    if manifest is None:
        print(_json({"id": env_id, "manifest": None, "problem": problem}) if as_json else f"{env_id}: {problem}")
        return 1
    try:
        trajectory, policy = _example(env_id, seed)
    except Exception as error:  # a plug-in's env may fail in any way: say so, with the manifest
        trajectory, policy, problem = None, None, f"{type(error).__name__}: {error}"
    else:
        problem = None
    installed = None if manifest.extra is None else extra_installed(manifest.extra, manifest.distribution)
    if as_json:
        example = None if trajectory is None else {"policy": policy, "seed": seed, **msgspec.to_builtins(trajectory)}
        print(_json({"manifest": manifest, "installed": installed, "example": example, "problem": problem}))
    else:
        print(_manifest_text(manifest, installed))
        print()
        print(
            f"Example episode: none could be played ({problem})"
            if trajectory is None
            else _episode_text(trajectory, policy, seed)
        )
    return 0 if trajectory is not None else 1


def _example(env_id: str, seed: int) -> tuple[Trajectory, str]:
    """One episode on ``seed`` by the env's expert (random turns when it has none) and who played it."""
    env = gym.make(env_id)
    try:
        policy = expert_action if has_expert(env) else random_action
        trajectory = play_episode(env, policy, seed=seed)
    finally:
        env.close()
    return trajectory, "expert" if policy is expert_action else "random (no expert)"


def _manifest_text(manifest: Manifest, installed: bool | None) -> str:
    reward = manifest.reward
    rows = [
        ("family", manifest.family),
        (
            "benchmark",
            "none: an env of its own" if manifest.benchmark is None else f"{manifest.benchmark}, {manifest.link}",
        ),
        ("tools", "; ".join(_signature(schema) for schema in manifest.tools) or "none"),
        ("reward", "{:g} to {:g}: {}".format(*reward.range, reward.measures)),
        ("paid", reward.paid),
        ("success", reward.success),
        ("seeded", "yes: same seed, same episode" if manifest.seeded else "no"),
        ("turn budget", str(manifest.max_turns)),
        (
            "extra",
            "none" if manifest.extra is None else f"{_extra_text(manifest.extra, installed)}: {manifest.install}",
        ),
        *(("data", f"{data.name}: {data.size}; {data.licence}") for data in manifest.data),
        ("parity", manifest.parity or "none"),
        ("expert", manifest.expert or "none"),
    ]
    width = max(len(label) for label, _ in rows)
    lines = [f"{manifest.id}: {manifest.description}", *(f"  {label.ljust(width)}  {text}" for label, text in rows)]
    if manifest.tools:
        lines += ["", "Tool schemas:", *(f"  {json.dumps(schema['function'])}" for schema in manifest.tools)]
    return "\n".join(lines)


def _signature(schema: dict[str, Any]) -> str:
    """``name(argument: type, ...)`` of an OpenAI function schema."""
    function = schema["function"]
    properties = function.get("parameters", {}).get("properties", {})
    arguments = ", ".join(f"{name}: {spec.get('type', 'any')}" for name, spec in properties.items())
    return f"{function['name']}({arguments})"


def _episode_text(trajectory: Trajectory, policy: str, seed: int) -> str:
    summary = trajectory.summary()
    lines = [f"Example episode ({policy}, seed {seed}):", f"  observation  {_cut(trajectory.observation)}"]
    for number, step in enumerate(trajectory.steps[:SHOWN_TURNS], 1):
        lines.append(f"  turn {number:<7} {_cut(step.action)}")
        lines.append(f"  {'':12} -> {_cut(step.observation) or '(no observation)'}  [reward {step.reward:g}]")
    if len(trajectory.steps) > SHOWN_TURNS:
        lines.append(f"  ... {len(trajectory.steps) - SHOWN_TURNS} more turns")
    ending = f"truncated ({summary.truncation_reason})" if summary.truncated else "terminated"
    lines.append(
        f"  return {summary.reward:g}, {'solved' if summary.success else 'not solved'}, {summary.turns} turns, {ending}"
    )
    return "\n".join(lines)


def _cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_CHARS else f"{flat[:SHOWN_CHARS]}..."


# ---------------------------------------------------------------------------------------------- validate


def _report_text(report: Report) -> str:
    episodes = f"{report.episodes} episode{'s' if report.episodes != 1 else ''}"
    lines = [f"agentfly-env validate {report.env_id} ({episodes} per policy)"]
    names = [check.name for level in report.levels for check in level.checks]
    width = max(map(len, names), default=0)
    for level in report.levels:
        if level.skipped is not None:
            lines.append(f"{level.name}: SKIPPED ({level.skipped})")
            continue
        lines.append(f"{level.name}: {'PASS' if level.passed else 'FAIL'} ({level.seconds:.1f} s)")
        for check in level.checks:
            lines.append(f"  {'pass' if check.passed else 'FAIL'}  {check.name.ljust(width)}  {check.detail}")
    verdict = "every level passes" if report.passed else "a level fails"
    lines.append(f"{'PASS' if report.passed else 'FAIL'}: {verdict} ({report.seconds:.1f} s)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
