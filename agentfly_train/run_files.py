"""The names of what a run directory holds: the trainer writes them, ``eval`` writes its own, the viewer reads them.

A training run (``agentfly-train``, local backend) writes, under ``out_dir``::

    config.json          the resolved config
    metrics.jsonl        one record per training step (and step 0: the warm start)
    trajectories.jsonl   every episode played
    tokens.jsonl         each episode's tokens as trained (beside every trajectories.jsonl)
    tensorboard/         the same scalars as metrics.jsonl
    reward_curve.png     the reward by step, drawn at the end
    warm-start/          the policy as the warm start left it (a resumed run's KL reference)
    checkpoints/step-000012/trainer.pt
    final/               the trained model (loadable with --model)
    stages/<stage>/eval/ held-out evaluations before, between and after training (eval.stages)
    eval/                agentfly-train eval: trajectories.jsonl, tokens.jsonl, summary.json

This module imports nothing, so the viewer and light tools can share it.

Example:
    >>> from pathlib import Path
    >>> str(Path("runs/x") / STAGES_DIR / "rl" / EVAL_DIR / SUMMARY_FILE)
    'runs/x/stages/rl/eval/summary.json'
    >>> checkpoint_name(12)
    'step-000012'
"""

from __future__ import annotations

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
TRAJECTORIES_FILE = "trajectories.jsonl"
#: The token sidecar of a trajectories file, in the same folder (:mod:`agentfly_train.tokens_log`).
TOKENS_FILE = "tokens.jsonl"
TENSORBOARD_DIR = "tensorboard"
REWARD_CURVE_FILE = "reward_curve.png"
#: The policy as the warm start left it (a transformers folder).
WARM_START_DIR = "warm-start"
CHECKPOINTS_DIR = "checkpoints"
#: A checkpoint folder is this prefix and the step, zero-padded (sorting by name sorts by step).
CHECKPOINT_PREFIX = "step-"
#: The state a checkpoint folder holds (weights, optimiser states, the step).
CHECKPOINT_STATE_FILE = "trainer.pt"
FINAL_MODEL_DIR = "final"
#: Held-out evaluations during training: ``stages/<stage>/eval/``.
STAGES_DIR = "stages"
#: An evaluation's folder (``agentfly-train eval``, and each stage's).
EVAL_DIR = "eval"
#: An evaluation's report, in its folder.
SUMMARY_FILE = "summary.json"


def checkpoint_name(step: int) -> str:
    """The folder of step ``step``'s checkpoint under :data:`CHECKPOINTS_DIR`."""
    return f"{CHECKPOINT_PREFIX}{step:06d}"
