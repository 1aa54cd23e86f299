"""The viewer's JSON API on generated runs and a real training run: pages, filters, one episode with its
tokens exactly as trained (an agent program's in rows), damaged lines counted, and no file outside the run
directories served."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from agentfly_env.core.recording import read_trajectories
from agentfly_train.cli import _print_summary
from agentfly_train.run_files import TOKENS_FILE, TRAJECTORIES_FILE
from agentfly_view.app import create_app
from agentfly_view.cli import find_runs, main
from agentfly_view.runs import RunDir

#: Where the test client says it sends its requests: the viewer answers loopback names only.
LOOPBACK = "http://127.0.0.1"


@pytest.fixture
def client(synthetic_run) -> TestClient:
    return TestClient(create_app([RunDir(synthetic_run)]), base_url=LOOPBACK)


def test_the_episode_list_pages_and_filters(client):
    everything = client.get("/api/episodes", params={"limit": 20}).json()
    assert everything["total"] == 64 and [r["index"] for r in everything["rows"]] == list(range(20))
    second = client.get("/api/episodes", params={"limit": 20, "offset": 20}).json()
    assert [r["index"] for r in second["rows"]] == list(range(20, 40))
    assert set(everything["facets"]["envs"]) == {"AgentFly/Math-v0", "AgentFly/Search-v0"}
    assert everything["facets"]["steps"] == [1, 8]
    failed = client.get("/api/episodes", params={"success": 0, "env": "AgentFly/Search-v0", "step": 3}).json()
    assert failed["total"] and all(
        not r["success"] and r["env"] == "AgentFly/Search-v0" and r["step"] == 3 for r in failed["rows"]
    )
    question = client.get("/api/episode", params={"index": 7}).json()["trajectory"]["task"]["question"]
    # The model's text, quotes and all (JSON escapes them in the file), in any case
    search = client.get("/api/episodes", params={"q": f'"EXPRESSION": "{question}"'}).json()
    assert [r["index"] for r in search["rows"]] == [7]


def test_one_episode_comes_whole_with_its_tokens(client):
    episode = client.get("/api/episode", params={"index": 5}).json()
    trajectory, tokens = episode["trajectory"], episode["tokens"]
    assert episode["row"]["episode_id"] == trajectory["episode_id"]
    assert trajectory["steps"][0]["tool_calls"][0]["name"] == "calculator"
    assert len(tokens["pieces"]) == len(tokens["mask"]) == len(tokens["logprobs"]) == len(tokens["token_ids"])
    assert all((lp is None) == (bit == 0) for lp, bit in zip(tokens["logprobs"], tokens["mask"], strict=True))


def test_the_tools_of_a_file_come_with_their_rates_and_latency(client, synthetic_run):
    """The per-tool panel's numbers: every calculator call of the synthetic run, its wall times as written."""
    answer = client.get("/api/tools", params={"run": 0, "source": "."}).json()
    written = list(read_trajectories(synthetic_run / TRAJECTORIES_FILE))
    milliseconds = [1000 * r.duration_s for t in written for s in t.steps for r in s.tool_results]
    assert answer["episodes"] == len(written) == 64 and list(answer["tools"]) == ["calculator"]
    assert answer["tools"]["calculator"] == {
        "calls": len(milliseconds),
        "calls_per_episode": len(milliseconds) / 64,
        "error_rate": 0.0,
        "timeout_rate": 0.0,
        "latency_ms_p50": pytest.approx(np.percentile(milliseconds, 50)),
        "latency_ms_p95": pytest.approx(np.percentile(milliseconds, 95)),
    }
    assert {1.0, 4.0} <= set(np.round(milliseconds, 6))  # the synthetic calls take 1 to 4 ms
    assert client.get("/api/tools", params={"run": 0, "source": "elsewhere"}).status_code == 404


