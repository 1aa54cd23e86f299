"""``agentfly-bench --suite chaos``: a short soak through ``agentfly-serve`` (Math, Code, Search on Redis)
while sandboxes, Redis, the server and client connections are killed.

It ends once it has played its episodes, killed each kind at least once and seen each kill recovered
from (the duration is only a cap), so a loaded machine makes it slower, not different (about 10 s on an
idle 2-core machine). Nothing here is timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentfly_bench.cli import parse_args
from agentfly_bench.suites import chaos

KINDS = ["sandbox", "redis", "server", "connection"]


def soak(tmp_path: Path, **options: object) -> tuple[dict, str]:
    """The soak as ``agentfly-bench --suite chaos --quick`` runs it, in a process of its own: its results and
    what it printed. Every process below that one is the soak's, so no pooled process that an earlier test
    left in this pytest worker can count as one of its targets or leaks."""
    options["out_dir"] = str(tmp_path)
    command = "from agentfly_bench.cli import main; main()"
    arguments = ["--suite", "chaos", "--quick", "--suite-options", json.dumps(options)]
    arguments += ["--json", str(tmp_path / "bench.json")]
    done = subprocess.run([sys.executable, "-c", command, *arguments], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((tmp_path / "bench.json").read_text())["chaos"], done.stdout


def test_a_short_soak_loses_no_trajectory_leaks_nothing_and_explains_every_failure(tmp_path):
    results, printed = soak(
        tmp_path,
        duration_s=300,  # a cap for a starved machine: it ends once it has its episodes, kills and recoveries
        episodes=30,
        min_kills=1,
        lanes=["serve"],
        serve_envs=["math", "code", "search"],
        kinds=KINDS,
        kill_every_s=0.5,
        clients=3,
    )
    assert all(results["kills"].get(kind, 0) >= 1 for kind in KINDS), results["kills"]
    episodes = results["episodes"]
    assert episodes["run"] >= 30 and episodes["clean"] > 0
    # Every failure has a reason, and no episode the script solves ended unsolved without one.
    assert episodes["unexplained"] == 0 and episodes["silent_failures"] == 0
    assert sum(results["failures_by_reason"].values()) == episodes["failed"]
    assert all(reason and results["failure_examples"][reason] is not None for reason in results["failures_by_reason"])
    trajectories = results["trajectories"]
    assert trajectories["lost"] == trajectories["corrupted"] == trajectories["unexpected"] == 0
    assert trajectories["verified_intact"] == trajectories["written"] == trajectories["on_disk"] > 0
    leaks = results["leaks"]
    # (A sandbox killed while idle stays a zombie until its pool next checks it: reported, not a leak.)
    assert leaks["processes"] == [] and leaks["server_sessions"] == 0
    assert results["server_restarts"] == results["kills"]["server"]
    assert all(row["recovered"] >= 1 for row in results["recovery_s"].values()), results["recovery_s"]
    assert "0 lost, 0 corrupted" in printed


def test_a_training_run_takes_its_steps_while_its_env_actors_are_killed(tmp_path):
    """The train lane: GRPO steps of a small random model on Math-v0 envs in Ray actors, killed under it.
    Whatever a kill hits (an actor starting, idle, or mid-episode), the run goes on training and checkpointing,
    an episode whose env died ends failed with the reason and is left out of the update, nothing is lost."""
    results, _ = soak(
        tmp_path,
        duration_s=300,  # a cap: it ends once it has its episodes, kills and recoveries
        episodes=24,
        min_kills=2,
        lanes=["train"],
        kinds=["ray_actor"],
        kill_every_s=2,
        train_actors=4,
    )
    train, episodes = results["train"], results["episodes"]
    assert train["run_died"] is None and results["kills"]["ray_actor"] >= 2
    assert results["recovery_s"]["ray_actor"]["recovered"] == results["kills"]["ray_actor"]  # steps after each kill
    assert train["steps"] * 4 == episodes["run"] >= 24
    assert set(results["failures_by_reason"]) <= {"env failed"} and episodes["unexplained"] == 0
    assert train["left_out_episodes"] >= train["failed_episodes"] == episodes["failed"]
    assert (tmp_path / "train" / "checkpoints").is_dir()
    trajectories = results["trajectories"]
    assert trajectories["lost"] == trajectories["corrupted"] == 0 and trajectories["verified_intact"] > 0
    assert results["leaks"]["processes"] == []


def test_processes_from_before_the_soak_are_neither_its_targets_nor_its_leaks(tmp_path):
    """A pytest worker runs test files one after another: an earlier test's pooled processes may still live
    below this one when a soak starts. They are not the soak's to kill or to report."""
    earlier = subprocess.Popen(["sleep", "60"])
    try:
        soak = chaos.Soak(chaos.TrajectoryWriter(tmp_path / "trajectories.jsonl"))
        own = subprocess.Popen(["sleep", "60"])
        try:
            assert set(chaos.note_processes(soak)) == {own.pid}
            assert [process["pid"] for process in chaos.still_alive(soak)] == [own.pid]
        finally:
            own.kill()
            own.wait()
    finally:
        earlier.kill()
        earlier.wait()


def test_the_scripts_solve_the_envs_they_are_counted_for():
    task = {"question": "Who?", "golden_answers": ["Ada"], "solution": "def f():\n    return 1"}
    assert chaos.scripted_turn("AgentFly/Search-v0", task, 1) == "<answer>Ada</answer>"
    assert chaos.scripted_turn("AgentFly/Code-v0", task, 1).startswith("<answer>```python\ndef f()")
    assert '"name": "retrieve"' in chaos.scripted_turn("AgentFly/Search-v0", task, 0)


def test_the_command_line_passes_suite_options_to_the_suite():
    args = parse_args(["--suite", "chaos", "--suite-options", '{"duration_s": 900, "lanes": ["ray"]}'])
    assert args.suite_options == {"duration_s": 900, "lanes": ["ray"]}
    with pytest.raises(ValueError, match="unknown lanes"):
        chaos.run(quick=True, lanes=["elsewhere"])
