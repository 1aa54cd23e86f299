"""``agentfly-bench --suite learning --quick``: each preset runs end to end (warm start, RL, three evaluated
stages) on the bundled SmolLM2, and the table and the plot come out. The learning itself is the suite's full run
(figures in the README); here the budgets are a smoke run's."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from rich.console import Console

from agentfly_bench.suites import available, learning
from agentfly_train.chat import ChatFormat
from agentfly_train.config import Config
from agentfly_train.models import load_tokenizer
from agentfly_train.sft import DemonstrationError, collect_expert, encode, parse_rows


def test_the_suite_runs_a_preset_through_its_three_stages(tmp_path, smollm2_dir, monkeypatch):
    monkeypatch.setenv("AGENTFLY_MODEL_CACHE", str(Path(smollm2_dir).parent))  # the preset's model, converted once
    assert available()["learning"] is learning and learning.DESCRIPTION
    results = learning.run(quick=True, envs=["search"], out_dir=str(tmp_path))
    row = results["envs"]["search"]
    assert row["env"] == "AgentFly/Search-v0" and row["steps"] == 1 and len(row["rewards"]) == 1
    assert list(row["stages"]) == ["base", "warm start", "rl"]
    for stage in row["stages"].values():
        assert 0 <= stage["success_rate"] <= 1 and stage["turns_per_episode"] >= 1
    assert (tmp_path / "search" / "warm-start" / "model.safetensors").exists()
    assert (tmp_path / "learning.png").stat().st_size > 10_000
    console = Console(record=True, width=160)
    learning.render(results, console)
    printed = console.export_text()
    assert "--config search" in printed and "AgentFly/Search-v0" in printed and "plumbing only" in printed


def test_an_unknown_env_is_refused_with_the_choices():
    with pytest.raises(
        ValueError, match=r"unknown envs \['chess'\]; choose from \['math', 'math-agent', 'search', 'webshop'\]"
    ):
        learning.run(quick=True, envs=["chess"])


@pytest.mark.parametrize("name", sorted(learning.PRESETS))
def test_each_presets_expert_wins_and_its_demonstrations_fit_the_token_budget(name, smollm2_dir):
    """The premise of a row: the warm start's demonstrations are wins and (nearly all) fit the preset's budget."""
    config = Config.load(learning.PRESETS[name])
    chat = ChatFormat(load_tokenizer(smollm2_dir), config.rollout.observation_role)
    episodes = list(collect_expert(config.env.id, 16, options=config.env.options))
    assert all(episode.steps[-1].success for episode in episodes)
    fitting = 0
    for demo in parse_rows((msgspec.to_builtins(e) for e in episodes), source=name):
        try:
            encode(chat, demo, max_tokens=config.rollout.max_episode_tokens)
            fitting += 1
        except DemonstrationError as error:
            assert "more than the" in str(error)
    assert fitting >= 14, f"{fitting} of 16 {name} demonstrations fit {config.rollout.max_episode_tokens} tokens"
