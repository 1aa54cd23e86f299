"""``agentfly-bench --suite learning``: a row runs ``agentfly-train`` in a process of its own and is read back from
its run directory; a finished row is skipped on a re-run, a half-finished one redone, a failed one reported;
bad options stop the suite before anything runs; the comparison tables and plots come out of row results.

Only the first test trains (one ``--quick`` row on a tiny random model: a smoke run's budgets); the others
record or fake finished run directories. The learning itself is the suite's full run (figures in docs/learning.md).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from agentfly_bench.suites import available, learning
from agentfly_train.chat import ChatFormat
from agentfly_train.config import Config, apply_overrides
from agentfly_train.models import load_tokenizer
from agentfly_train.sft import DemonstrationError, collect_expert, encode, parse_rows, rewarded


def test_a_quick_row_trains_in_its_own_process_and_is_skipped_when_run_again(tmp_path, tiny_model_dir, monkeypatch):
    assert available()["learning"] is learning and learning.DESCRIPTION
    # The plumbing, on a tiny model sampled by transformers: a row's process, its records, the re-run, the plot.
    tiny = (f"model.path={json.dumps(tiny_model_dir)}", 'rollout.generator="transformers"')
    results = learning.run(quick=True, envs=["search"], out_dir=str(tmp_path), overrides=tiny)
    row = results["envs"]["search"]
    assert "failed" not in row, row.get("log_tail")
    assert row["env"] == "AgentFly/Search-v0" and row["steps"] == 1 and len(row["rewards"]) == 1
    assert list(row["stages"]) == ["base", "warm start", "rl"]
    for stage in row["stages"].values():
        assert 0 <= stage["success_rate"] <= 1 and stage["turns_per_episode"] >= 1
    run_dir = tmp_path / "search"
    assert (run_dir / "warm-start" / "model.safetensors").exists() and (run_dir / "final").is_dir()
    assert not (run_dir / "checkpoints").exists()  # a row is never resumed
    assert (run_dir / learning.ROW_RECORD).exists() and (run_dir / learning.ROW_LOG).stat().st_size > 0
    assert (tmp_path / "learning.png").stat().st_size > 10_000
    console = Console(record=True, width=160)
    learning.render(results, console)
    printed = console.export_text()
    assert "--config search" in printed and "AgentFly/Search-v0" in printed and "plumbing only" in printed

    monkeypatch.setattr(subprocess, "run", _no_training)
    assert learning.run(quick=True, envs=["search"], out_dir=str(tmp_path), overrides=tiny)["envs"]["search"] == row


def test_a_finished_row_is_skipped_and_one_of_another_config_run_again(tmp_path, monkeypatch, capsys):
    [row] = learning.plan(quick=True, out_dir=str(tmp_path), envs=["math"]).envs.values()
    row.run_dir.mkdir(parents=True)
    row.record(_result("math", 0.5, [0.25, 0.5]))
    monkeypatch.setattr(subprocess, "run", _no_training)
    results = learning.run(quick=True, out_dir=str(tmp_path), envs=["math"])
    assert results["envs"]["math"] == _result("math", 0.5, [0.25, 0.5])
    assert "math: finished in an earlier run" in capsys.readouterr().out

    monkeypatch.setattr(subprocess, "run", _fake_training(rewards=[1.0]))
    results = learning.run(quick=False, out_dir=str(tmp_path), envs=["math"])  # the full budgets: not that row
    assert results["envs"]["math"]["rewards"] == [1.0]
    assert "holds no finished run of this row; cleared, run again" in capsys.readouterr().out

    [row] = learning.plan(quick=False, out_dir=str(tmp_path), envs=["math"]).envs.values()
    record = json.loads((row.run_dir / learning.ROW_RECORD).read_text())
    assert learning.run(quick=False, out_dir=str(tmp_path), envs=["math"])["envs"]["math"] == record["result"]
    record["config"]["train"]["steps"] += 1  # as if the preset had been edited since
    (row.run_dir / learning.ROW_RECORD).write_text(json.dumps(record))
    monkeypatch.setattr(subprocess, "run", _fake_training(rewards=[0.5]))
    assert learning.run(quick=False, out_dir=str(tmp_path), envs=["math"])["envs"]["math"]["rewards"] == [0.5]


def test_a_half_finished_row_is_redone_from_an_empty_directory_and_read_back_from_it(tmp_path, monkeypatch):
    killed = tmp_path / "algorithms" / "math-rloo"
    (killed / "checkpoints" / "step-000009").mkdir(parents=True)
    (killed / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 0.9}\n{"step": 2, "rew')
    monkeypatch.setattr(subprocess, "run", _fake_training(rewards=[0.25, 0.75]))
    results = learning.run(quick=True, out_dir=str(tmp_path), algorithms=["rloo"])
    row = results["algorithms"]["rows"]["rloo"]
    assert not (killed / "checkpoints").exists()  # the killed run's, and the finished run's own after it
    assert row["algo"] == "rloo" and row["rewards"] == [0.25, 0.75] and row["steps"] == 2
    assert row["mismatch_kl"] == [None, 0.002]
    assert row["episodes_per_step"] == 4 and row["eval_episodes"] == 4  # the --quick budgets, from config.json
    assert row["stages"]["rl"] == {
        "success_rate": 0.75,
        "reward_mean": 0.75,
        "tool_calls_per_episode": 1.0,
        "turns_per_episode": 2.0,
    }
    assert (killed / learning.ROW_LOG).read_text() == "agentfly-train was here\n"
    record = json.loads((killed / learning.ROW_RECORD).read_text())
    assert record["overrides"][0] == 'algo="rloo"'

    # Recorded by an older suite that kept less of a run: skipped, and what it left out read from the run.
    del record["result"]["mismatch_kl"]
    (killed / learning.ROW_RECORD).write_text(json.dumps(record))
    monkeypatch.setattr(subprocess, "run", _no_training)
    again = learning.run(quick=True, out_dir=str(tmp_path), algorithms=["rloo"])["algorithms"]["rows"]["rloo"]
    assert again == row


def test_a_failed_row_is_reported_with_its_log_and_the_suite_goes_on(tmp_path, monkeypatch):
    rows = learning.plan(quick=True, out_dir=str(tmp_path), envs=["math-agent", "math"]).envs
    rows["math"].run_dir.mkdir(parents=True)
    rows["math"].record(_result("math", 1.0, [0.5]))
    monkeypatch.setattr(subprocess, "run", _fake_training(exit_code=3))
    results = learning.run(quick=True, out_dir=str(tmp_path), envs=["math-agent", "math"])
    failed = results["envs"]["math-agent"]
    assert failed["failed"] == "exited with code 3" and failed["log_tail"][-1] == "RuntimeError: out of memory"
    assert not (rows["math-agent"].run_dir / learning.ROW_RECORD).exists()  # tried again by the next run
    assert "step_comparison" not in results and results["envs"]["math"]["rewards"] == [0.5]
    console = Console(record=True, width=200)
    learning.render(results, console)
    printed = console.export_text()
    assert "math-agent failed: exited with code 3" in printed and "RuntimeError: out of memory" in printed


def test_the_comparisons_tables_and_plots_come_out_of_the_rows_results(tmp_path, monkeypatch):
    tis = ['algorithm.is_correction_level="token"', 'algorithm.is_correction_mode="clip"']
    options = {
        "algorithms": ["ppo", "grpo"],
        "variants": {"tis": tis, "lr-1e-5": ["train.lr=1e-5"]},
        "variant_envs": ["math", "search"],
        "turn_budgets": [2, 4],
        "seeds": [0, 1],
    }
    planned = learning.plan(quick=False, out_dir=str(tmp_path), **options)
    assert not planned.envs  # a comparison alone runs no env rows
    assert planned.variants["search", "tis"].run_dir == tmp_path / "variants" / "search-tis"
    assert planned.variants["search", "tis"].config()["env"]["id"] == "AgentFly/Search-v0"
    assert planned.variants["math", "tis"].config()["algorithm"]["is_correction_mode"] == "clip"
    finished = {
        **{row: _result(row.name, 0.5, [0.0, 0.5]) for row in planned.algorithms.values()},
        **{row: _result(row.name, 0.75, [0.25, 0.75]) for (_, name), row in planned.variants.items() if name == "tis"},
        planned.variants["math", "lr-1e-5"]: _result("math lr-1e-5", 0.25, [0.0, 0.25]),
        planned.turn_budgets[2, 0]: _result("2 turns seed 0", 0.5, [0.0, 1.0]),
        planned.turn_budgets[2, 1]: _result("2 turns seed 1", 1.0, [1.0, 1.0]),
        planned.turn_budgets[4, 0]: _result("4 turns seed 0", 0.25, [0.5, 0.5]),
    }
    for row, result in finished.items():
        row.run_dir.mkdir(parents=True)
        row.record(result)
    monkeypatch.setattr(subprocess, "run", _fake_training(exit_code=1))  # 4 turns seed 1, search lr-1e-5 fail
    results = learning.run(quick=False, out_dir=str(tmp_path), **options)

    assert list(results["algorithms"]["rows"]) == ["ppo", "grpo"] and "envs" not in results
    variants = results["variants"]
    assert variants["envs"] == ["math", "search"]
    assert variants["overrides"] == {"tis": tis, "lr-1e-5": ["train.lr=1e-5"]}
    assert list(variants["rows"]) == ["math tis", "math lr-1e-5", "search tis", "search lr-1e-5"]
    assert variants["rows"]["search tis"]["stages"]["rl"]["success_rate"] == 0.75
    assert variants["rows"]["search lr-1e-5"]["failed"] == "exited with code 1"
    two, four = results["turn_budgets"]["summary"]
    assert (two["turns"], two["seeds"], two["rl_success_mean"], two["rl_success_std"]) == (2, 2, 0.75, 0.25)
    assert two["reward_mean_curve"] == [0.5, 1.0] and two["reward_variance_across_seeds"] == 0.125
    assert (four["seeds"], four["rl_success_std"], four["reward_variance_across_seeds"]) == (1, 0.0, 0.0)
    for plot in (results["algorithms"]["plot"], variants["plot"], results["turn_budgets"]["plot"]):
        assert Path(plot).stat().st_size > 10_000
    console = Console(record=True, width=200)
    learning.render(results, console)
    printed = console.export_text()
    assert re.search(r"ppo\s+│\s+0\.00 \(1\.0\)\s+│\s+0\.10 \(1\.0\)\s+│\s+0\.50 \(1\.0\)\s+│\s+\+0\.40", printed)
    assert re.search(r"math tis\s+│\s+0\.00 \(1\.0\)\s+│\s+0\.10 \(1\.0\)\s+│\s+0\.75 \(1\.0\)\s+│\s+\+0\.65", printed)
    assert 'tis: algorithm.is_correction_level="token" algorithm.is_correction_mode="clip"' in printed
    assert re.search(r"2\s+│\s+2 of 2\s+│\s+0\.75 ± 0\.25\s+│\s+0\.1250", printed)
    assert re.search(r"4\s+│\s+1 of 2\s+│\s+0\.25 ± 0\.00", printed)
    assert "math 4 turns seed 1 failed" in printed


def test_variant_envs_by_name_run_each_variant_on_its_own_envs(tmp_path):
    planned = learning.plan(
        quick=True,
        out_dir=str(tmp_path),
        variants={"tis": ['algorithm.is_correction_mode="clip"'], "history1": ["rollout.history_turns=1"]},
        variant_envs={"tis": ["math", "alfworld"], "history1": ["webshop", "math"]},
    )
    assert list(planned.variants) == [
        ("math", "tis"),
        ("math", "history1"),
        ("alfworld", "tis"),
        ("webshop", "history1"),
    ]
    assert planned.variants["webshop", "history1"].config()["rollout"]["history_turns"] == 1
    assert planned.variants["alfworld", "tis"].config()["rollout"]["history_turns"] == 0
    with pytest.raises(ValueError, match=r"variant_envs by name must name each variant once"):
        learning.plan(quick=True, variants={"tis": [], "history1": []}, variant_envs={"tis": ["math"]})
    with pytest.raises(ValueError, match=r"unknown variant_envs \['chess'\]"):
        learning.plan(quick=True, variants={"tis": []}, variant_envs={"tis": ["chess"]})


def test_a_row_recorded_before_a_config_field_existed_is_its_row_while_the_field_is_at_its_default(
    tmp_path, monkeypatch
):
    """A new option defaults to the behaviour from before it, so an older record still stands for the row; a row that
    sets the option is another row."""
    [row] = learning.plan(quick=True, out_dir=str(tmp_path), envs=["math"]).envs.values()
    row.run_dir.mkdir(parents=True)
    row.record(_result("math", 0.5, [0.25, 0.5]))
    record = json.loads((row.run_dir / learning.ROW_RECORD).read_text())
    del record["config"]["rollout"]["history_turns"]  # as an older suite recorded it
    (row.run_dir / learning.ROW_RECORD).write_text(json.dumps(record))
    assert row.recorded() == _result("math", 0.5, [0.25, 0.5])
    windowed = learning.Row("math", "calculator", row.run_dir, (*row.overrides, "rollout.history_turns=2"))
    assert windowed.recorded() is None
    record["config"]["rollout"]["stop"] = ["]"]  # a recorded field that differs still counts
    (row.run_dir / learning.ROW_RECORD).write_text(json.dumps(record))
    assert row.recorded() is None


def test_unknown_names_are_refused_with_the_choices_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(subprocess, "run", _no_training)
    choices = re.escape(str(sorted(learning.PRESETS)))
    with pytest.raises(ValueError, match=rf"unknown envs \['chess'\]; choose from {choices}"):
        learning.run(quick=True, out_dir=str(tmp_path), envs=["chess"])
    with pytest.raises(ValueError, match=rf"unknown budget_env \['chess'\]; choose from {choices}"):
        learning.run(quick=True, out_dir=str(tmp_path), turn_budgets=[4], budget_env="chess")
    with pytest.raises(ValueError, match=rf"unknown variant_envs \['chess'\]; choose from {choices}"):
        learning.run(quick=True, out_dir=str(tmp_path), variants={"tis": []}, variant_envs=["math", "chess"])
    with pytest.raises(ValueError, match=r"unknown variant_envs \['chess'\]"):
        learning.run(quick=True, out_dir=str(tmp_path), envs=["math"], variant_envs=["chess"])
    with pytest.raises(ValueError, match=r"unknown algorithms \['dpo'\]; choose from \[.*'grpo'.*'ppo'"):
        learning.run(quick=True, out_dir=str(tmp_path), envs=["math"], algorithms=["ppo", "dpo"])
    with pytest.raises(ValueError, match=r"variant names are directory names .*got '\.\./tis'"):
        learning.run(quick=True, out_dir=str(tmp_path), variants={"../tis": []})
    with pytest.raises(ValueError, match=r"variant 'tis' takes a list of --set overrides"):
        learning.run(quick=True, out_dir=str(tmp_path), variants={"tis": "train.lr=1e-5"})
    with pytest.raises(ValueError, match=r"^math tis: .*is_correction_mode"):
        learning.run(quick=True, out_dir=str(tmp_path), variants={"tis": ['algorithm.is_correction_mode="fast"']})
    with pytest.raises(ValueError, match=r"seeds must be one or more whole numbers"):
        learning.run(quick=True, out_dir=str(tmp_path), turn_budgets=[4], seeds=[])
    assert not list(tmp_path.iterdir())


def test_a_row_whose_config_cannot_work_is_refused_by_name(tmp_path):
    row = learning.Row("math rloo", "calculator", tmp_path, ('algo="rloo"', "rollout.samples_per_prompt=1"))
    with pytest.raises(ValueError, match=r"^math rloo: rloo compares the chains of one task"):
        row.config()


@given(st.lists(st.one_of(st.integers(max_value=0), st.booleans(), st.floats(), st.text()), min_size=1))
def test_turn_budgets_that_are_not_whole_turns_are_refused(bad):
    with pytest.raises(ValueError, match=r"turn_budgets must be whole numbers of turns, 1 or more"):
        learning.plan(quick=True, turn_budgets=[4, *bad])


@pytest.mark.parametrize("name", learning.AGENT_API_ROWS)
def test_the_agent_api_rows_play_math_agents_env_and_warm_start(name):
    """So the expert check of ``math-agent`` below is theirs too."""
    ours, theirs = Config.load(learning.PRESETS[name]), Config.load(learning.PRESETS["math-agent"])
    assert (ours.env, ours.sft, ours.rollout) == (theirs.env, theirs.sft, theirs.rollout)


@pytest.mark.parametrize("name", learning.DEFAULT_ENVS)
def test_each_presets_expert_wins_and_its_demonstrations_fit_the_token_budget(name, smollm2_dir):
    """The premise of a row: the warm start's demonstrations are wins (all of the expert's episodes, or, for a
    preset that keeps only wins (``sft.min_reward``), at least half) and (nearly all) fit the preset's budget."""
    config = Config.load(learning.PRESETS[name])
    chat = ChatFormat(load_tokenizer(smollm2_dir), config.rollout.observation_role)
    episodes = list(collect_expert(config.env.id, 16, options=config.env.options))
    wins = sum(bool(episode.steps[-1].success) for episode in episodes)
    assert wins == 16 if config.sft.min_reward is None else wins >= 8
    demos = rewarded(parse_rows((msgspec.to_builtins(e) for e in episodes), source=name), config.sft.min_reward)
    assert len(demos) == wins
    fitting = 0
    for demo in demos:
        try:
            encode(chat, demo, max_tokens=config.rollout.max_episode_tokens)
            fitting += 1
        except DemonstrationError as error:
            assert "more than the" in str(error)
    assert fitting >= len(demos) - 2, f"{fitting} of {len(demos)} {name} demonstrations fit the token budget"


