"""Procedurally generated ALFWorld games: ALFRED's own floor plans, furnished at random, one task each.

The ``alfworld`` package ships what ALFWorld's games are made of, but not the 3,553 games themselves
(a release download): the PDDL domain (``alfred.pddl``), the text grammar (``alfred.twl2``), the goal
library (the PDDL goal and the sentence templates of each task type), ALFRED's object rules (which
receptacle can hold what; what can be cleaned, heated, cooled, switched on) and, per floor plan, the
object types of the scene and the receptacles with the spot the agent stands at to use each. From
these a game is generated the way ALFRED made its trials: take a floor plan whose room suits the task,
place the scene's objects in receptacles that can hold them, pick the task's targets, and write the
PDDL problem. The result is a game in the exact form of ALFWorld's release: ``traj_data.json``,
``initial_state.pddl`` and ``game.tw-pddl`` (domain, grammar with the goal sentence, problem, and a
walkthrough), played by the same TextWorld engine as the real files.

Everything is a function of the seed: the same seed gives the same game, file for file.

Example:
    >>> game = generate_game(seed=7, task_type="pick_heat_then_place_in_recep")
    >>> game.task_type, game.room
    ('pick_heat_then_place_in_recep', 'Kitchen')
    >>> game.walkthrough[-1].startswith("move ")
    True
"""

from __future__ import annotations

import functools
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import alfworld.gen.constants as alfred
from alfworld.gen.goal_library import gdict as GOALS

__all__ = [
    "GENERATOR_VERSION",
    "TASK_TYPES",
    "GeneratedGame",
    "display_names",
    "floor_plans",
    "generate_game",
    "mangle",
]

#: Part of the cache path: bump it when a change to this module changes the games a seed gives.
GENERATOR_VERSION = "v1"

#: ALFWorld's six task types, by its ids 1-6 (``alfworld.agents.environment.alfred_tw_env.TASK_TYPES``).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

#: The receptacle type each state-changing task needs (the domain's Clean/Heat/CoolObject preconditions).
APPLIANCE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
_TASK_OBJECTS = {
    "pick_clean_then_place_in_recep": alfred.VAL_ACTION_OBJECTS["Cleanable"],
    "pick_heat_then_place_in_recep": alfred.VAL_ACTION_OBJECTS["Heatable"],
    "pick_cool_then_place_in_recep": alfred.VAL_ACTION_OBJECTS["Coolable"],
}
LAMPS = ("DeskLamp", "FloorLamp")
#: Surfaces a lamp stands on (a lamp must be in a receptacle for ``use`` and for the look-at goal).
_LAMP_SURFACES = ("SideTable", "Desk", "Dresser", "CoffeeTable", "Shelf", "DiningTable", "CounterTop", "TVStand")

#: Receptacles that stay put (ALFRED's movable ones, bowls and boxes, are objects here as in ALFWorld).
STATIC_RECEPTACLES = frozenset(alfred.VAL_RECEPTACLE_OBJECTS) - set(alfred.MOVABLE_RECEPTACLES)
#: Object types that can be picked up and placed: everything some receptacle can hold, unsliced.
PICKUPABLE = frozenset().union(*alfred.VAL_RECEPTACLE_OBJECTS.values()) - {
    name for name in alfred.OBJECTS_WSLICED if name.endswith("Sliced")
}
#: Constants the domain's action preconditions name; the problem must declare them.
_DOMAIN_OTYPES = ("KnifeType", "ButterKnifeType")
_DOMAIN_RTYPES = ("SinkBasinType", "MicrowaveType", "FridgeType")
#: How many of one receptacle type a floor plan gets when its layout lists the type without positions.
_SYNTHESIZED_COUNTS = {"StoveBurner": 4}
_MANGLE = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}


def mangle(name: str) -> str:
    """An ALFRED id as a PDDL name, the way ALFWorld writes it.

    Example:
        >>> mangle("Cabinet|+00.38|+00.37|-01.24")
        'Cabinet_bar__plus_00_dot_38_bar__plus_00_dot_37_bar__minus_01_dot_24'
    """
    return "".join(_MANGLE.get(char, char) for char in name)


