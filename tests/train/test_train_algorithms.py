"""Estimators, losses and KL: hand-computed cases, and OpenRLHF 0.11.2's own code on the same inputs.

About the cross-check: ``openrlhf==0.11.2`` is installed with ``--no-deps``, and its modules cannot be
imported on this CPU machine: besides ``flash_attn`` and ``vllm``, ``openrlhf.models`` imports peft and
deepspeed, the experience maker ray, and ``openrlhf.utils`` pylatexenc, none of which are installed. So
instead of importing the modules behind stand-in modules, the test reads OpenRLHF's installed source
files, compiles exactly the function and class definitions it compares against
(``compute_approx_kl``, ``compute_reward``, ``masked_mean``, ``aggregate_loss``, ``PolicyLoss``,
``ValueLoss``, ``RemoteExperienceMaker.compute_advantages_and_returns`` and the helpers it calls) and
runs them with real torch. No stand-in modules are inserted.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import logging
import math
from pathlib import Path
from types import SimpleNamespace
from typing import List, Optional, Tuple, Union  # noqa: UP035 - OpenRLHF's annotations name them

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from agentfly_train import algorithms
from agentfly_train.algorithms import (
    ISCorrection,
    aggregate_loss,
    approx_kl,
    compute_advantages,
    gae,
    group_baseline,
    kl_loss,
    policy_loss,
    token_rewards,
    value_loss,
)

# ----------------------------------------------------------------------------- OpenRLHF's own code

OPENRLHF = Path(next(iter(importlib.util.find_spec("openrlhf").submodule_search_locations)))


#: The estimators OpenRLHF has (GiGPO's step-level credit is the local backend's own).
OPENRLHF_ESTIMATORS = [e for e in algorithms.ESTIMATORS if not algorithms.by_estimator(e).step_credit]


def load_openrlhf(relative: str, names: set[str], namespace: dict) -> dict:
    """Compile the named top-level definitions of an OpenRLHF source file into ``namespace``."""
    path = OPENRLHF / relative
    tree = ast.parse(path.read_text())
    nodes = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    assert {n.name for n in nodes} == names, f"{relative} no longer defines {names - {n.name for n in nodes}}"
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102 - OpenRLHF's own code
    return namespace


@pytest.fixture(scope="module")
def openrlhf():
    ns: dict = {
        "torch": torch,
        "nn": nn,
        "F": F,
        "dist": torch.distributed,
        "itertools": itertools,
        "Optional": Optional,
        "Tuple": Tuple,  # noqa: UP006
        "List": List,  # noqa: UP006
        "Union": Union,
        "logger": logging.getLogger("openrlhf"),
        "RayActorGroup": object,
    }
    load_openrlhf("models/utils.py", {"compute_approx_kl", "compute_reward", "masked_mean"}, ns)
    load_openrlhf("models/loss.py", {"aggregate_loss", "PolicyLoss", "ValueLoss"}, ns)
    load_openrlhf(
        "trainer/ppo_utils/length_penalty.py",
        {"apply_length_penalties", "apply_overlong_penalty", "apply_stop_properly_penalty"},
        ns,
    )
    ns["KL_IS_WEIGHT_CLIP"] = 10.0
    load_openrlhf("trainer/ppo_utils/experience_maker.py", {"RemoteExperienceMaker"}, ns)
    return SimpleNamespace(**ns)


def openrlhf_advantages(
    orl, rewards, mask, *, estimator, n, kl=None, kl_coef=0.0, values=None, gamma=1.0, lambd=0.95, splits=2
):
    """OpenRLHF's experience maker on the batch, split into ``splits`` micro-batch experiences."""
    args = SimpleNamespace(
        algo=SimpleNamespace(
            advantage=SimpleNamespace(estimator=estimator, gamma=gamma, lambd=lambd, no_std_norm=False)
        ),
        rollout=SimpleNamespace(n_samples_per_prompt=n, max_new_tokens=None),
        reward=SimpleNamespace(clip_range=(-10, 10), overlong_buffer_len=None, stop_properly_penalty_coef=None),
        data=SimpleNamespace(max_len=4096),
    )
    maker = object.__new__(orl.RemoteExperienceMaker)
    maker.strategy = SimpleNamespace(args=args)
    maker.advantage_estimator = estimator
    maker.kl_ctl = SimpleNamespace(value=kl_coef)
    rows = torch.arange(len(rewards)).tensor_split(splits)
    experiences = [
        SimpleNamespace(
            rewards=rewards[r].clone(),
            index=r.tolist(),
            info={},
            action_mask=mask[r],
            kl=(kl[r] if kl is not None else torch.zeros_like(mask[r])),
            values=(values[r] if values is not None else None),
        )
        for r in rows
    ]
    maker.compute_advantages_and_returns(experiences)
    return torch.cat([e.advantages for e in experiences]), torch.cat([e.returns for e in experiences])


