"""AgentFly/ALFWorld-v0 on real TextWorld engines: experts win, admissible commands, bad input, pool, real files."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import signal
from pathlib import Path

import alfworld.gen.constants as alfred
import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfly_env  # noqa: F401
from agentfly_env import run_sync
from agentfly_env.resources.pool import ResourceManager
from agentfly_env.tools.listed_actions import HEADING, PROMPT, action_list
from agentfly_envs.alfworld import (
    ENGINE_POOL,
    ALFWorldEnv,
    Engine,
    EngineError,
    GeneratedGames,
)
from agentfly_envs.alfworld.engine import engine_spec
from agentfly_envs.alfworld.generator import (
    TASK_TYPES,
    alfworld_logic,
    display_names,
    draw_game,
    floor_plans,
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """The session's generated games, shared with test_alfworld_generator.py (the expert checks each once)."""
    path = tmp_path_factory.getbasetemp() / "alfworld-games"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="module")
def manager():
    resources = ResourceManager({ENGINE_POOL: {"size": 2}})
    yield resources
    run_sync(resources.close())


@pytest.fixture
def make_env(cache_dir, manager):
    envs: list[ALFWorldEnv] = []

    def make(**options) -> ALFWorldEnv:
        options.setdefault("resources", manager)
        env = ALFWorldEnv(cache_dir=cache_dir, **options)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


#: The game each test plays of a task type: engines keep recent games' translations, so reloads are cheap.
GAME = {"task_index": 3}


def act(command: str) -> str:
    """A Hermes ``act`` call; "<" is escaped so that no command can close the tool-call block."""
    call = json.dumps({"name": "act", "arguments": {"command": command}}).replace("<", "\\u003c")
    return f"<tool_call>{call}</tool_call>"


def play_expert(env: ALFWorldEnv, max_steps: int = 200) -> tuple[float, dict]:
    for _ in range(max_steps):
        _, reward, terminated, truncated, info = env.step(env.expert_action())
        if terminated or truncated:
            return reward, info
    raise AssertionError("the expert did not finish")


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_the_scripted_expert_wins_every_task_type(make_env, task_type):
    env = make_env(task_types=[task_type], max_turns=200)  # the handcoded expert's path may pass 50 steps
    observation, info = env.reset(options=GAME)
    assert observation.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert observation.endswith(f"Your task is to: {info['task']['prompt']}.")
    assert info["task"]["task_type"] == task_type and info["won"] is False
    reward, final = play_expert(env)
    assert (reward, final["step"].success, final["won"], final["step"].reward_components) == (
        1.0,
        True,
        True,
        {"won": 1.0},
    )
    assert len(env.trajectory.steps) == len(json.loads(Path(info["task"]["game_file"]).read_text())["walkthrough"])


def smallest_scene(task_type: str) -> int:
    """The floor plan with the fewest receptacles that can host ``task_type`` (quick to plan in)."""
    for plan in sorted(floor_plans().values(), key=lambda plan: (len(plan.receptacles), plan.scene)):
        try:
            draw_game(0, task_type, scenes=[plan.scene])
        except ValueError:
            continue
        return plan.scene
    raise AssertionError(f"no floor plan hosts {task_type}")


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_the_expert_wins_from_states_off_the_walkthrough(make_env, task_type):
    env = make_env(task_types=[task_type])
    rng = random.Random(task_type)
    _, info = env.reset(options=GAME)
    admissible = info["admissible_commands"]
    for _ in range(rng.randint(4, 10)):  # a random detour: the expert then reads the game's facts
        _, _, terminated, _, step_info = env.step(act(rng.choice(admissible)))
        admissible = step_info["admissible_commands"]
        assert not terminated
    played = [step.tool_calls[0].arguments["command"] for step in env.trajectory.steps]
    assert env.engine.walkthrough[: len(played)] != played  # off the walkthrough: the facts decide now
    reward, final = play_expert(env)
    assert reward == 1.0 and final["won"]


