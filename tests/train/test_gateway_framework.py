"""Clients nobody here wrote against the gateway: the OpenAI Agents SDK's own example run unchanged, and a matrix
of real agent frameworks, each in its own venv (``make peers``), each as its documentation writes an agent.

The matrix (below, "the framework matrix") runs each framework's calculator agent as an agent command; what each
test found is in its docstring. The rest of this docstring is about the SDK's example.

The example is ``examples/model_providers/custom_example_agent.py`` of openai-agents 0.24.0 (the
SDK's documented way to use a non-OpenAI, chat-completions endpoint: an ``Agent`` with a function tool
``get_weather``, run by ``Runner.run``), as its release ships it, in the SDK's own venv (``make peers``
unpacks it from the sdist into ``.venv-peers/openai-agents``). It reads its endpoint from
``EXAMPLE_BASE_URL``, ``EXAMPLE_API_KEY`` and ``EXAMPLE_MODEL_NAME``; nothing of it is edited.

The gateway runs in this process with a scripted generator that plays the model: a hermes tool call,
then, once the tool's result is in the conversation, a haiku. The episode must be captured token-exact:
each row's tokens are the chat template's prompt tokens plus exactly the ids the generator sampled,
mask 1 and the generator's log-probs there and nowhere else.

What it found: the SDK sends the model's turn back as it got it (``content: null``, the tool call with
its id and arguments as the gateway returned them). The gateway recognizes that message as the model's
own unedited turn and puts in the ids it sampled, so the second call continues the first call's row
exactly (one row, no prefix mismatch) whether the model wrote its call in the form the gateway writes
calls back (hermes' own, with newlines) or compactly (no newlines): re-rendering the compact call from
the parsed ``tool_calls`` would have given other tokens and split the episode.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec
import pytest
from serving import REPO_ROOT, peer_python, run_in_peer
from test_gateway import ADD, TOOL_NOTE, ScriptedGenerator, template_ids, text_ids

from agentfly_env.core.aio import run_sync
from agentfly_env.resources.distributed import make_env_pool
from agentfly_train.agents import AgentRollout, gateway_for, load_agent
from agentfly_train.cli import build_parser, resolve_config
from agentfly_train.config import Config
from agentfly_train.evaluate import evaluate
from agentfly_train.gateway import BackgroundGateway, EpisodeRecording, Gateway
from agentfly_train.generation import Generation, build_generator
from agentfly_train.models import load_causal_lm

SDK_PYTHON = peer_python("openai-agents", "AGENTFLY_OPENAI_AGENTS_PYTHON")
EXAMPLE = REPO_ROOT / ".venv-peers/openai-agents/examples/model_providers/custom_example_agent.py"

# The example's tool as the SDK 0.24.0 describes it (a strict schema from the function's signature).
GET_WEATHER = {
    "name": "get_weather",
    "description": "",
    "parameters": {
        "properties": {"city": {"title": "City", "type": "string"}},
        "required": ["city"],
        "title": "get_weather_args",
        "type": "object",
        "additionalProperties": False,
    },
    "strict": True,
}
# A call as the gateway writes one back into a prompt (SmolLM2's template renders no tool_calls), and the
# same call without the newlines, as models often write it: hermes reads both.
CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>'
COMPACT_CALL_TEXT = CALL_TEXT.replace("\n", "")
HAIKU = "Tokyo wakes to sun\nno cloud above the rooftops\nthe whole day is bright"


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the OpenAI Agents SDK's venv is missing: make peers")
@pytest.mark.parametrize("call_text", [CALL_TEXT, COMPACT_CALL_TEXT], ids=["canonical-call", "compact-call"])
def test_the_agents_sdk_example_is_recorded_token_exact(tokenizer, call_text):
    generator = ScriptedGenerator(tokenizer, lambda prompt: HAIKU if "<|im_start|>tool" in prompt else call_text)
    with BackgroundGateway(Gateway(generator, tokenizer)) as running:
        episode = running.open_episode()
        [model] = httpx.get(f"{episode.base_url}/models", timeout=10).json()["data"]
        endpoint = {"EXAMPLE_BASE_URL": episode.base_url, "EXAMPLE_API_KEY": episode.key}
        printed = run_in_peer(SDK_PYTHON, EXAMPLE, env={**endpoint, "EXAMPLE_MODEL_NAME": model["id"]})
        recording = running.close_episode(episode.key)

    # The agent ran the tool the model called, with its argument, and printed the model's final answer.
    assert printed == f"[debug] getting weather for Tokyo\n{HAIKU}\n"
    assert recording.counters.calls == len(generator.served) == 2

    # The prompts are what SmolLM2's template gives for what the SDK sends: its instructions as the
    # system message (the tool listed there, as the template renders no tools), the user's question,
    # then the model's turn sent back as OpenAI tool_calls (``content: null``, the call's id and
    # arguments as the gateway returned them), which the gateway puts in as the model sampled it, and
    # the tool's result.
    system = {"role": "system", "content": "You only respond in haikus.\n\n" + _tool_note(GET_WEATHER)}
    user = {"role": "user", "content": "What's the weather in Tokyo?"}
    tool = {"role": "tool", "content": "The weather in Tokyo is sunny."}
    prompt1 = template_ids(tokenizer, [system, user])
    prompt2 = template_ids(tokenizer, [system, user, {"role": "assistant", "content": call_text}, tool])
    sampled1, sampled2 = generator.served
    assert sampled1.token_ids == text_ids(tokenizer, call_text) + [generator.end]
    # Re-rendered from the parsed call, the turn would continue the row only where the model wrote it canonically.
    rerendered = template_ids(tokenizer, [system, user, {"role": "assistant", "content": CALL_TEXT}, tool])
    assert (rerendered[: len(prompt1) + len(sampled1.token_ids)] == prompt1 + sampled1.token_ids) == (
        call_text == CALL_TEXT
    )

    # One row either way: both calls, the prompt's new tokens between them mask 0.
    assert (recording.counters.rows, recording.counters.prefix_mismatches) == (1, 0)
    [row] = recording.rows
    gap = len(prompt2) - len(prompt1) - len(sampled1.token_ids)
    assert row.token_ids == prompt2 + sampled2.token_ids
    assert row.token_ids[: len(prompt1) + len(sampled1.token_ids)] == prompt1 + sampled1.token_ids
    assert row.action_mask == [0] * len(prompt1) + [1] * len(sampled1.token_ids) + [0] * gap + [1] * len(
        sampled2.token_ids
    )
    assert row.logprobs == [0.0] * len(prompt1) + sampled1.logprobs + [0.0] * gap + sampled2.logprobs


def _tool_note(function: dict) -> str:
    """The system prompt's tool note of test_gateway.py, listing ``function`` instead of ``add``."""
    return TOOL_NOTE.replace(json.dumps(ADD["function"]), json.dumps(function))