def test_an_agent_programs_episode_comes_in_rows_with_its_mismatch_marked(tmp_path):
    from agentfly_view.synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path / "agents", episodes=16, per_step=8, agent_programs=True)
    client = TestClient(create_app([RunDir(run)]), base_url=LOOPBACK)
    listed = client.get("/api/episodes").json()["rows"]
    one_turn = next(r["index"] for r in listed if r["turns"] == 1)
    assert "rows" not in client.get("/api/episode", params={"index": one_turn}).json()["tokens"]
    two_turns = next(r["index"] for r in listed if r["turns"] >= 2)
    tokens = client.get("/api/episode", params={"index": two_turns}).json()["tokens"]
    assert tokens["token_ids"] == [] and [row["mismatch"] for row in tokens["rows"]] == [False, True]
    for row in tokens["rows"]:
        assert len(row["pieces"]) == len(row["mask"]) == len(row["logprobs"]) == len(row["token_ids"]) > 0
        assert all((lp is None) == (bit == 0) for lp, bit in zip(row["logprobs"], row["mask"], strict=True))


def test_curves_overlay_runs_and_split_envs(synthetic_run, tmp_path):
    from agentfly_view.synthetic import write_synthetic_run

    other = write_synthetic_run(tmp_path / "other", episodes=32, per_step=8, seed=1)
    client = TestClient(create_app([RunDir(synthetic_run), RunDir(other)]), base_url=LOOPBACK)
    runs = client.get("/api/curves", params={"runs": "0,1"}).json()
    assert [len(r["metrics"]["reward_mean"]["x"]) for r in runs] == [8, 4]
    assert all(set(r["episodes"]["envs"]) == {"AgentFly/Math-v0", "AgentFly/Search-v0"} for r in runs)
    assert client.get("/api/curves", params={"runs": "0,2"}).status_code == 404


def test_damaged_lines_are_counted_where_the_page_shows_them(synthetic_run, client):
    with open(synthetic_run / "trajectories.jsonl", "ab") as handle:
        handle.write(b'{"env_id": "AgentFly/Math-v0", "observ\n{not json}\n{"env_id": "AgentFly/Ma')
    run = client.get("/api/runs").json()[0]
    assert run["sources"]["."]["corrupt"] == 2 and run["sources"]["."]["partial_tail"]
    page = client.get("/api/episodes").json()
    assert page["total"] == 64 and page["status"]["corrupt"] == 2


def test_live_runs_show_appended_episodes(synthetic_run, client):
    lines = (synthetic_run / "trajectories.jsonl").read_bytes().splitlines(keepends=True)
    (synthetic_run / "trajectories.jsonl").write_bytes(b"".join(lines[:10]))
    assert client.get("/api/episodes").json()["total"] == 10
    with open(synthetic_run / "trajectories.jsonl", "ab") as handle:
        handle.write(b"".join(lines[10:]))
    assert client.get("/api/episodes").json()["total"] == 64


@pytest.mark.parametrize(
    "path",
    [
        "/api/episodes?source=..",
        "/api/episodes?source=../elsewhere",
        "/api/episodes?source=/etc",
        "/api/episode?source=linked&index=0",
        "/api/episode?source=.&index=64",
        "/api/episode?source=.&index=-1",
        "/api/episodes?run=1",
        "/static/../runs.py",
        "/static/%2e%2e/runs.py",
        "/static/..%2fruns.py",
        "/static/linked/trajectories.jsonl",
    ],
)
def test_nothing_outside_the_run_directories_is_served(synthetic_run, tmp_path, path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "trajectories.jsonl").write_bytes((synthetic_run / "trajectories.jsonl").read_bytes())
    os.symlink(outside, synthetic_run / "linked")
    client = TestClient(create_app([RunDir(synthetic_run)]), base_url=LOOPBACK)
    response = client.get(path)
    assert response.status_code in (400, 404) and b"AgentFly/Math-v0" not in response.content


def test_bad_numbers_are_a_400_with_a_message(client):
    response = client.get("/api/episodes", params={"min_reward": "lots"})
    assert response.status_code == 400 and "min_reward" in response.json()["error"]


