"""Procedurally generated ALFWorld games: ALFRED's own floor plans, furnished at random, one task each,
kept only if ALFWorld's handcoded expert solves them, as ``alfworld-generate`` keeps its games.

The ``alfworld`` package ships what ALFWorld's games are made of, but not the 3,553 games themselves
(a release download): the PDDL domain (``alfred.pddl``), the text grammar (``alfred.twl2``), the goal
library (the PDDL goal and the sentence templates of each task type), ALFRED's object rules (which
receptacle can hold what; what can be cleaned, heated, cooled, switched on) and, per floor plan, the
object types of the scene (``FloorPlanN-objects.json``), its reachable grid (``-layout.npy``) and its
receptacles with the spot the agent opens each from (``-openable.json``). From these a game is made the
way ALFRED made its trials: take a floor plan whose room suits the task, place the scene's objects in
receptacles that can hold them, pick the task's targets, and write the PDDL problem; then, as
``alfworld-generate`` does, play ALFWorld's handcoded expert on it (``AlfredExpert``, at most 200
steps) and keep the game only if the expert wins, its path becoming the walkthrough. A game the expert
loses is drawn again from a seed derived from the first. The result is a game in the exact form of
ALFWorld's release: ``traj_data.json``, ``initial_state.pddl`` and ``game.tw-pddl`` (domain, grammar
with the goal sentence, problem, ``solvable`` and the expert's walkthrough), played by the same
TextWorld engine as the real files.

Locations are named as ALFRED names them, ``loc|x|z|rotation|horizon``: the grid point the agent
stands on (0.25 m steps), the direction it faces (0-3: north, east, south, west) and the camera's tilt,
computed by ALFRED's rule (``get_obj_coords`` of its full-knowledge game state) from the receptacle's
position (its ALFRED id), the scene's reachable points and the known opening spot. What the package's
data does not give, and this module therefore makes up, is listed in :func:`floor_plans`.

Everything is a function of the seed: the same seed gives the same game, file for file.

Example:
    >>> game = draw_game(seed=7, task_type="pick_heat_then_place_in_recep")
    >>> game.task_type, game.room, game.walkthrough is None
    ('pick_heat_then_place_in_recep', 'Kitchen', True)
    >>> game.start.startswith("loc|") and game.start.endswith("|30")
    True
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import alfworld.gen.constants as alfred
import numpy as np
from alfworld.gen.goal_library import gdict as GOALS

from agentfly_envs.alfworld.engine import Engine

__all__ = [
    "GENERATOR_VERSION",
    "MAX_DRAWS",
    "TASK_TYPES",
    "Expert",
    "GeneratedGame",
    "display_names",
    "draw_game",
    "floor_plans",
    "generate_game",
    "handcoded_expert",
    "location_of",
    "mangle",
]

#: Part of the cache path: bump it when a change to this module changes the games a seed gives.
GENERATOR_VERSION = "v3"

#: ALFWorld's six task types, by its ids 1-6 (``alfworld.agents.environment.alfred_tw_env.TASK_TYPES``).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

#: How many draws :func:`generate_game` tries before giving up on a seed (the expert wins most first draws).
MAX_DRAWS = 64

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
_MANGLE = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}

#: ALFRED's grid step (m) and the camera's height: the agent stands at y = 0.9009992 in every ALFRED
#: scene (the ``init_action`` of its trajectories) and the camera sits ``CAMERA_HEIGHT_OFFSET`` above.
_STEP = alfred.AGENT_STEP_SIZE
_CAMERA_HEIGHT = 0.9009992 + alfred.CAMERA_HEIGHT_OFFSET
#: Grid offsets (x, z) of the four directions ALFRED's rotations 0-3 face: north, east, south, west.
HEADINGS = ((0, 1), (1, 0), (0, -1), (-1, 0))
#: Receptacles of a scene that the package lists by type only (no id, no position; see :func:`floor_plans`):
#: how many to make of each (1 or a block of 4), and a typical height (m) of their centre, which sets the
#: camera angle.
_UNPLACED_COUNTS = {"StoveBurner": 4}
_UNPLACED_HEIGHTS = {
    "StoveBurner": 0.93,
    "CoffeeMachine": 0.90,
    "Toaster": 0.90,
    "GarbageCan": 0.0,
    "Toilet": 0.0,
    "LaundryHamper": 0.0,
    "Safe": 0.0,
    "Ottoman": 0.0,
    "ToiletPaperHanger": 0.75,
    "TowelHolder": 1.1,
    "HandTowelHolder": 1.5,
    "SinkBasin": 0.8,
    "Drawer": 0.5,
    "Shelf": 0.5,
    "Cabinet": 0.5,
}


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
    their names, counting down.

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
    """One coordinate of an ALFRED id: signed, two digits each side, and zero unsigned ("00.00") as THOR writes it."""
    text = f"{value:+06.2f}"
    return "00.00" if text in ("+00.00", "-00.00") else text


def _alfred_id(kind: str, x: float, y: float, z: float) -> str:
    base = "|".join([kind.replace("Basin", "") if kind.endswith("Basin") else kind, *map(_coordinate, (x, y, z))])
    return f"{base}|{kind}" if kind.endswith("Basin") else base


def _position(alfred_id: str) -> tuple[float, float, float]:
    """The (x, y, z) an ALFRED id carries: where the object stood when the scene was made."""
    x, y, z = (float(value) for value in alfred_id.split("|")[1:4])
    return x, y, z


@functools.cache
def reachable_points(scene: int) -> np.ndarray:
    """The grid points (x, z in 0.25 m steps) the agent can stand on, as ALFRED's ``Graph`` loads them."""
    path = resources.files("alfworld.gen") / "layouts" / f"FloorPlan{scene}-layout.npy"
    with path.open("rb") as handle:
        points = np.load(handle) / _STEP
    return np.round(points).astype(np.int32)


