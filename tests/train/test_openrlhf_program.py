"""Agent programs on the OpenRLHF backend: ``program_agent.py`` driven as OpenRLHF 0.11.2 drives it.

The agent file the launcher writes for a program (``write_plugin``: the program executor bound to a settings file
whose ``agent`` names the program) is loaded by path, as OpenRLHF's ``_load_agent_executor`` does, and its
``execute`` is called as
the rollout actor calls it, with vLLM's own ``SamplingParams``, SmolLM2's real tokenizer, the real
AgentFly/Math-v0 task of the ``agent-calculator`` preset and the real example program
(``examples/calculator_agent.py``). Only the engine is a stand-in: :class:`ScriptedEngine` answers like
OpenRLHF's rollout actor (vLLM's ``RequestOutput`` shape) with the example's scripted expert, so the episodes
solve their task. Each returned row also goes through OpenRLHF's own ``_process_response_into_experience``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from types import SimpleNamespace

import pytest
import vllm
from serving import REPO_ROOT
from test_openrlhf_agent import load_agent_file

from agentfly_train.backends.openrlhf import PROGRAM_AGENT_FILE, executor, program_executor
from agentfly_train.backends.openrlhf.settings import SETTINGS_FILE, Settings, write_plugin
from agentfly_train.config import AgentConfig, Config
from agentfly_train.dataset import export_tasks

openai = pytest.importorskip("openai")

sys.path.insert(0, str(REPO_ROOT / "examples"))
import calculator_agent  # noqa: E402

EXAMPLE = f"{REPO_ROOT}/examples/calculator_agent.py:solve"
#: A program that calls its episode's env calculator over MCP (``task.tools_url``).
MCP_PROGRAM = f"{REPO_ROOT}/tests/train/_mcp_calculator_program.py:solve"
MAX_LENGTH = 1024
#: The run's tools, as the launcher fills ``Settings.tools`` from the env's manifest (Math-v0: the calculator).
TOOLS = ("calculator",)
TOOL_KEYS = {f"tool/calculator/{field}" for field in ("calls", "errors", "timeouts", "ms")}
#: The log keys of every row, failed or not (OpenRLHF batches them key by key).
LOG_KEYS = TOOL_KEYS | {
    "turns",
    "tool_calls",
    "parse_errors",
    "errors",
    "success",
    "env_latency_s",
    "truncated",
    "truncation_context",
    "failed",
    "rows",
    "rows_dropped",
    "prefix_mismatches",
}


class ScriptedEngine:
    """Stands in for OpenRLHF's rollout actor (``generate(prompt_token_ids, sampling_params)``): answers each
    call with ``script(prompt text)``, closed with the end-of-turn token, cut at ``max_tokens``; each token's
    log-prob is distinct, so a test can tell which call a token came from."""

    def __init__(self, tokenizer, script=calculator_agent.expert) -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.calls: list[dict] = []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        text = self.script(self.tokenizer.decode(prompt_token_ids))
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [
            self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        ]
        finish = "stop"
        if len(ids) > sampling_params.max_tokens:
            ids, finish = ids[: sampling_params.max_tokens], "length"
        logprobs = [-(len(self.calls) + 1) - i / 1000 for i in range(len(ids))]
        self.calls.append({"prompt": list(prompt_token_ids), "ids": ids, "logprobs": logprobs})
        output = SimpleNamespace(
            token_ids=ids,
            text=self.tokenizer.decode(ids),
            finish_reason=finish,
            stop_reason=None,
            logprobs=[{token: SimpleNamespace(logprob=lp)} for token, lp in zip(ids, logprobs)],
        )
        return SimpleNamespace(outputs=[output])


def calculator_prompt(tmp_path, tokenizer, seed: int = 0, **options) -> tuple[str, str]:
    """A prompt row of the agent-calculator task (its env options updated with ``options``), as OpenRLHF reads it:
    the messages through the chat template, and the label."""
    path = tmp_path / "prompts.jsonl"
    config = Config.load("agent-calculator")
    config.env.options.update(options)
    export_tasks(config, path, count=1, first_seed=seed)
    row = json.loads(path.read_text().splitlines()[0])
    return tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True), row["label"]


def sampling(logprobs: int | None = 1) -> vllm.SamplingParams:
    """What OpenRLHF's sample generator sends (its ``_dispatch_prompts_to_vllm``)."""
    return vllm.SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, max_tokens=64, min_tokens=1, logprobs=logprobs)


@pytest.fixture
async def program_agent(tmp_path):
    """The executor of the agent file the launcher writes for an agent: ``program_agent(program=...,
    timeout_s=...)`` (the ``[agent]`` fields), built as OpenRLHF builds it, with in-process env pools and the
    calculator's calls logged; gateways and pools are closed after the test."""
    made = []

    def make(**agent):
        settings = Settings(pool="local", tools=TOOLS, agent=AgentConfig(**agent))
        made.append(write_plugin(tmp_path / f"plugin-{len(made)}", settings))
        built = load_agent_file(made[-1]).AgentExecutor()
        assert built.settings == settings
        return built

    yield make
    await program_executor.close_gateways()
    await executor.close_pools()


