"""The OpenAI-compatible gateway over real HTTP with the real ``openai`` client and SmolLM2's tokenizer.

A scripted generator stands in for the model: it answers each prompt with a fixed text (chosen by the
conversation it reads) as tokens, with known log-probs, so every row can be checked token for token
against what the chat template gives and what was "sampled". Each pitfall of training agent programs
through an API is a test here: tool calls over streaming, an edited assistant message, a template that
strips earlier reasoning, sub-agents in one episode.
"""

from __future__ import annotations

import copy
import json
import threading

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentfly_env.core.types import ToolCall
from agentfly_train.chat import ChatFormat
from agentfly_train.gateway import BackgroundGateway, Gateway, GatewaySettings
from agentfly_train.gateway.rendering import ChatMessage, ChatRenderer
from agentfly_train.gateway.tool_calls import ToolCallText
from agentfly_train.generation import Generation

openai = pytest.importorskip("openai")

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
    },
}
CALL_TEXT = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
TOOL_NOTE = (
    "You can call these tools:\n"
    + json.dumps(ADD["function"])
    + "\n\nTo call a tool, write a <tool_call> block holding a JSON object with the tool's "
    '"name" and an "arguments" object for its parameters. You may call several tools in one '
    "turn, one block per call; text outside the blocks is not executed. Example:\n"
    '<tool_call>\n{"name": "search", "arguments": {"query": "red shoes"}}\n</tool_call>'
)


def text_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def spelled(tokenizer, text: str) -> list[int]:
    """``text`` sampled one character at a time: a tokenization of it that is not the tokenizer's own."""
    return [i for character in text for i in text_ids(tokenizer, character)]


class ScriptedGenerator:
    """Answers ``script(prompt text)`` as ``tokenize(text)`` (the tokenizer's own tokens unless given) closed by
    ``<|im_end|>``, or cut after the first of the request's stop strings it holds; log-prob ``-0.5 - 0.01 i``
    for token i; keeps every generation and every batch size it served."""

    def __init__(self, tokenizer, script, tokenize=None) -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.tokenize = tokenize or (lambda text: text_ids(tokenizer, text))
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.served: list[Generation] = []
        self.batch_sizes: list[int] = []
        self.lock = threading.Lock()

    def generate(self, requests, params):
        out = []
        for request in requests:
            text = self.script(self.tokenizer.decode(request.token_ids))
            cut = min((text.index(stop) + len(stop) for stop in params.stop if stop in text), default=None)
            if cut is None:
                tokens, reason = self.tokenize(text) + [self.end], "stop"
            else:
                tokens, reason = self.tokenize(text[:cut]), "stop_string"
            if len(tokens) > request.max_new_tokens:
                tokens, reason = tokens[: request.max_new_tokens], "length"
            out.append(Generation(tokens, [-0.5 - 0.01 * i for i in range(len(tokens))], reason))
        with self.lock:
            self.served += out
            self.batch_sizes.append(len(requests))
        return out


def calculator_script(prompt: str) -> str:
    """Call ``add`` first; answer once the tool's result is in the conversation."""
    turn = prompt.split("<|im_start|>user\n")[-1]
    if "<|im_start|>tool" in turn:
        return "The sum is 5."
    if "<think>" in prompt or "Think first" in turn:
        return "<think>2 and 3</think>Five." if "again" not in turn else "Still five."
    if "Sub-agent" in prompt:
        name = "A" if "Sub-agent A" in prompt else "B"
        return f"Agent {name} is done." if "assistant\nAgent" in prompt else f"Agent {name} thinks."
    return CALL_TEXT if "2 + 3" in turn else "ok"


@pytest.fixture
def served(tokenizer):
    generator = ScriptedGenerator(tokenizer, calculator_script)
    with BackgroundGateway(Gateway(generator, tokenizer, GatewaySettings(max_model_len=400))) as running:
        yield running, generator


def client_for(episode):
    return openai.OpenAI(base_url=episode.base_url, api_key=episode.key, max_retries=0)