def location_of(
    scene: int, kind: str, position: tuple[float, float, float], known_point: tuple[float, float] | None = None
) -> str:
    """Where ALFRED's generator puts the agent to use a thing, named ``loc|x|z|rotation|horizon``.

    ALFRED's rule (``TaskGameStateFullKnowledge.get_obj_coords``): stand on the known opening spot if
    there is one (``-openable.json``), else on the reachable point nearest the thing (Manhattan
    distance); face it along the axis of the larger offset; step back one point if closer than 0.5 m
    and that point is reachable; tilt the camera toward the thing's height, in 15 degree steps within
    -30..60 (with ALFRED's forced tilts for floor lamps, toilets and FloorPlan18's fridge).

    Args:
        scene: ALFRED scene number.
        kind: The thing's type (``Cabinet``).
        position: Its (x, y, z) in metres.
        known_point: The (x, z) in metres to stand on, if the floor plan's data names one.

    Example:
        >>> location_of(27, "Cabinet", (0.13, 0.39, 1.77), known_point=(1.0, 1.75))
        'loc|4|7|3|60'
    """
    points = reachable_points(scene)
    x, y, z = position
    centre = np.array([x, z]) / _STEP
    offsets = centre[np.newaxis, :] - points
    if known_point is not None:
        spot = np.array(known_point) / _STEP
        offset = centre - spot
    else:
        nearest = int(np.argmin(np.abs(offsets).sum(axis=1)))
        spot, offset = points[nearest].astype(float), offsets[nearest]
    distance = float(np.sqrt(np.sum((np.array([*spot, _CAMERA_HEIGHT / _STEP]) - [*centre, y / _STEP]) ** 2))) * _STEP
    if abs(offset[0]) > abs(offset[1]):
        rotation = 1 if offset[0] > 0 else 3
    else:
        rotation = 0 if offset[1] > 0 else 2
    if distance < 0.5:  # too close: one point back, if the agent can stand there
        back = spot - HEADINGS[rotation]
        matches = np.flatnonzero(np.abs(back[np.newaxis, :] - points).astype(np.int32).sum(axis=1) == 0)
        if matches.size:
            spot, offset = points[matches[0]].astype(float), offsets[matches[0]]
    horizontal = float(np.max(np.abs(offset))) * _STEP
    angle = np.round(np.degrees(np.arctan2(_CAMERA_HEIGHT - y, horizontal)) / alfred.HORIZON_GRANULARITY)
    horizon = int(np.clip(angle * alfred.HORIZON_GRANULARITY, -30, 60))
    forced = alfred.FORCED_HORIZON_OBJS
    horizon = forced.get((kind, scene), forced.get((kind, None), horizon))
    return f"loc|{int(spot[0])}|{int(spot[1])}|{rotation}|{horizon}"