def as_experience(row: dict):
    """The row through OpenRLHF's own conversion into a training sample (it reads no generator state)."""
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    return SamplesGenerator._process_response_into_experience(None, row, max_len=MAX_LENGTH)


def assert_token_exact(row: dict, unmatched: list[dict]) -> None:
    """Each action range holds exactly what one engine call sampled, after exactly that call's prompt, with its
    log-probs (the call is taken out of ``unmatched``: no call serves two ranges); every other token has log-prob 0."""
    tokens, logprobs = row["observation_tokens"], row["rollout_log_probs"]
    assert len(logprobs) == len(tokens)
    inside = set()
    for start, end in row["action_ranges"]:
        sampled = {"prompt": tokens[:start], "ids": tokens[start:end], "logprobs": logprobs[start:end]}
        assert sampled in unmatched
        unmatched.remove(sampled)
        inside.update(range(start, end))
    assert all(lp == 0.0 for i, lp in enumerate(logprobs) if i not in inside)


# ----------------------------------------------------------------------------- episodes


async def test_samples_play_the_program_token_exact_and_the_env_scores_them(program_agent, tokenizer, tmp_path):
    agent = program_agent(program=EXAMPLE, tools=False)
    prompt, label = calculator_prompt(tmp_path, tokenizer)
    engine = ScriptedEngine(tokenizer)
    rows = await asyncio.gather(
        *(agent.execute(prompt, label, sampling(), MAX_LENGTH, tokenizer, engine) for _ in range(2))
    )

    assert len(engine.calls) == 4  # each sample: the calculate call, then the answer
    unmatched = list(engine.calls)
    for row in rows:
        assert (row["prompt"], row["label"], row["images"]) == (prompt, label, None)
        assert len(row["action_ranges"]) == 2
        assert_token_exact(row, unmatched)
        # The program's own prompt opens the row: its system prompt and tool, then the env's task.
        opening = tokenizer.decode(row["observation_tokens"][: row["action_ranges"][0][0]])
        assert calculator_agent.SYSTEM_PROMPT in opening and '"calculate"' in opening
        assert row["reward"] == row["scores"] == 1.0 and row["truncated"] is False
        logs = row["extra_logs"]
        assert set(logs) == LOG_KEYS
        assert (logs["failed"], logs["success"], logs["turns"], logs["tool_calls"]) == (0.0, 1.0, 2.0, 1.0)
        assert (logs["rows"], logs["rows_dropped"], logs["prefix_mismatches"]) == (1.0, 0.0, 0.0)
        # The program's calculator is its own, not the env's: the env recorded no tool call.
        assert all(logs[key] == 0.0 for key in TOOL_KEYS)
        experience = as_experience(row)
        assert experience.action_mask.sum() == sum(end - start for start, end in row["action_ranges"])
        assert experience.rewards.tolist() == [1.0]
    assert unmatched == []
    # One gateway for the loop, shared by the samples.
    assert len(program_executor._GATEWAYS[asyncio.get_running_loop()]) == 1


async def test_the_envs_tools_a_program_calls_over_mcp_are_logged_per_tool(program_agent, tokenizer, tmp_path):
    """The program calls the episode's env calculator over MCP: a step of the env's trajectory, so a tool call in
    the row's ``tool/calculator/...`` logs."""
    pytest.importorskip("mcp")
    agent = program_agent(program=MCP_PROGRAM, tools=True)
    prompt, label = calculator_prompt(tmp_path, tokenizer, tools=["calculator"])
    row = await agent.execute(prompt, label, sampling(), MAX_LENGTH, tokenizer, ScriptedEngine(tokenizer))
    logs = row["extra_logs"]
    assert set(logs) == LOG_KEYS and row["reward"] == 1.0 and logs["failed"] == 0.0
    calls = (logs["tool/calculator/calls"], logs["tool/calculator/errors"], logs["tool/calculator/timeouts"])
    assert calls == (1.0, 0.0, 0.0) and 0 < logs["tool/calculator/ms"] < 10_000
    assert logs["tool_calls"] == 0.0  # the program called it, not the model


async def test_log_probs_come_back_only_when_openrlhf_asks_for_them(program_agent, tokenizer, tmp_path):
    agent = program_agent(program=EXAMPLE, tools=False)
    prompt, label = calculator_prompt(tmp_path, tokenizer)
    row = await agent.execute(prompt, label, sampling(logprobs=None), MAX_LENGTH, tokenizer, ScriptedEngine(tokenizer))
    assert row["rollout_log_probs"] is None and row["reward"] == 1.0


def side_question_then_solve(task, llm):
    """A side question in a conversation of its own (cut at 8 tokens), then the example agent: two rows."""
    client = openai.OpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": "Say hi."}], max_tokens=8)
    return calculator_agent.solve(task, llm)


