"""ALFWorld's generated games: the floor plans' own receptacles, ALFRED's location names, the handcoded
expert's check and walkthrough, determinism, splits, the files and the cache."""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from pathlib import Path

import alfworld.gen.constants as alfred
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfly_bench.alfworld_parity import floor_plan_parity
from agentfly_envs.alfworld import games as games_module
from agentfly_envs.alfworld.games import GeneratedGames, cache_root, checking_engine, resolve_split
from agentfly_envs.alfworld.generator import (
    APPLIANCE,
    LAMPS,
    MAX_DRAWS,
    STATIC_RECEPTACLES,
    TASK_TYPES,
    _draw_seed,
    display_names,
    draw_game,
    floor_plans,
    generate_game,
    layout_data,
    location_of,
    reachable_points,
    receptacle_type,
)

#: ``loc|x|z|rotation|horizon``: grid point, heading 0-3, camera tilt in ALFRED's 15 degree steps.
LOCATION = re.compile(r"loc\|-?\d+\|-?\d+\|[0-3]\|(-30|-15|0|15|30|45|60)")

#: Receptacle locations in ALFRED's own PDDL problems (``problem_0.pddl`` of two published trajectories,
#: FloorPlan27 and FloorPlan1), for the receptacles whose ids ``-openable.json`` has too: scene, id, and
#: x, z, rotation, horizon. Left out, as the one the package's data cannot reproduce: FloorPlan27's sink
#: basin, at horizon 60 there; its centre lies below the sink's coordinates that its id carries (45 here).
ALFRED_LOCATIONS = """
27 Cabinet|+00.13|+00.39|+01.77 4 7 3 60
27 Cabinet|+00.35|+00.39|+02.36 4 6 0 60
27 Cabinet|+01.51|+00.39|+02.36 3 6 0 60
27 Cabinet|+01.76|+00.39|+00.87 3 4 1 45
27 Cabinet|+01.76|+00.39|+02.35 3 6 1 45
27 Cabinet|+02.04|+01.81|+00.28 5 1 1 -15
27 Cabinet|+02.04|+01.81|+00.87 5 2 1 -15
27 Cabinet|+02.04|+02.11|+00.89 3 6 1 -15
27 Cabinet|+02.04|+02.11|+01.77 3 5 1 -15
27 CounterTop|+01.07|+00.97|+02.67 5 7 0 30
27 CounterTop|+02.06|+00.97|+00.58 5 2 1 45
27 Drawer|+01.91|+00.77|+02.06 4 8 1 45
27 Drawer|+02.17|+00.77|+00.58 4 3 1 30
27 Drawer|-00.02|+00.77|+02.06 3 8 3 45
27 Fridge|+02.10|+00.00|-00.28 5 -1 1 60
27 Microwave|-00.31|+00.93|+02.08 2 8 3 45
1 Cabinet|+00.68|+00.50|-02.20 0 -5 2 45
1 Cabinet|+00.68|+02.02|-02.46 2 -7 2 -30
1 Cabinet|+00.72|+02.02|-02.46 4 -7 2 -30
1 Cabinet|-00.73|+02.02|-02.46 -4 -7 2 -30
1 Cabinet|-01.18|+00.50|-02.20 -5 -5 2 45
1 Cabinet|-01.55|+00.50|+00.38 -4 2 3 60
1 Cabinet|-01.55|+00.50|-01.97 -3 -6 3 60
1 Cabinet|-01.69|+02.02|-02.46 -5 -7 2 -30
1 CounterTop|+00.69|+00.95|-02.48 3 -7 2 45
1 CounterTop|-00.08|+01.15|00.00 3 0 3 30
1 CounterTop|-01.87|+00.95|-01.21 -5 -7 3 45
1 Drawer|+00.95|+00.22|-02.20 6 -4 2 45
1 Drawer|+00.95|+00.39|-02.20 6 -4 2 45
1 Drawer|+00.95|+00.56|-02.20 2 -5 2 45
1 Drawer|+00.95|+00.71|-02.20 7 -7 3 45
1 Drawer|+00.95|+00.83|-02.20 1 -7 1 45
1 Drawer|-01.56|+00.33|-00.20 -4 3 2 60
1 Drawer|-01.56|+00.84|+00.20 -4 4 2 45
1 Drawer|-01.56|+00.84|-00.20 -4 -4 0 45
1 Microwave|-00.24|+01.69|-02.53 -1 -7 2 0
"""