def expected_commands(game, state) -> set[str]:
    """What the ALFRED domain admits in ``state``, worked out from the game's own facts."""
    plan = game.floor_plan
    names = display_names([r.id for r in plan.receptacles] + [i.id for i in game.items])
    kinds = {i.id: i.type for i in game.items}
    here = [r for r in plan.receptacles if r.location == state["at"]]
    # Going somewhere means leaving where one stands: no "go to" for the receptacles here.
    commands = {"look", "inventory", "help"} | {f"go to {names[r.id]}" for r in plan.receptacles if r not in here}
    for r in here:
        commands.add(f"examine {names[r.id]}")
        openable = r.openable
        if openable:
            commands.add(f"{'close' if r.id in state['opened'] else 'open'} {names[r.id]}")
        reachable = not openable or r.id in state["opened"]
        for item, where in state["placement"].items():
            if where != r.id:
                continue
            if kinds[item] in alfred.VAL_ACTION_OBJECTS["Toggleable"]:
                commands.add(f"use {names[item]}")
            # As ALFWorld's domain is written, the engine grounds "examine <object>" for objects in hand only.
            if reachable and state["held"] is None and kinds[item] not in alfred.VAL_ACTION_OBJECTS["Toggleable"]:
                commands.add(f"take {names[item]} from {names[r.id]}")
    held = state["held"]
    if held is not None:
        commands.add(f"examine {names[held]}")
        for r in here:
            if (not r.openable or r.id in state["opened"]) and kinds[held] in alfred.VAL_RECEPTACLE_OBJECTS[r.type]:
                commands.add(f"move {names[held]} to {names[r.id]}")
            for verb, appliance, able in (
                ("clean", "SinkBasin", "Cleanable"),
                ("heat", "Microwave", "Heatable"),
                ("cool", "Fridge", "Coolable"),
            ):
                if r.type == appliance and kinds[held] in alfred.VAL_ACTION_OBJECTS[able]:
                    commands.add(f"{verb} {names[held]} with {names[r.id]}")
        if kinds[held] in ("Knife", "ButterKnife"):
            here_ids = {r.id for r in here}
            commands |= {
                f"slice {names[i]} with {names[held]}"
                for i, where in state["placement"].items()
                if where in here_ids and kinds[i] in alfred.VAL_ACTION_OBJECTS["Sliceable"]
            }
    return commands


def advance(game, state, command: str) -> None:
    """Apply one walkthrough command to the oracle's state."""
    names = display_names([r.id for r in game.floor_plan.receptacles] + [i.id for i in game.items])
    by_name = {name: alfred_id for alfred_id, name in names.items()}
    receptacles = {r.id: r for r in game.floor_plan.receptacles}
    words = command.split()
    if command.startswith("go to "):
        state["at"] = receptacles[by_name[" ".join(words[2:4])]].location
    elif words[0] in ("open", "close"):
        (state["opened"].add if words[0] == "open" else state["opened"].discard)(by_name[" ".join(words[1:3])])
    elif words[0] == "take":
        state["held"] = by_name[" ".join(words[1:3])]
        del state["placement"][state["held"]]
    elif words[0] == "move":
        state["placement"][state["held"]] = by_name[" ".join(words[4:6])]
        state["held"] = None