def test_the_trainer_records_exactly_the_tokens_it_trained_on(trained_run):
    out, played = trained_run
    client = TestClient(create_app([RunDir(out)]), base_url=LOOPBACK)
    page = client.get("/api/episodes", params={"limit": 500}).json()
    assert page["total"] == len(played) == 32 and (out / TOKENS_FILE).exists()
    for row in page["rows"]:
        episode = played[row["episode_id"]]
        tokens = client.get("/api/episode", params={"index": row["index"]}).json()["tokens"]
        assert tokens["token_ids"] == episode.token_ids and tokens["mask"] == episode.action_mask
        generated = [lp for lp, bit in zip(episode.logprobs, episode.action_mask, strict=True) if bit]
        shown = [lp for lp in tokens["logprobs"] if lp is not None]
        assert shown == pytest.approx(generated, abs=1e-4)
        assert row["reward"] == pytest.approx(episode.reward) and row["success"] == episode.success


def test_the_cli_finds_runs_and_the_trainer_names_the_viewer(synthetic_run, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert find_runs(tmp_path) == [synthetic_run]
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing")])
    assert "not found" in capsys.readouterr().err
    from rich.console import Console

    console = Console(width=200)
    _print_summary(console, {"steps": 1, "metrics": str(synthetic_run / "metrics.jsonl")}, 1.0)
    assert f"agentfly-view {synthetic_run}" in capsys.readouterr().out


def test_an_evaluation_records_its_tokens_beside_its_trajectories(tokenizer, tmp_path):
    import msgspec
    from test_train_learning import ShoutEnv, shout_config
    from test_train_rollout import tiny_model

    from agentfly_train.evaluate import evaluate

    config = shout_config("grpo", tmp_path)
    config = msgspec.structs.replace(config, eval=msgspec.structs.replace(config.eval, episodes=3, concurrency=3))
    evaluate(config, model=tiny_model(tokenizer), tokenizer=tokenizer, env_fn=lambda: ShoutEnv(max_turns=3))
    client = TestClient(create_app([RunDir(tmp_path)]), base_url=LOOPBACK)
    assert client.get("/api/runs").json()[0]["sources"]["eval"]["has_tokens"]
    for index in range(3):
        episode = client.get("/api/episode", params={"source": "eval", "index": index}).json()
        tokens, turns = episode["tokens"], episode["trajectory"]["steps"]
        assert tokens["pieces"][0] == "<|im_start|>" and sum(tokens["mask"]) > 0
        # each model turn is a run of generated tokens
        assert sum(1 for a, b in zip([0, *tokens["mask"]], tokens["mask"]) if b and not a) == len(turns)


def test_a_run_that_logged_only_to_tensorboard_has_its_curves(tmp_path):
    """The OpenRLHF backend writes TensorBoard events (``train/`` tags), no metrics.jsonl."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tensorboard" / "openrlhf"))
    for step in range(1, 4):
        writer.add_scalar("train/reward", step / 4, step)
        writer.add_scalar("train/kl", step / 100, step)
    writer.close()
    client = TestClient(create_app([RunDir(tmp_path)]), base_url=LOOPBACK)
    metrics = client.get("/api/curves").json()[0]["metrics"]
    assert metrics["reward"] == {"x": [1, 2, 3], "y": [0.25, 0.5, 0.75]}
    assert metrics["kl"]["x"] == [1, 2, 3] and metrics["kl"]["y"] == pytest.approx([0.01, 0.02, 0.03])


def test_the_viewer_binds_to_loopback_unless_told_otherwise(synthetic_run, monkeypatch):
    import uvicorn

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: calls.append(options))
    assert main([str(synthetic_run)]) == 0
    with pytest.raises(SystemExit) as refused:  # another interface only when asked for on purpose
        main([str(synthetic_run), "--host", "0.0.0.0", "--port", "9001"])
    assert refused.value.code == 2
    assert main([str(synthetic_run), "--host", "0.0.0.0", "--port", "9001", "--allow-remote"]) == 0
    assert [(c["host"], c["port"]) for c in calls] == [("127.0.0.1", 8600), ("0.0.0.0", 9001)]


def outside_copy(run, tmp_path, name: str) -> Path:
    """``run``'s ``name`` copied to a folder outside every run, and the run's own file made a link to it."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    (outside / name).write_bytes((run / name).read_bytes())
    (run / name).unlink()
    os.symlink(outside / name, run / name)
    return outside / name


@pytest.mark.parametrize("name", ["metrics.jsonl", "tokens.jsonl", "config.json", "trajectories.jsonl"])
def test_a_runs_file_that_links_outside_the_run_is_not_read(synthetic_run, tmp_path, name):
    outside_copy(synthetic_run, tmp_path, name)
    client = TestClient(create_app([RunDir(synthetic_run)]), base_url=LOOPBACK)
    run = client.get("/api/runs").json()[0]
    curves = client.get("/api/curves").json()[0]
    episodes = client.get("/api/episodes")
    opened = client.get("/api/episode", params={"index": 0})
    if name == "metrics.jsonl":
        assert curves["metrics"] == {} and run["metrics"]["lines"] == 0 and run["metrics"]["bytes"] == 0
    if name == "config.json":
        assert run["algo"] is None and run["env"] is None
    if name == "tokens.jsonl":
        assert opened.json()["tokens"] is None
    if name == "trajectories.jsonl":  # no source there at all
        assert episodes.status_code == opened.status_code == 404 and b"AgentFly" not in episodes.content
    else:
        assert episodes.json()["total"] == 64 and opened.status_code == 200


def test_an_indexed_file_swapped_for_a_link_outside_the_run_is_refused(synthetic_run, tmp_path):
    client = TestClient(create_app([RunDir(synthetic_run)]), base_url=LOOPBACK)
    assert client.get("/api/episodes").json()["total"] == 64  # indexed while it was the run's own
    secret = outside_copy(synthetic_run, tmp_path, "trajectories.jsonl")
    secret.write_bytes(secret.read_bytes().replace(b"AgentFly/Math-v0", b"AgentFly/Secret-v0"))
    for path, params in (("/api/episode", {"index": 0}), ("/api/episodes", {"q": "Secret"})):
        response = client.get(path, params=params)
        assert b"Secret" not in response.content and response.status_code in (200, 403, 404), response.text
    assert client.get("/api/episodes").json()["total"] == 0  # re-read: the file is outside the run


def test_a_token_record_whose_mask_runs_outgrow_its_tokens_is_shown_damaged(synthetic_run):
    tokens = synthetic_run / TOKENS_FILE
    records = tokens.read_bytes().splitlines()
    first = json.loads(records[0])
    for runs in ([10**12], [0, 10**12, 3], [-5, 10], [1] * 2):
        record = {**first, "mask_runs": runs}
        tokens.write_bytes(b"\n".join([json.dumps(record).encode(), *records[1:]]) + b"\n")
        client = TestClient(create_app([RunDir(synthetic_run)]), base_url=LOOPBACK)
        index = next(
            row["index"]
            for row in client.get("/api/episodes", params={"limit": 500}).json()["rows"]
            if row["episode_id"] == first["episode_id"]
        )
        response = client.get("/api/episode", params={"index": index})
        assert response.status_code == 200 and "mask" in response.json()["tokens"]["damaged"], runs


@pytest.mark.parametrize(
    "headers", [{"host": "evil.example"}, {"host": "evil.example:8600"}, {"origin": "http://evil.example"}]
)
def test_a_foreign_host_or_origin_is_refused(client, headers):
    for path in ("/", "/api/runs", "/api/episode?index=0", "/static/app.js"):
        response = client.get(path, headers=headers)
        assert response.status_code == 403 and b"AgentFly" not in response.content, path
    assert client.get("/api/runs", headers={"origin": LOOPBACK}).status_code == 200  # the page's own origin