def display_names(ids: Sequence[str]) -> dict[str, str]:
    """The names the game shows for ALFRED ids ("cabinet 3"), numbered as ALFWorld's Demangler does.

    The engine lowercases PDDL names and ALFWorld numbers the instances of a kind in sorted order of
    their names, counting down, so the walkthrough must do the same to name things as the game does.

    Example:
        >>> display_names(["Apple|+01.00|+00.90|-01.00", "Apple|-01.00|+00.90|-01.00", "Sink|+00.00|+00.90|-02.00|SinkBasin"])
        {'Apple|+01.00|+00.90|-01.00': 'apple 1', 'Apple|-01.00|+00.90|-01.00': 'apple 2', 'Sink|+00.00|+00.90|-02.00|SinkBasin': 'sinkbasin 1'}
    """
    by_kind: dict[str, list[str]] = defaultdict(list)
    for name in ids:
        lowered = mangle(name).lower()
        kind = lowered.split("_bar_", 1)[0] + ("basin" if "basin" in lowered else "")
        by_kind[kind].append(lowered)
    numbers: dict[str, str] = {}
    for kind, members in by_kind.items():
        for number, member in zip(range(len(members), 0, -1), sorted(members), strict=True):
            numbers[member] = f"{kind} {number}"
    return {name: numbers[mangle(name).lower()] for name in ids}


def _coordinate(value: float) -> str:
    return f"{value:+06.2f}"


def _location(x: int, z: int, rotation: int, horizon: int) -> str:
    """ALFRED's agent pose on its 0.25 m grid, as its PDDL names it (``loc|x|z|rotation|horizon``)."""
    return f"loc|{x}|{z}|{rotation}|{horizon}"


@dataclass(frozen=True)
class Receptacle:
    """A receptacle of a floor plan: its ALFRED id, type, and where the agent stands to use it."""

    id: str
    type: str
    location: str


@dataclass(frozen=True)
class FloorPlan:
    """One of ALFRED's 120 scenes, as far as a text game needs it."""

    scene: int
    room: str
    receptacles: tuple[Receptacle, ...]
    object_types: frozenset[str]

    @property
    def receptacle_types(self) -> frozenset[str]:
        return frozenset(r.type for r in self.receptacles)


def _layout(scene: int, kind: str) -> Any:
    path = resources.files("alfworld.gen") / "layouts" / f"FloorPlan{scene}-{kind}.json"
    return json.loads(path.read_text())


def _receptacle_type(alfred_id: str) -> str:
    parts = alfred_id.split("|")
    return parts[4] if len(parts) == 5 else parts[0]  # "Sink|x|y|z|SinkBasin" is a SinkBasin


@functools.cache
def floor_plans() -> dict[int, FloorPlan]:
    """Every floor plan the ``alfworld`` package ships, by scene number (kitchens 1-30, living rooms
    201-230, bedrooms 301-330, bathrooms 401-430)."""
    plans = {}
    for room, scenes in alfred.SCENE_TYPE.items():
        for scene in scenes:
            object_types = frozenset(_layout(scene, "objects"))
            rng = random.Random(scene)
            receptacles = []
            for alfred_id, (x, z, rotation, horizon) in sorted(_layout(scene, "openable").items()):
                kind = _receptacle_type(alfred_id)
                if kind in STATIC_RECEPTACLES:
                    location = _location(round(x / 0.25), round(z / 0.25), round(rotation / 90) % 4, int(horizon))
                    receptacles.append(Receptacle(alfred_id, kind, location))
            # The layout gives positions of most receptacles only; the scene's own object list names the
            # rest (stove burners, toasters, coffee machines, toilets...). Those get a spot of their own.
            listed = {r.type for r in receptacles}
            missing = sorted(kind for kind in object_types if kind in STATIC_RECEPTACLES and kind not in listed)
            for kind in missing:
                for _ in range(_SYNTHESIZED_COUNTS.get(kind, 1)):
                    x, y, z = (rng.uniform(-3, 3) for _ in range(3))
                    alfred_id = "|".join([kind.replace("Basin", ""), *map(_coordinate, (x, abs(y), z))])
                    if kind.endswith("Basin"):
                        alfred_id += f"|{kind}"
                    location = _location(
                        round(x / 0.25), round(z / 0.25), rng.randrange(4), rng.choice((0, 30, 45, 60))
                    )
                    receptacles.append(Receptacle(alfred_id, kind, location))
            plans[scene] = FloorPlan(scene, room, tuple(receptacles), object_types)
    return plans


@dataclass(frozen=True)
class Item:
    """An object instance: its ALFRED id, type and the receptacle it starts in."""

    id: str
    type: str
    receptacle: Receptacle