@pytest.mark.parametrize(
    "task_type", ["pick_clean_then_place_in_recep", "look_at_obj_in_light", "pick_two_obj_and_place"]
)
def test_admissible_commands_are_right_on_sample_states(make_env, task_type):
    env = make_env(task_types=[task_type], max_turns=200)
    _, info = env.reset(options=GAME)
    game = env.games.game(GAME["task_index"])
    state = {"at": game.start, "held": None, "opened": set(), "placement": {i.id: i.receptacle.id for i in game.items}}
    admissible = info["admissible_commands"]
    for command in game.walkthrough:
        assert set(admissible) == expected_commands(game, state), command
        assert admissible == sorted(admissible)
        observation, *_, step_info = env.step(act(command))
        assert observation != "Nothing happens." and "invalid_command" not in step_info["step"].errors
        advance(game, state, command)
        admissible = step_info["admissible_commands"]
    assert step_info["won"]


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_the_planner_wins_in_small_floor_plans(make_env, task_type):
    env = make_env(task_types=[task_type], scenes=[smallest_scene(task_type)])
    _, info = env.reset(seed=5)
    detour = next(c for c in info["admissible_commands"] if c.startswith("go to ") and c != env.engine.walkthrough[0])
    env.step(act(detour))
    plan = env.engine.plan()  # Fast Downward, from the state the detour left
    assert plan
    for command in plan:
        observation, reward, terminated, *_ = env.step(act(command))
        assert observation != "Nothing happens."
    assert (reward, terminated) == (1.0, True)


def test_commands_the_game_does_not_know_get_nothing_happens(make_env):
    env = make_env(task_types=["pick_and_place_simple"])
    _, info = env.reset(options=GAME)
    before = info["admissible_commands"]
    receptacle = before[0].removeprefix("go to ")
    for command in (f"take nothing 9 from {receptacle}", "GO TO " + receptacle, "fly", "", "go to\nthe moon"):
        observation, reward, terminated, truncated, step_info = env.step(act(command))
        assert (observation, reward, terminated, truncated) == ("Nothing happens.", 0.0, False, False)
        assert step_info["step"].errors == {"invalid_command": 1} and step_info["admissible_commands"] == before
    observation, *_, step_info = env.step("no tool call at all")
    assert "No tool call" in observation and step_info["step"].errors == {"no_action": 1}
    observation, *_, step_info = env.step('<tool_call>{"name": "act", "arguments": {"cmd": 1}}</tool_call>')
    assert "invalid arguments" in observation and step_info["step"].errors == {"invalid_arguments": 1}
    listed = env.step('<tool_call>{"name": "admissible_commands", "arguments": {}}</tool_call>')[0]
    assert listed.splitlines() == before

    @settings(max_examples=40, deadline=None)
    @given(st.text(max_size=300))
    def any_text_is_answered(text):
        observation, _, terminated, truncated, step_info = env.step(act(text))
        assert not (terminated or truncated)
        if text.strip() not in before:
            assert observation == "Nothing happens." and step_info["step"].errors == {"invalid_command": 1}

    env.reset(options=GAME)
    env.max_turns = 10_000
    any_text_is_answered()


def test_text_mode_plays_plain_commands_within_alfworlds_step_budget(make_env):
    """The turn is one command, as in ALFWorld's own step: the walkthrough typed out wins, a command the
    game does not know gets its own answer, and the budget is ALFWorld's 50 steps, one command each."""
    env = make_env(task_types=["pick_and_place_simple"], action_mode="text")
    assert env.max_turns == 50 and list(env.tools) == ["act"] and "Reply with exactly one command" in env.system_prompt
    env.reset(options=GAME)
    walkthrough = env.engine.walkthrough
    assert env.expert_action() == walkthrough[0]
    for number, command in enumerate(walkthrough, 1):
        _, reward, terminated, truncated, info = env.step(f"{command}\n")
        assert terminated == (number == len(walkthrough)) and not truncated
    assert (reward, info["won"], info["step"].success) == (1.0, True, True)

    env.reset(options=GAME)
    observation, reward, terminated, truncated, info = env.step("fly to the moon")
    assert (observation, reward, terminated, truncated) == ("Nothing happens.", 0.0, False, False)
    assert info["step"].errors == {"invalid_command": 1}
    two_commands = f"{walkthrough[0]}\n{walkthrough[1]}"  # one turn, one command: this one is unknown
    assert env.step(two_commands)[0] == "Nothing happens."
    assert env.step("<answer>done</answer>")[0] == "Nothing happens."  # no final answer in the original
    for _ in range(4, 50):  # TextWorld's Limit: done once 50 steps are taken
        *_, terminated, truncated, info = env.step("look")
        assert not (terminated or truncated)
    *_, terminated, truncated, info = env.step("look")
    assert truncated and not terminated and info["step"].truncation_reason == "max_turns"
    with pytest.raises(ValueError, match="action_mode"):
        make_env(action_mode="commands")


