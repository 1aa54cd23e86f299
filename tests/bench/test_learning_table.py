"""The learning tables of the docs are rendered from one learning run's JSON, and checked against it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agentfly_bench.learning_table import (
    BUDGETS,
    COMPARISONS,
    RESULTS,
    ROOT,
    STEPS,
    TABLE,
    TARGETS,
    main,
    markers,
    render,
    render_agent_apis,
    render_agent_stages,
    render_algorithms,
    render_demo,
    render_steps,
    render_turn_budgets,
    render_variants,
    replaced,
    stale,
)
from agentfly_bench.suites.learning import DEFAULT_ENVS

STAGES = {"base": {"success_rate": 0.0}, "warm start": {"success_rate": 0.38}, "rl": {"success_rate": 0.5}}
ROW = {
    "env": "AgentFly/ALFWorld-v0",
    "steps": 16,
    "episodes_per_step": 16,
    "stages": STAGES,
    "rewards": [0.25] * 15 + [0.5],
    "step_s": [30.0] * 16,
    "mismatch_kl": [None] + [0.001] * 15,
    "wall_s": 1032.0,
}
RUN = {
    "started": "2026-11-29T10:24:25+0000",
    "commit": "e83bfd89a1902a6097116d69bd5cbca2807864d7+dirty",
    "machine": {"cpu": "AMD EPYC", "cpus": 2},
    "args": {"suite_options": {}},
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
    assert list(rows) == list(DEFAULT_ENVS)
    assert [name for name, row in rows.items() if "failed" in row] == []
    assert len(run["commit"].removesuffix("+dirty")) == 40 and run["machine"]["cpu"]


def test_the_committed_comparisons_have_every_algorithm_both_tis_rows_and_each_agent_api_finished():
    learning = json.loads((ROOT / COMPARISONS).read_text())["learning"]
    assert list(learning["algorithms"]["rows"]) == ["ppo", "reinforce++", "grpo", "rloo"]
    assert {"math tis", "alfworld tis"} <= set(learning["variants"]["rows"])
    assert list(learning["envs"]) == ["math-agent", "math-agent-messages", "math-agent-responses"]
    rows = [
        *learning["envs"].values(),
        *learning["algorithms"]["rows"].values(),
        *learning["variants"]["rows"].values(),
        *learning.get("turn_budgets", {}).get("rows", []),
    ]
    assert [row["name"] for row in rows if "failed" in row] == []


def test_a_row_reads_as_its_env_preset_stages_and_wall():
    readme = render(RUN, "readme").splitlines()
    assert readme[2] == "| ALFWorld-v0, text, pick and place | `--config alfworld` | 0.00 | 0.38 | 0.50 | 17.2 min |"
    assert readme[3] == "| scienceworld | `--config scienceworld` | failed | failed | failed | 1.0 min |"
    assert readme[-1].startswith(
        "One `agentfly-bench --suite learning` run, 2026-11-29, AMD EPYC (2 CPUs), commit e83bfd8+dirty;"
    )
    docs = render(RUN, "docs").splitlines()
    assert docs[0].endswith("| after RL | RL steps x episodes | of which RL steps | wall |")
    assert docs[2].endswith("| 0.50 | 16 x 16 | 8.0 min | 17.2 min |")


@pytest.mark.parametrize(("after", "cell"), [(0.39, "0.39"), (0.38, "**0.38**"), (0.02, "**0.02**")])
def test_rl_no_higher_than_the_warm_start_is_bold(after, cell):
    run = copy.deepcopy(RUN)
    run["learning"]["envs"]["alfworld"]["stages"]["rl"]["success_rate"] = after
    assert render(run, "readme").splitlines()[2].split(" | ")[4] == cell


def test_write_renders_each_file_and_then_the_check_passes(tmp_path, capsys):
    (tmp_path / RESULTS).parent.mkdir(parents=True)
    (tmp_path / RESULTS).write_text(json.dumps(RUN))
    (tmp_path / COMPARISONS).write_text(json.dumps(COMPARED))
    for path, blocks in TARGETS.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        marked = "".join(
            f"{markers(block, source)[0]}\n| hand | typed |\n{markers(block, source)[1]}\n"
            for block, (source, _) in blocks.items()
        )
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
    assert "The `math` row is not in the run." in readme
    assert (
        '| tis | `--config calculator` | `algorithm.is_correction_level="token"` |' in docs
        and "| 4 | 1.00 / failed |" in docs
    )
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


def _compared_row(name: str, success: float, **fields) -> dict:
    return {**ROW, "name": name, "stages": {**STAGES, "rl": {"success_rate": success}}, **fields}


AGENT_STAGES = {
    "base": {"success_rate": 0.0, "tool_calls_per_episode": 0.0, "turns_per_episode": 1.0},
    "warm start": {"success_rate": 0.46875, "tool_calls_per_episode": 1.859, "turns_per_episode": 2.391},
    "rl": {"success_rate": 1.0, "tool_calls_per_episode": 1.0, "turns_per_episode": 2.0},
}
COMPARED = {
    **{key: RUN[key] for key in ("started", "commit", "machine")},
    "args": {"suite_options": {"out_dir": "/tmp/x", "algorithms": ["grpo"], "variants": {"tis": ["..."]}}},
    "learning": {
        "envs": {
            "math-agent": _compared_row("math-agent", 1.0, stages=AGENT_STAGES, prefix_mismatch_rate=[0.0] * 16),
            "math-agent-messages": {"name": "math-agent-messages", "failed": "exited with code 1", "wall_s": 30.0},
        },
        "algorithms": {"rows": {"grpo": _compared_row("math grpo", 0.75), "dpo": _compared_row("math dpo", 0.0)}},
        "variants": {
            "envs": ["math", "webshop"],
            "overrides": {
                "tis": ['algorithm.is_correction_level="token"'],
                "as-shipped": [],
                "history1": ["rollout.history_turns=1"],
            },
            "rows": {
                "math tis": _compared_row("math tis", 0.5, mismatch_kl=[None, None]),
                "math as-shipped": {"name": "math as-shipped", "failed": "exited with code 1", "wall_s": 90.0},
                "webshop history1": _compared_row("webshop history1", 0.75),
            },
        },
        "turn_budgets": {
            "seeds": [0, 1],
            "rows": [
                {"turns": 4, "seed": 0, **_compared_row("math 4 turns seed 0", 1.0, wall_s=480.0)},
                {"turns": 4, "seed": 1, "name": "math 4 turns seed 1", "failed": "exited with code 1", "wall_s": 60.0},
            ],
            "summary": [
                {
                    "turns": 4,
                    "seeds": 1,
                    "rl_success_mean": 1.0,
                    "rl_success_std": 0.0,
                    "reward_variance_across_seeds": 0.0,
                }
            ],
        },
    },
}


def test_the_comparison_tables_read_each_rows_outcome_and_the_command_that_ran_them():
    algorithms = render_algorithms(COMPARED).splitlines()
    assert algorithms[0] == (
        "| algorithm | base | warm start | after RL | training reward, first -> last step | mean `mismatch_kl` "
        "| RL steps | wall |"
    )
    assert algorithms[2] == "| GRPO | 0.00 | 0.38 | 0.75 | 0.25 -> 0.50 | 0.0010 | 8.0 min | 17.2 min |"
    assert algorithms[3] == "| dpo | 0.00 | 0.38 | 0.00 | 0.25 -> 0.50 | 0.0010 | 8.0 min | 17.2 min |"
    # The options the run was given, but for where it wrote.
    assert algorithms[-1].startswith(
        """One `agentfly-bench --suite learning --suite-options '{"algorithms": ["grpo"], "variants": {"tis": ["..."]}}'` run"""
    )
    variants = render_variants(COMPARED).splitlines()
    assert variants[2] == (
        '| tis | `--config calculator` | `algorithm.is_correction_level="token"` | 0.00 | 0.38 | 0.50 | 0.25 -> 0.50 '
        "| - | 8.0 min | 17.2 min |"
    )
    assert variants[3] == (
        "| as-shipped | `--config calculator` | the preset as it ships | failed | failed | failed | failed | failed "
        "|  | 1.5 min |"
    )
    # A variant run on some envs only (variant_envs by name): the others have no line.
    assert [line.split(" | ")[:2] for line in variants[4:-2]] == [["| history1", "`--config webshop`"]]
    budgets = render_turn_budgets(COMPARED).splitlines()
    assert budgets[0].startswith("| max turns | held-out success after RL, seeds 0 / 1 | mean ± std |")
    assert budgets[2] == "| 4 | 1.00 / failed | 1.00 ± 0.00 | 0.50 / failed | 0.000 | 1.0-8.0 min |"
    assert BUDGETS in TARGETS[Path("docs/learning.md")]
    assert render_turn_budgets({**COMPARED, "learning": {}}) == "The run compared no turn budgets."


def test_the_agent_tables_read_the_agent_rows_stages_and_prefix_mismatches():
    stages = render_agent_stages(COMPARED).splitlines()
    assert stages[2:5] == [
        "| base SmolLM2-135M-Instruct | 0.000 | 0.00 | 1.00 |",
        "| after the warm start | 0.469 | 1.86 | 2.39 |",
        "| after RL | 1.000 | 1.00 | 2.00 |",
    ]
    assert stages[-1].endswith(
        ", its `math-agent` row: 16 RL steps of 16 episodes, training reward 0.25 at the first and 0.50 at the "
        "last, 17.2 min in all."
    )
    apis = render_agent_apis(COMPARED).splitlines()
    assert apis[2] == (
        "| [`calculator_agent.py`](../examples/calculator_agent.py) | Chat Completions (`openai`) | "
        "`agentfly-train --config agent-calculator` | 0.000 | 0.469 | 1.000 | 0.000 | 17.2 min |"
    )
    assert apis[3].endswith("| failed | failed | failed | failed | 0.5 min |") and len(apis) == 6  # no Responses row


def test_the_demo_table_reads_the_calculator_rows_stages_and_a_failed_row_says_so():
    run = copy.deepcopy(RUN)
    run["learning"]["envs"]["math"] = {
        **ROW,
        "stages": {
            stage: {**numbers, "reward_mean": 0.5, "tool_calls_per_episode": 1.0, "turns_per_episode": 2.0}
            for stage, numbers in STAGES.items()
        },
    }
    demo = render_demo(run).splitlines()
    assert demo[0] == "| held-out (64 tasks, greedy) | success | reward | tool calls / episode | turns / episode |"
    assert demo[3] == "| after the warm start | 0.380 | 0.500 | 1.00 | 2.00 |"
    run["learning"]["envs"]["math"] = {"name": "math", "failed": "exited with code 1", "wall_s": 1.0}
    assert render_demo(run) == "The `math` row failed in the run: exited with code 1."