def test_receptacle_locations_are_named_as_alfred_names_them():
    for line in ALFRED_LOCATIONS.strip().splitlines():
        scene, alfred_id, *pose = line.split()
        located = {r.id: r.location for r in floor_plans()[int(scene)].receptacles}
        assert located[alfred_id] == "loc|" + "|".join(pose), alfred_id


def test_receptacles_are_the_floor_plans_own():
    figures = floor_plan_parity()  # every receptacle the package places, with its id and opening spot
    assert figures["floor_plans_matching_package_data"] == figures["floor_plans"] == 120
    for scene, plan in floor_plans().items():
        listed = {
            alfred_id
            for alfred_id in layout_data(scene, "openable")
            if receptacle_type(alfred_id) in STATIC_RECEPTACLES
        }
        made_up = [r for r in plan.receptacles if r.id not in listed]
        scene_types = {kind for kind in layout_data(scene, "objects") if kind in STATIC_RECEPTACLES}
        assert plan.unplaced == scene_types - {r.type for r in plan.receptacles if r.id in listed}
        assert plan.unplaced == {r.type for r in made_up}
        # Openable as in ALFRED's problems: of an openable type and with a known opening spot.
        assert {r.id for r in plan.receptacles if r.openable} == {
            alfred_id for alfred_id in listed if receptacle_type(alfred_id) in alfred.OPENABLE_CLASS_SET
        }
        walkable = {(int(x), int(z)) for x, z in reachable_points(scene)}
        for r in plan.receptacles:
            assert LOCATION.fullmatch(r.location), r.location
            assert tuple(int(v) for v in r.location.split("|")[1:3]) in walkable
    kitchen = floor_plans()[14]  # 9 placed by the package's data; burners, coffee machine, toaster, bin made up
    assert Counter(r.type for r in kitchen.receptacles) == {
        "Cabinet": 4,
        "CounterTop": 2,
        "Fridge": 1,
        "Microwave": 1,
        "SinkBasin": 1,
        "StoveBurner": 4,
        "CoffeeMachine": 1,
        "Toaster": 1,
        "GarbageCan": 1,
    }
    assert kitchen.unplaced == {"StoveBurner", "CoffeeMachine", "Toaster", "GarbageCan"}


def test_location_of_follows_alfreds_rule():
    assert location_of(27, "Cabinet", (0.13, 0.39, 1.77), known_point=(1.0, 1.75)) == "loc|4|7|3|60"
    # ALFRED's forced tilts: floor lamps are looked at level, whatever their height.
    assert location_of(27, "FloorLamp", (0.13, 0.0, 1.77), known_point=(1.0, 1.75)).endswith("|0")
    # No known spot: the nearest reachable point, facing the thing.
    spot = location_of(1, "Apple", (0.0, 0.9, 0.0))
    x, z = (int(v) for v in spot.split("|")[1:3])
    assert (x, z) in {(int(a), int(b)) for a, b in reachable_points(1)} and LOCATION.fullmatch(spot)


@pytest.fixture(scope="module")
def one_game_per_type(tmp_path_factory):
    """Game 3 of each task type: the games test_alfworld.py plays (the same folder, so made once a session)."""
    cache_dir = tmp_path_factory.getbasetemp() / "alfworld-games"
    cache_dir.mkdir(exist_ok=True)
    return [GeneratedGames("train", task_types=[task_type], cache_dir=cache_dir)[3] for task_type in TASK_TYPES]