def test_listed_actions_end_each_observation_and_a_number_plays_the_command_it_lists(make_env):
    """``list_actions``: the walkthrough played by number wins; a number past the list, or a number without the
    option, is a command the game does not know."""
    env = make_env(task_types=["pick_and_place_simple"], action_mode="text", list_actions=True)
    assert PROMPT in env.system_prompt
    observation, info = env.reset(options=GAME)
    walkthrough, listed = env.engine.walkthrough, info["admissible_commands"]
    assert observation.endswith(action_list(listed)) and observation.startswith("-= Welcome to TextWorld, ALFRED! =-")
    for number, command in enumerate(walkthrough, 1):
        reply = f"{listed.index(command) + 1}"
        observation, reward, terminated, truncated, info = env.step(reply)
        assert info["command"] == command and info["step"].action == reply and not info["step"].errors
        assert terminated == (number == len(walkthrough)) and not truncated
        listed = info["admissible_commands"]
        assert observation.endswith(action_list(listed)) != terminated  # no list once the task is done
    assert (reward, info["won"]) == (1.0, True)

    observation, info = env.reset(options=GAME)
    observation, *_, info = env.step(str(len(info["admissible_commands"]) + 1))
    assert observation.startswith("Nothing happens.") and info["step"].errors == {"invalid_command": 1}
    assert env.step(walkthrough[0])[-1]["command"] == walkthrough[0]  # a reply in words plays as written

    plain = make_env(task_types=["pick_and_place_simple"], action_mode="text")
    observation, _ = plain.reset(options=GAME)
    assert HEADING not in observation and plain.step("1")[0] == "Nothing happens."
    with pytest.raises(ValueError, match="list_actions applies to action_mode='text'"):
        make_env(list_actions=True)


def test_seeded_resets_give_the_same_game_through_registration(cache_dir):
    episodes = []
    for _ in range(2):
        env = gym.make("AgentFly/ALFWorld-v0", cache_dir=cache_dir)
        observation, info = env.reset(seed=42)
        episodes.append((observation, info["task"]["id"], info["admissible_commands"]))
        env.close()
    assert episodes[0] == episodes[1]
    env = gym.make("AgentFly/ALFWorld-v0", cache_dir=cache_dir)
    assert env.reset(seed=43)[1]["task"]["id"] != episodes[0][1]
    env.close()


def test_a_killed_engine_truncates_the_episode_and_is_replaced(make_env, manager):
    env = make_env(task_types=["pick_and_place_simple"])
    env.reset(options=GAME)
    killed = env.engine.pid
    failures = manager.stats()[ENGINE_POOL].failures
    os.kill(killed, signal.SIGKILL)
    observation, reward, terminated, truncated, info = env.step(env.expert_action())
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["step"].truncation_reason.startswith("engine_failed") and "engine" in observation
    assert manager.stats()[ENGINE_POOL].failures == failures + 1 and manager.stats()[ENGINE_POOL].in_use == 0
    env.reset(options=GAME)
    assert env.engine.pid != killed and play_expert(env)[0] == 1.0


def test_an_engine_that_misses_its_deadline_is_stopped(make_env):
    env = make_env(task_types=["pick_heat_then_place_in_recep"], engine_timeout_s=1e-4)
    env.reset(options=GAME)
    engine = env.engine
    _, _, _, truncated, info = env.step(act("look"))
    assert truncated and "did not answer" in info["step"].truncation_reason and not engine.alive
    with pytest.raises(EngineError, match="has exited"):
        engine.step("look")