# ----------------------------------------------------------------------------- hand-computed cases


def test_grpo_and_rloo_on_the_issue_example():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0])
    grpo = group_baseline(rewards, 4, "group_norm")
    # mean 0.5; Bessel-corrected std sqrt(4 * 0.25 / 3) = 0.5774 -> 0.5 / 0.5774 = 0.866 (as torch.std and OpenRLHF)
    assert grpo.tolist() == pytest.approx([0.866025, -0.866025, -0.866025, 0.866025], abs=1e-5)
    rloo = group_baseline(rewards, 4, "rloo")  # a correct sample's baseline is the others' mean, 1/3
    assert rloo.tolist() == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3], abs=1e-6)
    assert group_baseline(rewards, 4, "reinforce_baseline").tolist() == [0.5, -0.5, -0.5, 0.5]
    assert group_baseline(rewards, 4, "reinforce").tolist() == rewards.tolist()


def test_groups_are_consecutive_rows_and_uniform_groups_give_zero():
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0])
    shaped = group_baseline(rewards, 2, "group_norm")
    assert shaped[:2].tolist() == [0.0, 0.0]  # a group where every chain scored the same teaches nothing
    assert shaped[2] < 0 < shaped[3]
    with pytest.raises(ValueError, match="groups of 3"):
        group_baseline(rewards, 3, "rloo")


def test_kl_estimators_by_hand():
    logp, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.0])
    d = logp - ref  # [0.5, -1.0]
    assert approx_kl(logp, ref, "k1").tolist() == pytest.approx(d.tolist())
    assert approx_kl(logp, ref, "k2").tolist() == pytest.approx((d**2 / 2).tolist())
    assert approx_kl(logp, ref, "k3").tolist() == pytest.approx([math.exp(-0.5) - 1 + 0.5, math.exp(1.0) - 1 - 1.0])
    assert approx_kl(torch.tensor([0.0]), torch.tensor([-50.0]), "k1").item() == 10.0  # clamped
    with pytest.raises(ValueError, match="k4"):
        approx_kl(logp, ref, "k4")


def test_reward_lands_on_the_last_action_token_and_kl_on_every_token():
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 0, 1, 1, 0, 0]], dtype=torch.float32)
    kl = torch.full(mask.shape, 0.5)
    shaped = token_rewards(torch.tensor([2.0, -1.0]), mask, kl, kl_coef=0.1)
    assert shaped[0].tolist() == pytest.approx([-0.05, -0.05, -0.05, -0.05, 1.95, -0.05])
    assert shaped[1, 3] == pytest.approx(-1.05)
    assert token_rewards(torch.tensor([20.0, 0.0]), mask, clip=10.0)[0, 4] == 10.0


def test_gae_by_hand():
    values = torch.tensor([[0.5, 0.2]])
    rewards = torch.tensor([[0.0, 1.0]])
    advantages, returns = gae(values, rewards, torch.ones(1, 2), gamma=1.0, lambd=1.0)
    # t=1: 1 - 0.2 = 0.8; t=0: (0 + 0.2 - 0.5) + 0.8 = 0.5
    assert advantages[0].tolist() == pytest.approx([0.5, 0.8])
    assert returns[0].tolist() == pytest.approx([1.0, 1.0])
    advantages, _ = gae(values, rewards, torch.ones(1, 2), gamma=0.9, lambd=0.5)
    assert advantages[0, 0].item() == pytest.approx((0.9 * 0.2 - 0.5) + 0.9 * 0.5 * 0.8)


def test_reinforce_plus_plus_discounts_and_normalises_over_the_batch():
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    result = compute_advantages(torch.tensor([1.0, 0.0]), mask, estimator="reinforce", gamma=0.5)
    assert result.returns[0].tolist() == pytest.approx([0.25, 0.5, 1.0])
    adv = result.advantages[mask.bool()]
    assert adv.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert adv.var(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)