def template_ids(tokenizer, messages) -> list[int]:
    """The prompt the chat template gives, tokenized whole (no message here holds special-token text)."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def calculator_program(client, stream: bool = False):
    """A two-call tool-using program: ask, run the tool the model called, send the result back."""
    messages = [{"role": "system", "content": "You add."}, {"role": "user", "content": "2 + 3?"}]
    first = client.chat.completions.create(model="policy", messages=messages, tools=[ADD])
    call = first.choices[0].message.tool_calls[0]
    arguments = json.loads(call.function.arguments)
    messages += [
        first.choices[0].message,
        {"role": "tool", "tool_call_id": call.id, "content": str(arguments["a"] + arguments["b"])},
    ]
    second = client.chat.completions.create(model="policy", messages=messages, tools=[ADD])
    return first, second


def assert_one_calculator_row(tokenizer, generator, recording) -> None:
    """The calculator conversation (:func:`calculator_program`, in any dialect) was recorded as one row: the second
    prompt as SmolLM2's template gives it, then the second call's sampled ids; both calls' sampled ids trained."""
    system = {"role": "system", "content": f"You add.\n\n{TOOL_NOTE}"}
    user = {"role": "user", "content": "2 + 3?"}
    prompt2 = template_ids(
        tokenizer, [system, user, {"role": "assistant", "content": CALL_TEXT}, {"role": "tool", "content": "5"}]
    )
    sampled1, sampled2 = generator.served
    assert len(recording.rows) == 1 and recording.counters.prefix_mismatches == 0
    assert recording.rows[0].token_ids == prompt2 + sampled2.token_ids
    assert sum(recording.rows[0].action_mask) == len(sampled1.token_ids) + len(sampled2.token_ids)


def test_a_tool_using_episode_is_one_token_exact_row(served, tokenizer):
    running, generator = served
    episode = running.open_episode()
    first, second = calculator_program(client_for(episode))
    recording = running.close_episode(episode.key)

    call = first.choices[0].message.tool_calls[0]
    assert (first.choices[0].finish_reason, first.choices[0].message.content) == ("tool_calls", None)
    assert (call.type, call.function.name, json.loads(call.function.arguments)) == ("function", "add", {"a": 2, "b": 3})
    assert second.choices[0].message.content == "The sum is 5."
    # The prompts are what SmolLM2's template gives, tools described in the system message (the
    # template renders none) and the call written in the content as the model wrote it.
    system = {"role": "system", "content": f"You add.\n\n{TOOL_NOTE}"}
    user = {"role": "user", "content": "2 + 3?"}
    prompt1 = template_ids(tokenizer, [system, user])
    prompt2 = template_ids(
        tokenizer, [system, user, {"role": "assistant", "content": CALL_TEXT}, {"role": "tool", "content": "5"}]
    )
    sampled1, sampled2 = generator.served
    assert len(recording.rows) == 1 and recording.counters.prefix_mismatches == 0
    row = recording.rows[0]
    assert prompt2[: len(prompt1) + len(sampled1.token_ids)] == prompt1 + sampled1.token_ids
    assert row.token_ids == prompt2 + sampled2.token_ids
    gap = len(prompt2) - len(prompt1) - len(sampled1.token_ids)
    assert row.action_mask == [0] * len(prompt1) + [1] * len(sampled1.token_ids) + [0] * gap + [1] * len(
        sampled2.token_ids
    )
    sampled_logprobs = [lp for lp, mask in zip(row.logprobs, row.action_mask, strict=True) if mask]
    assert sampled_logprobs == sampled1.logprobs + sampled2.logprobs
    counters = recording.counters
    assert (counters.calls, counters.rows) == (2, 1)
    assert counters.completion_tokens == len(sampled1.token_ids) + len(sampled2.token_ids)
    assert counters.prompt_tokens == len(prompt1) + len(prompt2) and counters.sampled_calls == 2
    assert len(counters.added_latency_s) == 2 and all(s >= 0 for s in counters.added_latency_s)


def test_the_api_key_route_and_models(served):
    running, _ = served
    episode = running.open_episode()
    by_key = openai.OpenAI(base_url=f"{running.url}/v1", api_key=episode.key, max_retries=0)
    assert [m.id for m in by_key.models.list()] == [m.id for m in client_for(episode).models.list()]
    calculator_program(by_key)
    assert running.close_episode(episode.key).counters.calls == 2