async def test_concurrent_episodes_share_a_pool_of_two_engines(cache_dir, manager):
    envs = [
        ALFWorldEnv(cache_dir=cache_dir, resources=manager, task_types=["look_at_obj_in_light"], max_turns=200)
        for _ in range(4)
    ]
    before = manager.stats()[ENGINE_POOL]

    async def episode(env: ALFWorldEnv) -> float:
        await env.areset(options=GAME)
        total = 0.0
        for _ in range(200):  # the game's walkthrough is the handcoded expert's path, up to 200 steps
            _, reward, terminated, truncated, _ = await env.astep(env.expert_action())
            total += reward
            if terminated or truncated:
                break
        return total

    rewards = await asyncio.wait_for(asyncio.gather(*(episode(env) for env in envs)), 300)
    stats = manager.stats()[ENGINE_POOL]
    assert rewards == [1.0] * 4 and stats.alive <= 2 and stats.leases - before.leases == 4 and stats.in_use == 0
    for env in envs:
        await env.aclose()


# A game written by hand in the form of ALFWorld's release (what `alfworld-download` unpacks).
HAND_MADE_PROBLEM = """
(define (problem plan_trial_T20190907_000000_000001)
(:domain alfred)
(:objects
agent1 - agent
MugType - otype
        AppleType - otype
        CabinetType - rtype
        CounterTopType - rtype
        CoffeeMachineType - rtype
        Mug_bar__plus_00_dot_52_bar__plus_00_dot_40_bar__minus_01_dot_20 - object
        Apple_bar__plus_01_dot_10_bar__plus_00_dot_97_bar__minus_00_dot_60 - object
        Cabinet_bar__plus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24 - receptacle
        Cabinet_bar__minus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24 - receptacle
        CounterTop_bar__plus_01_dot_00_bar__plus_00_dot_95_bar__minus_00_dot_61 - receptacle
        CoffeeMachine_bar__minus_01_dot_98_bar__plus_00_dot_90_bar__minus_00_dot_19 - receptacle
        loc_bar_0_bar__minus_1_bar_2_bar_30 - location
        loc_bar__minus_2_bar__minus_1_bar_2_bar_30 - location
        loc_bar_4_bar__minus_2_bar_1_bar_45 - location
        loc_bar__minus_7_bar__minus_1_bar_3_bar_0 - location
        loc_bar_1_bar_3_bar_0_bar_30 - location
        )
(:init
        (atLocation agent1 loc_bar_1_bar_3_bar_0_bar_30)
        (receptacleType Cabinet_bar__plus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24 CabinetType)
        (receptacleType Cabinet_bar__minus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24 CabinetType)
        (receptacleType CounterTop_bar__plus_01_dot_00_bar__plus_00_dot_95_bar__minus_00_dot_61 CounterTopType)
        (receptacleType CoffeeMachine_bar__minus_01_dot_98_bar__plus_00_dot_90_bar__minus_00_dot_19 CoffeeMachineType)
        (openable Cabinet_bar__plus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24)
        (openable Cabinet_bar__minus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24)
        (receptacleAtLocation Cabinet_bar__plus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24 loc_bar_0_bar__minus_1_bar_2_bar_30)
        (receptacleAtLocation Cabinet_bar__minus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24 loc_bar__minus_2_bar__minus_1_bar_2_bar_30)
        (receptacleAtLocation CounterTop_bar__plus_01_dot_00_bar__plus_00_dot_95_bar__minus_00_dot_61 loc_bar_4_bar__minus_2_bar_1_bar_45)
        (receptacleAtLocation CoffeeMachine_bar__minus_01_dot_98_bar__plus_00_dot_90_bar__minus_00_dot_19 loc_bar__minus_7_bar__minus_1_bar_3_bar_0)
        (objectType Mug_bar__plus_00_dot_52_bar__plus_00_dot_40_bar__minus_01_dot_20 MugType)
        (objectType Apple_bar__plus_01_dot_10_bar__plus_00_dot_97_bar__minus_00_dot_60 AppleType)
        (pickupable Mug_bar__plus_00_dot_52_bar__plus_00_dot_40_bar__minus_01_dot_20)
        (pickupable Apple_bar__plus_01_dot_10_bar__plus_00_dot_97_bar__minus_00_dot_60)
        (isReceptacleObject Mug_bar__plus_00_dot_52_bar__plus_00_dot_40_bar__minus_01_dot_20)
        (inReceptacle Mug_bar__plus_00_dot_52_bar__plus_00_dot_40_bar__minus_01_dot_20 Cabinet_bar__plus_00_dot_50_bar__plus_00_dot_37_bar__minus_01_dot_24)
        (inReceptacle Apple_bar__plus_01_dot_10_bar__plus_00_dot_97_bar__minus_00_dot_60 CounterTop_bar__plus_01_dot_00_bar__plus_00_dot_95_bar__minus_00_dot_61)
        (objectAtLocation Mug_bar__plus_00_dot_52_bar__plus_00_dot_40_bar__minus_01_dot_20 loc_bar_0_bar__minus_1_bar_2_bar_30)
        (objectAtLocation Apple_bar__plus_01_dot_10_bar__plus_00_dot_97_bar__minus_00_dot_60 loc_bar_4_bar__minus_2_bar_1_bar_45)
        (canContain CabinetType MugType)
        (canContain CounterTopType MugType)
        (canContain CounterTopType AppleType)
        (canContain CoffeeMachineType MugType)
        )
        (:goal
            (and
                (exists (?r - receptacle)
                    (exists (?o - object)
                        (and
                            (inReceptacle ?o ?r)
                            (objectType ?o MugType)
                            (receptacleType ?r CoffeeMachineType)
                        )
                    )
                )
            )
        )
    )
"""
HAND_MADE_WALKTHROUGH = [
    "go to cabinet 1",
    "open cabinet 1",
    "take mug 1 from cabinet 1",
    "go to coffeemachine 1",
    "move mug 1 to coffeemachine 1",
]


