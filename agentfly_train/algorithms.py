"""Advantage estimators, policy and value losses, KL estimators: OpenRLHF 0.11.2's definitions.

Every backend uses these functions, so a run means the same thing on a laptop CPU (the local backend)
and on a GPU cluster (OpenRLHF). Tensors are ``(batch, tokens)`` with an ``action_mask`` that is 1 on
the tokens the model generated and 0 on the prompt, the env's observations and the chat template's
tokens; everything is computed under that mask.

- Estimators: ``gae`` (PPO, with a critic), ``group_norm`` (GRPO), ``rloo``, ``reinforce``
  (REINFORCE++: token-level KL in the reward, returns normalised over the global batch) and
  ``reinforce_baseline``, and ``gigpo`` (GRPO's episode-level advantage plus a step-level one over the turns
  that start from the same state, :func:`step_advantages`), each the estimator of one record of
  :data:`~agentfly_train.algorithm_registry.ALGORITHMS`, which says what it does differently. Group
  estimators take the ``n`` chains of one task as consecutive rows.
- Failed episodes (their env died or raised): :func:`trained_episodes` says which episodes the loss
  learns from, and the estimators take that as ``included``: a group baseline is computed over the
  episodes that finished, and a group left with fewer than two of them teaches nothing.
- Losses: PPO's clipped policy loss with separate low and high clip (and optional dual clip), the
  clipped value loss, and two aggregations (``token-mean``, ``seq-mean-token-mean``).
- KL: the k1, k2 and k3 estimators, either as a penalty in the token rewards or as a loss term.

Example:
    >>> import torch
    >>> rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    >>> [round(x, 3) for x in group_baseline(rewards, group_size=4, estimator="group_norm").tolist()]
    [0.866, -0.866, -0.866, 0.866]
    >>> [round(x, 3) for x in group_baseline(rewards, group_size=4, estimator="rloo").tolist()]
    [0.667, -0.667, -0.667, 0.667]
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from agentfly_train.algorithm_registry import ALGORITHMS, by_estimator

#: The registered algorithms' advantage estimators (OpenRLHF's names).
ESTIMATORS = tuple(algorithm.estimator for algorithm in ALGORITHMS.values())
KL_ESTIMATORS = ("k1", "k2", "k3")
LOSS_AGGREGATIONS = ("token-mean", "seq-mean-token-mean")


def masked_mean(tensor: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``tensor`` where ``mask`` is 1 (over everything, or along ``dim``)."""
    if dim is None:
        return (tensor * mask).sum() / mask.sum()
    return (tensor * mask).sum(dim=dim) / mask.sum(dim=dim)


