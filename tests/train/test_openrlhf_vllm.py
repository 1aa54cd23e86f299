"""OpenRLHF 0.11.2's own rollout actor and agent loop on a real vLLM engine (vLLM's CPU build).

OpenRLHF's ``RolloutRayActor`` (``openrlhf.trainer.ray.vllm_engine``) is built in this process
(the ``openrlhf_actor`` fixture of conftest.py): it loads this project's plug-in by path (the agent file
the launcher writes, bound to a settings file beside it) and starts
vLLM's async engine on SmolLM2-135M. Its
``generate_responses`` is what OpenRLHF's sample generator calls for a prompt row: it runs
``MultiTurnAgentExecutor.execute`` through the plug-in's ``AgentExecutor`` against the real engine.
Everything vLLM returns is recorded on the way, so the test can hold the result to it token for token.
"""

from __future__ import annotations

import json

import pytest
import torch
import vllm

from agentfly_train.backends.openrlhf.settings import Settings
from agentfly_train.config import Config
from agentfly_train.dataset import export_tasks

MATH = ("AgentFly/Math-v0", {"dataset": "basic_arithmetic", "tools": ["calculator"], "max_turns": 3})
WEBSHOP = ("AgentFly/WebShop-v0", {"max_turns": 3})
MAX_LENGTH = 1536
TURN_TOKENS = 40
#: The two envs' tools (their manifests'), logged per tool on every sample.
TOOLS = ("calculator", "click", "search")


@pytest.fixture
async def actor(openrlhf_actor):
    """OpenRLHF's vLLM rollout actor with this project's env-loop plug-in (see the ``openrlhf_actor`` fixture),
    in-process env pools, a turn budget and a stop string."""
    settings = Settings(pool="local", max_turn_tokens=TURN_TOKENS, stop=("</tool_call>",), tools=TOOLS)
    return await openrlhf_actor(settings, MAX_LENGTH)


def prompt_row(tmp_path, tokenizer, env_id: str, options: dict, seed: int) -> tuple[str, str]:
    """A prompt row as OpenRLHF reads it: the exported messages through the chat template, the label."""
    config = Config.from_dict({"env": {"id": env_id, "options": options}})
    path = tmp_path / "prompts.jsonl"
    export_tasks(config, path, count=1, first_seed=seed)
    row = json.loads(path.read_text().splitlines()[0])
    return tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True), row["label"]


@pytest.mark.parametrize(("env_id", "options", "seed"), [(*MATH, 3), (*WEBSHOP, 5)], ids=["math", "webshop"])
async def test_openrlhf_actor_and_loop_keep_exactly_what_vllm_sampled(
    actor, tokenizer, tmp_path, env_id, options, seed
):
    prompt, label = prompt_row(tmp_path, tokenizer, env_id, options, seed)
    sampling = vllm.SamplingParams(temperature=1.0, top_p=1.0, max_tokens=None, min_tokens=1, logprobs=1)
    results = await actor.generate_responses(prompt, label, sampling, MAX_LENGTH, tokenizer, num_samples=2)

    assert len(results) == 2 and len(actor.outputs) == sum(len(r["action_ranges"]) for r in results)
    unmatched = list(actor.outputs)  # every vLLM output must be used by exactly one action range
    for result in results:
        tokens, ranges, logprobs = result["observation_tokens"], result["action_ranges"], result["rollout_log_probs"]
        assert tokens[: ranges[0][0]] == tokenizer(prompt, add_special_tokens=False)["input_ids"]
        for index, (start, end) in enumerate(ranges):
            # Inside the range: exactly the tokens vLLM sampled when asked to continue exactly the tokens
            # before it (the samples interleave, and both continue the prompt), with their log-probs.
            [match] = [
                item for item in unmatched if item[0] == tokens[:start] and list(item[2].token_ids) == tokens[start:end]
            ][:1]
            unmatched.remove(match)
            sampled = match[2]
            assert logprobs[start:end] == [step[t].logprob for step, t in zip(sampled.logprobs, sampled.token_ids)]
            # The turn's own budget and stop string held.
            assert len(sampled.token_ids) <= TURN_TOKENS
            if sampled.finish_reason == "stop" and isinstance(sampled.stop_reason, str):
                assert tokenizer.decode(sampled.token_ids).endswith("</tool_call>")
            # Between ranges: the env's observation turn, as the local backend appends it; no log-prob.
            following = ranges[index + 1][0] if index + 1 < len(ranges) else len(tokens)
            between = tokens[end:following]
            assert all(lp == 0.0 for lp in logprobs[end:following])
            if between:  # a tool turn, then the opening of the next model turn
                text = tokenizer.decode(between)
                assert "<|im_start|>tool\n" in text and text.endswith("<|im_start|>assistant\n"), text
        # Rewards and logs as OpenRLHF reads them: floats and tensors it can sum and batch.
        assert isinstance(result["reward"], float) and isinstance(result["scores"], torch.Tensor)
        logs = result["extra_logs"]
        assert logs["turns"] == len(ranges) and logs["failed"] == 0.0
        assert set(logs) >= {"tool_calls", "parse_errors", "errors", "success", "env_latency_s", "truncated"}
        tool_keys = {key for key in logs if key.startswith("tool/")}
        assert tool_keys == {
            f"tool/{name}/{field}" for name in TOOLS for field in ("calls", "errors", "timeouts", "ms")
        }
        assert sum(logs[f"tool/{name}/calls"] for name in TOOLS) <= logs["tool_calls"]
    assert unmatched == []
    # The untrained model's turns get cut at the turn budget, so episodes go on for several turns.
    assert max(len(r["action_ranges"]) for r in results) >= 2
