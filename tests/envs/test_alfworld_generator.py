"""ALFWorld's generated games without an engine: determinism, variety, splits, the files and the cache."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path

import alfworld.gen.constants as alfred
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfly_envs.alfworld import games as games_module
from agentfly_envs.alfworld.games import GeneratedGames, cache_root, resolve_split
from agentfly_envs.alfworld.generator import (
    APPLIANCE,
    LAMPS,
    TASK_TYPES,
    display_names,
    floor_plans,
    generate_game,
)


def test_the_same_seed_gives_the_same_game():
    for task_type in TASK_TYPES:
        first, second = generate_game(11, task_type), generate_game(11, task_type)
        assert first.pddl_problem() == second.pddl_problem()
        assert (first.goal, first.walkthrough, first.directory) == (second.goal, second.walkthrough, second.directory)
    problems = {generate_game(seed, "pick_and_place_simple").pddl_problem() for seed in range(8)}
    assert len(problems) == 8


def test_the_same_index_gives_the_same_files_in_any_cache(tmp_path):
    one = GeneratedGames("train", cache_dir=tmp_path / "one")[5]
    two = GeneratedGames("train", cache_dir=tmp_path / "two")[5]
    assert one["id"] == two["id"]
    for name in ("game.tw-pddl", "initial_state.pddl", "traj_data.json"):
        assert (Path(one["game_file"]).parent / name).read_bytes() == (
            Path(two["game_file"]).parent / name
        ).read_bytes()
    other_seed = GeneratedGames("train", seed=1, cache_dir=tmp_path / "one")[5]
    assert other_seed["id"] != one["id"]


def test_all_six_task_types_varied_rooms_and_objects(tmp_path):
    games = GeneratedGames("train", size=48, cache_dir=tmp_path)
    tasks = [games[i] for i in range(len(games))]
    assert Counter(task["task_type"] for task in tasks) == {task_type: 8 for task_type in TASK_TYPES}
    scenes = {scene_of(task) for task in tasks}
    assert {floor_plans()[scene].room for scene in scenes} == {"Kitchen", "LivingRoom", "Bedroom", "Bathroom"}
    assert len(scenes) >= 20
    assert len({task["pddl_params"]["object_target"] for task in tasks}) >= 15
    assert len({task["pddl_params"]["parent_target"] for task in tasks}) >= 8
    assert all(task["prompt"] and task["split"] == "train" for task in tasks)


def scene_of(task: dict) -> int:
    """The ALFRED scene number, the last part of ALFWorld's task folder name."""
    return int(task["id"].split("/")[0].rsplit("-", 1)[1])


def test_splits_follow_alfworld(tmp_path):
    unseen = GeneratedGames("valid_unseen", cache_dir=tmp_path)
    seen = GeneratedGames("eval", cache_dir=tmp_path)
    train = GeneratedGames("train", size=30, cache_dir=tmp_path)
    assert (len(train.__class__("train", cache_dir=tmp_path)), len(seen), len(unseen)) == (3553, 140, 134)
    assert seen.split == "valid_seen" and resolve_split("eval_out_of_distribution") == "valid_unseen"
    assert set(unseen.scenes) == set(alfred.TEST_SCENE_NUMBERS)
    assert set(train.scenes) == set(seen.scenes) == set(alfred.TRAIN_SCENE_NUMBERS)
    assert all(scene_of(unseen[i]) in alfred.TEST_SCENE_NUMBERS for i in range(12))
    assert all(scene_of(train[i]) in alfred.TRAIN_SCENE_NUMBERS for i in range(30))
    assert not {train[i]["id"] for i in range(30)} & {seen[i]["id"] for i in range(30)}


def test_game_files_are_in_alfworlds_layout_and_format(tmp_path):
    task = GeneratedGames("valid_seen", cache_dir=tmp_path)[4]
    game_file = Path(task["game_file"])
    trial = game_file.parent
    assert trial.parent.parent.parent.name == "json_2.1.1" and trial.parent.parent.name == "valid_seen"
    task_type, target, movable, _, scene = trial.parent.name.split("-")
    assert (task_type, movable) == (task["task_type"], "None") and trial.name.startswith("trial_")
    game = json.loads(game_file.read_text())
    assert set(game) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
    assert game["solvable"] is True and game["walkthrough"]
    assert "UNKNOWN GOAL" not in game["grammar"] and f"Your task is to: {task['prompt']}." in game["grammar"]
    assert game["pddl_problem"] == (trial / "initial_state.pddl").read_text()
    assert "(:goal" in game["pddl_problem"] and "(:domain alfred)" in game["pddl_problem"]
    traj = json.loads((trial / "traj_data.json").read_text())
    assert traj["task_type"] == task_type and traj["pddl_params"]["object_target"] == target
    assert traj["scene"]["scene_num"] == int(scene)