def stream_message(client, **kwargs):
    """A streamed completion put back together: content, tool calls by index, finish reason, usage."""
    content, calls, finish, usage = "", {}, None, None
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = delta.id or call["id"]
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
    return content, [calls[i] for i in sorted(calls)], finish, usage


def test_streaming_returns_the_same_tool_calls(served):
    running, _ = served
    request = {"model": "policy", "messages": [{"role": "user", "content": "2 + 3?"}], "tools": [ADD]}
    whole = client_for(running.open_episode()).chat.completions.create(**request).choices[0]
    content, calls, finish, usage = stream_message(client_for(running.open_episode()), **request)
    expected = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in whole.message.tool_calls
    ]
    assert (content, calls, finish) == ((whole.message.content or ""), expected, whole.finish_reason)
    assert calls[0]["name"] == "add" and usage.completion_tokens > 0


def test_an_edited_assistant_message_starts_a_new_row_and_is_never_trained(served, tokenizer):
    running, generator = served
    episode = running.open_episode()
    client = client_for(episode)
    messages = [{"role": "user", "content": "2 + 3?"}]
    first = client.chat.completions.create(model="policy", messages=messages, tools=[ADD]).choices[0].message
    edited = {
        "role": "assistant",
        "content": "I will add the numbers now.",
        "tool_calls": first.model_dump()["tool_calls"],
    }
    messages += [edited, {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "5"}]
    client.chat.completions.create(model="policy", messages=messages, tools=[ADD])
    recording = running.close_episode(episode.key)

    assert (recording.counters.rows, recording.counters.prefix_mismatches) == (2, 1)
    assert [row.mismatch for row in recording.rows] == [False, True]
    second = recording.rows[1]
    sampled = generator.served[1].token_ids
    assert second.action_mask == [0] * (len(second.token_ids) - len(sampled)) + [1] * len(sampled)
    edit = text_ids(tokenizer, "I will add the numbers now.")
    starts = [i for i in range(len(second.token_ids)) if second.token_ids[i : i + len(edit)] == edit]
    assert starts and all(not any(second.action_mask[i : i + len(edit)]) for i in starts)


THINK_STRIPPING_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}{% endif %}"
    "{% set content = message['content'] %}"
    "{% if message['role'] == 'assistant' and '</think>' in content %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_a_template_that_strips_earlier_reasoning_splits_rows_without_retokenizing(tokenizer):
    stripping = copy.copy(tokenizer)
    stripping.chat_template = THINK_STRIPPING_TEMPLATE
    generator = ScriptedGenerator(tokenizer, calculator_script)
    with BackgroundGateway(Gateway(generator, stripping)) as running:
        episode = running.open_episode()
        client = client_for(episode)
        messages = [{"role": "user", "content": "Think first: 2 + 3?"}]
        first = client.chat.completions.create(model="policy", messages=messages).choices[0].message
        assert first.content == "<think>2 and 3</think>Five."
        messages += [{"role": "assistant", "content": first.content}, {"role": "user", "content": "Think first again"}]
        client.chat.completions.create(model="policy", messages=messages)
        recording = running.close_episode(episode.key)

    assert (recording.counters.rows, recording.counters.prefix_mismatches) == (2, 1)
    sampled1, sampled2 = generator.served
    prompt1 = template_ids(stripping, messages[:1])
    prompt2 = template_ids(stripping, messages)  # the reasoning is gone from it, as the template wants
    assert recording.rows[0].token_ids == prompt1 + sampled1.token_ids
    assert recording.rows[1].token_ids == prompt2 + sampled2.token_ids
    assert sum(recording.rows[1].action_mask) == len(sampled2.token_ids)
    # The turn was sent back unchanged and is known as the model's, yet the template rewrote it: not spliced.
    assert recording.sampled_turns[first.content] == sampled1.token_ids[:-1]