def test_every_task_type_is_solved_by_the_handcoded_expert_within_200_steps(one_game_per_type):
    # That each walkthrough wins: test_alfworld.py's test_the_scripted_expert_wins_every_task_type plays it.
    assert [task["task_type"] for task in one_game_per_type] == list(TASK_TYPES)
    for task in one_game_per_type:
        game = json.loads(Path(task["game_file"]).read_text())
        assert game["solvable"] is True and 0 < len(game["walkthrough"]) <= 200


def test_the_walkthrough_is_the_experts_path(one_game_per_type):
    task = one_game_per_type[0]
    walkthrough = json.loads(Path(task["game_file"]).read_text())["walkthrough"]
    seed = json.loads((Path(task["game_file"]).parent / "traj_data.json").read_text())["scene"]["random_seed"]
    assert checking_engine().solve(task["game_file"], seed=seed) == walkthrough


def test_a_game_the_expert_cannot_win_is_not_kept(tmp_path):
    by_size = sorted(floor_plans(), key=lambda scene: len(floor_plans()[scene].receptacles))
    game = draw_game(0, "pick_and_place_simple", scenes=by_size[:10])  # a small room: quick steps
    assert not any(item.type == "Knife" for item in game.items)
    trial = tmp_path / game.directory
    trial.mkdir(parents=True)
    for name, text in game.files().items():
        (trial / name).write_text(text)
    traj = json.loads((trial / "traj_data.json").read_text())
    traj["pddl_params"]["object_target"] = "Knife"  # the expert hunts a knife the room lacks
    (trial / "traj_data.json").write_text(json.dumps(traj))
    assert checking_engine().solve(str(trial / "game.tw-pddl")) is None  # out of its 200 steps


def test_a_game_the_expert_loses_is_drawn_again_from_the_seed():
    played: list[int] = []

    def expert(game):
        played.append(game.seed)
        return ["look"] if len(played) == 3 else None

    game = generate_game(7, "pick_cool_then_place_in_recep", expert=expert)
    assert played == [7, _draw_seed(7, 1), _draw_seed(7, 2)] and game.seed == played[-1]
    assert game.walkthrough == ["look"]
    assert game.pddl_problem() == draw_game(played[-1], "pick_cool_then_place_in_recep").pddl_problem()
    with pytest.raises(ValueError, match=f"solved none of {MAX_DRAWS}"):
        generate_game(7, "pick_cool_then_place_in_recep", expert=lambda game: None)


@pytest.fixture
def played(monkeypatch):
    """A quick stand-in for the handcoded expert in tests of the cache: it loses every first draw of the
    train split's games and wins every other draw with ``["look"]`` (a verdict by seed, as the real
    expert's is); the list holds the seeds of the games it played."""
    first_draws = {GeneratedGames("train").game_seed(index) for index in range(16)}
    seeds: list[int] = []

    def expert(game):
        seeds.append(game.seed)
        return None if game.seed in first_draws else ["look"]

    monkeypatch.setattr(games_module, "checking_engine", lambda: None)
    monkeypatch.setattr(games_module, "handcoded_expert", lambda engine: expert)
    return seeds


def test_the_expert_plays_each_candidate_once_and_lost_games_are_kept_unsolvable(tmp_path, played):
    task = GeneratedGames("train", cache_dir=tmp_path)[0]
    assert len(played) == 2 and task["game_file"].endswith(f"trial_G{played[1]:016x}/game.tw-pddl")
    lost = next(tmp_path.rglob(f"trial_G{played[0]:016x}"))
    assert json.loads((lost / "game.tw-pddl").read_text())["solvable"] is False  # as alfworld-generate leaves it
    assert (lost / "traj_data.json").exists() and (lost / "initial_state.pddl").exists()
    assert GeneratedGames("train", cache_dir=tmp_path)[0] == task and len(played) == 2  # verdicts from the cache


