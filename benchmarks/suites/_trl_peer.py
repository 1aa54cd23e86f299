"""The TRL side of ``agentfly-bench --suite update``, run by the Python of TRL's own venv.

TRL pins other versions of transformers and accelerate than ours, so it cannot share our process: this
script runs in its venv (``make peers``: ``.venv-peers/trl``), reads one order from stdin and answers one line
on stdout, then ends (its peak resident memory is its own):

- the order: ``{"model": folder, "batch": file, "micro_batch": m, "repeats": r, "bf16": bool, "lr": x}``; the
  batch file holds the same sequences our update trains on, each ``{"prompt": ids, "completion": ids,
  "tool_mask": 0/1 per completion token, "advantage": a}`` (observations in the completion have mask 0, as
  TRL's own multi-turn tool calling marks them);
- the answer: ``{"first_s": s, "seconds": [...], "tokens": n, "peak_growth_gb": g, "versions": {...}}``.

One update is what TRL's ``GRPOTrainer`` does with a generation batch: its loss (``compute_loss``: the policy's
log-probs of the completion tokens through transformers' fused LM head, the clipped GRPO objective) and
backward over length-sorted micro-batches of ``m`` sequences, then one optimiser step. Generation and rewards
are not timed (the batch is given), nor are they in ours. It imports nothing from agentfly.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from importlib import metadata


def main() -> int:
    # TRL and transformers log to stdout here and there: only the answer may go to the real stdout.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    order = json.loads(sys.stdin.readline())

    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    micro = order["micro_batch"]
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(),
        use_cpu=True,
        report_to="none",
        per_device_train_batch_size=micro,
        num_generations=4,  # four chains per task, as in the batch
        beta=0.0,  # no reference model: ours has none in the calculator preset either
        loss_type="grpo",
        learning_rate=order["lr"],
        # Ours keeps float32 weights and (with bf16) autocasts; TRL's defaults are bf16 and gradient
        # checkpointing on, so both are set to match: the same numerics, the same memory trade.
        bf16=order["bf16"],
        gradient_checkpointing=False,
        model_init_kwargs={"dtype": torch.float32},
    )
    trainer = GRPOTrainer(
        model=order["model"],
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "unused"}] * 8),
    )
    trainer.create_optimizer()
    model = trainer.model
    model.train()

    with open(order["batch"]) as file:
        sequences = json.load(file)
    sequences.sort(key=lambda sequence: len(sequence["prompt"]) + len(sequence["completion"]))
    pad = trainer.processing_class.pad_token_id
    batches = [_inputs(sequences[start : start + micro], pad) for start in range(0, len(sequences), micro)]
    tokens = sum(len(sequence["prompt"]) + len(sequence["completion"]) for sequence in sequences)
    trainer.current_gradient_accumulation_steps = len(batches)  # as its training loop sets it: one step per batch

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds = []
    for _ in range(order["repeats"] + 1):  # the first is a warm-up
        started = time.perf_counter()
        for inputs in batches:
            trainer.accelerator.backward(trainer.compute_loss(model, inputs))
        trainer.optimizer.step()
        trainer.optimizer.zero_grad()
        seconds.append(time.perf_counter() - started)
    peak_growth_gb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2**20
    versions = {name: metadata.version(name) for name in ("trl", "transformers", "accelerate", "torch")}
    answers.write(
        json.dumps(
            {
                "first_s": seconds[0],
                "seconds": seconds[1:],
                "tokens": tokens,
                "peak_growth_gb": peak_growth_gb,
                "versions": versions,
            }
        )
        + "\n"
    )
    return 0


def _inputs(sequences: list[dict], pad: int) -> dict:
    """One micro-batch as GRPOTrainer's loss takes it: prompts padded on the left, completions on the right."""
    import torch

    prompt_width = max(len(sequence["prompt"]) for sequence in sequences)
    completion_width = max(len(sequence["completion"]) for sequence in sequences)

    def padded(rows: list[list[int]], width: int, value: int, left: bool) -> torch.Tensor:
        return torch.tensor(
            [[value] * (width - len(row)) + row if left else row + [value] * (width - len(row)) for row in rows]
        )

    prompts = [sequence["prompt"] for sequence in sequences]
    completions = [sequence["completion"] for sequence in sequences]
    return {
        "prompt_ids": padded(prompts, prompt_width, pad, left=True),
        "prompt_mask": padded([[1] * len(row) for row in prompts], prompt_width, 0, left=True),
        "completion_ids": padded(completions, completion_width, pad, left=False),
        "completion_mask": padded([[1] * len(row) for row in completions], completion_width, 0, left=False),
        "tool_mask": padded([sequence["tool_mask"] for sequence in sequences], completion_width, 1, left=False),
        "advantages": torch.tensor([sequence["advantage"] for sequence in sequences]),
    }


if __name__ == "__main__":
    sys.exit(main())