DEFAULT_MODEL_AGENT = REPO_ROOT / "tests/train/_agents_sdk_default_model.py"


@pytest.mark.skipif(SDK_PYTHON is None, reason="the OpenAI Agents SDK's venv is missing: make peers")
def test_the_agents_sdk_on_its_default_model_the_responses_api_is_recorded_token_exact(tokenizer):
    """The SDK's default model speaks the Responses API (``POST /responses``, its output items sent back as
    ``input``): the episode is still one token-exact row."""
    generator = ScriptedGenerator(tokenizer, lambda prompt: HAIKU if "<|im_start|>tool" in prompt else CALL_TEXT)
    with BackgroundGateway(Gateway(generator, tokenizer)) as running:
        episode = running.open_episode()
        endpoint = {"OPENAI_BASE_URL": episode.base_url, "OPENAI_API_KEY": episode.key, "OPENAI_MODEL": "policy"}
        printed = run_in_peer(SDK_PYTHON, DEFAULT_MODEL_AGENT, env=endpoint)
        recording = running.close_episode(episode.key)
    assert printed == f"[debug] getting weather for Tokyo\n{HAIKU}\n"
    assert (recording.counters.calls, recording.counters.rows, recording.counters.prefix_mismatches) == (2, 1, 0)
    [row] = recording.rows
    sampled1, sampled2 = generator.served
    assert row.token_ids[-len(sampled2.token_ids) :] == sampled2.token_ids
    assert sum(row.action_mask) == len(sampled1.token_ids) + len(sampled2.token_ids)
    generated = [lp for lp, bit in zip(row.logprobs, row.action_mask, strict=True) if bit]
    assert generated == sampled1.logprobs + sampled2.logprobs