def test_a_turn_sent_back_unchanged_is_the_ids_the_model_sampled(served, tokenizer):
    """The model spells its answer one character at a time, not in the tokenizer's own tokens: sent back
    unchanged, the turn goes into the next prompt as those ids, so the episode stays one row."""
    running, generator = served
    generator.script = lambda prompt: "Hello there, reader." if "Again" not in prompt else "ok"
    generator.tokenize = lambda text: spelled(tokenizer, text)
    episode = running.open_episode()
    client = client_for(episode)
    messages = [{"role": "user", "content": "Greet me."}]
    first = client.chat.completions.create(model="policy", messages=messages).choices[0].message
    messages += [{"role": "assistant", "content": first.content}, {"role": "user", "content": "Again."}]
    client.chat.completions.create(model="policy", messages=messages)
    recording = running.close_episode(episode.key)

    sampled1, sampled2 = generator.served
    answer = sampled1.token_ids[:-1]
    assert first.content == "Hello there, reader." and answer != text_ids(tokenizer, first.content)
    assert (recording.counters.rows, recording.counters.prefix_mismatches) == (1, 0)
    [row] = recording.rows
    prompt1 = template_ids(tokenizer, messages[:1])
    # Past the turn, the second prompt is the template's own text, as re-rendering gives it.
    rest = template_ids(tokenizer, messages)[len(prompt1) + len(text_ids(tokenizer, first.content)) :]
    assert rest[0] == generator.end
    assert row.token_ids == prompt1 + answer + rest + sampled2.token_ids
    assert row.action_mask == [0] * len(prompt1) + [1] * len(sampled1.token_ids) + [0] * (len(rest) - 1) + [1] * len(
        sampled2.token_ids
    )


def test_a_turn_cut_at_a_stop_string_is_sent_back_as_its_text(served, tokenizer):
    """OpenAI leaves the stop string out of the returned text, so that text is not what the sampled ids say:
    sent back, it is tokenized from its text (a new row), never swapped for ids the program did not send."""
    running, generator = served
    generator.script = lambda prompt: "Five. END of it" if "Again" not in prompt else "ok"
    episode = running.open_episode()
    client = client_for(episode)
    messages = [{"role": "user", "content": "2 + 3 in words?"}]
    first = client.chat.completions.create(model="policy", messages=messages, stop=["END"]).choices[0]
    assert (first.message.content, first.finish_reason) == ("Five. ", "stop")
    messages += [{"role": "assistant", "content": first.message.content}, {"role": "user", "content": "Again."}]
    client.chat.completions.create(model="policy", messages=messages)
    recording = running.close_episode(episode.key)

    assert (recording.counters.rows, recording.counters.prefix_mismatches) == (2, 1)
    assert recording.rows[1].token_ids == template_ids(tokenizer, messages) + generator.served[1].token_ids


TOOL_CALLS_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] }}"
    "{% if message['tool_calls'] is defined %}{% for call in message['tool_calls'] %}"
    "{{ '<tool_call>' + call['function']['name'] + '</tool_call>' }}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_a_template_that_renders_tool_calls_gets_no_spliced_turn_with_calls(tokenizer):
    """Where the template writes the call markup, a message with calls is not the model's text alone."""
    own = copy.copy(tokenizer)
    own.chat_template = TOOL_CALLS_TEMPLATE
    renderer = ChatRenderer(ChatFormat(own), ToolCallText("hermes"))
    assert renderer.renders_tool_calls
    sampled, end = spelled(tokenizer, "Adding."), tokenizer.convert_tokens_to_ids("<|im_end|>")
    add = ToolCall("add", {"a": 2})
    assert renderer.sampled_turn("Adding.", [add], sampled + [end]) is None
    assert renderer.sampled_turn("Adding.", [], sampled + [end]) == ("Adding.", sampled)

    user = ChatMessage("user", "2 + 2?")
    with_call = [user, ChatMessage("assistant", "Adding.", [("call_1", add)])]
    assert renderer.encode(with_call, [], {"Adding.": sampled}) == renderer.encode(with_call, [])
    plain = [user, ChatMessage("assistant", "Adding.")]
    spliced = renderer.encode(plain, [], {"Adding.": sampled})
    assert spliced != renderer.encode(plain, [])
    assert any(spliced[i : i + len(sampled)] == sampled for i in range(len(spliced)))
    user_turn = [ChatMessage("user", "Adding.")]  # only assistant messages are the model's
    assert renderer.encode(user_turn, [], {"Adding.": sampled}) == renderer.encode(user_turn, [])


