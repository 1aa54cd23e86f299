"""OpenAI's Responses API on the gateway, driven by OpenAI's own client (``client.responses``): the same
token-exact recording as a chat completion, the output items and the streamed event lifecycle as the
client reads them, and a clear 400 for what has no chat equivalent.

A scripted generator plays the model (``test_gateway.ScriptedGenerator``): a hermes call to ``add``, then
the sum once the tool's output is in the conversation.
"""

from __future__ import annotations

import json

import httpx
import pytest
from test_gateway import ADD, ScriptedGenerator, assert_one_calculator_row, calculator_script

from agentfly_train.gateway import BackgroundGateway, Gateway, GatewaySettings

openai = pytest.importorskip("openai")

#: The ``add`` tool as the Responses API describes a function tool (flat, not under "function").
ADD_TOOL = {"type": "function", **ADD["function"]}


@pytest.fixture
def served(tokenizer):
    generator = ScriptedGenerator(tokenizer, calculator_script)
    with BackgroundGateway(Gateway(generator, tokenizer, GatewaySettings(max_model_len=400))) as running:
        yield running, generator


def client_for(episode):
    return openai.OpenAI(base_url=episode.base_url, api_key=episode.key, max_retries=0)


def responses_program(client, stream: bool = False):
    """The calculator program on the Responses API: the output items go back into ``input`` as they came,
    with the tool's output after them, as the Agents SDK sends them."""
    items = [{"role": "user", "content": "2 + 3?"}]
    first = create(client, stream, instructions="You add.", input=items, tools=[ADD_TOOL])
    call = next(item for item in first.output if item.type == "function_call")
    arguments = json.loads(call.arguments)
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append(
        {"type": "function_call_output", "call_id": call.call_id, "output": str(arguments["a"] + arguments["b"])}
    )
    second = create(client, stream, instructions="You add.", input=items, tools=[ADD_TOOL])
    return first, second


def create(client, stream: bool, **request):
    if not stream:
        return client.responses.create(model="policy", **request)
    with client.responses.stream(model="policy", **request) as events:
        kinds = [event.type for event in events]
        response = events.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed", kinds
    return response


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tool_using_episode_on_the_responses_api_is_one_token_exact_row(served, tokenizer, stream):
    running, generator = served
    episode = running.open_episode()
    first, second = responses_program(client_for(episode), stream)
    recording = running.close_episode(episode.key)

    assert [item.type for item in first.output] == ["function_call"] and first.status == "completed"
    call = first.output[0]
    assert (call.name, json.loads(call.arguments), call.call_id) == ("add", {"a": 2, "b": 3}, "call_1_0")
    assert second.output_text == "The sum is 5." and [item.type for item in second.output] == ["message"]
    assert second.usage.output_tokens == len(generator.served[1].token_ids)
    assert_one_calculator_row(tokenizer, generator, recording)  # as the chat completions of the conversation


def test_the_api_key_route_and_a_cut_response(served):
    running, _ = served
    episode = running.open_episode()
    by_key = openai.OpenAI(base_url=f"{running.url}/v1", api_key=episode.key, max_retries=0)
    cut = by_key.responses.create(model="policy", input=" ".join(["word"] * 500))  # past the context window
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    assert running.close_episode(episode.key).counters.calls == 1


@pytest.mark.parametrize(
    ("request_", "param"),
    [
        ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
        ({"input": [{"type": "reasoning", "summary": []}]}, "input[0]"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        ({"input": "hi", "text": {"format": {"type": "json_object"}}}, "text.format"),
        ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": []}, "input"),
    ],
)
def test_what_has_no_chat_equivalent_is_a_400_naming_the_field(served, request_, param):
    running, _ = served
    episode = running.open_episode()
    with pytest.raises(openai.BadRequestError) as refused:
        client_for(episode).responses.create(model="policy", **request_)
    assert refused.value.body["param"] == param, refused.value.body
    assert running.close_episode(episode.key).counters.calls == 0


def test_an_unknown_route_is_a_404_that_lists_the_routes(served):
    running, _ = served
    episode = running.open_episode()
    for path in ("/completions", "/embeddings", "/audio/speech"):
        response = httpx.post(f"{episode.base_url}{path}", json={"input": "hi"}, timeout=10)
        error = response.json()["error"]
        assert response.status_code == 404 and "/v1/responses" in error["message"] and path in error["message"]
    running.close_episode(episode.key)
