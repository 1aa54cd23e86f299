"""What the gateway refuses before it renders, and what one episode's heavy call may not do to the others.

A scripted generator stands in for the model (``test_gateway.ScriptedGenerator``); requests go over real HTTP.
"""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from test_gateway import ADD, ScriptedGenerator, calculator_script

from agentfly_train.gateway import BackgroundGateway, Gateway, GatewaySettings
from agentfly_train.gateway.rendering import ChatRenderer

openai = pytest.importorskip("openai")

JSON_BODY = {"Content-Type": "application/json"}
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def running(tokenizer):
    generator = ScriptedGenerator(tokenizer, calculator_script)
    with BackgroundGateway(Gateway(generator, tokenizer, GatewaySettings(max_model_len=400))) as gateway:
        yield gateway


def chat(episode, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{episode.base_url}/chat/completions", content=body, headers=headers or JSON_BODY, timeout=60)


def is_openai_error(response: httpx.Response) -> bool:
    return set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_a_body_over_the_limit_is_a_413_in_openais_shape(running):
    episode = running.open_episode()
    limit = GatewaySettings().max_request_bytes
    big = json.dumps({"messages": [{"role": "user", "content": "x" * limit}]}).encode()
    response = chat(episode, big)
    assert response.status_code == 413 and is_openai_error(response) and str(limit) in response.text
    fits = json.dumps({"messages": [{"role": "user", "content": "x" * (limit // 2)}]}).encode()
    assert chat(episode, fits).json()["choices"][0]["finish_reason"] == "length"  # read, then past the window
    assert running.close_episode(episode.key).counters.calls == 1


def test_json_nested_too_deep_is_a_400(running):
    episode = running.open_episode()
    deep = json.dumps({"messages": HI, "metadata": json.loads("[" * 200 + "]" * 200)}).encode()
    for body in (deep, b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"):
        response = chat(episode, body)
        assert response.status_code == 400 and is_openai_error(response) and "nested" in response.text
    assert running.close_episode(episode.key).counters.calls == 0


@pytest.mark.parametrize(
    "parameters",
    [{"type": "banana"}, {"properties": 5}, {"required": "x"}, {"type": "string"}, [1], {"minLength": -1}],
)
def test_tool_parameters_that_are_not_an_objects_json_schema_are_a_400_naming_the_tool(running, parameters):
    episode = running.open_episode()
    client = openai.OpenAI(base_url=episode.base_url, api_key=episode.key, max_retries=0)
    tool = {"type": "function", "function": {"name": "measure", "parameters": parameters}}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="policy", messages=HI, tools=[ADD, tool])
    assert "'measure'" in str(refused.value) and refused.value.body["param"] == "tools[1].function.parameters"
    assert client.chat.completions.create(model="policy", messages=HI, tools=[ADD]).choices  # a good schema
    running.close_episode(episode.key)


def test_web_pages_and_foreign_host_names_are_refused(running):
    episode = running.open_episode()
    body = json.dumps({"messages": HI}).encode()
    port = running.url.rpartition(":")[2]
    for headers in (
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Host": f"evil.example:{port}"},
        {"Content-Type": "text/plain"},
    ):
        response = chat(episode, body, {**JSON_BODY, **headers})
        assert response.status_code in (403, 415) and is_openai_error(response), headers
    assert chat(episode, body, {**JSON_BODY, "Origin": running.url}).status_code == 200  # the gateway's own origin
    assert running.close_episode(episode.key).counters.calls == 1


def test_one_episodes_long_render_does_not_hold_the_other_episodes(running, monkeypatch):
    """A call whose rendering takes as long as it likes (here: until released) stalls no other episode's call."""
    release = threading.Event()
    encode = ChatRenderer.encode

    def slow_encode(self, messages, tools, sampled_turns=None):
        if "HOLD" in messages[-1].content:
            assert release.wait(60), "the held call was never released"
        return encode(self, messages, tools, sampled_turns)

    monkeypatch.setattr(ChatRenderer, "encode", slow_encode)
    held, other = running.open_episode(), running.open_episode()
    answers: list[httpx.Response] = []
    holder = threading.Thread(
        target=lambda: answers.append(
            chat(held, json.dumps({"messages": [{"role": "user", "content": "HOLD"}]}).encode())
        )
    )
    holder.start()
    try:
        for _ in range(3):  # while the held call renders, the other episode's calls are answered
            quick = openai.OpenAI(base_url=other.base_url, api_key=other.key, max_retries=0, timeout=30)
            assert quick.chat.completions.create(model="policy", messages=HI).choices[0].message.content == "ok"
        assert holder.is_alive() and not answers
    finally:
        release.set()
        holder.join(60)
    assert answers[0].status_code == 200
    assert running.close_episode(other.key).counters.calls == 3 and running.close_episode(held.key).counters.calls == 1
