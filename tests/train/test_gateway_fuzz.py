"""The fuzz lane against the gateway: random requests (paths, keys, headers, bodies shaped like chat
completions or not) over real HTTP, for two open episodes and keys that are none of theirs.

Asserted whatever is sent: no 5xx (the scripted generator never fails, so every fault is the client's), no
2xx for a foreign host or origin or a body that is not JSON, and each episode's recording counts exactly the
calls answered 200 on its own key, none of the other's.
"""

from __future__ import annotations

import json

import pytest
from fuzzing import JSON, bodies, headers, is_json_type
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serving import http_request
from test_gateway import ADD, ScriptedGenerator, calculator_script

from agentfly_train.gateway import BackgroundGateway, Gateway, GatewaySettings
from agentfly_train.generation import SamplingParams

pytestmark = pytest.mark.fuzz

LIMIT = 8192
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(("system", "user", "assistant", "tool", "developer", "robot")),
        "content": st.text(max_size=30) | JSON,
    },
    optional={"tool_call_id": st.text(max_size=5) | JSON, "tool_calls": JSON, "name": JSON},
)
TOOL = st.just(ADD) | st.fixed_dictionaries({"type": st.just("function"), "function": JSON})
CHAT = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGE, max_size=3) | JSON},
    optional={
        "tools": st.lists(TOOL, max_size=2) | JSON,
        "tool_choice": st.sampled_from(("auto", "none", "required")) | JSON,
        "temperature": st.floats(-1, 3) | JSON,
        "top_p": st.floats(-1, 2) | JSON,
        "max_tokens": st.integers(-2, 50) | JSON,
        "stop": st.text(max_size=3) | JSON,
        "stream": st.booleans() | JSON,
        "n": st.integers(0, 3),
        "seed": st.integers() | JSON,
        "stream_options": JSON,
    },
)


@pytest.fixture(scope="module")
def gateway(tokenizer):
    generator = ScriptedGenerator(tokenizer, calculator_script)
    settings_ = GatewaySettings(
        max_model_len=400, sampling=SamplingParams(max_new_tokens=16), max_request_bytes=LIMIT, batch_wait_s=0.0
    )
    with BackgroundGateway(Gateway(generator, tokenizer, settings_)) as running:
        episodes = [running.open_episode(), running.open_episode()]
        answered = {episode.key: 0 for episode in episodes}
        yield running, episodes, answered


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_requests_get_no_5xx_and_reach_only_their_own_episode(gateway, data):
    running, episodes, answered = gateway
    port = int(running.url.rpartition(":")[2])
    chosen, foreign = data.draw(headers(port, running.url))
    episode = data.draw(st.sampled_from(episodes))
    key = data.draw(st.sampled_from((episode.key, "ep-nobody", "")))
    path, by_header = data.draw(
        st.sampled_from(
            (
                (f"/episodes/{key}/v1/chat/completions", False),
                (f"/episodes/{key}/v1/models", False),
                ("/v1/chat/completions", True),
                ("/v1/models", True),
                (f"/episodes/{key}/mcp", False),
                ("/nope", False),
            )
        )
    )
    if by_header and data.draw(st.booleans()):
        chosen["Authorization"] = f"Bearer {key}"
    method = "GET" if path.endswith("models") and data.draw(st.booleans()) else "POST"
    body = data.draw(bodies(LIMIT, CHAT)) if method == "POST" else b""
    status, answer = http_request(running.url, method, path, chosen, body)
    assert status < 500, (method, path, chosen, body[:200], answer[:300])
    if foreign or (body and not is_json_type(chosen)) or len(body) > LIMIT:
        assert status >= 400, (method, path, chosen, body[:200], answer[:300])
    if status == 200 and path.endswith("chat/completions"):
        assert key == episode.key and (not by_header or chosen.get("Authorization") == f"Bearer {key}")
        answered[key] += 1
    if status >= 400 and not path.endswith("/mcp") and path != "/nope":
        assert set(json.loads(answer)["error"]) == {"message", "type", "param", "code"}, answer  # OpenAI's shape


def test_each_episode_recorded_exactly_its_own_answered_calls(gateway):
    running, episodes, answered = gateway
    for episode in episodes:
        assert running.close_episode(episode.key).counters.calls == answered[episode.key]
    assert running.gateway.episodes == {}