@dataclass
class GeneratedGame:
    """One generated ALFWorld game: the household, the task, and the files it is written as.

    Attributes:
        seed: The seed that made it.
        task_type: One of :data:`TASK_TYPES`.
        scene: ALFRED scene number of the floor plan.
        room: ``Kitchen``, ``LivingRoom``, ``Bedroom`` or ``Bathroom``.
        pddl_params: ALFRED's targets: ``object_target``, ``parent_target``, ``toggle_target``, ...
        goal: The task sentence the player reads ("put a hot apple in countertop").
        items: Every object instance and where it starts.
        start: The agent's starting pose.
        walkthrough: A scripted solution, in the game's own commands.
    """

    seed: int
    task_type: str
    scene: int
    room: str
    pddl_params: dict[str, Any]
    goal: str
    items: list[Item]
    start: str
    walkthrough: list[str] = field(default_factory=list)

    @property
    def floor_plan(self) -> FloorPlan:
        return floor_plans()[self.scene]

    @property
    def trial_id(self) -> str:
        return f"trial_G{self.seed:016x}"

    @property
    def directory(self) -> str:
        """``<task_type>-<Object>-<MovableRecep>-<Recep>-<scene>/trial_<id>``, as in ALFWorld's release."""
        params = self.pddl_params
        parent = params["parent_target"] or params["toggle_target"]
        return f"{self.task_type}-{params['object_target']}-None-{parent}-{self.scene}/{self.trial_id}"

    def traj_data(self) -> dict[str, Any]:
        """The parts of ALFRED's ``traj_data.json`` that ALFWorld reads."""
        return {
            "task_id": self.trial_id,
            "task_type": self.task_type,
            "pddl_params": self.pddl_params,
            "scene": {"floor_plan": f"FloorPlan{self.scene}", "scene_num": self.scene, "random_seed": self.seed},
            "turk_annotations": {"anns": [{"task_desc": self.goal, "high_descs": list(self.walkthrough)}]},
        }

    def pddl_problem(self) -> str:
        """The initial state and goal in the form of ALFWorld's ``initial_state.pddl``."""
        receptacles = self.floor_plan.receptacles
        items = self.items
        otypes = sorted({f"{i.type}Type" for i in items} | set(_DOMAIN_OTYPES))
        rtypes = sorted({f"{r.type}Type" for r in receptacles} | set(_DOMAIN_RTYPES))
        locations = sorted({r.location for r in receptacles} | {self.start})
        declared = (
            ["agent1 - agent"]
            + [f"{name} - otype" for name in otypes]
            + [f"{name} - rtype" for name in rtypes]
            + [f"{mangle(i.id)} - object" for i in items]
            + [f"{mangle(r.id)} - receptacle" for r in receptacles]
            + [f"{mangle(loc)} - location" for loc in locations]
        )
        facts = [f"(atLocation agent1 {mangle(self.start)})"]
        for r in receptacles:
            facts.append(f"(receptacleType {mangle(r.id)} {r.type}Type)")
            facts.append(f"(receptacleAtLocation {mangle(r.id)} {mangle(r.location)})")
            if r.type in alfred.OPENABLE_CLASS_SET:
                facts.append(f"(openable {mangle(r.id)})")
        properties = {
            "cleanable": alfred.VAL_ACTION_OBJECTS["Cleanable"],
            "heatable": alfred.VAL_ACTION_OBJECTS["Heatable"],
            "coolable": alfred.VAL_ACTION_OBJECTS["Coolable"],
            "sliceable": alfred.VAL_ACTION_OBJECTS["Sliceable"],
            "toggleable": alfred.VAL_ACTION_OBJECTS["Toggleable"],
            "isReceptacleObject": alfred.MOVABLE_RECEPTACLES_SET,
            "pickupable": PICKUPABLE,
        }
        for item in items:
            name = mangle(item.id)
            facts.append(f"(objectType {name} {item.type}Type)")
            facts += [f"({predicate} {name})" for predicate, kinds in properties.items() if item.type in kinds]
            facts.append(f"(inReceptacle {name} {mangle(item.receptacle.id)})")
            facts.append(f"(objectAtLocation {name} {mangle(item.receptacle.location)})")
        item_types = {i.type for i in items}
        for rtype in sorted({r.type for r in receptacles}):
            for otype in sorted(item_types & alfred.VAL_RECEPTACLE_OBJECTS[rtype]):
                facts.append(f"(canContain {rtype}Type {otype}Type)")
        params = self.pddl_params
        goal = (
            GOALS[self.task_type]["pddl"]
            .format(obj=params["object_target"], recep=params["parent_target"], toggle=params["toggle_target"])
            .replace("#", "-")
        )
        indent = "\n        "
        return (
            f"\n(define (problem plan_{self.trial_id})\n(:domain alfred)\n(:objects\n        "
            f"{indent.join(declared)}\n        )\n\n(:init\n        {indent.join(facts)}\n        )\n"
            f"{goal}"
        )

    def game_file(self, domain: str, grammar: str) -> dict[str, Any]:
        """The content of ``game.tw-pddl``, as ``alfworld-generate`` writes it."""
        return {
            "pddl_domain": domain,
            "grammar": grammar.replace("UNKNOWN GOAL", self.goal),
            "pddl_problem": self.pddl_problem(),
            "solvable": True,
            "walkthrough": list(self.walkthrough),
        }