def test_clipped_policy_loss_by_hand():
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1]]))  # ratios 1.5, 0.5, 1.1 against old log-probs of 0
    old = torch.zeros(1, 3)
    adv = torch.tensor([[1.0, -1.0, 2.0]])
    result = policy_loss(logp, old, adv, torch.ones(1, 3), clip_eps_low=0.2, clip_eps_high=0.3)
    # token 0: min(1.5, 1.3) = 1.3; token 1: min(-0.5, -0.8) = -0.8; token 2: min(2.2, 2.2) = 2.2
    assert result.loss.item() == pytest.approx(-(1.3 - 0.8 + 2.2) / 3)
    assert result.clip_ratio.item() == pytest.approx(2 / 3)
    dual = policy_loss(
        torch.log(torch.tensor([[5.0]])), torch.zeros(1, 1), torch.tensor([[-1.0]]), torch.ones(1, 1), dual_clip=3.0
    )
    assert dual.loss.item() == pytest.approx(3.0)  # -max(min(-5, -1.2), 3 * -1)


def test_value_loss_clip_and_aggregations_by_hand():
    values, old, returns = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    # token 0: max((0.5 - 0)^2, (1 - 0)^2) = 1; token 1: max(1, 1) = 1
    assert value_loss(values, old, returns, torch.ones(1, 2), clip_eps=0.5).item() == pytest.approx(0.5)
    loss = torch.tensor([[1.0, 3.0, 0.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert aggregate_loss(loss, mask, "token-mean").item() == pytest.approx(6 / 3)
    assert aggregate_loss(loss, mask, "seq-mean-token-mean").item() == pytest.approx((2 + 2) / 2)
    assert aggregate_loss(loss, mask, "token-mean", num_tokens=6).item() == pytest.approx(1.0)  # a micro-batch's share


def test_masked_tokens_do_not_matter():
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    logp, old, adv = torch.randn(1, 4), torch.randn(1, 4), torch.randn(1, 4)
    base = policy_loss(logp, old, adv, mask).loss
    noisy = logp.clone()
    noisy[mask == 0] += 100.0
    assert policy_loss(noisy, old, adv, mask).loss.item() == pytest.approx(base.item())
    assert kl_loss(noisy, old, mask).item() == pytest.approx(kl_loss(logp, old, mask).item())


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown estimator"):
        group_baseline(torch.zeros(2), 2, "ppo")
    with pytest.raises(ValueError, match="loss aggregation"):
        aggregate_loss(torch.zeros(1, 1), torch.ones(1, 1), "sum")
    with pytest.raises(ValueError, match="critic"):
        compute_advantages(torch.zeros(1), torch.ones(1, 2), estimator="gae")


# ----------------------------------------------------------------------------- against OpenRLHF


def random_batch(seed: int, batch: int, length: int):
    g = torch.Generator().manual_seed(seed)
    mask = (torch.rand(batch, length, generator=g) > 0.3).float()
    mask[:, 0] = 0.0  # a prompt column
    mask[torch.arange(batch), torch.randint(1, length, (batch,), generator=g)] = 1.0  # every row acts at least once
    return g, mask


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    estimator=st.sampled_from(OPENRLHF_ESTIMATORS),
    n=st.sampled_from([2, 4]),
    groups=st.integers(1, 3),
    length=st.integers(2, 9),
    kl_coef=st.sampled_from([0.0, 0.05]),
    gamma=st.sampled_from([1.0, 0.9]),
)
def test_advantages_match_openrlhf(openrlhf, seed, estimator, n, groups, length, kl_coef, gamma):
    g, mask = random_batch(seed, n * groups, length)
    rewards = torch.randint(0, 3, (n * groups,), generator=g).float() - 0.5 * torch.rand(n * groups, generator=g)
    kl = torch.randn(mask.shape, generator=g) * 0.1
    values = torch.randn(mask.shape, generator=g) if estimator == "gae" else None
    ours = compute_advantages(
        rewards, mask, estimator=estimator, group_size=n, kl=kl, kl_coef=kl_coef, values=values, gamma=gamma, lambd=0.95
    )
    theirs_adv, theirs_ret = openrlhf_advantages(
        openrlhf,
        rewards,
        mask,
        estimator=estimator,
        n=n,
        kl=kl,
        kl_coef=kl_coef,
        values=values,
        gamma=gamma,
        lambd=0.95,
    )
    assert torch.allclose(ours.advantages, theirs_adv, atol=1e-5), (ours.advantages, theirs_adv)
    assert torch.allclose(ours.returns, theirs_ret, atol=1e-5)


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_matches_openrlhf(openrlhf, estimator):
    g = torch.Generator().manual_seed(3)
    logp, ref = torch.randn(4, 7, generator=g) * 3, torch.randn(4, 7, generator=g) * 3
    assert torch.allclose(
        approx_kl(logp, ref, estimator), openrlhf.compute_approx_kl(logp, ref, kl_estimator=estimator)
    )


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("dual_clip", [None, 3.0])
def test_policy_and_value_losses_match_openrlhf(openrlhf, mode, dual_clip):
    g, mask = random_batch(11, 6, 8)
    logp, old = torch.randn(6, 8, generator=g) * 0.3 - 1, torch.randn(6, 8, generator=g) * 0.3 - 1
    adv = torch.randn(6, 8, generator=g)
    token_level = mode == "token-mean"
    totals = {"num_tokens": mask.sum() * 2, "num_sequences": torch.tensor(12.0)}  # as if this were half a step
    ours = policy_loss(
        logp, old, adv, mask, clip_eps_low=0.2, clip_eps_high=0.28, dual_clip=dual_clip, mode=mode, **totals
    )
    loss_fn = openrlhf.PolicyLoss(
        clip_eps_low=0.2, clip_eps_high=0.28, dual_clip=dual_clip, token_level_loss=token_level
    )
    theirs, clip_ratio, ppo_kl, _, _ = loss_fn(
        logp,
        old,
        adv,
        action_mask=mask,
        batch_num_tokens=totals["num_tokens"],
        global_batch_size=totals["num_sequences"],
    )
    assert (
        torch.allclose(ours.loss, theirs)
        and torch.allclose(ours.clip_ratio, clip_ratio)
        and torch.allclose(ours.ppo_kl, ppo_kl)
    )

    values, old_values, returns = (
        torch.randn(6, 8, generator=g),
        torch.randn(6, 8, generator=g),
        torch.randn(6, 8, generator=g),
    )
    ours_v = value_loss(values, old_values, returns, mask, clip_eps=0.5, mode=mode, **totals)
    theirs_v = openrlhf.ValueLoss(clip_eps=0.5, token_level_loss=token_level)(
        values,
        old_values,
        returns,
        action_mask=mask,
        batch_num_tokens=totals["num_tokens"],
        global_batch_size=totals["num_sequences"],
    )
    assert torch.allclose(ours_v, theirs_v)
    ours_kl = kl_loss(logp, old, mask, estimator="k3", mode=mode)
    theirs_kl = openrlhf.aggregate_loss(
        openrlhf.compute_approx_kl(logp, old, kl_estimator="k3"), mask, token_level_loss=token_level
    )
    assert torch.allclose(ours_kl, theirs_kl)


CORRECTIONS = [
    ("token", "clip", "ratio", [0.5, 5.0]),  # TIS
    ("token", "mask", "ratio", [0.5, 2.0]),  # ICEPOP
    ("seq", "mask", "ratio", [0.8, 1.25]),  # seq-mask-tis
    ("token", "mask", "binary_kl", [0.02]),
    ("seq", "mask", "tv", [0.05]),
]


@pytest.mark.parametrize(("level", "mode", "gating", "threshold"), CORRECTIONS)
def test_train_rollout_correction_matches_openrlhf(openrlhf, level, mode, gating, threshold):
    g, mask = random_batch(13, 6, 9)
    logp, old = torch.randn(6, 9, generator=g) * 0.3 - 1, torch.randn(6, 9, generator=g) * 0.3 - 1
    # The generator's own numerics, off by more in later rows, so sequence-level gates keep some rows.
    rollout = old + torch.randn(6, 9, generator=g) * torch.linspace(0.01, 1.0, 6).unsqueeze(1)
    adv = torch.randn(6, 9, generator=g)
    low, high = [0.0, *threshold][-2:]
    ours = policy_loss(
        logp, old, adv, mask, correction=ISCorrection(level, mode, gating, low, high), rollout_log_probs=rollout
    )
    loss_fn = openrlhf.PolicyLoss(
        is_correction_level=level,
        is_correction_mode=mode,
        is_correction_gating=gating,
        is_correction_threshold=[low, high],
    )
    theirs, clip_ratio, ppo_kl, vllm_kl, filtered = loss_fn(logp, old, adv, action_mask=mask, rollout_log_probs=rollout)
    assert torch.allclose(ours.loss, theirs) and torch.allclose(ours.vllm_kl, vllm_kl)
    assert torch.allclose(ours.is_filter_ratio, filtered) and 0 < float(filtered) < 1  # the gate did something
    assert not torch.allclose(ours.loss, policy_loss(logp, old, adv, mask).loss)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), level=st.sampled_from(["token", "seq"]), mode=st.sampled_from(["mask", "clip"]))