def test_the_same_seed_gives_the_same_game():
    for task_type in TASK_TYPES:
        first, second = draw_game(11, task_type), draw_game(11, task_type)
        assert first.pddl_problem() == second.pddl_problem()
        assert (first.goal, first.directory, first.start) == (second.goal, second.directory, second.start)
    problems = {draw_game(seed, "pick_and_place_simple").pddl_problem() for seed in range(8)}
    assert len(problems) == 8


def test_the_same_index_gives_the_same_files_in_any_cache(tmp_path):
    one = GeneratedGames("train", cache_dir=tmp_path / "one")[0]
    two = GeneratedGames("train", cache_dir=tmp_path / "two")[0]  # the expert plays it again: the same path
    assert one["id"] == two["id"]
    for name in ("game.tw-pddl", "initial_state.pddl", "traj_data.json"):
        assert (Path(one["game_file"]).parent / name).read_bytes() == (
            Path(two["game_file"]).parent / name
        ).read_bytes()
    other_seed = GeneratedGames("train", seed=1, cache_dir=tmp_path / "one").game_seed(0)
    assert other_seed != GeneratedGames("train", cache_dir=tmp_path / "one").game_seed(0)


def test_all_six_task_types_varied_rooms_and_objects(tmp_path):
    games = GeneratedGames("train", size=48, cache_dir=tmp_path)
    draws = [draw_game(games.game_seed(i), games.task_types[i % 6], scenes=games.scenes) for i in range(48)]
    assert Counter(game.task_type for game in draws) == {task_type: 8 for task_type in TASK_TYPES}
    scenes = {game.scene for game in draws}
    assert {floor_plans()[scene].room for scene in scenes} == {"Kitchen", "LivingRoom", "Bedroom", "Bathroom"}
    assert len(scenes) >= 20
    assert len({game.pddl_params["object_target"] for game in draws}) >= 15
    assert len({game.pddl_params["parent_target"] for game in draws}) >= 8


def scene_of(task: dict) -> int:
    """The ALFRED scene number, the last part of ALFWorld's task folder name."""
    return int(task["id"].split("/")[0].rsplit("-", 1)[1])


def test_splits_follow_alfworld(tmp_path, one_game_per_type):
    unseen = GeneratedGames("valid_unseen", cache_dir=tmp_path)
    seen = GeneratedGames("eval", cache_dir=tmp_path)
    train = GeneratedGames("train", cache_dir=tmp_path)
    assert (len(train), len(seen), len(unseen)) == (3553, 140, 134)
    assert seen.split == "valid_seen" and resolve_split("eval_out_of_distribution") == "valid_unseen"
    assert set(unseen.scenes) == set(alfred.TEST_SCENE_NUMBERS)
    assert set(train.scenes) == set(seen.scenes) == set(alfred.TRAIN_SCENE_NUMBERS)
    assert all(scene_of(task) in alfred.TRAIN_SCENE_NUMBERS for task in one_game_per_type)
    assert scene_of(unseen[0]) in alfred.TEST_SCENE_NUMBERS
    assert {train.game_seed(i) for i in range(30)}.isdisjoint(seen.game_seed(i) for i in range(30))


