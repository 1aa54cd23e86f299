"""Reading run directories: incremental indexing of growing files, damaged lines skipped and counted,
filters and text search, per-env curves, the token sidecar's format (an agent program's rows too) and its
join to trajectories."""

from __future__ import annotations

import json
import os

import msgspec
import pytest
from docstring_examples import module_names, run_docstring_examples
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfly_view
from agentfly_env.core.types import Step, Trajectory
from agentfly_train.run_files import TOKENS_FILE
from agentfly_train.tokens_log import TokenRecord, TokenRow, mask_from_runs, mask_runs
from agentfly_view.runs import ENDED, EpisodeFilter, EpisodeIndex, RunDir, TokenIndex


def line(number: int, *, reward: float = 1.0, env: str = "AgentFly/Math-v0", text: str = "ok") -> bytes:
    trajectory = Trajectory(
        env_id=env,
        observation=f"task {number}",
        episode_id=f"{number // 4}-{number % 4}-0",
        steps=[Step(action=text, observation="", reward=reward, terminated=True, truncated=False, success=reward > 0)],
    )
    return msgspec.json.encode(trajectory) + b"\n"


#: A damaged line: a valid one cut short (a crash mid-write), or bytes that are not JSON at all.
damaged_lines = st.one_of(
    st.tuples(st.integers(0, 50), st.floats(0, 0.98)).map(lambda cut: line(cut[0])[: int(cut[1] * len(line(cut[0])))]),
    st.binary(max_size=40).map(lambda junk: b"#" + junk),
)


@given(st.lists(st.one_of(st.integers(0, 50), damaged_lines), max_size=30))
@settings(max_examples=60, deadline=None)
def test_any_mix_of_good_and_damaged_lines_keeps_every_good_one_and_counts_the_rest(tmp_path_factory, items):
    path = tmp_path_factory.mktemp("mix") / "trajectories.jsonl"
    good, damaged = [], 0
    with open(path, "wb") as handle:
        for item in items:
            if isinstance(item, int):
                handle.write(line(item))
                good.append(f"{item // 4}-{item % 4}-0")
            else:
                fragment = item.replace(b"\n", b" ")
                handle.write(fragment + b"\n")
                damaged += bool(fragment.strip())  # an empty line is no damage
    index = EpisodeIndex(path)
    index.refresh()
    assert index.episode_ids == good and index.corrupt == damaged
    assert [json.loads(index.line(n))["episode_id"] for n in range(len(index))] == good