@dataclass(frozen=True)
class Receptacle:
    """A receptacle of a floor plan: its ALFRED id, type, and where the agent stands to use it.

    Attributes:
        openable: Whether it must be opened to reach inside. As ALFRED writes its problems (with
            ``PRUNE_UNREACHABLE_POINTS`` off), only receptacles of an openable type that have a known
            opening spot are: a made-up drawer or safe stands open.
    """

    id: str
    type: str
    location: str
    openable: bool = False


@dataclass(frozen=True)
class FloorPlan:
    """One of ALFRED's 120 scenes, as far as a text game needs it.

    Attributes:
        unplaced: The receptacle types the package lists by type only, whose ids and spots were made up.
    """

    scene: int
    room: str
    receptacles: tuple[Receptacle, ...]
    object_types: frozenset[str]
    unplaced: frozenset[str]

    @property
    def receptacle_types(self) -> frozenset[str]:
        return frozenset(r.type for r in self.receptacles)


def layout_data(scene: int, kind: str) -> Any:
    """A floor plan's ``FloorPlanN-<kind>.json`` from the package: ``objects`` (the scene's object types)
    or ``openable`` (receptacle id -> [x, z, rotation, horizon] of the spot to open it from)."""
    path = resources.files("alfworld.gen") / "layouts" / f"FloorPlan{scene}-{kind}.json"
    return json.loads(path.read_text())


def receptacle_type(alfred_id: str) -> str:
    """The type of a receptacle's ALFRED id."""
    parts = alfred_id.split("|")
    return parts[4] if len(parts) == 5 else parts[0]  # "Sink|x|y|z|SinkBasin" is a SinkBasin


def _edges(scene: int) -> list[tuple[int, int, int]]:
    """Reachable points with an unreachable neighbour, and the direction (0-3) of that neighbour: where
    something can stand against the walkable area."""
    points = reachable_points(scene)
    walkable = {(int(x), int(z)) for x, z in points}
    return [
        (x, z, heading)
        for x, z in sorted(walkable)
        for heading, (dx, dz) in enumerate(HEADINGS)
        if (x + dx, z + dz) not in walkable
    ]


def _unplaced_receptacles(scene: int, kind: str) -> list[Receptacle]:
    """Receptacles of a type the floor plan lists without ids or positions, placed against the edge of
    its walkable area (1.5 grid steps beyond a reachable edge point drawn by scene and type, at the
    type's typical height) and located by ALFRED's rule. Stove burners come as a block of four, 0.25 m
    apart."""
    rng = random.Random(f"{scene}/{kind}")
    x, z, heading = rng.choice(_edges(scene))
    dx, dz = HEADINGS[heading]
    centre_x, centre_z = (x + 1.5 * dx) * _STEP, (z + 1.5 * dz) * _STEP
    count = _UNPLACED_COUNTS.get(kind, 1)
    spread = [(0.0, 0.0)] if count == 1 else [(sx * 0.125, sz * 0.125) for sx in (-1, 1) for sz in (-1, 1)]
    height = _UNPLACED_HEIGHTS.get(kind, 0.5)
    receptacles = []
    for ox, oz in spread:
        position = (centre_x + ox, height, centre_z + oz)
        receptacles.append(Receptacle(_alfred_id(kind, *position), kind, location_of(scene, kind, position)))
    return receptacles