@st.composite
def written_calls(draw):
    """``add``'s call as a model may write it (any JSON spacing, blank lines, prose around it), and a
    tokenization of that text it may sample: (text, the pieces it is tokenized in, each apart)."""
    separators = draw(st.sampled_from([(", ", ": "), (",", ":"), (", ", ":"), (" ,", " : ")]))
    call = json.dumps({"name": "add", "arguments": {"a": 2, "b": 3}}, separators=separators)
    space = st.sampled_from(["", " ", "\n", "\n\n", "  \n"])
    before, after = draw(st.sampled_from(["", "Adding."])), draw(st.sampled_from(["", "Done."]))
    text = f"{before}{draw(space)}<tool_call>{draw(space)}{call}{draw(space)}</tool_call>{draw(space)}{after}"
    cuts = sorted(draw(st.sets(st.integers(1, len(text) - 1), max_size=6)))
    return text, [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(written=written_calls())
def test_a_tool_call_sent_back_unchanged_continues_its_row_in_any_form_and_tokenization(served, tokenizer, written):
    running, generator = served
    text, pieces = written
    generator.script = lambda prompt: "The sum is 5." if "<|im_start|>tool" in prompt else text
    generator.tokenize = lambda answer: [
        i for piece in (pieces if answer == text else [answer]) for i in text_ids(tokenizer, piece)
    ]
    generator.served.clear()
    episode = running.open_episode()
    first, _ = calculator_program(client_for(episode))
    recording = running.close_episode(episode.key)

    assert json.loads(first.choices[0].message.tool_calls[0].function.arguments) == {"a": 2, "b": 3}
    assert (recording.counters.rows, recording.counters.prefix_mismatches) == (1, 0)
    [row] = recording.rows
    sampled1, sampled2 = generator.served
    (prompt1, end1), (prompt2, end2) = row.calls
    assert row.token_ids[prompt1:end1] == sampled1.token_ids and row.token_ids[prompt2:end2] == sampled2.token_ids
    assert [i for i, mask in enumerate(row.action_mask) if mask] == [*range(prompt1, end1), *range(prompt2, end2)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    answer=st.text(min_size=1, max_size=20),
    at=st.integers(0, 20),
    removed=st.integers(0, 3),
    inserted=st.text(max_size=3),
)
def test_an_edited_turn_always_splits_and_is_never_trained(served, tokenizer, answer, at, removed, inserted):
    running, generator = served
    generator.script = lambda prompt: answer if "Again" not in prompt else "ok"
    generator.served.clear()
    episode = running.open_episode()
    client = client_for(episode)
    messages = [{"role": "user", "content": "Say something."}]
    returned = client.chat.completions.create(model="policy", messages=messages).choices[0].message.content or ""
    edited = returned[:at] + inserted + returned[at + removed :]
    # SmolLM2's template trims contents and its tokenizer drops control characters: an edit they erase is no edit.
    assume(text_ids(tokenizer, edited.strip()) != text_ids(tokenizer, returned.strip()))
    messages += [{"role": "assistant", "content": edited}, {"role": "user", "content": "Again."}]
    client.chat.completions.create(model="policy", messages=messages)
    recording = running.close_episode(episode.key)

    assert (recording.counters.rows, recording.counters.prefix_mismatches) == (2, 1)
    second = recording.rows[1]
    sampled = generator.served[1].token_ids
    assert second.action_mask == [0] * (len(second.token_ids) - len(sampled)) + [1] * len(sampled)


def test_concurrent_sub_agents_get_rows_of_their_own(served, tokenizer):
    running, generator = served
    episode = running.open_episode()
    transcripts: dict[str, list] = {}

    def sub_agent(name: str) -> None:
        client = client_for(episode)
        messages = [{"role": "system", "content": f"Sub-agent {name}."}, {"role": "user", "content": "Go."}]
        for _ in range(2):
            reply = client.chat.completions.create(model="policy", messages=messages).choices[0].message
            messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "Go on."}]
        transcripts[name] = messages[:-1]

    threads = [threading.Thread(target=sub_agent, args=(name,)) for name in "AB"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recording = running.close_episode(episode.key)

    assert (recording.counters.rows, recording.counters.prefix_mismatches, recording.counters.calls) == (2, 0, 4)
    for name, messages in transcripts.items():
        [row] = [r for r in recording.rows if f"Sub-agent {name}." in tokenizer.decode(r.token_ids)]
        answers = [text_ids(tokenizer, m["content"]) + [generator.end] for m in messages if m["role"] == "assistant"]
        assert row.token_ids == template_ids(tokenizer, messages[:-1]) + answers[-1]
        assert sum(row.action_mask) == sum(map(len, answers))


def test_calls_of_concurrent_episodes_share_generator_batches(served):
    running, generator = served
    episodes = [running.open_episode() for _ in range(4)]
    threads = [threading.Thread(target=calculator_program, args=(client_for(e),)) for e in episodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(generator.batch_sizes) == 8 and max(generator.batch_sizes) > 1
    assert all(len(running.close_episode(e.key).rows) == 1 for e in episodes)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "hi"}], "n": 2}, "n"),
        ({"messages": [{"role": "user", "content": "hi"}], "tool_choice": "required"}, "tool_choice"),
        ({"model": "policy"}, "messages"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, "temperature"),
    ],
)
def test_a_bad_field_is_a_400_that_names_it(served, body, param):
    running, _ = served
    client = client_for(running.open_episode())
    with pytest.raises(openai.BadRequestError) as caught:
        client.post("/chat/completions", body=body, cast_to=object)
    assert caught.value.status_code == 400
    assert caught.value.body["param"] == param and param.split("[")[0] in caught.value.body["message"]