def test_a_line_being_written_waits_for_its_newline_and_appended_lines_are_read_alone(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    whole = line(0) + line(1)
    path.write_bytes(whole[:-20])  # a writer halfway through the second line
    index = EpisodeIndex(path)
    assert index.refresh()
    assert len(index) == 1 and index.partial_tail and index.corrupt == 0
    assert not index.refresh()  # nothing new: a stat, no read
    with open(path, "ab") as handle:
        handle.write(whole[-20:] + line(2))
    assert index.refresh()
    assert index.episode_ids == ["0-0-0", "0-1-0", "0-2-0"] and not index.partial_tail


def test_a_run_killed_mid_write_then_resumed_skips_only_the_fragment(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    path.write_bytes(line(0) + line(1)[:30] + b"\n" + line(2))  # the next writer starts a fresh line
    index = EpisodeIndex(path)
    index.refresh()
    assert index.episode_ids == ["0-0-0", "0-2-0"] and index.corrupt == 1


def test_a_file_replaced_by_a_fresh_run_is_indexed_from_the_start(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    path.write_bytes(line(0) + line(1) + line(2))
    index = EpisodeIndex(path)
    index.refresh()
    path.unlink()
    path.write_bytes(line(7))
    index.refresh()
    assert index.episode_ids == ["1-3-0"]


def test_filters_and_text_search_select_the_right_episodes(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    with open(path, "wb") as handle:
        for number in range(12):
            env = "AgentFly/Search-v0" if number % 3 == 0 else "AgentFly/Math-v0"
            text = 'he said "Quoted" here' if number == 5 else "plain"
            handle.write(line(number, reward=number / 10, env=env, text=text))
    index = EpisodeIndex(path)
    index.refresh()
    assert index.select(EpisodeFilter(env="AgentFly/Search-v0")).tolist() == [0, 3, 6, 9]
    assert index.select(EpisodeFilter(success=False)).tolist() == [0]
    assert index.select(EpisodeFilter(min_reward=0.45, max_reward=0.75)).tolist() == [5, 6, 7]
    assert index.select(EpisodeFilter(step=2)).tolist() == [4, 5, 6, 7]  # ids 1-*-0: the second step
    assert index.select(EpisodeFilter(text='said "quoted')).tolist() == [5]  # case-insensitive, JSON-escaped
    assert index.select(EpisodeFilter(text="nowhere")).tolist() == []
    assert index.select(EpisodeFilter(env="AgentFly/Nope-v0")).tolist() == []
    assert index.select(EpisodeFilter(outcome=ENDED, env="AgentFly/Math-v0", success=True)).tolist() == [
        1,
        2,
        4,
        5,
        7,
        8,
        10,
        11,
    ]


def test_episodes_the_trainer_cut_are_named_by_the_limit_that_cut_them(tmp_path):
    path = tmp_path / "trajectories.jsonl"
    open_step = Step(action="a", observation="b", reward=0.0, terminated=False, truncated=False)
    env_cut = Step(action="a", observation="", reward=0.0, terminated=False, truncated=True, truncation_reason="crash")
    records = [
        Trajectory(env_id="E", observation="", steps=[open_step] * 3),  # at the turn limit
        Trajectory(env_id="E", observation="", steps=[open_step]),  # short of it: the token budget
        Trajectory(env_id="E", observation="", steps=[open_step, env_cut]),  # the env's own reason
    ]
    path.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in records))
    index = EpisodeIndex(path, max_turns=3)
    index.refresh()
    assert [index.row(n)["outcome"] for n in range(3)] == ["max_turns", "max_tokens", "crash"]
    assert index.row(0)["step"] is None  # no training id


def test_curves_are_per_env_means_by_step(synthetic_run):
    index = RunDir(synthetic_run).sources()["."].episodes
    curves = index.curves()
    assert curves["x_label"] == "step" and set(curves["envs"]) == {"AgentFly/Math-v0", "AgentFly/Search-v0"}
    math = curves["envs"]["AgentFly/Math-v0"]
    rows = [index.row(n) for n in range(len(index))]
    first = [r["reward"] for r in rows if r["env"] == "AgentFly/Math-v0" and r["step"] == 1]
    assert math["x"] == list(range(1, 9)) and math["reward"][0] == pytest.approx(sum(first) / len(first))


@given(st.lists(st.integers(0, 1), max_size=200))
def test_mask_runs_round_trip(mask):
    runs = mask_runs(mask)
    assert mask_from_runs(runs) == mask
    assert all(length > 0 for length in runs[1:]) and sum(runs) == len(mask)


def test_repeated_episode_ids_pair_trajectories_and_token_records_from_the_last(tmp_path):
    """A resumed run plays the steps after its checkpoint again (trajectories are trimmed, token records
    are not); evaluations append both."""
    first = TokenRecord("3-0-0", [1, 2, 3], mask_runs([0, 1, 1]), [-0.5, -0.25], ["a", "b", "c"])
    second = TokenRecord("3-0-0", [1, 2, 4, 5], mask_runs([0, 0, 1, 0]), [-0.125], ["a", "b", "d", "e"])
    (tmp_path / TOKENS_FILE).write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in (first, second)))
    trajectory = Trajectory(env_id="E", observation="", episode_id="3-0-0")
    (tmp_path / "trajectories.jsonl").write_bytes(msgspec.json.encode(trajectory) + b"\n")
    resumed = RunDir(tmp_path).sources()["."]
    tokens = resumed.episode(0)["tokens"]
    assert tokens["mask"] == [0, 0, 1, 0] and tokens["logprobs"] == [None, None, -0.125, None]
    (tmp_path / "trajectories.jsonl").write_bytes((msgspec.json.encode(trajectory) + b"\n") * 2)
    appended = RunDir(tmp_path).sources()["."]
    assert [appended.episode(n)["tokens"]["pieces"] for n in (0, 1)] == [["a", "b", "c"], ["a", "b", "d", "e"]]
    assert appended.tokens.tokens("9-9-9") is None and appended.tokens.tokens("3-0-0", later=2) is None


#: An agent program's row: its mask, and whether it began on a prefix mismatch.
agent_rows = st.lists(st.tuples(st.lists(st.integers(0, 1), max_size=20), st.booleans()), min_size=1, max_size=5)