def test_a_game_is_written_once(tmp_path, monkeypatch):
    writes: list[str] = []
    real_write = games_module.write_atomic
    monkeypatch.setattr(
        games_module, "write_atomic", lambda path, text: (writes.append(path.name), real_write(path, text))
    )
    GeneratedGames("train", cache_dir=tmp_path)[3]
    assert sorted(writes) == ["game.tw-pddl", "initial_state.pddl", "traj_data.json"]
    GeneratedGames("train", cache_dir=tmp_path)[3]  # a new source instance: found on disk
    assert len(writes) == 3


def test_a_crash_mid_write_leaves_no_partial_game(tmp_path, monkeypatch):
    def crash(source: str, target: str) -> None:
        if str(target).endswith("game.tw-pddl"):
            raise OSError("disk full")
        os.rename(source, target)

    monkeypatch.setattr(games_module.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        GeneratedGames("train", cache_dir=tmp_path)[2]
    assert not list(tmp_path.rglob("game.tw-pddl")) and not list(tmp_path.rglob("*.tmp"))
    monkeypatch.undo()
    task = GeneratedGames("train", cache_dir=tmp_path)[2]  # the next try completes the game
    assert json.loads(Path(task["game_file"]).read_text())["solvable"]


def test_concurrent_writers_agree(tmp_path):
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(GeneratedGames("train", cache_dir=tmp_path)[9]["game_file"]))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1 and json.loads(Path(results[0]).read_text())["walkthrough"]
    assert not list(tmp_path.rglob("*.tmp"))


def test_cache_location_and_bad_options(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTFLY_ALFWORLD_CACHE_DIR", str(tmp_path / "games"))
    assert cache_root() == tmp_path / "games" and GeneratedGames().root == tmp_path / "games"
    monkeypatch.delenv("AGENTFLY_ALFWORLD_CACHE_DIR")
    monkeypatch.setenv("AGENTFLY_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path / "alfworld"
    with pytest.raises(ValueError, match="unknown split"):
        GeneratedGames("test")
    with pytest.raises(ValueError, match="unknown task types"):
        GeneratedGames(task_types=["pick_three"])
    with pytest.raises(ValueError, match="unknown task type"):
        generate_game(0, "slice_it")
    with pytest.raises(ValueError, match="can host"):
        generate_game(0, "pick_heat_then_place_in_recep", scenes=[401, 301])  # no microwave outside kitchens
    with pytest.raises(IndexError):
        GeneratedGames("valid_seen", cache_dir=tmp_path)[140]


def test_display_names_number_as_alfworld_does():
    names = display_names(
        ["Cabinet|+00.38|+00.37|-01.24", "Cabinet|-00.57|+00.37|-01.24", "Sink|+00.02|+00.77|-01.71|SinkBasin"]
    )
    # ALFWorld numbers the lowercased PDDL names in sorted order, counting down: "_minus_" sorts before "_plus_".
    assert names == {
        "Cabinet|+00.38|+00.37|-01.24": "cabinet 1",
        "Cabinet|-00.57|+00.37|-01.24": "cabinet 2",
        "Sink|+00.02|+00.77|-01.71|SinkBasin": "sinkbasin 1",
    }


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**63 - 1), task_type=st.sampled_from(TASK_TYPES))
def test_every_generated_game_is_consistent(seed, task_type):
    game = generate_game(seed, task_type)
    plan = game.floor_plan
    params = game.pddl_params
    assert game.room in alfred.GOALS_VALID[task_type]
    assert all(
        item.type in alfred.VAL_RECEPTACLE_OBJECTS[item.receptacle.type] or item.type in LAMPS for item in game.items
    )
    assert len({item.id for item in game.items}) == len(game.items)
    targets = [item for item in game.items if item.type == params["object_target"]]
    assert len(targets) >= (2 if task_type == "pick_two_obj_and_place" else 1)
    assert all(item.receptacle.type != params["parent_target"] for item in targets)
    if task_type in APPLIANCE:
        assert APPLIANCE[task_type] in plan.receptacle_types and params["parent_target"] != APPLIANCE[task_type]
    if task_type == "look_at_obj_in_light":
        assert params["toggle_target"] in LAMPS and any(item.type == params["toggle_target"] for item in game.items)
    else:
        assert params["object_target"] in alfred.VAL_RECEPTACLE_OBJECTS[params["parent_target"]]
    assert game.start not in {r.location for r in plan.receptacles}
    names = set(display_names([r.id for r in plan.receptacles] + [i.id for i in game.items]).values())
    for command in game.walkthrough:
        words = command.split()
        mentioned = {" ".join(words[i : i + 2]) for i in range(len(words) - 1) if words[i + 1].isdigit()}
        assert mentioned and mentioned <= names, command