# ----------------------------------------------------------------------------- the framework matrix
#
# Real agent frameworks, each as its documentation writes an agent, each in its own venv, run on the calculator task
# (AgentFly/Math-v0's 3-digit multiplication, the agent-calculator preset) as agent commands (``--agent-command``:
# the task on stdin, the endpoint in the variables every SDK reads): the Agents SDK on its default model (the
# Responses API), LangGraph's ``create_react_agent`` over ``langchain_openai.ChatOpenAI``, smolagents'
# ``ToolCallingAgent`` over its ``OpenAIServerModel``, Anthropic's client streaming with a tool (the Messages API),
# and the example's plain ``openai`` agent command. Each is played twice: against a scripted model that writes
# canonical calls, where every call must be recorded token-exact; and against the bundled SmolLM2 with the
# trainer's generator, where ``eval`` must end no episode failed.

TESTS = REPO_ROOT / "tests/train"


@dataclass(frozen=True)
class Framework:
    """An agent of the matrix: the Python of its venv (None: the venv is missing) and its script."""

    name: str
    python: Path | None
    script: Path

    @property
    def command(self) -> str:
        return shlex.join([str(self.python), str(self.script)])


FRAMEWORKS = [
    Framework("agents-sdk-responses", SDK_PYTHON, TESTS / "_agents_sdk_calculator_agent.py"),
    Framework("langgraph", peer_python("langgraph", "AGENTFLY_LANGGRAPH_PYTHON"), TESTS / "_langgraph_agent.py"),
    Framework("smolagents", peer_python("smolagents", "AGENTFLY_SMOLAGENTS_PYTHON"), TESTS / "_smolagents_agent.py"),
    Framework("anthropic-stream", Path(sys.executable), TESTS / "_anthropic_stream_agent.py"),
    Framework("openai-command", Path(sys.executable), REPO_ROOT / "examples/calculator_agent_command.py"),
]
BY_NAME = {framework.name: framework for framework in FRAMEWORKS}


def frameworks(*names: str) -> list:
    """The matrix's frameworks named (all by default) as test parameters, each skipped when its venv is missing."""
    return [
        pytest.param(f, id=f.name, marks=pytest.mark.skipif(f.python is None, reason=f"{f.name}: make peers"))
        for f in FRAMEWORKS
        if not names or f.name in names
    ]


#: How a hermes call starts: a call's forced opening (``tool_choice`` "required") ends the prompt with it.
OPENING = '<tool_call>\n{"name": "'


def calculator_model(prompt: str) -> str:
    """The scripted model: call ``calculate`` on the task's expression in the canonical hermes form; once its result
    is in the conversation, answer with it (as text, or as a ``final_answer`` call where the turn must be a call).
    Where the prompt ends with a forced opening it writes the rest of the call."""
    expression = re.search(r"Calculate (\d+ \* \d+)\.", prompt).group(1)
    product = str(math.prod(int(term) for term in expression.split(" * ")))
    seen = product in prompt[prompt.index(expression) :]
    forced = prompt.endswith(OPENING)
    if seen and not forced:
        return product
    call = {"name": "final_answer", "arguments": {"answer": product}} if seen else None
    call = call or {"name": "calculate", "arguments": {"expression": expression}}
    text = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
    return text.removeprefix(OPENING) if forced else text


class CalculatorModel(ScriptedGenerator):
    """:func:`calculator_model` as a generator (tokens and log-probs as test_gateway.py's), keeping what it sampled
    for each prompt it was given."""

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer, calculator_model)
        self.sampled: dict[tuple[int, ...], Generation] = {}

    def generate(self, requests, params):
        out = super().generate(requests, params)
        with self.lock:
            self.sampled.update({tuple(request.token_ids): g for request, g in zip(requests, out, strict=True)})
        return out