def write_trial(root: Path, directory: str, task_type: str, *, solvable: bool = True) -> Path:
    """One trial folder as ALFWorld's release has it; game.tw-pddl as `alfworld-generate` writes it."""
    trial = root / "json_2.1.1" / directory
    trial.mkdir(parents=True)
    params = {
        "object_target": "Mug",
        "parent_target": "CoffeeMachine",
        "toggle_target": "",
        "mrecep_target": "",
        "object_sliced": False,
    }
    (trial / "traj_data.json").write_text(
        json.dumps({"task_id": trial.name, "task_type": task_type, "pddl_params": params})
    )
    (trial / "initial_state.pddl").write_text(HAND_MADE_PROBLEM)
    domain, grammar = alfworld_logic()
    game = {
        "pddl_domain": domain,
        "grammar": grammar.replace("UNKNOWN GOAL", "put a mug in coffeemachine"),
        "pddl_problem": HAND_MADE_PROBLEM,
        "solvable": solvable,
        "walkthrough": HAND_MADE_WALKTHROUGH,
    }
    (trial / "game.tw-pddl").write_text(json.dumps(game))
    return trial


@pytest.fixture(scope="module")
def alfworld_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("alfworld-data")
    write_trial(
        root,
        "valid_seen/pick_and_place_simple-Mug-None-CoffeeMachine-10/trial_T20190907_000000_000001",
        "pick_and_place_simple",
    )
    write_trial(
        root,
        "valid_seen/pick_and_place_simple-Mug-None-CoffeeMachine-10/trial_T20190907_000000_000002",
        "pick_and_place_simple",
        solvable=False,
    )
    write_trial(
        root,
        "valid_seen/pick_and_place_with_movable_recep-Mug-Cup-CoffeeMachine-10/trial_T20190907_000000_000003",
        "pick_and_place_with_movable_recep",
    )
    write_trial(
        root,
        "valid_seen/pick_cool_then_place_in_recep-Mug-None-CoffeeMachine-10/trial_T20190907_000000_000004",
        "pick_cool_then_place_in_recep",
    )
    return root


