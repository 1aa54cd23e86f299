"""A run on several envs at once (``env.mix``): batches mix them, and metrics, the held-out stages and the reward
curve report each env as well as all of them."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from test_train_learning import PeekEnv, ShoutEnv, shout_config
from test_train_rollout import tiny_model

from agentfly_env.core.recording import read_trajectories
from agentfly_train.backends.local import LocalTrainer
from agentfly_train.config import Config

SHOUT, PEEK = "AgentFly/TestShout-v0", "AgentFly/TestPeek-v0"


@pytest.fixture
def two_envs():
    """Two registered test envs, registered only while the test runs (the registry tests see the real ones)."""
    gym.register(SHOUT, entry_point=lambda **options: ShoutEnv(**{"max_turns": 3, **options}))
    gym.register(PEEK, entry_point=PeekEnv)
    yield
    for env_id in (SHOUT, PEEK):
        del gym.registry[env_id]


def test_a_mixed_run_mixes_its_batches_and_reports_each_env(two_envs, tokenizer, tmp_path):
    data = shout_config("grpo", tmp_path, steps=3).to_dict()
    data["env"] = {"mix": [{"id": SHOUT, "weight": 1}, {"id": PEEK, "name": "peek", "weight": 1}], "eval_options": {}}
    data["eval"] = {"episodes": 8, "stages": True}
    data["log"]["plot"] = True
    config = Config.from_dict(data)
    assert config.env.id == "AgentFly/Mix-v0"
    steps: list[dict] = []
    trainer = LocalTrainer(config, model=tiny_model(tokenizer), tokenizer=tokenizer)
    summary = trainer.fit(on_step=lambda step, metrics: steps.append(metrics))

    per_env = [{key.rpartition("/")[0] for key in metrics if key.endswith("/episodes")} for metrics in steps]
    assert set().union(*per_env) == {SHOUT, "peek"}
    for metrics in steps:  # each env's share of the batch, and its numbers beside the overall ones
        counts = [metrics[f"{env}/episodes"] for env in (SHOUT, "peek") if f"{env}/episodes" in metrics]
        assert sum(counts) == metrics["episodes"] == 16 and all(count % 4 == 0 for count in counts)  # whole groups
        shares = [
            metrics[f"{env}/reward_mean"] * metrics[f"{env}/episodes"]
            for env in (SHOUT, "peek")
            if f"{env}/episodes" in metrics
        ]
        assert sum(shares) / 16 == pytest.approx(metrics["reward_mean"])
    trajectories = list(read_trajectories(tmp_path / "trajectories.jsonl"))
    assert {t.env_id for t in trajectories} == {SHOUT, "peek"}
    peek_tools = {t.system_prompt for t in trajectories if t.env_id == "peek"}
    assert peek_tools == {"Peek, then finish."}  # each episode is its own env's, prompt included

    for stage in summary["stages"].values():
        assert {f"{env}/success_rate" for env in (SHOUT, "peek")} <= stage.keys()
    evaluated = json.loads((tmp_path / "stages" / "rl" / "eval" / "summary.json").read_text())
    assert evaluated[f"{SHOUT}/episodes"] + evaluated["peek/episodes"] == 8
    assert (tmp_path / "reward_curve.png").stat().st_size > 0


def test_a_mix_and_an_env_id_together_are_refused():
    with pytest.raises(ValueError, match=r"give env.id \('AgentFly/Code-v0'\) or env.mix, not both"):
        Config.from_dict({"env": {"id": "AgentFly/Code-v0", "mix": [{"id": "AgentFly/Math-v0"}]}})