#: What a program's client says its body is (the gateway takes nothing else).
JSON_BODY = {"Content-Type": "application/json"}


def test_malformed_json_unknown_and_closed_episodes(served):
    running, _ = served
    episode = running.open_episode()
    response = httpx.post(f"{episode.base_url}/chat/completions", content=b"{not json", headers=JSON_BODY)
    assert response.status_code == 400 and set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert "not valid JSON" in response.json()["error"]["message"]
    running.close_episode(episode.key)
    with pytest.raises(openai.NotFoundError, match="has ended"):
        client_for(episode).chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError, match="is not open"):
        openai.OpenAI(base_url=f"{running.url}/v1", api_key="ep-nobody", max_retries=0).models.list()


def test_a_prompt_past_the_context_window_finishes_with_length(served):
    running, generator = served
    episode = running.open_episode()
    long = " ".join(["word"] * 500)
    reply = client_for(episode).chat.completions.create(model="policy", messages=[{"role": "user", "content": long}])
    recording = running.close_episode(episode.key)
    assert (reply.choices[0].finish_reason, reply.choices[0].message.content) == ("length", None)
    assert generator.served == [] and recording.rows == [] and recording.counters.calls == 1
    assert recording.counters.sampled_calls == 0 and recording.counters.prompt_tokens == 0  # nothing sampled


@pytest.mark.parametrize("short_by", [None, 0, 1, "second prompt"])
def test_the_episode_budget_bounds_its_rows_and_its_end_says_so(tokenizer, short_by):
    """``max_episode_tokens`` counts the tokens the episode's rows hold: a call gets what is left of it, and a call
    it cuts or refuses marks the episode over budget. ``None``: no budget; ``short_by``: the budget is the whole
    conversation's tokens less that many; ``"second prompt"``: the budget ends where the second call's prompt does."""
    generator = ScriptedGenerator(tokenizer, calculator_script)
    with BackgroundGateway(Gateway(generator, tokenizer, GatewaySettings(max_model_len=400))) as running:
        episode = running.open_episode()
        calculator_program(client_for(episode))
        whole = running.close_episode(episode.key).rows[0]
    first_call_end = whole.calls[0][1]
    prompt2_end = whole.calls[1][0]
    if short_by is None:
        budget = 0
    elif short_by == "second prompt":
        budget = prompt2_end
    else:
        budget = len(whole.token_ids) - short_by
    generator = ScriptedGenerator(tokenizer, calculator_script)
    settings = GatewaySettings(max_model_len=400, max_episode_tokens=budget)
    with BackgroundGateway(Gateway(generator, tokenizer, settings)) as running:
        episode = running.open_episode()
        first, second = calculator_program(client_for(episode))
        recording = running.close_episode(episode.key)
    [row] = recording.rows
    assert recording.counters.over_budget == (short_by not in (None, 0))
    assert first.choices[0].finish_reason == "tool_calls"
    if short_by == "second prompt":  # refused at once: nothing sampled, the row ends with the first call
        assert (second.choices[0].finish_reason, second.choices[0].message.content) == ("length", None)
        assert row.token_ids == whole.token_ids[:first_call_end] and len(generator.served) == 1
    else:  # the second call gets what is left: its whole answer, or all but the budget's shortfall
        assert row.token_ids == whole.token_ids[: budget or None]
        assert second.choices[0].finish_reason == ("length" if short_by else "stop")