def test_alfworlds_own_game_files_are_found_and_played(make_env, alfworld_data, monkeypatch):
    env = make_env(source="alfworld", data_path=alfworld_data, split="eval", task_types=["pick_and_place_simple"])
    assert len(env.games) == 1  # not the unsolvable one, the movable-receptacle one, nor other task types
    observation, info = env.reset(seed=0)
    assert info["task"]["prompt"] == "put a mug in coffeemachine" and info["task"]["split"] == "valid_seen"
    assert "you see a cabinet 2, a cabinet 1, a coffeemachine 1, and a countertop 1." in observation
    assert observation.endswith("Your task is to: put a mug in coffeemachine.")
    assert env.step(act("go to cabinet 1"))[0] == "You arrive at cabinet 1. The cabinet 1 is closed."
    assert play_expert(env)[0] == 1.0
    monkeypatch.setenv("ALFWORLD_DATA", str(alfworld_data))
    assert len(make_env(source="alfworld", split="valid_seen").games) == 2  # both solvable task types
    with pytest.raises(FileNotFoundError, match="no ALFWorld split folder"):
        make_env(source="alfworld", split="train")
    with pytest.raises(ValueError, match="data_path is for source='alfworld'"):
        make_env(data_path=alfworld_data)


def test_the_speedups_change_nothing_the_stock_engine_says(alfworld_data, cache_dir):
    """The worker caches TextWorld's work; stock TextWorld (unpatched, in this process) must agree."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    from textworld.envs import PddlEnv

    small = GeneratedGames(
        "train",
        task_types=["pick_clean_then_place_in_recep"],
        scenes=[smallest_scene("pick_clean_then_place_in_recep")],
        cache_dir=cache_dir,
    )
    game_files = [
        str(next(alfworld_data.rglob("trial_T20190907_000000_000001")) / "game.tw-pddl"),
        small[0]["game_file"],
    ]
    engine = Engine.start()
    try:
        for game_file in game_files:
            stock = AlfredDemangler(PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True)))
            stock.load(game_file)
            expected = stock.reset()
            ours = engine.load(game_file)
            commands = [
                "inventory",
                "look",
                *engine.walkthrough[:3],
                "help",
                "examine " + engine.walkthrough[0][6:],
                *engine.walkthrough[3:],
            ]
            for command in [*commands, None]:
                assert (ours.feedback, ours.won, ours.admissible_commands) == (
                    expected.feedback,
                    expected["won"],
                    expected["admissible_commands"],
                )
                if command is not None:
                    expected, _, _ = stock.step(command)
                    ours = engine.step(command)
            assert ours.won
    finally:
        engine.close()


def test_an_engine_that_cannot_start_says_why(tmp_path, monkeypatch):
    broken = tmp_path / "textworld"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('textworld is broken here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the worker imports this textworld first
    with pytest.raises(EngineError, match="could not start: ImportError: textworld is broken here"):
        Engine.start(timeout_s=60)


def test_an_engine_that_dies_while_it_starts_is_replaced_at_reset(make_env):
    spec = engine_spec()
    starts = []

    def start() -> Engine:  # the first engine dies while it starts, as from the OOM killer
        starts.append(len(starts))
        if len(starts) == 1:
            raise EngineError("the engine process died (exit code -9)")
        return spec.create()

    resources = ResourceManager()
    resources.register(ENGINE_POOL, dataclasses.replace(spec, create=start))
    env = make_env(resources=resources)
    try:
        observation, _ = env.reset(options=GAME)
        assert observation.startswith("-= Welcome to TextWorld, ALFRED! =-") and starts == [0, 1]
        assert resources.stats()[ENGINE_POOL].failures == 1
    finally:
        env.close()
        run_sync(resources.close())