@functools.cache
def floor_plans() -> dict[int, FloorPlan]:
    """Every floor plan the ``alfworld`` package ships, by scene number (kitchens 1-30, living rooms
    201-230, bedrooms 301-330, bathrooms 401-430).

    The receptacles are those of ``FloorPlanN-openable.json``, with their ALFRED ids and located by
    ALFRED's rule from their position and opening spot (:func:`location_of`). The package has no more:
    a release's scenes come from AI2-THOR's scene metadata, which lists every receptacle object with its
    position, and that metadata needs the simulator. So two things differ from a release:

    * receptacle types the scene's ``-objects.json`` lists but ``-openable.json`` does not place (most
      often stove burners, coffee machines, toasters, garbage cans and bathroom holders) get made-up
      ids and positions: four stove burners, one of anything else, against the edge of the walkable
      area, at a typical height (:attr:`FloorPlan.unplaced`); as in ALFRED's problems, such a
      receptacle is never openable, since it has no known opening spot;
    * instances of a placed type that ``-openable.json`` omits (ALFRED's precompute step skipped
      receptacles it found no good spot for, such as some high cabinets) are missing.

    And one small thing: a basin's camera tilt is worked out from the height its id carries (the sink's);
    THOR's basin centre lies lower, so a release may tilt one step further down.
    """
    plans = {}
    for room, scenes in alfred.SCENE_TYPE.items():
        for scene in scenes:
            object_types = frozenset(layout_data(scene, "objects"))
            receptacles = []
            for alfred_id, (x, z, _, _) in sorted(layout_data(scene, "openable").items()):
                kind = receptacle_type(alfred_id)
                if kind in STATIC_RECEPTACLES:
                    location = location_of(scene, kind, _position(alfred_id), known_point=(x, z))
                    openable = kind in alfred.OPENABLE_CLASS_SET
                    receptacles.append(Receptacle(alfred_id, kind, location, openable))
            placed = {r.type for r in receptacles}
            unplaced = frozenset(kind for kind in object_types if kind in STATIC_RECEPTACLES and kind not in placed)
            for kind in sorted(unplaced):
                receptacles.extend(_unplaced_receptacles(scene, kind))
            plans[scene] = FloorPlan(scene, room, tuple(receptacles), object_types, unplaced)
    return plans


@dataclass(frozen=True)
class Item:
    """An object instance: its ALFRED id, type, the receptacle it starts in and the agent's spot to see it."""

    id: str
    type: str
    receptacle: Receptacle
    location: str