@functools.cache
def alfworld_logic() -> tuple[str, str]:
    """ALFWorld's PDDL domain and grammar, as its package ships them."""
    data = resources.files("alfworld") / "data"
    return (data / "alfred.pddl").read_text(), (data / "alfred.twl2").read_text()


def _usable_scenes(rng: random.Random, task_type: str, scenes: Sequence[int]) -> list[int]:
    """The scenes that can host ``task_type``, in a seeded order to try them in."""
    rooms = alfred.GOALS_VALID[task_type]
    usable = []
    for scene in scenes:
        plan = floor_plans()[scene]
        if plan.room not in rooms:
            continue
        if task_type in APPLIANCE and APPLIANCE[task_type] not in plan.receptacle_types:
            continue
        if task_type == "look_at_obj_in_light" and not (plan.object_types & set(LAMPS)):
            continue
        usable.append(scene)
    rng.shuffle(usable)
    return usable


def _holders(plan: FloorPlan, kind: str) -> list[Receptacle]:
    return [r for r in plan.receptacles if kind in alfred.VAL_RECEPTACLE_OBJECTS[r.type]]


def _targets(plan: FloorPlan, task_type: str) -> list[tuple[str, str]]:
    """Every (object type, receptacle type) pair the task could ask for in this floor plan.

    The object must start somewhere other than a receptacle of the target type, so a second type of
    holder must exist; state-changing tasks take objects the appliance works on, and never ask to put
    the object back in the appliance itself.
    """
    kinds = sorted(plan.object_types & PICKUPABLE & _TASK_OBJECTS.get(task_type, PICKUPABLE))
    pairs = []
    for kind in kinds:
        holder_types = sorted({r.type for r in _holders(plan, kind)})
        if task_type == "look_at_obj_in_light":
            if holder_types:
                pairs.append((kind, ""))
            continue
        for target in holder_types:
            if target != APPLIANCE.get(task_type) and len(holder_types) > 1:
                pairs.append((kind, target))
    return pairs


def _new_id(rng: random.Random, kind: str, near: Receptacle, taken: set[str]) -> str:
    """A fresh ALFRED-style id (``Apple|+01.23|+00.91|-02.10``) near the receptacle it starts in."""
    base = [float(v) for v in near.id.split("|")[1:4]]
    while True:
        alfred_id = "|".join([kind, *(_coordinate(v + rng.uniform(-0.3, 0.3)) for v in base)])
        if alfred_id not in taken:
            taken.add(alfred_id)
            return alfred_id


def _furnish(rng: random.Random, plan: FloorPlan, task_type: str, target: str, parent: str, toggle: str) -> list[Item]:
    """Place the scene's objects: one to three of each kind, each in a receptacle that can hold it.

    The target kind gets at least as many instances as the task needs, none of them starting in a
    receptacle of the target type.
    """
    taken: set[str] = set()
    items = []
    for kind in sorted(plan.object_types & PICKUPABLE):
        holders = _holders(plan, kind)
        if kind == target:
            holders = [r for r in holders if r.type != parent]
        if not holders:
            continue
        count = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
        if kind == target:
            count = max(count, 2 if task_type == "pick_two_obj_and_place" else 1)
        for _ in range(count):
            where = rng.choice(holders)
            items.append(Item(_new_id(rng, kind, where, taken), kind, where))
    if toggle:
        surfaces = [r for r in plan.receptacles if r.type in _LAMP_SURFACES] or list(plan.receptacles)
        where = rng.choice(surfaces)
        items.append(Item(_new_id(rng, toggle, where, taken), toggle, where))
    return items


