"""The learning tables of the docs are rendered from one learning run's JSON, and checked against it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agentfly_bench.learning_table import (
    RESULTS,
    ROOT,
    STEPS,
    TABLE,
    TARGETS,
    main,
    markers,
    render,
    render_steps,
    replaced,
    stale,
)
from agentfly_bench.suites.learning import PRESETS

STAGES = {"base": {"success_rate": 0.0}, "warm start": {"success_rate": 0.38}, "rl": {"success_rate": 0.5}}
ROW = {"env": "AgentFly/ALFWorld-v0", "steps": 16, "episodes_per_step": 16, "stages": STAGES, "wall_s": 1032.0}
RUN = {
    "started": "2026-11-29T10:24:25+0000",
    "commit": "e83bfd89a1902a6097116d69bd5cbca2807864d7+dirty",
    "machine": {"cpu": "AMD EPYC", "cpus": 2},
    "learning": {
        "envs": {
            "alfworld": ROW,
            "scienceworld": {"name": "scienceworld", "failed": "exited with code 1", "wall_s": 61.0},
        }
    },
}


def test_the_docs_tables_are_the_ones_the_committed_run_renders():
    """The check CI runs: edit a learning number by hand, or commit a new run without rendering it, and this fails."""
    assert stale() == [], "run: python -m agentfly_bench.learning_table --write"


def test_the_committed_run_has_every_env_row_finished_from_one_commit():
    run = json.loads((ROOT / RESULTS).read_text())
    rows = run["learning"]["envs"]
    assert list(rows) == list(PRESETS)
    assert [name for name, row in rows.items() if "failed" in row] == []
    assert len(run["commit"].removesuffix("+dirty")) == 40 and run["machine"]["cpu"]


def test_a_row_reads_as_its_env_preset_stages_and_wall():
    readme = render(RUN, "readme").splitlines()
    assert readme[2] == "| ALFWorld-v0, text, pick and place | `--config alfworld` | 0.00 | 0.38 | 0.50 | 17.2 min |"
    assert readme[3] == "| scienceworld | `--config scienceworld` | failed | failed | failed | 1.0 min |"
    assert readme[-1].startswith(
        "One `agentfly-bench --suite learning` run, 2026-11-29, AMD EPYC (2 CPUs), commit e83bfd8+dirty;"
    )
    docs = render(RUN, "docs").splitlines()
    assert docs[0].endswith("| after RL | RL steps x episodes | wall |")
    assert docs[2].endswith("| 0.50 | 16 x 16 | 17.2 min |")


@pytest.mark.parametrize(("after", "cell"), [(0.39, "0.39"), (0.38, "**0.38**"), (0.02, "**0.02**")])
def test_rl_no_higher_than_the_warm_start_is_bold(after, cell):
    run = copy.deepcopy(RUN)
    run["learning"]["envs"]["alfworld"]["stages"]["rl"]["success_rate"] = after
    assert render(run, "readme").splitlines()[2].split(" | ")[4] == cell


def test_write_renders_each_file_and_then_the_check_passes(tmp_path, capsys):
    (tmp_path / RESULTS).parent.mkdir(parents=True)
    (tmp_path / RESULTS).write_text(json.dumps(RUN))
    for path, blocks in TARGETS.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        marked = "".join(f"{markers(block)[0]}\n| hand | typed |\n{markers(block)[1]}\n" for block in blocks)
        (tmp_path / path).write_text(f"# {path}\n\nbefore\n{marked}after\n")
    assert main(["--root", str(tmp_path)]) == 1
    assert "README.md: its learning results are not the ones rendered from" in capsys.readouterr().out
    assert main(["--root", str(tmp_path), "--write"]) == 0
    assert stale(tmp_path) == []
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("# README.md\n\nbefore\n") and readme.endswith(f"{markers(TABLE)[1]}\nafter\n")
    docs = (tmp_path / "docs/learning.md").read_text()
    assert "| hand | typed |" not in readme + docs and "RL steps x episodes" in docs
    assert "The run has no step comparison: a row of the two failed." in docs
    (tmp_path / "README.md").write_text(readme.replace("| 0.50 |", "| 0.60 |"))  # a hand edit
    assert stale(tmp_path) == [Path("README.md")]


BEGIN, END = markers(TABLE)


@pytest.mark.parametrize("text", ["no markers", f"{END}\n{BEGIN}", f"{BEGIN}\n{END}\n{BEGIN}\n{END}"])
def test_a_file_without_one_pair_of_markers_in_order_is_refused(text, tmp_path):
    with pytest.raises(ValueError, match="must hold the learning table's markers once each, in order"):
        replaced(text, TABLE, "| table |", tmp_path / "README.md")


def test_the_step_comparison_reads_the_runs_medians():
    parts = {"step_s": (40.0, 50.0), "rollout_s": (15.0, 20.0), "update_s": (25.0, 30.0)}
    run = {
        "learning": {"step_comparison": {p: {"agent": a, "env_loop": b, "ratio": a / b} for p, (a, b) in parts.items()}}
    }
    assert render_steps(run) == (
        "The agent program's median GRPO step took 40.0 s against the env loop's 50.0 s "
        "(0.80x: rollout 15.0 vs 20.0 s, update 25.0 vs 30.0 s)."
    )
    assert STEPS in TARGETS[Path("docs/learning.md")]