def test_a_generator_that_agrees_with_the_trainer_leaves_the_loss_alone(seed, level, mode):
    if mode == "clip" and level == "seq":
        mode = "mask"
    g, mask = random_batch(seed, 4, 7)
    logp, old, adv = (torch.randn(4, 7, generator=g) for _ in range(3))
    plain = policy_loss(logp, old, adv, mask)
    corrected = policy_loss(logp, old, adv, mask, correction=ISCorrection(level, mode), rollout_log_probs=old.clone())
    assert torch.allclose(plain.loss, corrected.loss) and float(corrected.is_filter_ratio) == 0.0


def test_gradient_accumulation_adds_up_to_the_step_mean():
    g, mask = random_batch(5, 6, 5)
    logp = (torch.randn(6, 5, generator=g) - 1).requires_grad_()
    old, adv = logp.detach() + 0.1 * torch.randn(6, 5, generator=g), torch.randn(6, 5, generator=g)
    whole = policy_loss(logp, old, adv, mask).loss
    parts = sum(
        policy_loss(logp[rows], old[rows], adv[rows], mask[rows], num_tokens=mask.sum()).loss
        for rows in (slice(0, 2), slice(2, 6))
    )
    assert parts.item() == pytest.approx(whole.item(), abs=1e-6)


# ----------------------------------------------------------------------------- failed episodes