def _walkthrough(game: GeneratedGame) -> list[str]:
    """A scripted solution: fetch the target (opening what is closed), change its state, deliver it."""
    plan = game.floor_plan
    names = display_names([r.id for r in plan.receptacles] + [i.id for i in game.items])
    params = game.pddl_params
    steps: list[str] = []
    here: list[Receptacle] = []
    opened: set[str] = set()

    def arrive(receptacle: Receptacle) -> None:
        if not here or here[-1] != receptacle:
            steps.append(f"go to {names[receptacle.id]}")
            here.append(receptacle)

    def go(receptacle: Receptacle) -> None:  # arrive, and open it to reach inside
        arrive(receptacle)
        if receptacle.type in alfred.OPENABLE_CLASS_SET and receptacle.id not in opened:
            steps.append(f"open {names[receptacle.id]}")
            opened.add(receptacle.id)

    def fetch(item: Item) -> None:
        go(item.receptacle)
        steps.append(f"take {names[item.id]} from {names[item.receptacle.id]}")

    targets = sorted((i for i in game.items if i.type == params["object_target"]), key=lambda i: names[i.id])
    if game.task_type == "look_at_obj_in_light":
        lamp = next(i for i in game.items if i.type == params["toggle_target"])
        fetch(targets[0])
        arrive(lamp.receptacle)
        steps.append(f"use {names[lamp.id]}")
        return steps
    destination = min((r for r in plan.receptacles if r.type == params["parent_target"]), key=lambda r: names[r.id])
    for item in targets[: 2 if game.task_type == "pick_two_obj_and_place" else 1]:
        fetch(item)
        if game.task_type in APPLIANCE:
            appliance = min(
                (r for r in plan.receptacles if r.type == APPLIANCE[game.task_type]), key=lambda r: names[r.id]
            )
            arrive(appliance)  # the appliance works closed
            verb = {"SinkBasin": "clean", "Microwave": "heat", "Fridge": "cool"}[appliance.type]
            steps.append(f"{verb} {names[item.id]} with {names[appliance.id]}")
        go(destination)
        steps.append(f"move {names[item.id]} to {names[destination.id]}")
    return steps


def generate_game(seed: int, task_type: str, *, scenes: Sequence[int] | None = None) -> GeneratedGame:
    """Generate one game of ``task_type`` from ``seed``.

    Args:
        seed: Decides everything: the floor plan, the furnishing, the targets, the goal's wording.
        task_type: One of :data:`TASK_TYPES`.
        scenes: ALFRED scene numbers to draw the floor plan from (default: all 120).

    Raises:
        ValueError: an unknown task type, or no given scene can host it.
    """
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; known: {', '.join(TASK_TYPES)}")
    rng = random.Random(seed)
    candidates = _usable_scenes(rng, task_type, sorted(floor_plans()) if scenes is None else scenes)
    for scene in candidates:
        plan = floor_plans()[scene]
        pairs = _targets(plan, task_type)
        if pairs:
            break
    else:
        raise ValueError(f"none of the {len(candidates)} usable scenes can host a {task_type} task")
    target, parent = rng.choice(pairs)
    toggle = rng.choice(sorted(plan.object_types & set(LAMPS))) if task_type == "look_at_obj_in_light" else ""
    params = {
        "object_target": target,
        "parent_target": parent,
        "toggle_target": toggle,
        "mrecep_target": "",
        "object_sliced": False,
    }
    template = rng.choice(GOALS[task_type]["templates"])
    goal = template.format(obj=target.lower(), recep=parent.lower(), toggle=toggle.lower())
    items = _furnish(rng, plan, task_type, target, parent, toggle)
    xs = [int(loc.split("|")[1]) for loc in (r.location for r in plan.receptacles)]
    zs = [int(loc.split("|")[2]) for loc in (r.location for r in plan.receptacles)]
    used = {r.location for r in plan.receptacles}
    while True:  # the agent starts in the middle of the room, at no receptacle
        start = _location(rng.randint(min(xs), max(xs)), rng.randint(min(zs), max(zs)), rng.randrange(4), 30)
        if start not in used:
            break
    game = GeneratedGame(seed, task_type, scene, plan.room, params, goal, items, start)
    game.walkthrough = _walkthrough(game)
    return game