def scripted_episodes(framework: Framework, tokenizer, seeds=(5, 6)):
    """The framework's agent command on the calculator tasks ``seeds`` against :class:`CalculatorModel`, through the
    trainer's gateway (:func:`~agentfly_train.agents.gateway_for`): the episodes and the model."""
    config = Config.load("agent-calculator")
    config.agent = msgspec.structs.replace(
        config.agent,
        program="",
        expert="",
        command=framework.command,
        timeout_s=1800.0,  # nothing here is about time
    )
    # smolagents' every call is ~1,250 prompt tokens, and each of its calls is a row of its own.
    config.rollout = msgspec.structs.replace(config.rollout, samples_per_prompt=1, max_episode_tokens=4096)
    model = CalculatorModel(tokenizer)
    envs = make_env_pool(config.env.id, config.env.options, size=len(seeds))
    try:
        rollout = AgentRollout(
            envs, load_agent(config.agent), gateway_for(config, model, tokenizer), config.rollout, config.agent
        )
        return rollout.run(list(seeds), sample_seed=0).episodes, model
    finally:
        run_sync(envs.close())


def assert_solved_token_exact(episode, model: CalculatorModel) -> None:
    """The episode ran the tool and the env scored its answer right; each of its calls is in a row as the prompt the
    model was given (mask 0) and then exactly the ids it sampled for it (mask 1, with their log-probs)."""
    assert episode.failure is None, episode.failure
    answer = episode.trajectory.task["answer"]
    assert (
        episode.success
        and episode.reward == 1.0
        and episode.trajectory.steps[-1].action == f"<answer>{answer}</answer>"
    )
    assert sum(len(row.calls) for row in episode.rows) == episode.calls.calls
    for row in episode.rows:
        done = 0
        for prompt_end, end in row.calls:
            sampled = model.sampled[tuple(row.token_ids[:prompt_end])]
            assert row.token_ids[prompt_end:end] == sampled.token_ids
            assert row.action_mask[done:end] == [0] * (prompt_end - done) + [1] * (end - prompt_end)
            assert row.logprobs[done:end] == [0.0] * (prompt_end - done) + sampled.logprobs
            done = end
        assert done == len(row.token_ids)


@pytest.mark.parametrize(
    "framework", frameworks("agents-sdk-responses", "langgraph", "anthropic-stream", "openai-command")
)
def test_each_framework_plays_one_token_exact_row_per_episode(framework, tokenizer):
    """Each sends the model's turn back as it got it (the Responses API's output items, OpenAI ``tool_calls``,
    Anthropic's ``tool_use`` blocks, streamed or not): the tool call and the answer are one row."""
    episodes, model = scripted_episodes(framework, tokenizer)
    for episode in episodes:
        assert_solved_token_exact(episode, model)
        counters = episode.calls
        assert (counters.calls, counters.rows, counters.prefix_mismatches, counters.tool_calls) == (2, 1, 0, 1)


@pytest.fixture(scope="module")
def smolagents_played(tokenizer):
    framework = BY_NAME["smolagents"]
    if framework.python is None:
        pytest.skip("smolagents: make peers")
    return scripted_episodes(framework, tokenizer)


def test_smolagents_writes_the_models_call_back_as_its_own_text_so_each_call_is_a_row(smolagents_played, tokenizer):
    """smolagents' ``ToolCallingAgent`` asks for a call every turn (``tool_choice: "required"``: the turn starts with
    the call's opening) and keeps no ``tool_calls``: its memory writes the model's call back as an assistant message of
    its own text (``ActionStep.to_messages``: "Calling tools:" and the calls' Python repr) and the tool's result as a
    user message ("Observation:"). The second call's prompt is not the first row continued, so each call is a row of
    its own: each token-exact, each trained."""
    episodes, model = smolagents_played
    for episode in episodes:
        assert_solved_token_exact(episode, model)
        assert (episode.calls.calls, episode.calls.rows, episode.calls.tool_calls) == (2, 2, 2)
        first, second = episode.rows
        expression = episode.trajectory.task["metadata"]["expression"]
        prompt2 = tokenizer.decode(second.token_ids[: second.calls[0][0]])
        written_back = (
            "<|im_start|>assistant\nCalling tools:\n[{'id': 'call_1_0', 'type': 'function', 'function': {'name': "
            f"'calculate', 'arguments': {{'expression': '{expression}'}}}}}}]<|im_end|>\n"
            f"<|im_start|>user\nObservation:\n{episode.trajectory.task['answer']}<|im_end|>\n"
        )
        assert written_back in prompt2
        assert prompt2.endswith(f"<|im_start|>assistant\n{OPENING}")  # tool_choice "required": the call is begun
        sampled1 = tokenizer.decode(first.token_ids[first.calls[0][0] :])
        assert sampled1 == 'calculate", "arguments": {"expression": "' + expression + '"}}\n</tool_call><|im_end|>'