def approx_kl(log_probs: torch.Tensor, ref_log_probs: torch.Tensor, estimator: str = "k1") -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from the sampled tokens' log-probs.

    k1 is ``log p - log q``; k2 is ``(log p - log q)^2 / 2``; k3 is ``exp(log q - log p) - 1 - (log q - log p)``
    (Schulman's estimators). The value is clamped to ``[-10, 10]`` as OpenRLHF does.
    """
    log_ratio = log_probs.float() - ref_log_probs.float()
    if estimator == "k1":
        value = log_ratio
    elif estimator == "k2":
        value = log_ratio**2 / 2.0
    elif estimator == "k3":
        clamped = log_ratio.clamp(min=-10)  # bounds exp() before the final clamp, as OpenRLHF does
        value = (-clamped).exp() - 1 + clamped
    else:
        raise ValueError(f"unknown KL estimator {estimator!r}; choose one of {KL_ESTIMATORS}")
    return value.clamp(min=-10, max=10)


def group_baseline(
    rewards: torch.Tensor, group_size: int, estimator: str, included: torch.Tensor | None = None
) -> torch.Tensor:
    """Shape per-episode rewards with the group baseline of the estimator.

    ``rewards`` holds consecutive groups of ``group_size`` chains of one task. ``group_norm`` divides by
    the group's unbiased (Bessel-corrected) std plus 1e-9, as ``torch.std`` and OpenRLHF do; ``rloo``
    subtracts the mean of the other chains; ``reinforce_baseline`` subtracts the group mean; ``gae`` and
    ``reinforce`` leave the rewards alone.

    ``included`` (one bool per episode; default all) leaves episodes out: their shaped reward is 0, and a
    group baseline is computed over the group's included episodes alone (0 for all of a group with fewer
    than two).
    """
    algorithm = by_estimator(estimator)
    if algorithm.baseline is None:
        return rewards.clone() if included is None else torch.where(included, rewards, 0.0)
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    if group_size < 2:
        raise ValueError(f"{estimator} needs at least 2 chains per task")
    grouped = rewards.float().reshape(-1, group_size)
    if included is None:
        return algorithm.baseline(grouped).reshape(-1)
    kept = included.reshape(-1, group_size)
    whole = kept.all(-1)
    shaped = torch.zeros_like(grouped)
    shaped[whole] = algorithm.baseline(grouped[whole])  # one call for the groups that lost no episode
    for group in (~whole).nonzero().flatten().tolist():
        chains = kept[group]
        if chains.sum() >= 2:
            shaped[group, chains] = algorithm.baseline(grouped[group, chains].unsqueeze(0)).squeeze(0)
    return shaped.reshape(-1)


def first_rows(episode_of: torch.Tensor) -> torch.Tensor:
    """Where each episode's rows start, for rows grouped by episode (``episode_of`` non-decreasing).

    An agent program's episode can be several token rows; group baselines are over episodes, so the
    estimators read each episode's values at its first row and give every row its episode's result.

    Example:
        >>> first_rows(torch.tensor([0, 0, 1, 2, 2, 2])).tolist()
        [0, 2, 3]
    """
    starts = torch.ones_like(episode_of, dtype=torch.bool)
    starts[1:] = episode_of[1:] != episode_of[:-1]
    return starts.nonzero().flatten()


def trained_episodes(
    finished: torch.Tensor, group_size: int, estimator: str, episode_of: torch.Tensor | None = None
) -> torch.Tensor:
    """Which episodes the loss learns from: the ones that finished (their env did not fail), and, for a group
    baseline, only in groups where two or more finished (one alone has nothing to be compared with).
    With ``episode_of`` (rows of multi-row episodes, see :func:`first_rows`) the answer is per row.

    Example:
        >>> finished = torch.tensor([True, False, True, False, False, True])
        >>> trained_episodes(finished, 3, "rloo").tolist()
        [True, False, True, False, False, False]
        >>> trained_episodes(finished, 3, "reinforce").tolist()
        [True, False, True, False, False, True]
    """
    if by_estimator(estimator).baseline is None:
        return finished.clone()
    if episode_of is not None:
        return trained_episodes(finished[first_rows(episode_of)], group_size, estimator)[episode_of]
    grouped = finished.reshape(-1, group_size)
    return (grouped & (grouped.sum(-1, keepdim=True) >= 2)).reshape(-1)


def token_rewards(
    rewards: torch.Tensor,
    action_mask: torch.Tensor,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    clip: float | None = None,
) -> torch.Tensor:
    """Per-token rewards: the episode's reward (clipped to ``[-clip, clip]``) on its last action token,
    minus ``kl_coef * kl`` on every token."""
    if clip:
        rewards = rewards.clamp(-clip, clip)
    last = action_mask.size(1) - 1 - action_mask.long().fliplr().argmax(dim=1, keepdim=True)
    shaped = torch.zeros(action_mask.shape, dtype=torch.float32, device=action_mask.device)
    shaped.scatter_(1, last, rewards.float().unsqueeze(1))
    if kl is not None and kl_coef > 0:
        shaped = shaped - kl_coef * kl
    return shaped


def cumulative_returns(rewards: torch.Tensor, action_mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted return from each token on, counting rewards on action tokens only."""
    rewards = rewards * action_mask
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.size(0), dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(rewards.size(1))):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns


def gae(
    values: torch.Tensor, rewards: torch.Tensor, action_mask: torch.Tensor, gamma: float, lambd: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation: ``(advantages, returns)``, values and rewards masked to actions."""
    values = values * action_mask
    rewards = rewards * action_mask
    running = torch.zeros(rewards.size(0), dtype=rewards.dtype, device=rewards.device)
    reversed_advantages = []
    length = rewards.size(1)
    for t in reversed(range(length)):
        next_values = values[:, t + 1] if t < length - 1 else 0.0
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        running = delta + gamma * lambd * running
        reversed_advantages.append(running)
    advantages = torch.stack(reversed_advantages[::-1], dim=1)
    return advantages, advantages + values


def normalize_advantages(advantages: torch.Tensor, action_mask: torch.Tensor, std: bool = True) -> torch.Tensor:
    """Whiten advantages over every action token of the batch (population variance, floor 1e-8)."""
    count = action_mask.sum()
    mean = (advantages * action_mask).sum() / count
    if not std:
        return advantages - mean
    var = ((advantages - mean).pow(2) * action_mask).sum() / count
    return (advantages - mean) * var.clamp(min=1e-8).rsqrt()


@dataclass(frozen=True)
class TurnAnchor:
    """One model turn, for step-level credit: where its tokens are, the state it started from, what it earned.

    Attributes:
        row: The batch row holding the turn.
        start: Its first action column (columns as the action mask's).
        end: One past its last.
        state: The state the turn started from (the observation the model answered); turns of one group with
            equal states are compared with each other.
        reward: The env's reward for the turn's step.
    """

    row: int
    start: int
    end: int
    state: Hashable
    reward: float


def step_advantages(
    anchors: Sequence[TurnAnchor], group_of_row: Sequence[int], shape: tuple[int, int], gamma: float = 1.0
) -> torch.Tensor:
    """GiGPO's step-level advantages (arXiv 2505.10978, its anchor-state grouping): each turn's discounted return
    (its step's reward and the rest of its episode's, ``gamma`` per turn), normalised against the returns of
    every turn of its group (the same task's chains) that started from the same state: minus their mean, over
    their std (Bessel-corrected) plus 1e-6. A state no other turn of the group shares, or one whose turns all
    returned the same, gives 0. The value fills the turn's action columns.

    ``anchors`` lists each row's turns in order; the return runs to the row's last listed turn.

    Example:
        >>> A = TurnAnchor
        >>> # Two chains of one task, both from s0: the first goes on to s1 and s2 and wins; the second stays in s0
        >>> # once, then does the same. Of the three turns from s0, the one that stayed returned less; s1 and s2
        >>> # returned alike.
        >>> anchors = [A(0, 0, 1, "s0", 0.0), A(0, 2, 3, "s1", 0.0), A(0, 4, 5, "s2", 1.0),
        ...            A(1, 0, 1, "s0", 0.0), A(1, 2, 3, "s0", 0.0), A(1, 4, 5, "s1", 0.0), A(1, 6, 7, "s2", 1.0)]
        >>> step = step_advantages(anchors, [0, 0], (2, 8), gamma=0.5)
        >>> [round(x, 3) for x in step[0, [0, 2, 4]].tolist()], [round(x, 3) for x in step[1, [0, 2, 4, 6]].tolist()]
        ([0.577, 0.0, 0.0], [-1.155, 0.577, 0.0, 0.0])
    """
    returns: list[float] = [0.0] * len(anchors)
    running, row = 0.0, None
    for index in reversed(range(len(anchors))):
        anchor = anchors[index]
        if anchor.row != row:
            running, row = 0.0, anchor.row
        running = anchor.reward + gamma * running
        returns[index] = running
    by_state: dict[tuple[int, Hashable], list[int]] = defaultdict(list)
    for index, anchor in enumerate(anchors):
        by_state[group_of_row[anchor.row], anchor.state].append(index)
    out = torch.zeros(shape, dtype=torch.float32)
    for members in by_state.values():
        if len(members) < 2:
            continue
        shared = torch.tensor([returns[index] for index in members], dtype=torch.float32)
        shaped = (shared - shared.mean()) / (shared.std() + 1e-6)
        for index, value in zip(members, shaped.tolist(), strict=True):
            anchor = anchors[index]
            out[anchor.row, anchor.start : anchor.end] = value
    return out


@dataclass
class Advantages:
    """What :func:`compute_advantages` returns: per-token advantages and returns, and the token rewards."""

    advantages: torch.Tensor
    returns: torch.Tensor
    token_rewards: torch.Tensor


def compute_advantages(
    rewards: torch.Tensor,
    action_mask: torch.Tensor,
    *,
    estimator: str,
    group_size: int = 1,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    values: torch.Tensor | None = None,
    gamma: float = 1.0,
    lambd: float = 0.95,
    std_norm: bool = True,
    reward_clip: float | None = 10.0,
    included: torch.Tensor | None = None,
    episode_of: torch.Tensor | None = None,
    step: torch.Tensor | None = None,
    step_weight: float = 1.0,
) -> Advantages:
    """Advantages and returns for a rollout batch, as OpenRLHF's experience maker computes them.

    Args:
        rewards: One scalar per episode, ``(batch,)``; groups of ``group_size`` consecutive rows.
        action_mask: ``(batch, tokens)``, 1 on generated tokens.
        estimator: One of :data:`ESTIMATORS`; its algorithm's record says how advantages are made.
        group_size: Chains per task.
        kl: Per-token KL to the reference, for a KL penalty in the reward (None for none).
        kl_coef: Its coefficient.
        values: The critic's values (``gae`` only).
        gamma: Discount, for the algorithms whose record says ``discounted`` (the others use 1).
        lambd: GAE lambda.
        std_norm: Divide by the std when normalising globally.
        reward_clip: Clip the shaped episode rewards to ``[-reward_clip, reward_clip]`` (None: off).
        included: One bool per episode, False for one left out (:func:`trained_episodes`): it has no share in
            group baselines or the batch normalisation, and its tokens count as masked. Default: all.
        episode_of: Rows of multi-row episodes (an agent program's): the episode of each row. ``rewards`` and
            ``included`` are then per row, alike within an episode; the group baseline is taken over
            episodes and each row gets its episode's shaped reward. Default: each row an episode.
        step: Step-level advantages (:func:`step_advantages`) for an algorithm with ``step_credit``, added to
            the episode-level ones with ``step_weight`` on the trained action tokens.
        step_weight: Their weight (GiGPO's omega).
    """
    algorithm = by_estimator(estimator)
    if episode_of is None:
        shaped = group_baseline(rewards.float(), group_size, estimator, included)
    else:
        first = first_rows(episode_of)
        kept = None if included is None else included[first]
        shaped = group_baseline(rewards.float()[first], group_size, estimator, kept)[episode_of]
    mask = action_mask.float() if included is None else action_mask.float() * included.unsqueeze(1)
    per_token = token_rewards(shaped, mask, kl, kl_coef, reward_clip)
    discount = gamma if algorithm.discounted else 1.0
    if algorithm.critic:
        if values is None:
            raise ValueError(f"the {estimator} estimator needs the critic's values")
        advantages, returns = gae(values.float(), per_token, mask, discount, lambd)
    else:
        returns = cumulative_returns(per_token, mask, discount)
        advantages = returns.clone()
    if algorithm.step_credit:
        if step is None:
            raise ValueError(f"the {estimator} estimator needs the step-level advantages (step=)")
        advantages = advantages + step_weight * step.to(advantages.device) * mask
    if algorithm.normalised:
        advantages = normalize_advantages(advantages, mask, std=std_norm)
    return Advantages(advantages=advantages, returns=returns, token_rewards=per_token)


def aggregate_loss(
    loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",
    *,
    num_tokens: float | torch.Tensor | None = None,
    num_sequences: float | torch.Tensor | None = None,
    sequence_tokens: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar under the mask.

    ``token-mean``: masked sum / number of action tokens; ``seq-mean-token-mean``: the mean over
    sequences of each sequence's token mean (fully masked sequences left out). With gradient
    accumulation, pass the totals of the whole optimiser step (``num_tokens`` / ``num_sequences``)
    so that the micro-batch losses add up to the step's mean, as OpenRLHF does. A sequence may span
    several rows (an episode trained as windows or an agent program's calls): ``sequence_tokens`` gives,
    per row, the action tokens of its whole sequence (default: the row's own), and ``num_sequences`` counts
    sequences, so each sequence weighs the same however many rows it has.

    Example:
        >>> loss, mask = torch.tensor([[1.0, 3.0], [5.0, 0.0]]), torch.tensor([[1.0, 1.0], [1.0, 0.0]])
        >>> float(aggregate_loss(loss, mask, "seq-mean-token-mean"))  # (2 + 5) / 2
        3.5
        >>> float(aggregate_loss(loss, mask, "seq-mean-token-mean", sequence_tokens=torch.tensor([3.0, 3.0]),
        ...                      num_sequences=1))  # the two rows are one sequence: 9 / 3
        3.0
    """
    if mode == "token-mean":
        return (loss * mask).sum() / (mask.sum() if num_tokens is None else num_tokens)
    if mode != "seq-mean-token-mean":
        raise ValueError(f"unknown loss aggregation {mode!r}; choose one of {LOSS_AGGREGATIONS}")
    counts = mask.sum(dim=-1)
    present = (counts > 0).float()
    own = counts if sequence_tokens is None else sequence_tokens
    per_row = (loss * mask).sum(dim=-1) / (own + 1e-8)
    return (per_row * present).sum() / (present.sum() if num_sequences is None else num_sequences)


@dataclass
class PolicyLossResult:
    """The policy loss and its diagnostics (clip fraction, approximate KL to the old policy; with the
    train/rollout correction on, the mean log-prob gap ``rollout - old`` and the share it filtered)."""

    loss: torch.Tensor
    clip_ratio: torch.Tensor
    ppo_kl: torch.Tensor
    vllm_kl: torch.Tensor | None = None
    is_filter_ratio: torch.Tensor | None = None


@dataclass(frozen=True)
class ISCorrection:
    """The train/rollout importance-sampling correction, as OpenRLHF 0.11.2 defines it
    (``--algo.advantage.is_correction_*``).

    The generator (vLLM) samples with its own numerics, so the trainer's log-prob of a sampled token
    (``old``) differs from the generator's (``rollout``); the per-token ratio ``exp(old - rollout)``
    reweights the loss. A gate reads a statistic per unit (each token, or the sequence's mean) and drops
    (``mask``) or clamps (``clip``) units outside ``[low, high]``: token clip is TIS, token mask ICEPOP,
    sequence mask seq-mask-tis; ``binary_kl`` / ``tv`` gating reads a divergence instead (a trust region).

    Attributes:
        level: ``off``, ``token`` or ``seq``.
        mode: ``mask`` (survivors keep their token ratio as a weight) or ``clip`` (token level, ratio only).
        gating: ``ratio``, ``binary_kl`` or ``tv``.
        low: Lower bound (0 for a divergence).
        high: Upper bound.
    """

    level: str = "off"
    mode: str = "mask"
    gating: str = "ratio"
    low: float = 0.5
    high: float = 5.0

    def weights(
        self, old_log_probs: torch.Tensor, rollout_log_probs: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token loss weights and the filtered share (of tokens, or of sequences at ``seq`` level)."""
        seq_level = self.level == "seq"
        log_ratio = (old_log_probs - rollout_log_probs).detach()  # log(pi_train / pi_rollout)
        if self.gating == "ratio":
            stat = (masked_mean(log_ratio, mask, dim=-1).unsqueeze(-1) if seq_level else log_ratio).exp()
        else:
            p = rollout_log_probs.exp().clamp(1e-6, 1 - 1e-6)  # the clamp keeps the binary-KL logs finite
            q = old_log_probs.exp().clamp(1e-6, 1 - 1e-6)
            if self.gating == "binary_kl":
                stat = p * (p / q).log() + (1 - p) * ((1 - p) / (1 - q)).log()
            else:
                stat = (p - q).abs()
            if seq_level:
                stat = masked_mean(stat, mask, dim=-1).unsqueeze(-1)
        if self.mode == "clip":
            weights, filtered = stat.clamp(min=self.low, max=self.high), (stat < self.low) | (stat > self.high)
        else:
            keep = (stat >= self.low) & (stat <= self.high)
            weights, filtered = torch.where(keep, log_ratio.exp(), 0.0), ~keep
        share = filtered.float().mean() if seq_level else masked_mean(filtered.float(), mask)
        return weights, share


def policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    action_mask: torch.Tensor,
    *,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
    dual_clip: float | None = None,
    mode: str = "token-mean",
    num_tokens: float | torch.Tensor | None = None,
    num_sequences: float | torch.Tensor | None = None,
    sequence_tokens: torch.Tensor | None = None,
    correction: ISCorrection | None = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> PolicyLossResult:
    """PPO's clipped surrogate: ``-min(r A, clip(r, 1 - low, 1 + high) A)``, dual-clipped when asked, and
    reweighted per token by the train/rollout ``correction`` (which reads ``rollout_log_probs``) when on."""
    log_ratio = log_probs - old_log_probs
    ratio = log_ratio.clamp(min=-20.0, max=20.0).exp()
    surr1 = ratio * advantages
    surr2 = ratio.clamp(1 - clip_eps_low, 1 + clip_eps_high) * advantages
    if dual_clip:
        clipped = torch.min(surr1, surr2)
        loss = -torch.where(advantages < 0, torch.max(clipped, dual_clip * advantages), clipped)
    else:
        loss = -torch.min(surr1, surr2)
    mask = action_mask.float()
    vllm_kl = is_filter_ratio = None
    if correction is not None and correction.level != "off":
        if rollout_log_probs is None:
            raise ValueError("the train/rollout correction needs the generator's log-probs (rollout_log_probs)")
        weights, is_filter_ratio = correction.weights(old_log_probs, rollout_log_probs, mask)
        loss = weights * loss
        vllm_kl = masked_mean(rollout_log_probs - old_log_probs, mask)
    return PolicyLossResult(
        loss=aggregate_loss(
            loss, mask, mode, num_tokens=num_tokens, num_sequences=num_sequences, sequence_tokens=sequence_tokens
        ),
        clip_ratio=masked_mean(torch.lt(surr2, surr1).float(), mask).detach(),
        ppo_kl=masked_mean(-log_ratio.detach(), mask),
        vllm_kl=vllm_kl,
        is_filter_ratio=is_filter_ratio,
    )


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    action_mask: torch.Tensor,
    *,
    clip_eps: float | None = 0.5,
    mode: str = "token-mean",
    num_tokens: float | torch.Tensor | None = None,
    num_sequences: float | torch.Tensor | None = None,
    sequence_tokens: torch.Tensor | None = None,
) -> torch.Tensor:
    """Half the (clipped) squared error of the critic: ``0.5 * max((v_clip - R)^2, (v - R)^2)``."""
    if clip_eps:
        clipped = old_values + (values - old_values).clamp(-clip_eps, clip_eps)
        loss = torch.max((clipped - returns) ** 2, (values - returns) ** 2)
    else:
        loss = (values - returns) ** 2
    return 0.5 * aggregate_loss(
        loss,
        action_mask.float(),
        mode,
        num_tokens=num_tokens,
        num_sequences=num_sequences,
        sequence_tokens=sequence_tokens,
    )


def kl_loss(
    log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor,
    action_mask: torch.Tensor,
    *,
    estimator: str = "k3",
    mode: str = "token-mean",
    num_tokens: float | torch.Tensor | None = None,
    num_sequences: float | torch.Tensor | None = None,
    sequence_tokens: torch.Tensor | None = None,
) -> torch.Tensor:
    """The KL to the reference as a loss term (multiply by the KL coefficient and add to the policy loss)."""
    kl = approx_kl(log_probs, ref_log_probs, estimator)
    return aggregate_loss(
        kl,
        action_mask.float(),
        mode,
        num_tokens=num_tokens,
        num_sequences=num_sequences,
        sequence_tokens=sequence_tokens,
    )
