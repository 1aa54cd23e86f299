"""``agentfly-bench --suite update``: our update and TRL's GRPOTrainer's (in TRL's own venv) on the same batch."""

from __future__ import annotations

import json
import statistics

import pytest
from rich.console import Console

from agentfly_bench.suites import update
from agentfly_bench.suites._peers import peer_python


def test_the_peer_batch_is_our_batch_split_at_the_prompt(tmp_path):
    episodes = update._episodes(range(1000), 8, seed=0)  # any sized vocabulary
    path = tmp_path / "batch.json"
    update._write_peer_batch(episodes, path)
    sequences = json.loads(path.read_text())
    for episode, sequence in zip(episodes, sequences, strict=True):
        assert sequence["prompt"] + sequence["completion"] == episode.token_ids
        assert sequence["tool_mask"] == episode.action_mask[len(sequence["prompt"]) :]
        assert 0 in sequence["tool_mask"] and 1 in sequence["tool_mask"]  # observations are left out of the loss
    for group in range(2):  # GRPO's advantages: centred within each group of four chains
        advantages = [sequence["advantage"] for sequence in sequences[group * 4 : group * 4 + 4]]
        assert statistics.mean(advantages) == pytest.approx(0.0, abs=1e-6)


def test_ways_are_picked_by_name_and_an_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="'whole logits'"):
        update.run(quick=True, ways=["whole logit"])
    with pytest.raises(ValueError, match="TRL GRPOTrainer"):
        update.run(quick=True, ways=[], trl_ways=["TRL"])


def test_without_trl_the_suite_says_how_to_get_it(monkeypatch, capsys):
    monkeypatch.setenv("AGENTFLY_TRL_PYTHON", "/nonexistent/python")
    results = update.run(quick=True, ways=[])
    assert results["rows"] == [] and results["trl"] is None
    update.render(results, Console(width=200))
    assert "make peers" in capsys.readouterr().out


@pytest.mark.skipif(peer_python("trl", "AGENTFLY_TRL_PYTHON") is None, reason="TRL's venv is missing: make peers")
def test_trl_updates_the_same_batch_side_by_side(capsys, tiny_model_dir):
    results = update.run(
        quick=True,
        micro_batches=(4,),
        ways=[update.WAYS[1]],
        trl_ways=[update.TRL_WAYS[0]],
        episodes=4,
        model=tiny_model_dir,
    )
    ours, trl = results["rows"]
    assert (ours["side"], trl["side"]) == ("agentfly", "trl")
    assert ours["tokens"] == trl["tokens"] > 4 * 150  # the same four sequences on both sides
    assert ours["update_s"] > 0 and trl["update_s"] > 0
    assert ours["vs_trl"] == pytest.approx(ours["tokens_per_s"] / trl["tokens_per_s"])
    assert results["trl"]["trl"] == "1.16.0" and results["trl_error"] is None
    update.render(results, Console(width=200))
    assert "TRL GRPOTrainer" in capsys.readouterr().out