GROUP_ESTIMATORS = [e for e in algorithms.ESTIMATORS if algorithms.by_estimator(e).baseline is not None]


@pytest.mark.parametrize("estimator", GROUP_ESTIMATORS)
def test_a_group_baseline_ignores_failed_episodes(estimator):
    rewards = torch.tensor([1.0, 9.0, 0.0, 0.5, 1.0, 0.0, -4.0, 2.0, 3.0])  # three groups of three
    finished = torch.tensor([True, False, True, True, True, True, False, True, False])
    trained = algorithms.trained_episodes(finished, 3, estimator)
    assert trained.tolist() == [True, False, True, True, True, True, False, False, False]  # group 2: one finished
    shaped = group_baseline(rewards, 3, estimator, included=trained)
    # Each group's finished episodes get the baseline of those episodes alone, whatever the failed one scored.
    assert torch.allclose(shaped[[0, 2]], group_baseline(rewards[[0, 2]], 2, estimator))
    assert torch.allclose(shaped[3:6], group_baseline(rewards[3:6], 3, estimator))
    assert shaped[[1, 6, 7, 8]].tolist() == [0.0, 0.0, 0.0, 0.0]  # left out, and a group of one teaches nothing


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    estimator=st.sampled_from(OPENRLHF_ESTIMATORS),
    failed=st.integers(0, 7),
    reward=st.floats(-20, 20),
)
def test_what_a_failed_episode_holds_changes_nothing_for_the_others(seed, estimator, failed, reward):
    g, mask = random_batch(seed, 8, 7)
    rewards = torch.rand(8, generator=g)
    values = torch.randn(8, 7, generator=g) if estimator == "gae" else None
    finished = torch.arange(8) != failed
    included = algorithms.trained_episodes(finished, 4, estimator)
    others = included.nonzero().flatten()

    def advantages(rewards, mask, values):
        return compute_advantages(
            rewards, mask, estimator=estimator, group_size=4, values=values, gamma=0.9, included=included
        )

    ours = advantages(rewards, mask, values)
    changed_rewards, changed_mask = rewards.clone(), mask.clone()
    changed_rewards[failed], changed_mask[failed] = reward, 1.0
    changed_values = None if values is None else values.index_add(0, torch.tensor([failed]), torch.full((1, 7), 3.0))
    changed = advantages(changed_rewards, changed_mask, changed_values)
    assert torch.allclose(ours.advantages[others], changed.advantages[others], atol=1e-5)
    assert torch.allclose(ours.returns[others], changed.returns[others], atol=1e-5)
    if algorithms.by_estimator(estimator).baseline is None:  # no group: exactly the batch without the episode
        alone = compute_advantages(
            rewards[others],
            mask[others],
            estimator=estimator,
            values=None if values is None else values[others],
            gamma=0.9,
        )
        assert torch.allclose(ours.advantages[others], alone.advantages, atol=1e-5)