def test_smolagents_rewritten_turns_count_as_prefix_mismatches(smolagents_played):
    """Its second call rewrites the model's turn, forced opening included: a prefix mismatch, counted."""
    episodes, _ = smolagents_played
    assert [episode.calls.prefix_mismatches for episode in episodes] == [1] * len(episodes)


# ----------------------------------------------------------------------------- on the bundled model


@pytest.fixture(scope="module")
def policy(smollm2_dir, tokenizer):
    """The bundled SmolLM2 and the trainer's transformers generator for it, loaded once for the module's evals."""
    config = Config.load("agent-calculator")
    config.rollout = msgspec.structs.replace(config.rollout, generator="transformers")
    model = load_causal_lm(smollm2_dir, dtype="float32", device="cpu")
    return model, build_generator(config, model, tokenizer)


@pytest.mark.parametrize("framework", frameworks())
def test_each_framework_evaluates_on_the_bundled_model_with_no_failed_episode(
    framework, policy, tokenizer, tmp_path, monkeypatch
):
    """``agentfly-train eval --config agent-calculator --agent-command CMD`` on a few tasks, greedy, with the trainer's
    transformers generator: the model writes what it writes (the untrained model answers in prose, cut at the turn's
    budget; after smolagents' forced call opening it writes calls, of its own arguments), but no episode fails (no
    HTTP error, no SDK that cannot read an answer, no call refused for its length): every call the framework makes is
    answered with sampled tokens, all of them trained.

    What it found: the Agents SDK refuses a Responses ``incomplete`` response (a turn cut at the token limit, as OpenAI
    and vLLM answer one) with ``ModelBehaviorError``; its agent takes that as no answer."""
    model, generator = policy
    # The preset names a program, which the command replaces. No time limit to speak of: nothing here is about time.
    argv = ["--config", "agent-calculator", "--agent-command", framework.command, "--set", "agent.timeout_s=1800"]
    argv += ["--max-new-tokens", "32", "--out", str(tmp_path)]
    argv += ["--episodes", "2"]
    if framework.name == "smolagents":  # each of its calls is a row of ~1,300 tokens: the episode's rows need room
        argv += ["--max-episode-tokens", "8192"]
    config = resolve_config(build_parser("eval").parse_args(argv))
    recordings: list[EpisodeRecording] = []
    close_episode = Gateway.close_episode

    def closed(self, key):
        recordings.append(close_episode(self, key))
        return recordings[-1]

    monkeypatch.setattr(Gateway, "close_episode", closed)
    summary = evaluate(config, model=model, tokenizer=tokenizer, generator=generator)
    assert summary["failed_episodes"] == 0, summary.get("failure_reasons")
    assert summary["episodes"] == len(recordings) == config.eval.episodes
    for recording in recordings:
        counters = recording.counters
        assert counters.calls >= 1 and counters.sampled_calls == counters.calls, counters
        assert sum(len(row.calls) for row in recording.rows) == counters.calls
        assert sum(sum(row.action_mask) for row in recording.rows) == counters.completion_tokens > 0
        # What the model wrote, garbage or not, goes back as it came: one row. smolagents writes it back as its own
        # text: a row per call (its mismatches are undercounted: see the xfail above).
        if framework.name == "smolagents":
            assert counters.rows == counters.calls, counters
        else:
            assert (counters.rows, counters.prefix_mismatches) == (1, 0), counters