@given(agent_rows)
@settings(max_examples=40, deadline=None)
def test_an_agent_programs_rows_are_shown_in_order_each_aligned_with_its_log_probs(tmp_path_factory, rows):
    folder = tmp_path_factory.mktemp("rows")
    stored = [
        TokenRow(
            token_ids=list(range(len(mask))),
            mask_runs=mask_runs(mask),
            logprobs=[-(row + position / 100) for position, bit in enumerate(mask) if bit],
            pieces=[f"{row}.{position}" for position in range(len(mask))],
            mismatch=mismatch,
        )
        for row, (mask, mismatch) in enumerate(rows)
    ]
    old = TokenRecord("0-0-0", [7], [0, 1], [-0.5], ["x"])
    agent = TokenRecord("0-0-1", [], mask_runs([]), rows=stored)
    (folder / TOKENS_FILE).write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in (old, agent)))
    assert msgspec.json.encode(agent).startswith(b'{"episode_id":"0-0-1"')  # indexed without decoding the rows
    index = TokenIndex(folder / TOKENS_FILE)
    index.refresh()
    assert index.tokens("0-0-0") == {"token_ids": [7], "pieces": ["x"], "mask": [1], "logprobs": [-0.5]}  # as before
    shown = index.tokens("0-0-1")
    assert shown["pieces"] == shown["mask"] == [] and len(shown["rows"]) == len(rows)
    for row, ((mask, mismatch), display) in enumerate(zip(rows, shown["rows"], strict=True)):
        assert display["mask"] == mask and display["mismatch"] == mismatch
        assert display["pieces"] == [f"{row}.{position}" for position in range(len(mask))]
        assert display["logprobs"] == [-(row + position / 100) if bit else None for position, bit in enumerate(mask)]


def test_only_trajectory_files_inside_the_run_are_found(tmp_path, synthetic_run):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "trajectories.jsonl").write_bytes(line(0))
    (synthetic_run / "eval").mkdir()
    (synthetic_run / "eval" / "trajectories.jsonl").write_bytes(line(1))
    os.symlink(outside, synthetic_run / "linked")  # a folder link out of the run
    (synthetic_run / "stages").mkdir()
    os.symlink(outside / "trajectories.jsonl", synthetic_run / "stages" / "trajectories.jsonl")  # a file link
    run = RunDir(synthetic_run)
    assert sorted(run.sources()) == [".", "eval"]
    assert run.inside("../elsewhere/trajectories.jsonl") is None and run.inside(str(outside)) is None
    assert run.inside("stages/trajectories.jsonl") is None and run.inside("eval/trajectories.jsonl") is not None


@pytest.mark.parametrize("name", module_names(agentfly_view))
def test_docstring_examples(name):
    run_docstring_examples(name)


def test_a_large_file_is_indexed_a_chunk_at_a_time_within_a_budget(tmp_path, monkeypatch):
    import agentfly_view.runs as runs

    monkeypatch.setattr(runs, "CHUNK_BYTES", 1000)
    path = tmp_path / "trajectories.jsonl"
    long_line = line(99, text="x" * 3000)  # longer than a chunk: read whole all the same
    path.write_bytes(b"".join(line(n) for n in range(30)) + long_line + line(31))
    index = EpisodeIndex(path)
    assert index.refresh(budget_s=0) and not index.caught_up and 0 < len(index) < 30
    assert not index.partial_tail
    index.refresh()
    assert index.caught_up and len(index) == 32 and index.episode_ids[30] == "24-3-0"
    assert json.loads(index.line(30))["steps"][0]["action"] == "x" * 3000


def test_token_ids_are_read_from_the_line_start_or_decoded_and_damage_shows_on_opening(tmp_path):
    path = tmp_path / TOKENS_FILE
    plain = TokenRecord("0-0-0", [1, 2], [1, 1], [-0.5], ["a", "b"])
    quoted = TokenRecord('eval "7"', [3], [0, 1], [-0.25], ["c"])  # escapes in the id: decoded
    damaged = msgspec.json.encode(TokenRecord("0-1-0", [4], [1], [], ["d"]))[:-3] + b"\n"
    path.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in (plain, quoted)) + damaged)
    index = TokenIndex(path)
    index.refresh()
    assert index.tokens('eval "7"')["mask"] == [1] and index.tokens("0-0-0")["pieces"] == ["a", "b"]
    assert index.tokens("0-1-0") is None and index.corrupt == 1  # cut short: no closing brace
    path.write_bytes(path.read_bytes().replace(b'"pieces":["a","b"]', b'"pieces":["a",7]'))
    index.refresh()
    assert "damaged" in index.tokens("0-0-0")
