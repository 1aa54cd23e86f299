"""A client nobody here wrote: the OpenAI Agents SDK's own example, run unchanged against the gateway.

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

import httpx
import pytest
from serving import REPO_ROOT, peer_python, run_in_peer
from test_gateway import ADD, TOOL_NOTE, ScriptedGenerator, template_ids, text_ids

from agentfly_train.gateway import BackgroundGateway, Gateway

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
