"""Tests for agentfly_env.tools.parsing: shapes per format, round trips, robustness, limits and speed."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfly_env.core.types import ParseResult, ToolCall
from agentfly_env.tools.parsing import (
    PARSERS,
    SNIPPET_LIMIT,
    BracketParser,
    CommandParser,
    HermesParser,
    JSONParser,
    Parser,
    ReActParser,
    find_json_object_spans,
    get_parser,
)

ALL_PARSERS: list[Parser] = [
    HermesParser(),
    HermesParser(accept_unclosed=True),
    JSONParser(),
    ReActParser(),
    BracketParser(),
    BracketParser(multiple=True),
]
PARSER_IDS = ["hermes", "hermes-unclosed", "json", "react", "bracket", "bracket-multiple"]
all_parsers = pytest.mark.parametrize("parser", ALL_PARSERS, ids=PARSER_IDS)

# Timings mean nothing under a tracer (coverage, debugger).
timed = pytest.mark.skipif(sys.gettrace() is not None, reason="a tracer is active")


def check_result(result: ParseResult, parser: Parser) -> None:
    """The invariants every parse result keeps, whatever the input."""
    assert isinstance(result, ParseResult)
    assert len(result.calls) <= parser.max_calls
    assert len(result.errors) <= parser.max_errors + 2  # plus "more not shown" and "too many calls"
    for call in result.calls:
        assert isinstance(call, ToolCall) and call.name
        assert isinstance(call.arguments, (dict, str))
    for error in result.errors:
        assert "Expected" in error.message or "expected" in error.message
        assert len(error.snippet) <= SNIPPET_LIMIT


def only_call(result: ParseResult) -> ToolCall:
    assert result.errors == []
    assert len(result.calls) == 1
    return result.calls[0]


# ---------------------------------------------------------------- strategies

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,24}", fullmatch=True)
# Fragments that have a meaning to some parser, so that generated text hits the edge cases.
FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    "\\]",
    "\\\\",
    '"name"',
    '"arguments"',
    '"function"',
    ":",
    ",",
    "\n",
    "\nAction: ",
    "\nAction Input: ",
    "\nObservation: ",
    "\nThought: ",
    "\nFinal Answer: ",
    "```",
    "```json\n",
    "search[",
    " ",
]
tricky_text = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(FRAGMENTS)), max_size=12).map("".join)
# JSON has no NaN or infinities: msgspec would write them as null, so they cannot round-trip.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
    | tricky_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
dict_arguments = st.dictionaries(st.text(max_size=10) | tricky_text, json_values, max_size=5)
json_calls = st.builds(ToolCall, name=identifiers, arguments=dict_arguments)
json_calls_with_ids = st.builds(
    ToolCall, name=identifiers, arguments=dict_arguments, id=st.none() | st.text(max_size=12)
)
react_calls = st.builds(ToolCall, name=identifiers, arguments=dict_arguments | st.text() | tricky_text)
bracket_calls = st.builds(ToolCall, name=identifiers, arguments=st.text() | tricky_text)


# ---------------------------------------------------------------- registry and docs


def test_registry_holds_the_four_formats() -> None:
    assert set(PARSERS) == {"hermes", "json", "react", "bracket"}
    for name, cls in PARSERS.items():
        assert cls.name == name
        assert isinstance(get_parser(name), cls)


def test_get_parser_passes_instances_through() -> None:
    parser = BracketParser(multiple=True)
    assert get_parser(parser) is parser


def test_get_parser_unknown_name_lists_known_names() -> None:
    with pytest.raises(ValueError, match="bracket, hermes, json, react"):
        get_parser("xml")


def test_get_parser_rejects_other_types() -> None:
    with pytest.raises(TypeError):
        get_parser(3)  # type: ignore[arg-type]


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        HermesParser(max_calls=0)
    with pytest.raises(ValueError):
        JSONParser(max_errors=-1)


@all_parsers
def test_instructions_show_an_example_call(parser: Parser) -> None:
    text = parser.instructions()
    assert parser.format_call(ToolCall("search", {"query": "red shoes"})) in text


@all_parsers
def test_empty_turn(parser: Parser) -> None:
    result = parser.parse("")
    assert result.calls == []
    if isinstance(parser, BracketParser) and not parser.multiple:
        assert len(result.errors) == 1 and "No action found" in result.errors[0].message
    else:
        assert result.errors == []


@all_parsers
def test_plain_answer_has_no_call(parser: Parser) -> None:
    result = parser.parse("The answer is 42, because 6 * 7 = 42.")
    assert result.calls == []
    if not isinstance(parser, BracketParser) or parser.multiple:
        assert result.errors == []


# ---------------------------------------------------------------- hermes


def hermes(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


def test_hermes_several_calls_with_text_around() -> None:
    text = (
        "I'll check both.\n"
        + hermes('{"name": "search", "arguments": {"query": "cats"}}')
        + "\nand then\n"
        + hermes('\n{"name": "calculator", "arguments": {"expression": "1 + 2"}}\n')
        + "\nDone."
    )
    result = HermesParser().parse(text)
    assert result.errors == []
    assert result.calls == [
        ToolCall("search", {"query": "cats"}),
        ToolCall("calculator", {"expression": "1 + 2"}),
    ]


def test_hermes_bad_json_beside_good_block() -> None:
    text = hermes('{"name": "a", "arguments": {"x": 1,}}') + hermes('{"name": "b", "arguments": {}}')
    result = HermesParser().parse(text)
    assert result.calls == [ToolCall("b", {})]
    assert len(result.errors) == 1
    error = result.errors[0]
    assert "Invalid JSON" in error.message and "<tool_call>" in error.message
    assert error.snippet == '{"name": "a", "arguments": {"x": 1,}}'


def test_hermes_arguments_as_json_string() -> None:
    text = hermes('{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}')
    assert only_call(HermesParser().parse(text)) == ToolCall("get_weather", {"city": "Paris"})


def test_hermes_arguments_string_that_is_not_an_object() -> None:
    result = HermesParser().parse(hermes('{"name": "f", "arguments": "Paris"}'))
    assert result.calls == []
    assert '"arguments"' in result.errors[0].message


def test_hermes_parameters_alias() -> None:
    text = hermes('{"name": "f", "parameters": {"x": 1}}')
    assert only_call(HermesParser().parse(text)) == ToolCall("f", {"x": 1})


def test_hermes_missing_arguments_is_no_arg_call() -> None:
    assert only_call(HermesParser().parse(hermes('{"name": "now"}'))) == ToolCall("now", {})


def test_hermes_openai_shape_and_id() -> None:
    text = hermes('{"type": "function", "id": "c1", "function": {"name": "f", "arguments": "{}"}}')
    assert only_call(HermesParser().parse(text)) == ToolCall("f", {}, id="c1")


def test_hermes_braces_inside_strings() -> None:
    text = hermes('{"name": "python", "arguments": {"code": "d = {1: \'}\'}; print(d)"}} trailing')
    assert only_call(HermesParser().parse(text)) == ToolCall("python", {"code": "d = {1: '}'}; print(d)"})


def test_hermes_raw_newline_inside_string() -> None:
    text = hermes('{"name": "python", "arguments": {"code": "x = 1\nprint(x)"}}')
    assert only_call(HermesParser().parse(text)).arguments == {"code": "x = 1\nprint(x)"}


def test_hermes_fenced_json_inside_block() -> None:
    text = hermes('\n```json\n{"name": "f", "arguments": {"a": [1, 2]}}\n```\n')
    assert only_call(HermesParser().parse(text)) == ToolCall("f", {"a": [1, 2]})


def test_hermes_list_of_calls_in_one_block() -> None:
    text = hermes('[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": null}}]')
    result = HermesParser().parse(text)
    assert result.errors == [] and result.calls == [ToolCall("a", {}), ToolCall("b", {"x": None})]


@pytest.mark.parametrize(
    ("body", "expected_problem"),
    [
        ('{"arguments": {}}', 'no "name"'),
        ('{"name": 7, "arguments": {}}', '"name" must be a non-empty string, got a number'),
        ('{"name": "", "arguments": {}}', "got an empty string"),
        ('{"name": "f", "arguments": [1]}', "must be a JSON object, got an array"),
        ('{"name": "f", "arguments": null}', "must be a JSON object, got null"),
        ('"f"', "must be a JSON object, got a string"),
        ("[]", "got an array"),
        ("   ", "Empty <tool_call> block"),
        ('{"name": "f", "arguments": {"x": 1}', "unclosed '{'"),
        ('{"name": "f"} {"name": "g"}', "Invalid JSON"),
        ('{"name": "f", "arguments": {"x": NaN}}', "Invalid JSON"),
        ("[" * 100_000, "Invalid JSON"),
    ],
)
def test_hermes_block_errors(body: str, expected_problem: str) -> None:
    parser = HermesParser()
    result = parser.parse("text " + hermes(body) + hermes('{"name": "ok", "arguments": {}}'))
    check_result(result, parser)
    assert result.calls == [ToolCall("ok", {})]
    assert len(result.errors) == 1
    assert expected_problem in result.errors[0].message
    assert parser.expected in result.errors[0].message


def test_hermes_unclosed_block_at_end() -> None:
    text = hermes('{"name": "a", "arguments": {}}') + '<tool_call>{"name": "b", "arguments": {"q": "ca'
    result = HermesParser().parse(text)
    assert result.calls == [ToolCall("a", {})]
    assert len(result.errors) == 1 and "no closing </tool_call>" in result.errors[0].message
    assert result.errors[0].snippet.startswith('<tool_call>{"name": "b"')


def test_hermes_unclosed_block_before_next_block() -> None:
    text = '<tool_call>{"name": "a", "arguments": {}}' + hermes('{"name": "b", "arguments": {}}')
    result = HermesParser().parse(text)
    assert result.calls == [ToolCall("b", {})]
    assert len(result.errors) == 1 and "not closed" in result.errors[0].message


def test_hermes_accept_unclosed_complete_final_block() -> None:
    """vLLM strips the stop string ``</tool_call>``; the complete call before it still counts."""
    text = 'Let me search.\n<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n'
    assert HermesParser().parse(text).calls == []
    assert only_call(HermesParser(accept_unclosed=True).parse(text)) == ToolCall("search", {"query": "x"})
    truncated = HermesParser(accept_unclosed=True).parse('<tool_call>{"name": "search", "argu')
    assert truncated.calls == [] and "no closing" in truncated.errors[0].message


def test_hermes_stray_close_tag_is_text() -> None:
    result = HermesParser().parse("no call here </tool_call> really")
    assert result == ParseResult()


def test_hermes_escapes_close_tag_inside_arguments() -> None:
    call = ToolCall("echo", {"text": "a </tool_call> b <tool_call>"})
    formatted = HermesParser().format_call(call)
    assert formatted.count("</tool_call>") == 1
    assert only_call(HermesParser().parse(formatted)) == call


def test_hermes_format_call_needs_dict_arguments() -> None:
    with pytest.raises(ValueError):
        HermesParser().format_call(ToolCall("search", "red shoes"))


def test_hermes_format_call_is_chat_template_spacing() -> None:
    text = HermesParser().format_call(ToolCall("search", {"query": "x", "n": [1, 2]}))
    assert text == '<tool_call>\n{"name": "search", "arguments": {"query": "x", "n": [1, 2]}}\n</tool_call>'


# ---------------------------------------------------------------- json


def test_json_single_object_in_prose() -> None:
    text = 'Let me search.\n{"name": "search", "arguments": {"query": "cats"}}\nThat should do it.'
    assert only_call(JSONParser().parse(text)) == ToolCall("search", {"query": "cats"})


def test_json_list_of_calls() -> None:
    text = '[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]'
    result = JSONParser().parse(text)
    assert result.errors == [] and result.calls == [ToolCall("a", {"x": 1}), ToolCall("b", {})]


def test_json_fenced_block() -> None:
    text = 'Calling:\n```json\n{\n  "name": "search",\n  "arguments": {"query": "cats"}\n}\n```\n'
    assert only_call(JSONParser().parse(text)) == ToolCall("search", {"query": "cats"})


def test_json_openai_shape_with_string_arguments() -> None:
    text = (
        '{"id": "call_9", "type": "function", '
        '"function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 3}"}}'
    )
    assert only_call(JSONParser().parse(text)) == ToolCall("get_weather", {"city": "Paris", "days": 3}, id="call_9")


def test_json_braces_inside_strings_do_not_confuse_the_scanner() -> None:
    text = 'Run this: {"name":"python","arguments":{"code":"d = {1: \'}\'}\\nprint(\\"}{\\")"}} ok }'
    assert only_call(JSONParser().parse(text)) == ToolCall("python", {"code": "d = {1: '}'}\nprint(\"}{\")"})


def test_json_stray_brace_before_call() -> None:
    text = 'The set { 1, 2 is unclosed, "quoted" too. {"name": "f", "arguments": {}}'
    assert only_call(JSONParser().parse(text)) == ToolCall("f", {})


def test_json_other_json_is_not_a_call() -> None:
    result = JSONParser().parse('Final answer: {"result": 4, "name": "Alice", "age": 3} and {x} and \\frac{1}{2}')
    assert result == ParseResult()


def test_json_bare_name_is_a_no_arg_call() -> None:
    assert only_call(JSONParser().parse('{"name": "get_time"}')) == ToolCall("get_time", {})


def test_json_invalid_call_gives_error() -> None:
    result = JSONParser().parse('I call {"name": "f", "arguments": {"x": 1,}} now')
    assert result.calls == []
    assert len(result.errors) == 1 and "Invalid JSON" in result.errors[0].message
    assert result.errors[0].snippet == '{"name": "f", "arguments": {"x": 1,}}'


def test_json_truncated_call_gives_error() -> None:
    result = JSONParser().parse('{"name": "a", "arguments": {}}\n{"name": "search", "arguments": {"query": "ca')
    assert result.calls == [ToolCall("a", {})]
    assert len(result.errors) == 1 and "never closed" in result.errors[0].message


def test_json_bad_field_gives_error() -> None:
    result = JSONParser().parse('{"name": "f", "arguments": 3}')
    assert result.calls == [] and "got a number" in result.errors[0].message


def test_json_call_inside_hermes_tags_is_read() -> None:
    assert only_call(JSONParser().parse(hermes('{"name": "f", "arguments": {}}'))) == ToolCall("f", {})


# ---------------------------------------------------------------- react


def test_react_json_input() -> None:
    text = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}\n'
    assert only_call(ReActParser().parse(text)) == ToolCall("get_weather", {"city": "Paris"})


def test_react_raw_input_stops_at_observation() -> None:
    text = "Thought: search\nAction: search\nAction Input:  red running shoes \nObservation: 3 results"
    assert only_call(ReActParser().parse(text)) == ToolCall("search", "red running shoes")


def test_react_multiline_raw_input() -> None:
    text = "Action: python\nAction Input: x = 1\nprint(x)\nThought: wait"
    assert only_call(ReActParser().parse(text)) == ToolCall("python", "x = 1\nprint(x)")


def test_react_several_pairs() -> None:
    text = (
        "Thought: two lookups\n"
        "Action: search\nAction Input: cats\n"
        "Observation: ...\n"
        "Thought: now the other\n"
        'action: lookup\naction input: {"id": 3}\n'
    )
    result = ReActParser().parse(text)
    assert result.errors == []
    assert result.calls == [ToolCall("search", "cats"), ToolCall("lookup", {"id": 3})]


def test_react_action_without_input_is_no_arg_call() -> None:
    text = "Action: get_time\nThought: then\nAction: now\nAction Input:\nAction: last"
    assert ReActParser().parse(text).calls == [ToolCall("get_time", {}), ToolCall("now", {}), ToolCall("last", {})]


def test_react_quoted_and_fenced_inputs() -> None:
    parser = ReActParser()
    assert only_call(parser.parse('Action: s\nAction Input: "red shoes"')).arguments == "red shoes"
    assert only_call(parser.parse('Action: s\nAction Input: ```json\n{"q": 1}\n```')).arguments == {"q": 1}
    assert only_call(parser.parse("Action: s\nAction Input: {not json}")).arguments == "{not json}"
    assert only_call(parser.parse("Action: s\nAction Input: [1, 2]")).arguments == "[1, 2]"


def test_react_final_answer_is_not_a_call() -> None:
    result = ReActParser().parse("Thought: I know it.\nFinal Answer: 42")
    assert result == ParseResult()


def test_react_final_answer_ends_input() -> None:
    result = ReActParser().parse("Action: search\nAction Input: cats\nFinal Answer: 42")
    assert result.calls == [ToolCall("search", "cats")]


def test_react_markers_only_at_line_start() -> None:
    text = "Action: search\nAction Input: what does Action: mean"
    assert only_call(ReActParser().parse(text)).arguments == "what does Action: mean"


def test_react_errors() -> None:
    parser = ReActParser()
    orphan = parser.parse("Action Input: cats")
    assert orphan.calls == [] and "without an" in orphan.errors[0].message
    nameless = parser.parse("Action:\n\nObservation: x")
    assert nameless.calls == [] and "not followed by a tool name" in nameless.errors[0].message
    for error in orphan.errors + nameless.errors:
        assert parser.expected in error.message


def test_react_format_call_rejects_bad_names() -> None:
    for name in ["", " a", "a\nb"]:
        with pytest.raises(ValueError):
            ReActParser().format_call(ToolCall(name, {}))


# ---------------------------------------------------------------- bracket


def test_bracket_simple_actions() -> None:
    assert only_call(BracketParser().parse("search[red shoes]")) == ToolCall("search", "red shoes")
    assert only_call(BracketParser().parse("  click[Buy Now]\n")) == ToolCall("click", "Buy Now")
    assert only_call(BracketParser().parse("click[]")) == ToolCall("click", "")


def test_bracket_nested_brackets() -> None:
    assert only_call(BracketParser().parse("click[size [large] [x[y]]]")) == ToolCall("click", "size [large] [x[y]]")


def test_bracket_unbalanced() -> None:
    result = BracketParser().parse("click[size [large]")
    assert result.calls == [] and "Unbalanced" in result.errors[0].message
    assert "name[argument]" in result.errors[0].message


def test_bracket_single_mode_needs_the_whole_turn() -> None:
    for text in ["I will search[shoes]", "search[a] click[b]", "search[a].", "search [a]", "no action"]:
        result = BracketParser().parse(text)
        assert result.calls == [] and len(result.errors) == 1, text
        assert "name[argument]" in result.errors[0].message


def test_bracket_multiple_mode_finds_actions_in_prose() -> None:
    text = "First search[red shoes], then click[size [10]] and maybe click[Buy Now]. foo["
    result = BracketParser(multiple=True).parse(text)
    assert result.calls == [
        ToolCall("search", "red shoes"),
        ToolCall("click", "size [10]"),
        ToolCall("click", "Buy Now"),
    ]
    assert len(result.errors) == 1 and "Unbalanced" in result.errors[0].message


def test_bracket_multiple_mode_unclosed_outer_does_not_hide_inner() -> None:
    result = BracketParser(multiple=True).parse("foo[ bar[x]")
    assert result.calls == [ToolCall("bar", "x")] and len(result.errors) == 1


def test_bracket_escapes() -> None:
    parser = BracketParser()
    assert only_call(parser.parse(r"click[a \] b]")) == ToolCall("click", "a ] b")
    assert parser.format_call(ToolCall("click", "a ] b")) == r"click[a \] b]"
    assert parser.format_call(ToolCall("click", "size [large]")) == "click[size [large]]"


def test_bracket_format_call_dict_arguments() -> None:
    parser = BracketParser()
    assert parser.format_call(ToolCall("search", {"query": "shoes"})) == "search[shoes]"
    assert parser.format_call(ToolCall("finish", {"answer": 42})) == "finish[42]"
    assert parser.format_call(ToolCall("click", {})) == "click[]"
    assert parser.format_call(ToolCall("f", {"a": 1, "b": "x"})) == 'f[{"a": 1, "b": "x"}]'
    with pytest.raises(ValueError):
        parser.format_call(ToolCall("web-search", "x"))


# ---------------------------------------------------------------- the JSON span scanner


def test_spans_skip_strings_and_report_unclosed() -> None:
    text = 'a {"x": "}{"} b {"y": {"z": "\\"}"}} c {"open": {"w": 1}'
    spans, unclosed = find_json_object_spans(text)
    assert [text[a:b] for a, b in spans] == ['{"x": "}{"}', '{"y": {"z": "\\"}"}}', '{"w": 1}']
    assert unclosed is not None and text[unclosed:].startswith('{"open"')


def test_spans_respect_bounds() -> None:
    text = '{"a": 1} {"b": 2} {"c": 3}'
    spans, unclosed = find_json_object_spans(text, 9, 17)
    assert [text[a:b] for a, b in spans] == ['{"b": 2}'] and unclosed is None


def test_spans_unterminated_string() -> None:
    spans, unclosed = find_json_object_spans('{"a": 1} {"b": "never ends }')
    assert spans == [(0, 8)] and unclosed == 9


# ---------------------------------------------------------------- limits


@pytest.mark.parametrize(
    ("make", "call"),
    [
        (HermesParser, ToolCall("f", {"i": 1})),
        (JSONParser, ToolCall("f", {"i": 1})),
        (ReActParser, ToolCall("f", {"i": 1})),
        (functools.partial(BracketParser, multiple=True), ToolCall("f", "1")),
    ],
    ids=["hermes", "json", "react", "bracket"],
)
def test_max_calls(make: Callable[..., Parser], call: ToolCall) -> None:
    parser = make()
    text = "\n".join([parser.format_call(call)] * 5000)
    result = parser.parse(text)
    assert result.calls == [call] * 32
    assert len(result.errors) == 1
    assert "at most 32" in result.errors[0].message and "4968" in result.errors[0].message
    assert make(max_calls=10_000).parse(text) == ParseResult(calls=[call] * 5000)


def test_max_errors_summarises_the_rest() -> None:
    parser = HermesParser(max_errors=3)
    result = parser.parse(hermes("{bad}") * 10 + hermes('{"name": "ok"}'))
    assert result.calls == [ToolCall("ok", {})]
    assert len(result.errors) == 4
    assert "7 more" in result.errors[-1].message


def test_long_snippets_are_truncated() -> None:
    result = HermesParser().parse(hermes('{"name": "f", "arguments": {"x": "' + "y" * 5000 + '",}}'))
    snippet = result.errors[0].snippet
    assert len(snippet) == SNIPPET_LIMIT and snippet.endswith("...")


# ---------------------------------------------------------------- properties


@all_parsers
@given(text=st.text())
def test_never_raises_on_any_text(parser: Parser, text: str) -> None:
    check_result(parser.parse(text), parser)


@all_parsers
@given(text=tricky_text)
def test_never_raises_on_syntax_soup(parser: Parser, text: str) -> None:
    check_result(parser.parse(text), parser)


@all_parsers
@given(call=json_calls, data=st.data())
def test_never_raises_on_truncated_calls(parser: Parser, call: ToolCall, data: st.DataObject) -> None:
    formatted = parser.format_call(call)
    cut = data.draw(st.integers(0, len(formatted)))
    check_result(parser.parse(formatted[:cut]), parser)


@given(call=json_calls, data=st.data())
def test_hermes_truncated_block_is_an_error(call: ToolCall, data: st.DataObject) -> None:
    formatted = HermesParser().format_call(call)
    cut = data.draw(st.integers(len("<tool_call>"), len(formatted) - 1))
    result = HermesParser().parse(formatted[:cut])
    assert result.calls == [] and len(result.errors) == 1


@given(call=json_calls_with_ids)
def test_hermes_round_trip(call: ToolCall) -> None:
    parser = HermesParser()
    assert parser.parse(parser.format_call(call)) == ParseResult(calls=[call])


@given(call=json_calls_with_ids)
def test_json_round_trip(call: ToolCall) -> None:
    parser = JSONParser()
    assert parser.parse(parser.format_call(call)) == ParseResult(calls=[call])


@given(call=react_calls)
def test_react_round_trip(call: ToolCall) -> None:
    parser = ReActParser()
    assert parser.parse(parser.format_call(call)) == ParseResult(calls=[call])


@given(call=bracket_calls, multiple=st.booleans())
def test_bracket_round_trip(call: ToolCall, multiple: bool) -> None:
    parser = BracketParser(multiple=multiple)
    assert parser.parse(parser.format_call(call)) == ParseResult(calls=[call])


@pytest.mark.parametrize(
    ("parser", "calls", "separator"),
    [
        (HermesParser(), json_calls_with_ids, "\nthen\n"),
        (JSONParser(), json_calls_with_ids, "\nthen\n"),
        (ReActParser(), react_calls, "\nObservation: ok\nThought: more\n"),
        (BracketParser(multiple=True), bracket_calls, " then "),
    ],
    ids=["hermes", "json", "react", "bracket"],
)
@settings(max_examples=50)
@given(data=st.data())
def test_several_calls_round_trip(
    parser: Parser, calls: st.SearchStrategy[ToolCall], separator: str, data: st.DataObject
) -> None:
    drawn = data.draw(st.lists(calls, min_size=1, max_size=5))
    text = separator.join(parser.format_call(call) for call in drawn)
    assert parser.parse(text) == ParseResult(calls=drawn)


# ---------------------------------------------------------------- speed

MB = 1 << 20
CALL_JSON = '{"name": "search", "arguments": {"query": "red running shoes size 10", "limit": 5}}'
TYPICAL = {
    "hermes": f"I will search for this now, then summarize the results. <tool_call>\n{CALL_JSON}\n</tool_call>",
    "json": f"I will search for this now, then summarize the results.\n```json\n{CALL_JSON}\n```",
    "react": (
        "Thought: I should search for this now, then summarize.\nAction: search\n"
        'Action Input: {"query": "red running shoes size 10", "limit": 5}\nObservation:'
    ),
    "bracket": "search[red running shoes size 10 in a wide fit, under 50 dollars, with free returns]",
}
BIG_INPUTS = {
    "prose": ('The quick brown fox jumps over the lazy dog; it\'s {not} a [call]. "Quote" ok. ' * 15_000)[:MB],
    "calls": ("\n".join(TYPICAL.values()) + "\n") * (MB // 600),
    "open_braces": "{" * MB,
    "brace_pairs": "{}" * (MB // 2),
    "name_soup": '{"name"}' * (MB // 8),
    "open_strings": '{"' * (MB // 2),
    "backslashes": '{"a": "' + "\\" * MB,
    "open_brackets": "a[" * (MB // 2),
    "bracket_pairs": "a[]" * (MB // 3),
    "tags": "<tool_call>" * (MB // 11),
    "blocks": hermes("{bad}") * (MB // 29),
    "markers": "Action: x\nAction Input: y\n" * (MB // 26),
    "one_line": "x" * MB,
}


def timed_parse(parser: Parser, text: str) -> tuple[ParseResult, float]:
    start = time.perf_counter()
    result = parser.parse(text)
    return result, time.perf_counter() - start


@timed
@all_parsers
@pytest.mark.parametrize("kind", list(BIG_INPUTS))
def test_megabyte_turn_has_no_superlinear_blowup(parser: Parser, kind: str) -> None:
    # A guard, not a speed target (agentfly-bench's core suite times parsing): every case takes
    # well under a second here, while a backtracking regex on these inputs would take hours.
    result, elapsed = timed_parse(parser, BIG_INPUTS[kind])
    check_result(result, parser)
    assert elapsed < 15.0, f"{parser.name} on {kind}: {elapsed:.3f} s"


@given(st.text(max_size=200))
def test_command_parser_reads_any_turn_as_one_command(turn: str) -> None:
    parser = CommandParser("act", "command")
    result = parser.parse(turn)
    if turn.strip():
        assert result.errors == [] and result.calls == [ToolCall("act", {"command": turn.strip()})]
        assert parser.parse(parser.format_call(result.calls[0])).calls == result.calls
    else:
        assert result.calls == [] and len(result.errors) == 1
    with pytest.raises(ValueError):
        parser.format_call(ToolCall("look", {"command": "x"}))