async def test_of_several_rows_the_one_with_most_sampled_tokens_returns(program_agent, tokenizer, tmp_path):
    agent = program_agent(program=f"{__name__}:side_question_then_solve", tools=False)
    prompt, label = calculator_prompt(tmp_path, tokenizer)
    engine = ScriptedEngine(tokenizer)
    row = await agent.execute(prompt, label, sampling(), MAX_LENGTH, tokenizer, engine)

    side, *solve = engine.calls
    assert len(side["ids"]) == 8 and len(solve) == 2
    assert_token_exact(row, solve)  # the solving conversation, not the side question
    assert len(row["action_ranges"]) == 2 and row["reward"] == 1.0
    logs = row["extra_logs"]
    assert (logs["rows"], logs["rows_dropped"], logs["prefix_mismatches"], logs["turns"]) == (2.0, 1.0, 0.0, 3.0)
    assert row["truncated"] is True  # the side question was cut at its budget


# ----------------------------------------------------------------------------- failures


def raises_at_once(task, llm):
    raise RuntimeError("the program's own bug")


def raises_after_a_call(task, llm):
    client = openai.OpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task.prompt}])
    raise RuntimeError("the program's own bug, after a call")


def never_calls(task, llm):
    return "42"


async def runs_too_long(task, llm):
    await asyncio.sleep(30)


@pytest.mark.parametrize(
    ("program", "reason", "called"),
    [
        ("raises_at_once", "raised RuntimeError: the program's own bug", False),
        ("raises_after_a_call", "raised RuntimeError: the program's own bug, after a call", True),
        ("never_calls", "never called the model", False),
        ("runs_too_long", "ran past its time limit of 0.5 s", False),
    ],
)
async def test_a_failed_episode_is_a_valid_row_at_reward_zero(
    program_agent, tokenizer, tmp_path, caplog, program, reason, called
):
    # Only the slow program gets a short time limit: the others' calls must not run past theirs on a busy machine.
    agent = program_agent(program=f"{__name__}:{program}", timeout_s=0.5 if "time limit" in reason else 60, tools=False)
    prompt, label = calculator_prompt(tmp_path, tokenizer)
    engine = ScriptedEngine(tokenizer)
    row = await agent.execute(prompt, label, sampling(), MAX_LENGTH, tokenizer, engine)

    assert row["reward"] == row["scores"] == 0.0
    logs = row["extra_logs"]
    assert set(logs) == LOG_KEYS and logs["failed"] == 1.0 and logs["success"] == 0.0
    assert logs["rows"] == float(called) and logs["turns"] == float(called)
    tokens = row["observation_tokens"]
    if called:  # the row the program made before it failed: its sampled tokens, trained at reward 0
        assert tokens == engine.calls[0]["prompt"] + engine.calls[0]["ids"]
        assert row["action_ranges"] == [(len(engine.calls[0]["prompt"]), len(tokens))]
    else:  # no row: OpenRLHF's prompt, as its own loop would have started, nothing sampled
        assert tokens == tokenizer(prompt, add_special_tokens=False)["input_ids"] and row["action_ranges"] == []
    assert len(row["rollout_log_probs"]) == len(tokens)
    assert any(reason in record.getMessage() for record in caplog.records)
    experience = as_experience(row)
    assert experience.action_mask.sum() == sum(end - start for start, end in row["action_ranges"])
    assert experience.info["failed"].tolist() == [1.0]
    # The rollout goes on: the env went back to its pool as broken, and the next sample plays.
    solver = program_agent(program=EXAMPLE, tools=False)
    assert (await solver.execute(prompt, label, sampling(), MAX_LENGTH, tokenizer, engine))["reward"] == 1.0


# ----------------------------------------------------------------------------- settings


def test_the_program_executor_needs_an_agent_and_says_so(tmp_path):
    # program_agent.py, the agent file with the default settings, names no program.
    with pytest.raises(ValueError, match=r"agent must name one.*Settings\(\) \(no settings file\) has none"):
        load_agent_file(PROGRAM_AGENT_FILE).AgentExecutor()
    settings_file = tmp_path / SETTINGS_FILE
    Settings(pool="local").write(settings_file)
    with pytest.raises(ValueError, match=rf"agent must name one.*settings file {settings_file} has none"):
        program_executor.ProgramExecutor.bound(settings_file)()
    settings_file.write_text(json.dumps({"agent": {"program": "x.py:f", "timeout_s": -1}}))
    with pytest.raises(ValueError, match=r"not an AgentFly plug-in settings file: .*agent\.timeout_s"):
        program_executor.ProgramExecutor.bound(settings_file)()


def test_a_command_is_loaded_from_the_settings(tmp_path):
    settings = Settings(agent=AgentConfig(command="python agent.py --fast", returns="reward"))
    agent = program_executor.ProgramExecutor(settings).agent
    assert (agent.argv, agent.returns) == (["python", "agent.py", "--fast"], "reward")
    built = load_agent_file(write_plugin(tmp_path, settings)).AgentExecutor()
    assert (built.agent.argv, built.agent.returns) == (["python", "agent.py", "--fast"], "reward")