def test_game_files_are_in_alfworlds_layout_and_format(one_game_per_type):
    task = one_game_per_type[4]
    game_file = Path(task["game_file"])
    trial = game_file.parent
    assert trial.parent.parent.parent.name == "json_2.1.1" and trial.parent.parent.name == "train"
    task_type, target, movable, _, scene = trial.parent.name.split("-")
    assert (task_type, movable) == (task["task_type"], "None") and trial.name.startswith("trial_")
    game = json.loads(game_file.read_text())
    assert set(game) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
    assert "UNKNOWN GOAL" not in game["grammar"] and f"Your task is to: {task['prompt']}." in game["grammar"]
    assert game["pddl_problem"] == (trial / "initial_state.pddl").read_text()
    assert "(:goal" in game["pddl_problem"] and "(:domain alfred)" in game["pddl_problem"]
    traj = json.loads((trial / "traj_data.json").read_text())
    assert traj["task_type"] == task_type and traj["pddl_params"]["object_target"] == target
    assert traj["scene"]["scene_num"] == int(scene) and traj["scene"]["init_action"]["horizon"] == 30
    umask = os.umask(0)
    os.umask(umask)
    for name in ("game.tw-pddl", "initial_state.pddl", "traj_data.json"):  # readable as any file the user writes
        assert (trial / name).stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_game_is_written_once(tmp_path, monkeypatch, played):
    writes: list[str] = []
    real_write = games_module.write_atomic
    monkeypatch.setattr(
        games_module, "write_atomic", lambda path, text: (writes.append(path.name), real_write(path, text))
    )
    GeneratedGames("train", cache_dir=tmp_path)[3]
    written = Counter(writes)
    assert set(written) == {"game.tw-pddl", "initial_state.pddl", "traj_data.json"} and len(set(written.values())) == 1
    GeneratedGames("train", cache_dir=tmp_path)[3]  # a new source instance: found on disk
    assert Counter(writes) == written


def test_a_crash_mid_write_leaves_no_partial_game(tmp_path, monkeypatch, played):
    replace = os.replace

    def crash(source: str, target: str) -> None:
        if str(target).endswith("game.tw-pddl"):
            raise OSError("disk full")
        os.rename(source, target)

    monkeypatch.setattr(games_module.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        GeneratedGames("train", cache_dir=tmp_path)[2]
    assert not list(tmp_path.rglob("game.tw-pddl")) and not list(tmp_path.rglob("*.tmp"))
    monkeypatch.setattr(games_module.os, "replace", replace)
    task = GeneratedGames("train", cache_dir=tmp_path)[2]  # the next try completes the game
    assert json.loads(Path(task["game_file"]).read_text())["solvable"]


def test_concurrent_writers_agree(tmp_path, played):
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
        draw_game(0, "slice_it")
    with pytest.raises(ValueError, match="can host"):
        draw_game(0, "pick_heat_then_place_in_recep", scenes=[401, 301])  # no microwave outside kitchens
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
def test_every_drawn_game_is_consistent(seed, task_type):
    game = draw_game(seed, task_type)
    plan = game.floor_plan
    params = game.pddl_params
    assert game.room in alfred.GOALS_VALID[task_type]
    assert all(
        item.type in alfred.VAL_RECEPTACLE_OBJECTS[item.receptacle.type] or item.type in LAMPS for item in game.items
    )
    assert len({item.id for item in game.items}) == len(game.items)
    assert all(LOCATION.fullmatch(item.location) for item in game.items)
    targets = [item for item in game.items if item.type == params["object_target"]]
    assert len(targets) >= (2 if task_type == "pick_two_obj_and_place" else 1)
    assert all(item.receptacle.type != params["parent_target"] for item in targets)
    if task_type in APPLIANCE:
        assert APPLIANCE[task_type] in plan.receptacle_types and params["parent_target"] != APPLIANCE[task_type]
    if task_type == "look_at_obj_in_light":
        assert params["toggle_target"] in LAMPS and any(item.type == params["toggle_target"] for item in game.items)
    else:
        assert params["object_target"] in alfred.VAL_RECEPTACLE_OBJECTS[params["parent_target"]]
    # The agent starts on a reachable point, at no receptacle, the camera at 30 degrees as in ALFRED.
    _, x, z, _, horizon = game.start.split("|")
    assert LOCATION.fullmatch(game.start) and horizon == "30"
    assert (int(x), int(z)) in {(int(a), int(b)) for a, b in reachable_points(game.scene)}
    assert game.start not in {r.location for r in plan.receptacles}
    names = display_names([r.id for r in plan.receptacles] + [i.id for i in game.items])
    assert len(set(names.values())) == len(names)  # every thing has a name of its own
