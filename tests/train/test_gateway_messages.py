"""Anthropic's Messages API on the gateway, driven by Anthropic's own client (``anthropic`` 2.14): the same
token-exact recording as a chat completion, tool_use and tool_result blocks, streaming with tools as the
client's stream helper reads it, errors in Anthropic's shape, and a clear 400 for what a text model's chat
has no equivalent of.

A scripted generator plays the model (``test_gateway.ScriptedGenerator``): a hermes call to ``add``, then
the sum once the tool's output is in the conversation.
"""

from __future__ import annotations

import json

import httpx
import pytest
from test_gateway import ADD, ScriptedGenerator, assert_one_calculator_row, calculator_script

from agentfly_train.agents import LLMEndpoint
from agentfly_train.gateway import BackgroundGateway, Gateway, GatewaySettings

anthropic = pytest.importorskip("anthropic")

#: The ``add`` tool as the Messages API describes a client tool.
ADD_TOOL = {"name": "add", "description": ADD["function"]["description"], "input_schema": ADD["function"]["parameters"]}


@pytest.fixture
def served(tokenizer):
    generator = ScriptedGenerator(tokenizer, calculator_script)
    with BackgroundGateway(Gateway(generator, tokenizer, GatewaySettings(max_model_len=400))) as running:
        yield running, generator


def client_for(episode):
    llm = LLMEndpoint(episode.base_url, episode.key, "policy")
    return anthropic.Anthropic(base_url=llm.anthropic_base_url, api_key=llm.api_key, max_retries=0)


def messages_program(client, stream: bool = False):
    """The calculator program as a Claude-style loop: the assistant's content goes back as it came, the
    tool's output as a tool_result block of the next user turn."""
    messages = [{"role": "user", "content": "2 + 3?"}]
    first = create(client, stream, system="You add.", messages=messages, tools=[ADD_TOOL])
    call = next(block for block in first.content if block.type == "tool_use")
    messages += [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": str(call.input["a"] + call.input["b"])}
            ],
        },
    ]
    second = create(client, stream, system="You add.", messages=messages, tools=[ADD_TOOL])
    return first, second


def create(client, stream: bool, **request):
    if not stream:
        return client.messages.create(model="policy", max_tokens=64, **request)
    with client.messages.stream(model="policy", max_tokens=64, **request) as events:
        kinds = [event.type for event in events]
        message = events.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
    return message


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tool_using_episode_on_the_messages_api_is_one_token_exact_row(served, tokenizer, stream):
    running, generator = served
    episode = running.open_episode()
    first, second = messages_program(client_for(episode), stream)
    recording = running.close_episode(episode.key)

    assert first.stop_reason == "tool_use" and [block.type for block in first.content] == ["tool_use"]
    assert (first.content[0].name, first.content[0].input) == ("add", {"a": 2, "b": 3})
    assert second.stop_reason == "end_turn" and second.content[0].text == "The sum is 5."
    assert second.usage.output_tokens == len(generator.served[1].token_ids)
    assert_one_calculator_row(tokenizer, generator, recording)  # as the chat completions of the conversation


def test_the_key_as_x_api_key_a_stop_sequence_and_the_error_shape(served):
    running, _ = served
    episode = running.open_episode()
    by_key = anthropic.Anthropic(base_url=running.url, api_key=episode.key, max_retries=0)
    stopped = by_key.messages.create(
        model="policy", max_tokens=64, messages=[{"role": "user", "content": "hello"}], stop_sequences=["k"]
    )
    assert (stopped.stop_reason, stopped.stop_sequence, stopped.content[0].text) == ("stop_sequence", "k", "o")
    refused = httpx.post(f"{running.url}/v1/messages", json={"max_tokens": 5}, headers={"x-api-key": episode.key})
    assert refused.status_code == 400 and refused.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "messages: 'messages' must be a non-empty array"},
    }
    unknown = httpx.post(f"{running.url}/v1/messages", json={}, headers={"x-api-key": "nobody"})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
    assert running.close_episode(episode.key).counters.calls == 1


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
        ({"top_k": 5}, "top_k"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
        ({"tool_choice": {"type": "any"}}, "tool_choice"),
        ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "messages[0].content[0]"),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}]},
            "messages[0].content[0]",
        ),
        ({"messages": [{"role": "system", "content": "hi"}]}, "messages[0].role"),
    ],
)
def test_what_a_text_models_chat_has_no_equivalent_of_is_a_400_naming_the_field(served, request_, field):
    running, _ = served
    episode = running.open_episode()
    body = {"model": "policy", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}], **request_}
    if field == "max_tokens":
        del body["max_tokens"]
    response = httpx.post(
        f"{episode.base_url}/messages", content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["type"] == "error", response.text
    assert response.json()["error"]["message"].startswith(field), response.json()
    assert running.close_episode(episode.key).counters.calls == 0


def test_a_body_over_the_limit_on_the_messages_route_is_a_413_in_anthropics_shape(served):
    running, _ = served
    episode = running.open_episode()
    big = json.dumps({"max_tokens": 5, "messages": [{"role": "user", "content": "x" * (2 << 20)}]})
    response = httpx.post(f"{episode.base_url}/messages", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["type"] == "request_too_large"
    running.close_episode(episode.key)
