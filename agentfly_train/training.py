"""The training maths the RL update and the warm start share: episodes as padded tensors, micro-batches,
and the log-probs of a sequence's tokens under a model.

Example:
    >>> import torch
    >>> [piece.tolist() for piece in chunks(torch.arange(5), 2)]
    [[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from agentfly_train.rollout import Episode


@dataclass
class Batch:
    """Episodes as right-padded tensors; per-token tensors are aligned with log-prob columns.

    Column ``j`` of ``action_mask``, ``rollout_logprobs``, ... concerns token ``j + 1`` of ``input_ids``.
    ``finished`` is False for an episode whose env failed (``episode.failure``): the update leaves it out.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    action_mask: torch.Tensor
    rollout_logprobs: torch.Tensor
    rewards: torch.Tensor
    lengths: torch.Tensor
    finished: torch.Tensor

    @classmethod
    def from_episodes(cls, episodes: Sequence[Episode], pad_id: int, device: torch.device) -> Batch:
        width = max(len(e.token_ids) for e in episodes)
        ids = torch.full((len(episodes), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(episodes), width), dtype=torch.long)
        action = torch.zeros((len(episodes), width), dtype=torch.float32)
        logprobs = torch.zeros((len(episodes), width), dtype=torch.float32)
        for row, episode in enumerate(episodes):
            n = len(episode.token_ids)
            ids[row, :n] = torch.tensor(episode.token_ids)
            attention[row, :n] = 1
            action[row, :n] = torch.tensor(episode.action_mask, dtype=torch.float32)
            logprobs[row, :n] = torch.tensor(episode.logprobs, dtype=torch.float32)
        return cls(
            input_ids=ids.to(device),
            attention_mask=attention.to(device),
            action_mask=action[:, 1:].to(device),
            rollout_logprobs=logprobs[:, 1:].to(device),
            rewards=torch.tensor([e.reward for e in episodes], dtype=torch.float32, device=device),
            lengths=attention.sum(-1).to(device),
            finished=torch.tensor([e.failure is None for e in episodes], dtype=torch.bool, device=device),
        )

    def __len__(self) -> int:
        return len(self.rewards)

    def keeping(self, rows: torch.Tensor) -> Batch:
        """The batch with the action mask of every episode but ``rows`` (one bool each) zeroed: no loss term,
        no share of a token or sequence count comes from them."""
        return dataclasses.replace(self, action_mask=self.action_mask * rows.unsqueeze(1))

    def slice(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rows' ids, attention and action mask, cut to their own longest sequence."""
        width = int(self.lengths[rows].max())
        return self.input_ids[rows, :width], self.attention_mask[rows, :width], self.action_mask[rows, : width - 1]

    def micro_batches(self, rows: torch.Tensor, size: int) -> list[torch.Tensor]:
        """``rows`` in micro-batches of ``size`` similar lengths, so little compute goes into padding (a loss
        that sums the micro-batches' shares of the whole is not changed by the grouping)."""
        return chunks(rows[torch.argsort(self.lengths[rows].cpu(), stable=True)], size)

    def full_width(self, values: torch.Tensor) -> torch.Tensor:
        """A micro-batch's per-token tensor (cut by :meth:`slice`) right-padded with zeros to the batch's width."""
        return torch.nn.functional.pad(values, (0, self.action_mask.size(1) - values.size(1)))


def chunks(indices: torch.Tensor, size: int) -> list[torch.Tensor]:
    """``indices`` in consecutive pieces of ``size`` (the last may be shorter)."""
    return [indices[start : start + size] for start in range(0, len(indices), size)]


def sequence_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    action_mask: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """Log-probs of each token given its prefix, ``(batch, length - 1)``, at the sampling temperature.

    Only the columns from the first action token on are computed (``logits_to_keep``): prompts can be
    long and the vocabulary is large.
    """
    length = input_ids.size(1)
    acting = action_mask.any(0).nonzero()
    first = int(acting[0]) if len(acting) else length - 2
    keep = length - first  # positions first..length-1; the last one predicts past the end
    out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep, use_cache=False)
    logits = out.logits[:, :-1].float() / temperature
    targets = input_ids[:, first + 1 :]
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    result = torch.zeros(action_mask.shape, dtype=torch.float32, device=input_ids.device)
    result[:, first:] = picked
    return result
