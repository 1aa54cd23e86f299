"""``agentfly-bench --suite update``: the trainer's RL update alone, tokens/s and peak memory, per way of computing it.

The update (:meth:`~agentfly_train.backends.local.LocalTrainer._update`: score, advantages, then the GRPO policy
loss's forward and backward over length-sorted micro-batches, one optimiser step) runs on one fixed batch shaped
like the calculator demo's: 32 episodes of SmolLM2-135M-Instruct (the bundled model), 150-320 tokens each, a
prompt then model turns (mask 1) and observations (mask 0), four chains per task with 0/1 rewards. Each way runs
in a process of its own (its peak resident memory is its own), one warm-up update then the timed ones:

- **whole logits** (the update before issue 26): the model's own float32 logits over the whole vocabulary
  from the first action token on, kept for the backward pass;
- **action tokens, chunked**: the output layer and the softmax only at action tokens, in chunks recomputed in
  the backward pass (:func:`~agentfly_train.training.sequence_logprobs`);
- **... + bf16 autocast**: the same with the forward and backward in bfloat16 (``train.bf16_autocast``; this CPU
  has AMX and AVX-512 BF16).

Each at ``train.micro_batch_size`` 4 (the demo's) and 16 (the memory question: a 16 x 320-token micro-batch held
18 GB before). Tokens/s counts every token of the batch (prompts and observations included) per second of update.

Example:
    >>> [name for name, _, _ in WAYS]
    ['whole logits', 'action tokens, chunked', 'action tokens, chunked + bf16 autocast']
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import tempfile
import time
from typing import Any

from rich.console import Console
from rich.table import Table

DESCRIPTION = "the RL update alone: tokens/s and peak memory, whole logits vs chunked action log-probs vs bf16 autocast"

#: (name, chunked action log-probs, bf16 autocast)
WAYS = [
    ("whole logits", False, False),
    ("action tokens, chunked", True, False),
    ("action tokens, chunked + bf16 autocast", True, True),
]
MICRO_BATCHES = (4, 16)


def _episodes(tokenizer: Any, count: int, seed: int) -> list[Any]:
    """Episodes shaped like the calculator demo's: a prompt, then turns of model tokens and observations."""
    import numpy as np

    from agentfly_train.rollout import Episode

    rng = np.random.default_rng(seed)
    episodes = []
    for index in range(count):
        episode = Episode(group=index // 4, chain=index % 4, seed=index)
        total = int(rng.integers(150, 321))
        episode.append(rng.integers(0, len(tokenizer), 90).tolist(), generated=False)
        generated = True
        while len(episode.token_ids) < total:
            piece = rng.integers(0, len(tokenizer), int(rng.integers(20, 45))).tolist()[
                : total - len(episode.token_ids)
            ]
            episode.append(piece, generated=generated, logprobs=(-rng.random(len(piece))).tolist() if generated else ())
            generated = not generated
        episode.verdict = float(rng.integers(0, 2))
        episodes.append(episode)
    return episodes


def _measure(way: tuple[str, bool, bool], micro: int, episodes: int, repeats: int, out: Any) -> None:
    """In a process of its own: the update's seconds per repeat and the process's peak memory growth."""
    import msgspec

    import agentfly_train.backends.local as local
    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.config import Config
    from agentfly_train.training import Batch, _whole_logits_logprobs

    _, chunked, bf16 = way
    if not chunked:  # the update as it was: the model's whole logits
        local.sequence_logprobs = _whole_logits_logprobs
    config = Config.load("calculator")
    config.out_dir = tempfile.mkdtemp()
    config.rollout = msgspec.structs.replace(config.rollout, generator="transformers")
    config.train = msgspec.structs.replace(config.train, micro_batch_size=micro, bf16_autocast=bf16)
    trainer = LocalTrainer(config)
    batch = Batch.from_episodes(_episodes(trainer.tokenizer, episodes, 0), trainer.pad_id, trainer.device)
    tokens = int(batch.lengths.sum())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds = []
    for _ in range(repeats + 1):  # the first is a warm-up
        started = time.perf_counter()
        trainer._update(batch)
        seconds.append(time.perf_counter() - started)
    peak_growth_gb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2**20
    out.send({"seconds": seconds[1:], "tokens": tokens, "peak_growth_gb": peak_growth_gb})
    trainer.close()


def run(quick: bool) -> dict[str, Any]:
    episodes, repeats = (8, 1) if quick else (32, 2)
    spawn = multiprocessing.get_context("spawn")
    rows = []
    for micro in MICRO_BATCHES:
        for way in WAYS:
            receiving, sending = spawn.Pipe(duplex=False)
            child = spawn.Process(target=_measure, args=(way, micro, episodes, repeats, sending))
            child.start()
            result = receiving.recv()
            child.join()
            median = statistics.median(result["seconds"])
            rows.append(
                {
                    "way": way[0],
                    "micro_batch": micro,
                    "update_s": median,
                    "tokens": result["tokens"],
                    "tokens_per_s": result["tokens"] / median,
                    "peak_growth_gb": result["peak_growth_gb"],
                }
            )
    for row in rows:
        base = next(r for r in rows if r["micro_batch"] == row["micro_batch"] and r["way"] == WAYS[0][0])
        row["speedup"] = row["tokens_per_s"] / base["tokens_per_s"]
        row["memory_ratio"] = row["peak_growth_gb"] / base["peak_growth_gb"] if base["peak_growth_gb"] else 0.0
    return {"episodes": episodes, "repeats": repeats, "rows": rows}


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"The RL update of {results['episodes']} calculator-demo episodes (SmolLM2-135M, GRPO), "
        f"median of {results['repeats']}"
    )
    for column in ("micro-batch", "way", "update", "tokens/s", "x whole logits", "peak memory growth", "x whole"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for row in results["rows"]:
        table.add_row(
            str(row["micro_batch"]),
            row["way"],
            f"{row['update_s']:.1f} s",
            f"{row['tokens_per_s']:.0f}",
            f"{row['speedup']:.2f}x",
            f"{row['peak_growth_gb']:.2f} GB",
            f"{row['memory_ratio']:.2f}x",
        )
    console.print(table)
