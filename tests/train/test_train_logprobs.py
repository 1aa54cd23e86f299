"""The update's log-probs (``agentfly_train.training.sequence_logprobs``): the output layer only at action tokens,
in chunks that are recomputed in the backward pass, equals the model's own whole logits, values and gradients."""

from __future__ import annotations

import contextlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_train_rollout import tiny_model

from agentfly_train.training import _whole_logits_logprobs, sequence_logprobs


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    return tiny_model(tokenizer)


@settings(max_examples=15, deadline=None)
@given(
    rows=st.integers(1, 3),
    length=st.integers(3, 40),
    chunk=st.sampled_from([1, 7, 1024]),
    temperature=st.sampled_from([0.7, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_chunked_action_logprobs_equal_the_whole_logits_in_value_and_gradient(
    model, rows, length, chunk, temperature, seed
):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (rows, length), generator=generator)
    mask = (torch.rand(rows, length - 1, generator=generator) < 0.5).float()
    attention = torch.ones_like(ids)
    attention[0, length - 1 - int(torch.randint(0, length // 2, (1,), generator=generator)) :] = 0  # right padding
    mask = mask * attention[:, 1:]
    results = []
    for compute in (
        lambda: sequence_logprobs(model, ids, attention, mask, temperature, chunk_tokens=chunk),
        lambda: _whole_logits_logprobs(model, ids, attention, mask, temperature),
    ):
        model.zero_grad()
        logprobs = compute()
        (logprobs * mask).sum().backward()
        results.append((logprobs.detach(), [p.grad.clone() for p in model.parameters()]))
    (ours, our_grads), (theirs, their_grads) = results
    assert torch.equal(ours == 0, theirs == 0) or mask.sum() == 0
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert (ours[mask == 0] == 0).all() and (ours[mask == 1] < 0).all()
    # Equal up to float32's order of summation, measured against the whole gradient's scale as well as each
    # parameter's: a parameter whose true gradient is 0 (a query that attends to itself alone: its softmax is
    # constant) gets rounding noise (~1e-8) from each path, which no relative bound on its own norm can hold.
    scale = torch.cat([grad.flatten() for grad in their_grads]).norm()
    for a, b in zip(our_grads, their_grads, strict=True):
        assert (a - b).norm() <= 1e-4 * b.norm() + 1e-6 * scale


def test_a_bf16_autocast_update_says_so_and_stays_near_float32(tokenizer, tmp_path):
    """``train.bf16_autocast``: the run's first line says so; the update's log-probs come out in float32, near
    float32's own (bfloat16 keeps ~3 significant digits), and the step is finite and moves the weights."""
    from test_train_learning import ShoutEnv, shout_config

    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.training import Batch

    config = shout_config("grpo", tmp_path, steps=1, epochs=1, bf16_autocast=True)
    trainer = LocalTrainer(config, model=tiny_model(tokenizer), tokenizer=tokenizer, env_fn=ShoutEnv)
    assert trainer.describe().endswith("update in bfloat16 autocast (attention in float32)")
    batch = Batch.from_episodes(trainer.rollout.run([1, 2], sample_seed=0).episodes, trainer.pad_id, trainer.device)
    ids, attention, mask = batch.slice(torch.arange(len(batch)))
    with torch.no_grad():
        exact = sequence_logprobs(trainer.policy, ids, attention, mask, 1.0)
        with trainer._numerics():
            autocast = sequence_logprobs(trainer.policy, ids, attention, mask, 1.0)
    assert autocast.dtype == torch.float32 and not torch.equal(autocast, exact)
    assert ((autocast - exact).abs() * mask).max() < 0.1
    before = [p.detach().clone() for p in trainer.policy.parameters()]
    metrics = trainer._update(batch)
    assert torch.isfinite(torch.tensor(metrics["policy_loss"])) and metrics["grad_norm"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, trainer.policy.parameters(), strict=True))
    trainer.close()


def test_under_bf16_autocast_on_a_cpu_attention_with_gradients_runs_in_float32_and_keeps_its_masks(tokenizer):
    """``use_float32_attention_gradients``: under bfloat16 autocast a pass with gradients gets float32 attention (its
    output is float32), one without gets autocast's bfloat16, bit for bit what plain SDPA computes; outside autocast
    nothing changes. Padding stays masked: a left-padded row's log-probs are the row's own."""
    from agentfly_train.training import FLOAT32_GRADIENT_ATTENTION, use_float32_attention_gradients

    model = tiny_model(tokenizer)
    plain = tiny_model(tokenizer)  # the same weights (same seed), plain SDPA
    assert use_float32_attention_gradients(model) and not use_float32_attention_gradients(model)
    assert model.config._attn_implementation == FLOAT32_GRADIENT_ATTENTION
    assert plain.config._attn_implementation == "sdpa"
    seen: list[torch.dtype] = []  # the attention's output, as the output projection receives it
    for layer in (*model.model.layers, *plain.model.layers):
        layer.self_attn.o_proj.register_forward_pre_hook(lambda module, args: seen.append(args[0].dtype))
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (2, 24), generator=generator)
    attention = torch.ones_like(ids)
    attention[1, :9] = 0  # row 1 left-padded: its real tokens must not see the first 9
    mask = attention[:, 1:].float()
    mask[1, :9] = 0

    def logprobs(net, grad, autocast, rows=slice(None)):
        seen.clear()
        with torch.set_grad_enabled(grad), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return sequence_logprobs(net, ids[rows], attention[rows], mask[rows], 1.0)

    with_grad = logprobs(model, True, True)
    assert set(seen) == {torch.float32}
    (with_grad * mask).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert torch.equal(logprobs(model, False, True), logprobs(plain, False, True))
    assert set(seen) == {torch.bfloat16}
    assert torch.equal(logprobs(model, True, False).detach(), logprobs(plain, True, False).detach())
    assert set(seen) == {torch.float32}
    exact = logprobs(plain, False, False)
    assert ((with_grad.detach() - exact).abs() * mask).max() < 0.1
    padded = logprobs(model, True, True, slice(1, 2))[:, 9:]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        unpadded = sequence_logprobs(model, ids[1:, 9:], attention[1:, 9:], mask[1:, 9:], 1.0)
    assert torch.allclose(padded, unpadded, atol=1e-4)


def test_a_compiled_update_computes_what_the_eager_one_does_and_generation_stays_eager(tokenizer, tmp_path):
    """``train.compile``: the run's first line says so; inside the update the decoder layers run compiled, with the
    eager layers' log-probs and gradients (float32, up to the order of summation); outside it they are the model's
    own again, so generation never compiles."""
    from test_train_learning import ShoutEnv, shout_config

    from agentfly_train.backends.local import LocalTrainer
    from agentfly_train.training import Batch

    config = shout_config("grpo", tmp_path, steps=1, epochs=1, compile=True)
    trainer = LocalTrainer(config, model=tiny_model(tokenizer), tokenizer=tokenizer, env_fn=ShoutEnv)
    assert trainer.describe().endswith("decoder layers compiled for the update")
    assert trainer.compiled is not None and len(trainer.compiled.blocks) == 2
    batch = Batch.from_episodes(trainer.rollout.run([1, 2], sample_seed=0).episodes, trainer.pad_id, trainer.device)
    ids, attention, mask = batch.slice(torch.arange(len(batch)))
    results = []
    for compiled in (False, True):
        trainer.policy.zero_grad()
        with trainer.compiled if compiled else contextlib.nullcontext():
            assert all(("forward" in vars(block)) is compiled for block in trainer.compiled.blocks)
            logprobs = sequence_logprobs(trainer.policy, ids, attention, mask, 1.0)
            (logprobs * mask).sum().backward()
        results.append((logprobs.detach(), [p.grad.clone() for p in trainer.policy.parameters()]))
    (eager, eager_grads), (compiled, compiled_grads) = results
    assert mask.sum() > 0 and torch.allclose(eager, compiled, atol=1e-4)
    for a, b in zip(compiled_grads, eager_grads, strict=True):
        assert (a - b).norm() <= 1e-3 * b.norm() + 1e-7
    assert not any("forward" in vars(block) for block in trainer.compiled.blocks)  # generation: the eager layers
    metrics = trainer._update(batch)
    assert torch.isfinite(torch.tensor(metrics["policy_loss"])) and metrics["grad_norm"] > 0
    trainer.close()