@pytest.mark.parametrize("episode_budget", [0, 4096])
def test_a_call_cut_by_its_own_token_limit_leaves_the_episode_within_budget(tokenizer, episode_budget):
    generator = ScriptedGenerator(tokenizer, calculator_script)
    settings = GatewaySettings(max_model_len=400, max_episode_tokens=episode_budget)
    with BackgroundGateway(Gateway(generator, tokenizer, settings)) as running:
        episode = running.open_episode()
        reply = client_for(episode).chat.completions.create(
            model="p", messages=[{"role": "user", "content": "2 + 3?"}], tools=[ADD], max_tokens=3
        )
        recording = running.close_episode(episode.key)
    assert reply.choices[0].finish_reason == "length" and len(generator.served[0].token_ids) == 3
    assert not recording.counters.over_budget


def test_a_prompt_past_the_episode_budget_but_inside_the_context_window_is_refused_as_over_budget(tokenizer):
    """A program's long prompt is the episode's business, not the context window's: within the model's window it is
    refused only by the episode's budget, and the episode is over budget (not silently cut)."""
    generator = ScriptedGenerator(tokenizer, calculator_script)
    settings = GatewaySettings(max_model_len=4096, max_episode_tokens=100)
    with BackgroundGateway(Gateway(generator, tokenizer, settings)) as running:
        long, short = running.open_episode(), running.open_episode()
        words = " ".join(["word"] * 200)
        refused = client_for(long).chat.completions.create(model="p", messages=[{"role": "user", "content": words}])
        # The episode is over: a shorter call after it is refused too.
        after = client_for(long).chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
        answered = client_for(short).chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
        long_recording, short_recording = running.close_episode(long.key), running.close_episode(short.key)
    for reply in (refused, after):
        assert (reply.choices[0].finish_reason, reply.choices[0].message.content) == ("length", None)
    assert long_recording.counters.over_budget and long_recording.rows == [] and len(generator.served) == 1
    assert answered.choices[0].finish_reason == "stop" and not short_recording.counters.over_budget


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool", "developer", "x"])},
    optional={
        "content": st.none() | st.text(max_size=30) | JSON,
        "tool_calls": JSON,
        "tool_call_id": st.text(max_size=5) | JSON,
    },
)
BODY = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGE, max_size=4) | JSON},
    optional={"tools": st.just([ADD]) | JSON, "stream": st.booleans() | JSON, "max_tokens": JSON, "stop": JSON},
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODY | JSON, raw=st.booleans())
def test_random_bodies_never_crash_the_server(served, body, raw):
    running, _ = served
    episode = running.open_episode()
    content = json.dumps(body).encode()[:-1] if raw else json.dumps(body).encode()  # raw: cut-off JSON
    response = httpx.post(f"{episode.base_url}/chat/completions", content=content, headers=JSON_BODY, timeout=30)
    running.close_episode(episode.key)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    elif not (isinstance(body, dict) and body.get("stream") is True):
        assert response.json()["choices"][0]["finish_reason"] in ("stop", "tool_calls", "length")
    else:
        assert response.text.rstrip().endswith("data: [DONE]")


OPENING = '<tool_call>\n{"name": "'
NAMED_OPENING = '<tool_call>\n{"name": "add", "arguments": '