def _stage(success: float) -> dict[str, float]:
    return {"success_rate": success, "reward_mean": success, "tool_calls_per_episode": 1.0, "turns_per_episode": 2.0}


def _result(name: str, rl_success: float, rewards: list[float]) -> dict:
    """A finished row's result, as the suite records it."""
    return {
        "name": name,
        "env": "AgentFly/Math-v0",
        "algo": "grpo",
        "steps": len(rewards),
        "episodes_per_step": 32,
        "eval_episodes": 64,
        "stages": {"base": _stage(0.0), "warm start": _stage(0.1), "rl": _stage(rl_success)},
        "rewards": rewards,
        "step_s": [30.0] * len(rewards),
        "rollout_s": [10.0] * len(rewards),
        "update_s": [20.0] * len(rewards),
        "wall_s": 600.0,
    }


def _no_training(*args, **kwargs):
    raise AssertionError("a row was trained")


def _fake_training(*, rewards: list[float] = (), exit_code: int = 0):
    """``subprocess.run`` as ``agentfly-train`` would leave a run directory: a finished run's files (its config
    with the row's overrides, a metrics record per step, the stages' summaries), or a crash's log."""

    def run(command: list[str], *, stdout, stderr, check):
        assert command[1:3] == ["-m", "agentfly_train.cli"] and stderr is subprocess.STDOUT and not check
        if exit_code:
            stdout.write("Traceback (most recent call last):\nRuntimeError: out of memory\n")
            return subprocess.CompletedProcess(command, exit_code)
        stdout.write("agentfly-train was here\n")
        run_dir = Path(command[command.index("--out") + 1])
        overrides = command[command.index("--no-progress") + 2 :: 2]
        config = apply_overrides(Config.load(command[command.index("--config") + 1]), overrides)
        (run_dir / "config.json").write_text(json.dumps(config.to_dict()))
        (run_dir / "checkpoints" / "step-000001").mkdir(parents=True)
        records = [{"step": 0, "sft_loss": 1.0}] + [
            {"step": step, "reward_mean": reward, "step_s": 3.0, "rollout_wall_s": 1.0, "update_s": 2.0}
            | ({"mismatch_kl": 0.001 * step} if step > 1 else {})  # the first update skipped
            for step, reward in enumerate(rewards, 1)
        ]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
        for folder, success in (("base", 0.0), ("warm-start", 0.25), ("rl", rewards[-1])):
            (run_dir / "stages" / folder / "eval").mkdir(parents=True)
            summary = {**_stage(success), "episodes": 4, "wall_s": 1.0, "errors_per_episode": 0.0}
            (run_dir / "stages" / folder / "eval" / "summary.json").write_text(json.dumps(summary))
        return subprocess.CompletedProcess(command, 0)

    return run
