"""The local backend's update leaves out episodes whose env failed (``episode.failure``): they add nothing to
the loss, and a group-baseline algorithm learns nothing from a group left with one finished episode. The update
on a batch with such episodes is the update on the batch without them."""

from __future__ import annotations

import copy

import pytest
import torch
from test_train_learning import ShoutEnv, shout_config
from test_train_rollout import tiny_model

from agentfly_env.core.recording import read_trajectories
from agentfly_train.backends.local import LocalTrainer
from agentfly_train.metrics import read_metrics
from agentfly_train.run_files import CHECKPOINTS_DIR, METRICS_FILE, TRAJECTORIES_FILE, checkpoint_name
from agentfly_train.training import Batch


@pytest.mark.parametrize("algo", ["grpo", "rloo", "reinforce++", "gigpo"])
def test_an_update_leaves_out_failed_episodes_and_a_lone_survivors_group(tokenizer, tmp_path, algo):
    torch.set_num_threads(1)
    config = shout_config(algo, tmp_path, steps=1, epochs=1)

    def trainer() -> LocalTrainer:
        built = LocalTrainer(copy.deepcopy(config), model=tiny_model(tokenizer), tokenizer=tokenizer, env_fn=ShoutEnv)
        # Plain SGD: the weights then move by the gradient (Adam's first step is lr x its sign, float noise included).
        built.optimizer = torch.optim.SGD(built.policy.parameters(), lr=1.0)
        return built

    played, alone = trainer(), trainer()
    episodes = played.rollout.run([11, 12, 13, 14], sample_seed=5).episodes  # four groups of four chains
    for episode in episodes[1:4]:  # group 0 keeps one finished episode
        episode.failure = "the env died"
    grouped = played.config.algo_spec.baseline is not None
    # A group baseline has nothing to compare group 0's survivor with; REINFORCE++ trains on it.
    kept = [e for e in episodes if e.failure is None and not (grouped and e.group == 0)]
    anchors = played.config.algo_spec.step_credit  # GiGPO: the failed episodes' turns are no anchors either
    update = played._update(Batch.from_episodes(episodes, played.pad_id, played.device, anchors=anchors))
    reference = alone._update(Batch.from_episodes(kept, alone.pad_id, alone.device, anchors=anchors))
    assert update["left_out_episodes"] == 16 - len(kept) and reference["left_out_episodes"] == 0
    assert update["policy_loss"] == pytest.approx(reference["policy_loss"], abs=1e-6)
    assert update["advantage_mean"] == pytest.approx(reference["advantage_mean"], abs=1e-6)
    assert update["grad_norm"] == pytest.approx(reference["grad_norm"], rel=1e-4) and update["grad_norm"] > 0
    for ours, theirs in zip(played.policy.parameters(), alone.policy.parameters(), strict=True):
        assert torch.allclose(ours, theirs, atol=1e-5)
    played.close()
    alone.close()


class FlakyShoutEnv(ShoutEnv):
    """ShoutEnv whose backend dies under the second turn of every third task."""

    async def _reset(self, seed, options):
        self.doomed = seed is not None and seed % 3 == 0
        return await super()._reset(seed, options)

    async def _step(self, action):
        if self.doomed and self.said:
            raise ConnectionResetError("the env's backend went away")
        return await super()._step(action)


def test_a_training_run_survives_envs_that_die(tokenizer, tmp_path):
    """The issue's reproduction in small: envs die during the run's rollouts, every step still trains and
    checkpoints, and the metrics count what was left out."""
    torch.set_num_threads(1)
    config = shout_config("grpo", tmp_path, steps=3, epochs=1, save_every=1)
    trainer = LocalTrainer(config, model=tiny_model(tokenizer), tokenizer=tokenizer, env_fn=FlakyShoutEnv)
    try:
        trainer.fit()
    finally:
        trainer.close()
    records = [r for r in read_metrics(tmp_path / METRICS_FILE) if r["step"] >= 1]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert sum(r["failed_episodes"] for r in records) >= 4  # at least one task of four chains each
    assert all(r["left_out_episodes"] >= r["failed_episodes"] for r in records)
    assert (tmp_path / CHECKPOINTS_DIR / checkpoint_name(3)).is_dir()  # older ones are pruned (keep_checkpoints)
    failed = [t for t in read_trajectories(tmp_path / TRAJECTORIES_FILE) if t.steps and not t.done]
    assert failed  # a failed episode's record is kept, as far as its env got
