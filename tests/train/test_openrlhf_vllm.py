"""OpenRLHF 0.11.2's own rollout actor and agent loop on a real vLLM engine (vLLM's CPU build, SmolLM2-135M).

OpenRLHF's ``RolloutRayActor`` (``openrlhf.trainer.ray.vllm_engine``) is built in this process, once for the module
(the ``actor`` fixture): it loads this project's plug-in by path (the agent file the launcher writes, bound to a
settings file beside it) and starts vLLM's async engine. Each test loads its own plug-in into it, as OpenRLHF loads
one (``_load_agent_executor``). The actor's ``generate_responses`` is what OpenRLHF's sample generator calls for a
prompt row: it runs ``MultiTurnAgentExecutor.execute`` through the plug-in's ``AgentExecutor`` against the real
engine, playing the env loop (Math with its calculator, WebShop) or an agent program (the example calculator agent
through the gateway, as a function and as a command). Everything vLLM returns is recorded on the way, so each test
holds the result to it token for token.
"""

from __future__ import annotations

import json
import sys

import pytest
import pytest_asyncio
import torch
import vllm
from openrlhf.trainer.ray.vllm_engine import RolloutRayActor, _load_agent_executor
from serving import REPO_ROOT
from test_openrlhf_program import as_experience, calculator_prompt

from agentfly_train.backends.openrlhf import executor, program_executor
from agentfly_train.backends.openrlhf.settings import Settings, write_plugin
from agentfly_train.config import AgentConfig, Config
from agentfly_train.dataset import export_tasks

#: One engine and one event loop for the module: its tests share the actor (a vLLM boot is most of a test's time).
pytestmark = pytest.mark.asyncio(loop_scope="module")

MATH = ("AgentFly/Math-v0", {"dataset": "basic_arithmetic", "tools": ["calculator"], "max_turns": 3})
WEBSHOP = ("AgentFly/WebShop-v0", {"max_turns": 3})
MAX_LENGTH = 1536
TURN_TOKENS = 40
#: The two envs' tools (their manifests'), logged per tool on every sample.
TOOLS = ("calculator", "click", "search")
#: The env loop's plug-in: in-process env pools, a turn budget and a stop string.
ENV_LOOP = Settings(pool="local", max_turn_tokens=TURN_TOKENS, stop=("</tool_call>",), tools=TOOLS)

PROGRAM_MAX_LENGTH = 512
PROGRAM_TURN_TOKENS = 16
PROGRAM = AgentConfig(program=f"{REPO_ROOT}/examples/calculator_agent.py:solve", tools=False, timeout_s=120)
COMMAND = AgentConfig(command=f"{sys.executable} {REPO_ROOT}/examples/calculator_agent_command.py", tools=False)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def actor(smollm2_dir, tmp_path_factory):
    """OpenRLHF's ``RolloutRayActor`` in this process, on SmolLM2-135M in float32.

    It is built as its plain class instead of as a Ray actor (its ``__init__`` is a coroutine: awaited by hand, as
    Ray would), with the env loop's plug-in. Every vLLM output its ``generate`` returns is recorded in its
    ``outputs``: ``(prompt token ids, sampling params, CompletionOutput)``. The env pools, the gateways and the
    engine are closed after the module.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ADDRESS", "unused:0")  # the actor records Ray's address; no Ray runs here
        patch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        patch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
        cls = RolloutRayActor.__ray_metadata__.modified_class
        engine = cls.__new__(cls)
        await cls.__init__(
            engine,
            model=smollm2_dir,
            agent_func_path=str(write_plugin(tmp_path_factory.mktemp("plugin"), ENV_LOOP)),
            num_gpus=0,
            dtype="float32",
            seed=0,
            enforce_eager=True,
            max_model_len=MAX_LENGTH,
        )
        generate = engine.generate

        async def recording(prompt_token_ids, sampling_params, multi_modal_data=None):
            output = await generate(prompt_token_ids, sampling_params, multi_modal_data)
            engine.outputs.append((list(prompt_token_ids), sampling_params, output.outputs[0]))
            return output

        engine.generate = recording
        yield engine
        await program_executor.close_gateways()
        await executor.close_pools()
        engine.llm.shutdown()


def load_plugin(actor, folder, settings: Settings):
    """Loads the agent file the launcher writes for ``settings`` into the actor, as OpenRLHF loads one, and clears
    its recorded outputs."""
    actor.executor = _load_agent_executor(str(write_plugin(folder, settings)))
    assert actor.executor.settings == settings
    actor.outputs = []
    return actor


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
    actor = load_plugin(actor, tmp_path / "plugin", ENV_LOOP)
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


def assert_rows_are_what_vllm_sampled(rows: list[dict], outputs: list) -> None:
    """Each action range holds exactly the tokens of one engine output, sampled to continue exactly the tokens before
    it, with its log-probs; every output is used once; the rest of the row has log-prob 0."""
    unmatched = list(outputs)
    for row in rows:
        tokens, logprobs = row["observation_tokens"], row["rollout_log_probs"]
        assert len(logprobs) == len(tokens) <= PROGRAM_MAX_LENGTH and row["action_ranges"]
        inside = set()
        for start, end in row["action_ranges"]:
            match = next(o for o in unmatched if o[0] == tokens[:start] and list(o[2].token_ids) == tokens[start:end])
            unmatched.remove(match)
            sampled = match[2]
            assert logprobs[start:end] == [step[t].logprob for step, t in zip(sampled.logprobs, sampled.token_ids)]
            assert 1 <= len(sampled.token_ids) <= PROGRAM_TURN_TOKENS
            inside.update(range(start, end))
        assert all(lp == 0.0 for i, lp in enumerate(logprobs) if i not in inside)
        # The env scored the program's answer; one row, continued exactly.
        logs = row["extra_logs"]
        assert isinstance(row["reward"], float) and row["reward"] == row["scores"] == logs["success"]
        assert (logs["failed"], logs["rows"], logs["rows_dropped"], logs["prefix_mismatches"]) == (0.0, 1.0, 0.0, 0.0)
        assert logs["turns"] == len(row["action_ranges"])
        experience = as_experience(row)
        assert experience.action_mask.sum() == len(inside) and experience.rewards.tolist() == [row["reward"]]
    assert unmatched == []


async def test_programs_on_openrlhfs_actor_return_exactly_what_vllm_sampled(actor, tokenizer, tmp_path):
    settings = Settings(pool="local", max_turn_tokens=PROGRAM_TURN_TOKENS, tools=("calculator",), agent=PROGRAM)
    actor = load_plugin(actor, tmp_path / "program", settings)
    prompt, label = calculator_prompt(tmp_path, tokenizer, seed=3)
    sampling = vllm.SamplingParams(temperature=1.0, top_p=1.0, max_tokens=None, min_tokens=1, logprobs=1)

    rows = await actor.generate_responses(prompt, label, sampling, PROGRAM_MAX_LENGTH, tokenizer, num_samples=2)
    assert len(rows) == 2
    assert_rows_are_what_vllm_sampled(rows, actor.outputs)
    assert all(row["extra_logs"]["tool/calculator/calls"] == 0.0 for row in rows)  # its calculator is its own

    # The same agent as a command: a process of its own, which reaches the actor's gateway from outside.
    load_plugin(actor, tmp_path / "command", Settings(pool="local", max_turn_tokens=PROGRAM_TURN_TOKENS, agent=COMMAND))
    rows = await actor.generate_responses(prompt, label, sampling, PROGRAM_MAX_LENGTH, tokenizer, num_samples=1)
    assert_rows_are_what_vllm_sampled(rows, actor.outputs)
