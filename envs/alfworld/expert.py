"""A scripted expert that finishes an ALFWorld task from any state, reading the game's facts.

The env's expert replays a game's walkthrough while the episode follows it; once the episode has
left it (another policy moved, or a user steers), this expert takes over. It sees what the engine
knows (where everything is, what is open, held, clean, hot or cool) and does the next thing a person
would: put down a wrong object, fetch a target that is not yet done (opening what is closed), bring it
to the sink, microwave or fridge when the task asks, then to the destination, or under the lamp. It
answers in a few milliseconds where a blind plan search can take a minute in a large kitchen.

Example:
    >>> facts = [("atlocation", "agent1", "loc_bar_1"), ("receptacletype", "r_bar_1", "countertoptype"),
    ...          ("receptacleatlocation", "r_bar_1", "loc_bar_2"), ("objecttype", "o_bar_1", "appletype"),
    ...          ("inreceptacle", "o_bar_1", "r_bar_1")]
    >>> names = {"r_bar_1": "countertop 1", "o_bar_1": "apple 1"}
    >>> params = {"object_target": "Apple", "parent_target": "Fridge", "toggle_target": ""}
    >>> next_command(facts, names, "pick_and_place_simple", params)
    'go to countertop 1'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["next_command"]

#: What a state-changing task does to its object: the verb, the appliance's type, the fact it sets.
_CHANGES = {
    "pick_clean_then_place_in_recep": ("clean", "sinkbasintype", "isclean"),
    "pick_heat_then_place_in_recep": ("heat", "microwavetype", "ishot"),
    "pick_cool_then_place_in_recep": ("cool", "fridgetype", "iscool"),
}


class _State:
    """The facts an expert needs, indexed (PDDL names are lowercase, as the engine has them)."""

    def __init__(self, facts: Iterable[Sequence[str]]) -> None:
        self.at: str | None = None
        self.held: str | None = None
        self.place: dict[str, str] = {}  # object -> receptacle it is in
        self.location: dict[str, str] = {}  # receptacle -> where the agent stands to use it
        self.rtype: dict[str, str] = {}
        self.otype: dict[str, str] = {}
        self.opened: set[str] = set()
        self.openable: set[str] = set()
        self.flags: set[tuple[str, str]] = set()  # (isclean | ishot | iscool | toggleable, object)
        self.can_contain: set[tuple[str, str]] = set()
        for name, *args in facts:
            if name == "atlocation":
                self.at = args[1]
            elif name == "holds":
                self.held = args[1]
            elif name == "inreceptacle":
                self.place[args[0]] = args[1]
            elif name == "receptacleatlocation":
                self.location[args[0]] = args[1]
            elif name == "receptacletype":
                self.rtype[args[0]] = args[1]
            elif name == "objecttype":
                self.otype[args[0]] = args[1]
            elif name == "opened":
                self.opened.add(args[0])
            elif name == "openable":
                self.openable.add(args[0])
            elif name == "cancontain":
                self.can_contain.add((args[0], args[1]))
            elif name in ("isclean", "ishot", "iscool", "toggleable"):
                self.flags.add((name, args[0]))


def next_command(
    facts: Iterable[Sequence[str]], names: Mapping[str, str], task_type: str, params: Mapping[str, Any]
) -> str:
    """The expert's next command.

    Args:
        facts: The game's true facts, each ``(predicate, *arguments)`` with the engine's lowercase names.
        names: What the game calls each entity ("cabinet 3").
        task_type: One of ALFWorld's six task types.
        params: ALFRED's ``pddl_params`` of the task (``object_target``, ``parent_target``, ``toggle_target``).
    """
    state = _State(facts)

    def by_name(things: Iterable[str]) -> list[str]:
        return sorted(things, key=lambda thing: names.get(thing, thing))

    def approach(receptacle: str, inside: bool) -> str | None:
        """Go to the receptacle, and open it when the next move reaches inside; None once there."""
        if state.location.get(receptacle) != state.at:
            return f"go to {names[receptacle]}"
        if inside and receptacle in state.openable and receptacle not in state.opened:
            return f"open {names[receptacle]}"
        return None

    target = f"{params['object_target']}type".lower()
    parent = f"{params['parent_target']}type".lower()
    change = _CHANGES.get(task_type)

    def done(thing: str) -> bool:
        in_place = state.rtype.get(state.place.get(thing, ""), "") == parent
        return in_place and (change is None or (change[2], thing) in state.flags)

    held = state.held
    if held is not None and state.otype.get(held) == target:
        if task_type == "look_at_obj_in_light":
            toggle = f"{params['toggle_target']}type".lower()
            lamps = by_name(o for o, kind in state.otype.items() if kind == toggle and o in state.place)
            if not lamps:
                return "look"
            return approach(state.place[lamps[0]], inside=False) or f"use {names[lamps[0]]}"
        if change is not None and (change[2], held) not in state.flags:
            appliances = by_name(r for r, kind in state.rtype.items() if kind == change[1])
            if not appliances:
                return "look"
            return approach(appliances[0], inside=False) or f"{change[0]} {names[held]} with {names[appliances[0]]}"
        destinations = by_name(r for r, kind in state.rtype.items() if kind == parent)
        if not destinations:
            return "look"
        return approach(destinations[0], inside=True) or f"move {names[held]} to {names[destinations[0]]}"
    if held is not None:  # the wrong thing in hand: put it down where it fits, nearest first
        kind = state.otype.get(held, "")
        fits = [r for r in state.rtype if (state.rtype[r], kind) in state.can_contain]
        fits.sort(key=lambda r: (state.location.get(r) != state.at, names.get(r, r)))
        if not fits:
            return "look"
        return approach(fits[0], inside=True) or f"move {names[held]} to {names[fits[0]]}"
    wanted = by_name(o for o, kind in state.otype.items() if kind == target and o in state.place and not done(o))
    if not wanted:
        return "look"
    where = state.place[wanted[0]]
    return approach(where, inside=True) or f"take {names[wanted[0]]} from {names[where]}"
