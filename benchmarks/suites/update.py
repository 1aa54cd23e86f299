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
  has AMX and AVX-512 BF16), the attention of the passes with gradients in float32 (on a CPU, its bfloat16 backward
  is the slower one); the row **..., bf16 attention** runs that attention in bfloat16 too, as before;
- **... + activation checkpointing**: the same, keeping only each layer's input for the backward pass and
  recomputing the rest there (``train.gradient_checkpointing``): the same gradients for a second forward pass,
  the memory question's answer.
- **... + compiled layers**: the bf16 way with the decoder layers compiled by ``torch.compile`` for the update
  (``train.compile``): the same maths, element-wise work fused; its first update pays the compilation (the
  "first update" column; Inductor keeps it on disk, so a second process pays less).

Beside them, the peer: TRL's ``GRPOTrainer`` (``trl`` 1.16.0 in its own venv, ``make peers``; driven by
``_trl_peer.py``) updating on the same sequences (prompt, then a completion whose observation tokens its tool
mask leaves out), float32 weights and with bf16 autocast, as ours. Its loss runs transformers' model through
TRL's fused LM head, which also scores only the completion tokens in tiles.

Each at ``train.micro_batch_size`` 4 (the demo's) and 16 (the memory question: a 16 x 320-token micro-batch held
18 GB before). Tokens/s counts every token of the batch (prompts and observations included) per second of update.

Example:
    >>> [way.name for way in WAYS]  # doctest: +NORMALIZE_WHITESPACE
    ['whole logits', 'action tokens, chunked', 'action tokens, chunked + bf16 autocast, bf16 attention',
     'action tokens, chunked + bf16 autocast',
     'action tokens, chunked + bf16 autocast + activation checkpointing',
     'action tokens, chunked + bf16 autocast + compiled layers']
    >>> [name for name, _ in TRL_WAYS]
    ['TRL GRPOTrainer', 'TRL GRPOTrainer + bf16 autocast']