@dataclass
class GeneratedGame:
    """One generated ALFWorld game: the household, the task, and the files it is written as.

    Attributes:
        seed: The seed of this draw.
        task_type: One of :data:`TASK_TYPES`.
        scene: ALFRED scene number of the floor plan.
        room: ``Kitchen``, ``LivingRoom``, ``Bedroom`` or ``Bathroom``.
        pddl_params: ALFRED's targets: ``object_target``, ``parent_target``, ``toggle_target``, ...
        goal: The task sentence the player reads ("put a hot apple in countertop").
        items: Every object instance and where it starts.
        start: The agent's starting pose.
        walkthrough: The handcoded expert's winning path; None until the expert has played the game,
            and for a game it lost.
    """

    seed: int
    task_type: str
    scene: int
    room: str
    pddl_params: dict[str, Any]
    goal: str
    items: list[Item]
    start: str
    walkthrough: list[str] | None = None

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
        _, x, z, rotation, horizon = self.start.split("|")
        return {
            "task_id": self.trial_id,
            "task_type": self.task_type,
            "pddl_params": self.pddl_params,
            "scene": {
                "floor_plan": f"FloorPlan{self.scene}",
                "scene_num": self.scene,
                "random_seed": self.seed,
                "init_action": {
                    "action": "TeleportFull",
                    "x": int(x) * _STEP,
                    "y": 0.9009992,
                    "z": int(z) * _STEP,
                    "rotateOnTeleport": True,
                    "rotation": int(rotation) * 90,
                    "horizon": int(horizon),
                },
            },
            "turk_annotations": {"anns": [{"task_desc": self.goal, "high_descs": list(self.walkthrough or [])}]},
        }

    def pddl_problem(self) -> str:
        """The initial state and goal in the form of ALFWorld's ``initial_state.pddl``."""
        receptacles = self.floor_plan.receptacles
        items = self.items
        otypes = sorted({f"{i.type}Type" for i in items} | set(_DOMAIN_OTYPES))
        rtypes = sorted({f"{r.type}Type" for r in receptacles} | set(_DOMAIN_RTYPES))
        locations = sorted({r.location for r in receptacles} | {i.location for i in items} | {self.start})
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
            if r.openable:
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
            facts.append(f"(objectAtLocation {name} {mangle(item.location)})")
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
        """The content of ``game.tw-pddl``, as ``alfworld-generate`` writes it: ``solvable`` is whether
        the handcoded expert won, ``walkthrough`` its path (None when it lost)."""
        return {
            "pddl_domain": domain,
            "grammar": grammar.replace("UNKNOWN GOAL", self.goal),
            "pddl_problem": self.pddl_problem(),
            "solvable": self.walkthrough is not None,
            "walkthrough": None if self.walkthrough is None else list(self.walkthrough),
        }

    def files(self) -> dict[str, str]:
        """The trial's three files by name, ``game.tw-pddl`` last (its presence marks a complete trial)."""
        content = self.game_file(*alfworld_logic())
        return {
            "traj_data.json": json.dumps(self.traj_data(), indent=2),
            "initial_state.pddl": content["pddl_problem"],
            "game.tw-pddl": json.dumps(content),
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


def _new_item(rng: random.Random, plan: FloorPlan, kind: str, near: Receptacle, taken: set[str]) -> Item:
    """A fresh object (``Apple|+01.23|+00.91|-02.10``) near the receptacle it starts in, located by ALFRED's rule."""
    base = _position(near.id)
    while True:
        position = tuple(value + rng.uniform(-0.3, 0.3) for value in base)
        alfred_id = _alfred_id(kind, *position)
        if alfred_id not in taken:
            taken.add(alfred_id)
            return Item(alfred_id, kind, near, location_of(plan.scene, kind, _position(alfred_id)))


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
            items.append(_new_item(rng, plan, kind, rng.choice(holders), taken))
    if toggle:
        surfaces = [r for r in plan.receptacles if r.type in _LAMP_SURFACES] or list(plan.receptacles)
        items.append(_new_item(rng, plan, toggle, rng.choice(surfaces), taken))
    return items


def draw_game(seed: int, task_type: str, *, scenes: Sequence[int] | None = None) -> GeneratedGame:
    """One candidate game of ``task_type`` from ``seed``, not yet played by the expert (no walkthrough).

    Args:
        seed: Decides everything: the floor plan, the furnishing, the targets, the goal's wording, the
            agent's start (a reachable point, any heading, the camera at 30 degrees as in ALFRED).
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
    used = {r.location for r in plan.receptacles}
    points = reachable_points(scene)
    while True:  # the agent starts somewhere in the room, at no receptacle
        x, z = points[rng.randrange(len(points))]
        start = f"loc|{x}|{z}|{rng.randrange(4)}|30"
        if start not in used:
            break
    return GeneratedGame(seed, task_type, scene, plan.room, params, goal, items, start)


#: Plays a game and returns the winning path, or None: what decides whether a game is kept.
Expert = Callable[[GeneratedGame], list[str] | None]


def handcoded_expert(engine: Engine) -> Expert:
    """ALFWorld's handcoded expert as ``alfworld-generate`` runs it, in ``engine``'s worker process: the
    game's files are written to a scratch folder and played with ``AlfredExpert`` (at most 200 steps),
    its random choices seeded with the game's seed."""

    def play(game: GeneratedGame) -> list[str] | None:
        with tempfile.TemporaryDirectory(prefix="alfworld-check-") as scratch:
            trial = Path(scratch) / game.directory
            trial.mkdir(parents=True)
            for name, text in game.files().items():
                (trial / name).write_text(text)
            return engine.solve(str(trial / "game.tw-pddl"), seed=game.seed)

    return play


def _draw_seed(seed: int, draw: int) -> int:
    """The seed of a seed's ``draw``-th candidate: the seed itself first, then derived ones."""
    if draw == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}/draw/{draw}".encode()).digest()[:8], "big")


def generate_game(
    seed: int, task_type: str, *, scenes: Sequence[int] | None = None, expert: Expert | None = None
) -> GeneratedGame:
    """Generate one game of ``task_type`` from ``seed`` that ALFWorld's handcoded expert solves.

    Candidates are drawn (:func:`draw_game`) from ``seed`` and then from seeds derived from it, and the
    first one the expert wins is returned, with the expert's path as its walkthrough.

    Args:
        seed: Decides everything, the redraws included.
        task_type: One of :data:`TASK_TYPES`.
        scenes: ALFRED scene numbers to draw the floor plan from (default: all 120).
        expert: What plays each candidate (default: :func:`handcoded_expert` in an engine process
            started for this call).

    Raises:
        ValueError: an unknown task type, no given scene can host it, or the expert lost
            :data:`MAX_DRAWS` candidates in a row.
    """
    if expert is None:
        engine = Engine.start()
        try:
            return generate_game(seed, task_type, scenes=scenes, expert=handcoded_expert(engine))
        finally:
            engine.close()
    for draw in range(MAX_DRAWS):
        game = draw_game(_draw_seed(seed, draw), task_type, scenes=scenes)
        game.walkthrough = expert(game)
        if game.walkthrough is not None:
            return game
    raise ValueError(f"the handcoded expert solved none of {MAX_DRAWS} {task_type} games drawn from seed {seed}")