@pytest.mark.parametrize(
    ("choice", "opening"),
    [("required", OPENING), ({"type": "function", "function": {"name": "add"}}, NAMED_OPENING)],
    ids=["required", "named"],
)
def test_a_required_or_named_tool_choice_starts_the_turn_with_the_call_and_trains_only_the_rest(
    tokenizer, choice, opening
):
    """The model's turn begins with the call format's opening (mask 0, in the prompt); it writes the rest (mask 1);
    sent back unchanged, the turn continues the row."""

    def script(prompt: str) -> str:
        return (
            "The sum is 5."
            if "<|im_start|>tool" in prompt.rpartition("<|im_start|>user")[2]
            else CALL_TEXT[len(opening) :]
        )

    generator = ScriptedGenerator(tokenizer, script)
    with BackgroundGateway(Gateway(generator, tokenizer, GatewaySettings(max_model_len=400))) as running:
        episode = running.open_episode()
        client = openai.OpenAI(base_url=episode.base_url, api_key=episode.key, max_retries=0)
        messages = [{"role": "system", "content": "You add."}, {"role": "user", "content": "2 + 3?"}]
        first = client.chat.completions.create(model="policy", messages=messages, tools=[ADD], tool_choice=choice)
        call = first.choices[0].message.tool_calls[0]
        assert (call.function.name, json.loads(call.function.arguments)) == ("add", {"a": 2, "b": 3})
        messages += [first.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": "5"}]
        second = client.chat.completions.create(model="policy", messages=messages, tools=[ADD])
        recording = running.close_episode(episode.key)
    assert second.choices[0].message.content == "The sum is 5."
    system = {"role": "system", "content": f"You add.\n\n{TOOL_NOTE}"}
    prompt1 = template_ids(tokenizer, [system, {"role": "user", "content": "2 + 3?"}])
    forced = text_ids(tokenizer, opening)
    sampled1 = generator.served[0].token_ids
    assert sampled1 == text_ids(tokenizer, CALL_TEXT[len(opening) :]) + [generator.end]  # the model wrote the rest
    [row] = recording.rows
    assert recording.counters.prefix_mismatches == 0
    assert row.token_ids[: len(prompt1) + len(forced) + len(sampled1)] == prompt1 + forced + sampled1
    assert row.action_mask[: len(prompt1) + len(forced) + len(sampled1)] == [0] * (len(prompt1) + len(forced)) + [
        1
    ] * len(sampled1)


def test_a_tool_choice_the_gateway_cannot_honour_is_a_400(served):
    running, _ = served
    episode = running.open_episode()
    client = openai.OpenAI(base_url=episode.base_url, api_key=episode.key, max_retries=0)
    for choice in ({"type": "function", "function": {"name": "multiply"}}, {"type": "custom"}, "always"):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model="policy", messages=[{"role": "user", "content": "hi"}], tools=[ADD], tool_choice=choice
            )
        assert refused.value.body["param"] == "tool_choice"
    with pytest.raises(openai.BadRequestError, match="needs tools"):
        client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], tool_choice="required"
        )
    running.close_episode(episode.key)


def test_each_dialect_names_a_tool_choice_its_own_way():
    from agentfly_train.gateway.messages import parse_messages_request
    from agentfly_train.gateway.responses import parse_responses_request

    anthropic_tool = {"name": "add", "input_schema": ADD["function"]["parameters"]}
    body = {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "tools": [anthropic_tool]}
    for choice, expected in (
        ({"type": "any"}, ("required", None)),
        ({"type": "tool", "name": "add"}, ("required", "add")),
    ):
        request = parse_messages_request(json.dumps({**body, "tool_choice": choice}).encode())
        assert (request.tool_choice, request.tool_name) == expected
    tool = {"type": "function", **ADD["function"]}
    for choice, expected in (
        ("required", ("required", None)),
        ({"type": "function", "name": "add"}, ("required", "add")),
    ):
        request = parse_responses_request(json.dumps({"input": "hi", "tools": [tool], "tool_choice": choice}).encode())
        assert (request.tool_choice, request.tool_name) == expected