"""

from __future__ import annotations

import json
import multiprocessing
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from rich.console import Console
from rich.table import Table

from agentfly_bench.suites._peers import peer_python

DESCRIPTION = (
    "the RL update alone: tokens/s and peak memory, whole logits vs chunked action log-probs vs bf16 autocast, "
    "and TRL's GRPOTrainer on the same batch"
)


class Way(NamedTuple):
    """One way of computing our update."""

    name: str
    chunked: bool
    """Action log-probs in chunks (else the model's whole logits)."""
    bf16: bool
    """``train.bf16_autocast``."""
    checkpointing: bool = False
    """``train.gradient_checkpointing``."""
    compiled: bool = False
    """``train.compile``."""
    bf16_attention: bool = False
    """Under bf16 autocast, attention with gradients in bfloat16 too, as before issue 26's third stop (the trainer now
    runs it in float32 on a CPU: :func:`~agentfly_train.training.use_float32_attention_gradients`)."""


WAYS = [
    Way("whole logits", chunked=False, bf16=False),
    Way("action tokens, chunked", chunked=True, bf16=False),
    Way("action tokens, chunked + bf16 autocast, bf16 attention", chunked=True, bf16=True, bf16_attention=True),
    Way("action tokens, chunked + bf16 autocast", chunked=True, bf16=True),
    Way(
        "action tokens, chunked + bf16 autocast + activation checkpointing", chunked=True, bf16=True, checkpointing=True
    ),
    Way("action tokens, chunked + bf16 autocast + compiled layers", chunked=True, bf16=True, compiled=True),
]
#: (name, bf16 autocast): TRL's GRPOTrainer, float32 and autocast, each against our way of the same numerics
TRL_WAYS = [("TRL GRPOTrainer", False), ("TRL GRPOTrainer + bf16 autocast", True)]
MICRO_BATCHES = (4, 16)
PEER_SCRIPT = Path(__file__).with_name("_trl_peer.py")
HOW_TO_GET_TRL = (
    "TRL's venv is missing: run `make peers` (creates .venv-peers/trl with trl==1.16.0, which pins other "
    "versions of transformers and accelerate), or set AGENTFLY_TRL_PYTHON to a Python that has it"
)


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
        episode.prompt_length = 90
        episode.verdict = float(rng.integers(0, 2))
        episodes.append(episode)
    return episodes


def _write_peer_batch(episodes: list[Any], path: Path) -> None:
    """The episodes as TRL's side reads them: prompt, completion, tool mask and the group-normalised advantage."""
    sequences = []
    for episode in episodes:
        group = [other.verdict for other in episodes if other.group == episode.group]
        advantage = (episode.verdict - statistics.mean(group)) / (statistics.pstdev(group) + 1e-4)
        cut = episode.prompt_length
        sequences.append(
            {
                "prompt": episode.token_ids[:cut],
                "completion": episode.token_ids[cut:],
                "tool_mask": episode.action_mask[cut:],
                "advantage": advantage,
            }
        )
    path.write_text(json.dumps(sequences))


def _measure_trl(python: Path, order: dict[str, Any], micro: int, bf16: bool) -> dict[str, Any]:
    """TRL's side, in its venv: one process per measurement, as ours (``order``: the model, batch, repeats, lr)."""
    order = {**order, "micro_batch": micro, "bf16": bf16}
    completed = subprocess.run(
        [str(python), str(PEER_SCRIPT)], input=json.dumps(order) + "\n", capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"TRL's update process failed; its output:\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout)


def _measure(way: Way, micro: int, episodes: int, repeats: int, model: str | None, out: Any) -> None:
    """In a process of its own: the update's seconds per repeat and the process's peak memory growth."""
    import msgspec

    import agentfly_train.backends.local as local
    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.config import Config
    from agentfly_train.training import Batch, _whole_logits_logprobs

    if not way.chunked:  # the update as it was: the model's whole logits
        local.sequence_logprobs = _whole_logits_logprobs
    if way.bf16_attention:  # attention as autocast has it
        local.use_float32_attention_gradients = lambda model: False
    config = Config.load("calculator")
    config.out_dir = tempfile.mkdtemp()
    if model is not None:
        config.model = msgspec.structs.replace(config.model, path=model)
    config.rollout = msgspec.structs.replace(config.rollout, generator="transformers")
    config.train = msgspec.structs.replace(
        config.train,
        micro_batch_size=micro,
        bf16_autocast=way.bf16,
        gradient_checkpointing=way.checkpointing,
        compile=way.compiled,
    )
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
    out.send({"first_s": seconds[0], "seconds": seconds[1:], "tokens": tokens, "peak_growth_gb": peak_growth_gb})
    trainer.close()


def _ours(way: Way, micro: int, episodes: int, repeats: int, model: str | None) -> dict[str, Any]:
    spawn = multiprocessing.get_context("spawn")
    receiving, sending = spawn.Pipe(duplex=False)
    child = spawn.Process(target=_measure, args=(way, micro, episodes, repeats, model, sending))
    child.start()
    result = receiving.recv()
    child.join()
    return result


def _named(known: dict[str, Any], name: str) -> Any:
    """The way called ``name``; an unknown name is a ``ValueError`` listing the names there are."""
    if name not in known:
        raise ValueError(f"no update way is called {name!r}; the ways are: {', '.join(map(repr, known))}")
    return known[name]


def run(
    quick: bool,
    *,
    micro_batches: tuple[int, ...] = MICRO_BATCHES,
    ways: list[Way | str] = WAYS,
    trl_ways: list[tuple[str, bool] | str] = TRL_WAYS,
    episodes: int | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Each way (ours, then TRL's where its venv is) at each micro-batch size; the median update of each.

    ``ways`` and ``trl_ways`` may name the ways to run (``--suite-options '{"ways": ["whole logits", ...]}'``); the
    first of ours is the base of the ratios. ``model`` (a folder) stands for the calculator preset's model on both
    sides (the suite's tests pass a tiny one: they check the plumbing, not the speed).
    """
    ours, trl = {way.name: way for way in WAYS}, {name: (name, bf16) for name, bf16 in TRL_WAYS}
    ways = [_named(ours, way) if isinstance(way, str) else way for way in ways]
    trl_ways = [_named(trl, way) if isinstance(way, str) else way for way in trl_ways]
    episodes, repeats = (episodes or 8, 1) if quick else (episodes or 32, 2)
    trl_python = peer_python("trl", "AGENTFLY_TRL_PYTHON")
    trl_versions = None
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        order: dict[str, Any] = {"batch": str(Path(scratch) / "batch.json"), "repeats": repeats}
        if trl_python is not None and trl_ways:
            from transformers import AutoTokenizer

            from agentfly_train.config import Config
            from agentfly_train.models import resolve_model_path

            config = Config.load("calculator")
            order.update(model=model or resolve_model_path(config.model.path), lr=config.train.lr)
            _write_peer_batch(
                _episodes(AutoTokenizer.from_pretrained(order["model"]), episodes, 0), Path(order["batch"])
            )
        for micro in micro_batches:
            measured = [(way.name, "agentfly", way.bf16, _ours(way, micro, episodes, repeats, model)) for way in ways]
            if trl_python is not None:
                measured += [
                    (name, "trl", bf16, _measure_trl(trl_python, order, micro, bf16)) for name, bf16 in trl_ways
                ]
            for name, side, bf16, result in measured:
                median = statistics.median(result["seconds"])
                trl_versions = result.get("versions", trl_versions)
                rows.append(
                    {
                        "way": name,
                        "side": side,
                        "bf16": bf16,
                        "micro_batch": micro,
                        "update_s": median,
                        "first_update_s": result["first_s"],
                        "tokens": result["tokens"],
                        "tokens_per_s": result["tokens"] / median,
                        "peak_growth_gb": result["peak_growth_gb"],
                    }
                )
    for row in rows:
        same_micro = [r for r in rows if r["micro_batch"] == row["micro_batch"]]
        base = same_micro[0]  # the first way: whole logits
        row["speedup"] = row["tokens_per_s"] / base["tokens_per_s"]
        row["memory_ratio"] = row["peak_growth_gb"] / base["peak_growth_gb"] if base["peak_growth_gb"] else 0.0
        peer = next((r for r in same_micro if r["side"] == "trl" and r["bf16"] == row["bf16"]), None)
        row["vs_trl"] = row["tokens_per_s"] / peer["tokens_per_s"] if peer else None
    return {
        "episodes": episodes,
        "repeats": repeats,
        "rows": rows,
        "trl": trl_versions,
        "trl_error": None if trl_python is not None else HOW_TO_GET_TRL,
    }


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"The RL update of {results['episodes']} calculator-demo episodes (SmolLM2-135M, GRPO), "
        f"median of {results['repeats']}"
    )
    columns = ("micro-batch", "way", "update", "first update", "tokens/s", "x whole logits", "x TRL, same numerics")
    for column in (*columns, "peak memory growth", "x whole"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for row in results["rows"]:
        table.add_row(
            str(row["micro_batch"]),
            row["way"],
            f"{row['update_s']:.1f} s",
            f"{row['first_update_s']:.1f} s",
            f"{row['tokens_per_s']:.0f}",
            f"{row['speedup']:.2f}x",
            f"{row['vs_trl']:.2f}x" if row["vs_trl"] is not None else "-",
            f"{row['peak_growth_gb']:.2f} GB",
            f"{row['memory_ratio']:.2f}x",
        )
    console.print(table)
    if results["trl"]:
        console.print("TRL's side: " + ", ".join(f"{name} {version}" for name, version in results["trl"].items()))
    if results["trl_error"]:
        console.print(f"[yellow]{results['trl_error']}[/yellow]")
