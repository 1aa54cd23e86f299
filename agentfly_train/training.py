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
from types import TracebackType
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from agentfly_train.algorithms import TurnAnchor

if TYPE_CHECKING:
    from agentfly_train.rollout import Episode


@dataclass
class Batch:
    """Episodes as right-padded tensors; per-token tensors are aligned with log-prob columns.

    Column ``j`` of ``action_mask``, ``rollout_logprobs``, ... concerns token ``j + 1`` of ``input_ids``.
    ``finished`` is False for an episode whose env failed (``episode.failure``): the update leaves it out.

    A row is one token sequence: an episode of the env loop is one row; an agent program's episode is as
    many as the gateway recorded (:attr:`~agentfly_train.rollout.Episode.sequences`), each carrying the
    episode's reward. ``episode_of`` says whose row each is (episode index in the rollout, non-decreasing),
    so group baselines are taken over episodes, not rows.

    ``anchors`` (when asked for, for step-level credit) lists each env-loop episode's turns with the state each
    started from (the observation it answered) and its step's reward; an agent program's rows have none.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    action_mask: torch.Tensor
    rollout_logprobs: torch.Tensor
    rewards: torch.Tensor
    lengths: torch.Tensor
    finished: torch.Tensor
    episode_of: torch.Tensor
    anchors: list[TurnAnchor] = dataclasses.field(default_factory=list)

    @classmethod
    def from_episodes(
        cls, episodes: Sequence[Episode], pad_id: int, device: torch.device, *, anchors: bool = False
    ) -> Batch:
        sequences = [e.sequences for e in episodes]  # built once: a bounded history's windows are built here
        rows = [(index, sequence) for index, own in enumerate(sequences) for sequence in own]
        width = max(len(sequence.token_ids) for _, sequence in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        action = torch.zeros((len(rows), width), dtype=torch.float32)
        logprobs = torch.zeros((len(rows), width), dtype=torch.float32)
        for row, (_, sequence) in enumerate(rows):
            n = len(sequence.token_ids)
            ids[row, :n] = torch.tensor(sequence.token_ids)
            attention[row, :n] = 1
            action[row, :n] = torch.tensor(sequence.action_mask, dtype=torch.float32)
            logprobs[row, :n] = torch.tensor(sequence.logprobs, dtype=torch.float32)
        owners = [episodes[index] for index, _ in rows]
        return cls(
            input_ids=ids.to(device),
            attention_mask=attention.to(device),
            action_mask=action[:, 1:].to(device),
            rollout_logprobs=logprobs[:, 1:].to(device),
            rewards=torch.tensor([e.reward for e in owners], dtype=torch.float32, device=device),
            lengths=attention.sum(-1).to(device),
            finished=torch.tensor([e.failure is None for e in owners], dtype=torch.bool, device=device),
            episode_of=torch.tensor([index for index, _ in rows], dtype=torch.long, device=device),
            anchors=_anchors(episodes, sequences) if anchors else [],
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


def _anchors(episodes: Sequence[Episode], sequences: Sequence[Sequence[Any]]) -> list[TurnAnchor]:
    """The env-loop episodes' turns as :class:`~agentfly_train.algorithms.TurnAnchor` s, each in the row that trains
    it (a window of a bounded history, else the episode's one row; rows numbered as :meth:`Batch.from_episodes`
    lays them out; in action columns: token ``j`` is column ``j - 1``); none for an agent program's rows. A last
    turn the driver cut before the env stepped it has no step, and no anchor. ``sequences``: each episode's
    :attr:`~agentfly_train.rollout.Episode.sequences`, as the batch built them."""
    anchors: list[TurnAnchor] = []
    first = 0  # the episode's first row
    for episode, own in zip(episodes, sequences, strict=True):
        if episode.trajectory is not None and not episode.rows:
            states = [episode.trajectory.observation, *(step.observation for step in episode.trajectory.steps)]
            places = episode.turn_places(own)
            anchors += [
                TurnAnchor(first + row, start - 1, end - 1, states[number], step.reward)
                for number, ((row, start, end), step) in enumerate(zip(places, episode.trajectory.steps))
            ]
        first += len(own)
    return anchors


class CompiledBlocks:
    """A model's repeated blocks (its decoder layers) compiled with ``torch.compile``, in use only inside ``with``.

    The update's forward and backward passes spend about a third of their time outside matrix products: norms,
    rotary embeddings, activations and dtype casts, each its own pass over memory. Compiled, each block's
    element-wise work is fused into a few kernels. Compilation happens at the first pass (tens of seconds on
    a CPU; Inductor keeps the result on disk for the next process) and once serves every block and every
    sequence length (``dynamic=True``). Outside ``with`` the blocks run as they always do, so generation
    (a KV cache, one token at a time) never compiles. The blocks are the classes the model names in
    ``_no_split_modules`` (what ``transformers`` shards as units): decoder layers.

    Example:
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> model = LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        ...                                      num_attention_heads=2, vocab_size=64))
        >>> compiled = CompiledBlocks(model)
        >>> len(compiled.blocks), "forward" in vars(compiled.blocks[0])
        (2, False)
        >>> with compiled:
        ...     "forward" in vars(compiled.blocks[0])
        True
    """

    def __init__(self, model: nn.Module) -> None:
        kinds = set(getattr(model, "_no_split_modules", None) or ())
        self.blocks = [module for module in model.modules() if type(module).__name__ in kinds]
        if not self.blocks:
            raise ValueError(
                f"train.compile: {type(model).__name__} names no repeated blocks (`_no_split_modules`) to compile"
            )
        self._forwards = [torch.compile(block.forward, dynamic=True) for block in self.blocks]

    def __enter__(self) -> CompiledBlocks:
        for block, forward in zip(self.blocks, self._forwards, strict=True):
            block.forward = forward  # an instance attribute: found before the class's forward
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for block in self.blocks:
            del block.forward


#: The attention of a model on a CPU trained in bfloat16 autocast (:func:`use_float32_attention_gradients`).
FLOAT32_GRADIENT_ATTENTION = "sdpa_float32_gradients"


def _sdpa_float32_gradients(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' SDPA attention, in float32 when autocast is on and gradients will flow through it."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    device = query.device.type
    if torch.is_grad_enabled() and torch.is_autocast_enabled(device):
        with torch.autocast(device, enabled=False):
            return sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask, **kwargs)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def use_float32_attention_gradients(model: nn.Module) -> bool:
    """Under bfloat16 autocast on a CPU, run the attention of passes that will be differentiated in float32: whether
    ``model`` (an SDPA ``transformers`` model on a CPU) now does.

    torch's CPU flash attention computes its backward pass more slowly in bfloat16 than in float32, while its
    forward pass is faster in bfloat16: on a 2-core AMX CPU, one layer of SmolLM2-135M at 4 x 316 tokens takes 4.5 ms
    forward in bfloat16 against 6.5 ms in float32, and about 20 ms backward against 14.5 ms (torch 2.13, medians of
    40 interleaved runs). So passes with gradients (the update's) run attention in float32, which is also nearer
    float32 training's numerics, and passes without (scoring, generation) run it as autocast does: the update takes
    about 8% less time. On a GPU, bfloat16 flash attention is the fast one, and the model is left as it is.

    Example:
        >>> from transformers import LlamaConfig, LlamaForCausalLM
        >>> model = LlamaForCausalLM(LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...                                      num_attention_heads=2, vocab_size=64))
        >>> use_float32_attention_gradients(model), model.config._attn_implementation
        (True, 'sdpa_float32_gradients')
        >>> use_float32_attention_gradients(model)  # already
        False
    """
    config = getattr(model, "config", None)
    on_cpu = all(parameter.device.type == "cpu" for parameter in model.parameters())
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa" or not on_cpu:
        return False
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(FLOAT32_GRADIENT_ATTENTION, _sdpa_float32_gradients)
    AttentionMaskInterface.register(FLOAT32_GRADIENT_ATTENTION, sdpa_mask)  # SDPA's masks, padding included
    model.set_attn_implementation(FLOAT32_GRADIENT_ATTENTION)
    return True


def chunks(indices: torch.Tensor, size: int) -> list[torch.Tensor]:
    """``indices`` in consecutive pieces of ``size`` (the last may be shorter)."""
    return [indices[start : start + size] for start in range(0, len(indices), size)]


def sequence_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    action_mask: torch.Tensor,
    temperature: float,
    *,
    chunk_tokens: int = 1024,
) -> torch.Tensor:
    """Log-probs of the action tokens given their prefixes, ``(batch, length - 1)`` (0 where ``action_mask`` is 0),
    at the sampling temperature.

    The model's body runs once; the output layer and the softmax over the vocabulary run only at the action
    tokens (a multi-turn episode's prompt and observations need none), ``chunk_tokens`` at a time, each chunk's
    logits recomputed in the backward pass instead of kept (activation checkpointing): the full vocabulary's
    float32 logits of a batch (49k columns per token for SmolLM2, 150k for Qwen) never exist at once. Models
    whose output layer is not a plain projection (logit soft-capping or scaling) take the whole-logits path.
    """
    head = model.get_output_embeddings()
    config = getattr(model, "config", None)
    plain_head = isinstance(head, nn.Linear) and not any(
        getattr(config, name, None) for name in ("final_logit_softcapping", "logit_scale")
    )
    if not plain_head:
        return _whole_logits_logprobs(model, input_ids, attention_mask, action_mask, temperature)
    hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    acting = action_mask.nonzero(as_tuple=True)  # (row, column): column j predicts token j + 1
    states, targets = hidden[:, :-1][acting], input_ids[:, 1:][acting]
    picked = []
    for start in range(0, len(targets), chunk_tokens):
        piece = (states[start : start + chunk_tokens], targets[start : start + chunk_tokens], head.weight, head.bias)
        if torch.is_grad_enabled():
            picked.append(checkpoint(_token_logprobs, *piece, temperature, use_reentrant=False))
        else:
            picked.append(_token_logprobs(*piece, temperature))
    result = torch.zeros(action_mask.shape, dtype=torch.float32, device=input_ids.device)
    if picked:
        return result.index_put(acting, torch.cat(picked))
    return result + 0.0 * hidden.sum()  # no action token (episodes left out): zeros, still part of the graph


def _token_logprobs(
    states: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    """Each state's log-prob of its target token under the output layer, at ``temperature``, in float32.

    Cross-entropy is the negative log-prob, computed by one fused log-softmax and pick (forward and backward)
    instead of a gather, a max, a subtraction, an exponential and a sum over the vocabulary each.
    """
    logits = nn.functional.linear(states, weight, bias).float() / temperature
    return -nn.functional.cross_entropy(logits, targets, reduction="none")


def _whole_logits_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    action_mask: torch.Tensor,
    temperature: float,
) -> torch.Tensor:
    """:func:`sequence_logprobs` through the model's own logits, from the first action token on."""
    length = input_ids.size(1)
    acting = action_mask.any(0).nonzero()
    first = int(acting[0]) if len(acting) else length - 2
    keep = length - first  # positions first..length-1; the last one predicts past the end
    out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep, use_cache=False)
    logits = out.logits[:, :-1].float() / temperature
    targets = input_ids[:, first + 1 :]
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    result = torch.zeros(action_mask.shape, dtype=torch.float32, device=input_ids.device)
    result[:, first:] = picked * action_mask[:, first:].bool()
    return result
