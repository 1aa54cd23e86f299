"""What each episode trained on, token by token: ``tokens.jsonl`` beside ``trajectories.jsonl``.

A trajectory records what the env saw (text); the trainer trains on tokens. This sidecar keeps, per
episode, the token ids of the whole sequence, which of them the model generated (the action mask that
the loss uses) and the generator's log-prob of each generated token, so ``agentfly-view`` can show
exactly what was trained on. Each token's text (the token decoded alone) is stored too, so reading the
file needs no tokenizer.

The format is compact where it is cheap to be: the mask is stored as run lengths (a multi-turn episode
is a few long runs), log-probs only for generated tokens, rounded to 4 decimals. Records are joined to
trajectories by ``episode_id``; where an id repeats (a resumed run plays again the steps after its
checkpoint, evaluations append), the trajectories and records of the id pair up from the last. Each
call appends whole lines in one write, so a crash leaves at most one partial line, which readers skip.

This module imports only msgspec: the viewer reads the format without torch.

Example:
    >>> runs = mask_runs([0, 0, 1, 1, 1, 0, 1])
    >>> runs, mask_from_runs(runs)
    ([2, 3, 1, 1], [0, 0, 1, 1, 1, 0, 1])
    >>> mask_runs([1, 0])  # the first run is always of zeros (maybe empty)
    [0, 1, 1]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec


class TokenRow(msgspec.Struct, omit_defaults=True):
    """One row of an agent program's episode (:class:`~agentfly_train.gateway.Row`): the fields of a
    :class:`TokenRecord`, and whether the row began with a prefix mismatch."""

    token_ids: list[int]
    mask_runs: list[int]
    logprobs: list[float] = msgspec.field(default_factory=list)
    pieces: list[str] = msgspec.field(default_factory=list)
    mismatch: bool = False


class TokenRecord(msgspec.Struct, omit_defaults=True):
    """One episode's token sequence as trained.

    Attributes:
        episode_id: The trajectory's ``episode_id``.
        token_ids: The whole sequence: prompt, turns, observations.
        mask_runs: The action mask as run lengths, alternating zeros and ones, starting with zeros.
        logprobs: The generator's log-prob of each generated token (mask 1), in order.
        pieces: Each token decoded alone (what the viewer shows).
        rows: What the episode was trained as when that is not its own sequence: an agent program's rows (its own
            ``token_ids`` are then empty), or the windows of a bounded history (``rollout.history_turns``).
    """

    episode_id: str
    token_ids: list[int]
    mask_runs: list[int]
    logprobs: list[float] = msgspec.field(default_factory=list)
    pieces: list[str] = msgspec.field(default_factory=list)
    rows: list[TokenRow] = msgspec.field(default_factory=list)

    @property
    def action_mask(self) -> list[int]:
        return mask_from_runs(self.mask_runs)


def mask_runs(mask: Sequence[int]) -> list[int]:
    """Run lengths of a 0/1 mask, alternating, the first run of zeros (0 long when the mask starts with 1)."""
    runs: list[int] = []
    current, length = 0, 0
    for value in mask:
        bit = 1 if value else 0
        if bit != current:
            runs.append(length)
            current, length = bit, 0
        length += 1
    runs.append(length)
    return runs


def mask_from_runs(runs: Sequence[int]) -> list[int]:
    """The 0/1 mask back from :func:`mask_runs`."""
    mask: list[int] = []
    for index, length in enumerate(runs):
        mask.extend([index % 2] * length)
    return mask


def token_record(episode: Any, tokenizer: Any) -> TokenRecord:
    """The record of a played :class:`~agentfly_train.rollout.Episode` (one with a trajectory)."""
    rows = [token_row(row, tokenizer) for row in episode.sequences if row is not episode]  # what was trained on
    own = token_row(episode, tokenizer)
    return TokenRecord(
        episode_id=episode.trajectory.episode_id or "",
        token_ids=own.token_ids,
        mask_runs=own.mask_runs,
        logprobs=own.logprobs,
        pieces=own.pieces,
        rows=rows,
    )


def token_row(sequence: Any, tokenizer: Any) -> TokenRow:
    """A token sequence (an episode's own, or a row of an agent program's) as stored."""
    generated = [round(lp, 4) for lp, bit in zip(sequence.logprobs, sequence.action_mask) if bit]
    return TokenRow(
        token_ids=list(sequence.token_ids),
        mask_runs=mask_runs(sequence.action_mask),
        logprobs=generated,
        pieces=tokenizer.batch_decode([[t] for t in sequence.token_ids], skip_special_tokens=False),
        mismatch=getattr(sequence, "mismatch", False),
    )


_encoder = msgspec.json.Encoder()


def write_token_log(path: str | os.PathLike[str], episodes: Iterable[Any], tokenizer: Any) -> None:
    """Append the records of the episodes that have a trajectory (the ones written to trajectories.jsonl)."""
    lines = b"".join(_encoder.encode(token_record(e, tokenizer)) + b"\n" for e in episodes if e.trajectory is not None)
    path = Path(path)
    with open(path, "ab") as handle:
        if handle.tell() and _last_byte(path) != b"\n":  # a writer died mid-line: start a fresh one
            lines = b"\n" + lines
        handle.write(lines)


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)
