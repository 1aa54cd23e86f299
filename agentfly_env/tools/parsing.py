"""Action parsers: read the tool calls out of one whole model turn.

A parser turns the raw text of an assistant turn into a :class:`ParseResult`: the
:class:`ToolCall` objects it found and one :class:`ParseError` per malformed attempt. The error
messages are written for the model (what was wrong and the expected form), so the env can show
them as the observation. ``parse`` never raises on a ``str``, runs in time linear in the text, and
accepts at most ``max_calls`` calls per turn.

Formats (``PARSERS`` maps each name to its class):

* ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (Hermes, Qwen).
* ``json``: a JSON call object or a list of them anywhere in the turn, fenced or not.
* ``react``: ``Action: <tool>`` and ``Action Input: <input>`` lines.
* ``bracket``: WebShop-style ``name[argument]``.

:class:`CommandParser` (not in ``PARSERS``: it is made for one tool) reads the whole turn as one
command, as text games such as ALFWorld and ScienceWorld take their input.

Every parser also renders calls (``format_call``, used for prompts and ``space.sample()``) and
writes a short how-to for the system prompt (``instructions``).

Example:
    >>> parser = get_parser("hermes")
    >>> result = parser.parse(
    ...     'Let me check. <tool_call>{"name": "search", "arguments": {"query": "cats"}}</tool_call>'
    ... )
    >>> result.calls
    [ToolCall(name='search', arguments={'query': 'cats'}, id=None)]
    >>> get_parser("bracket").parse("click[Buy Now]").calls
    [ToolCall(name='click', arguments='Buy Now', id=None)]
"""

from __future__ import annotations

import abc
import json
import math
import re
from typing import Any, ClassVar

import msgspec

from agentfly_env.core.types import ParseError, ParseResult, ToolCall

__all__ = [
    "PARSERS",
    "SNIPPET_LIMIT",
    "BracketParser",
    "CommandParser",
    "HermesParser",
    "JSONParser",
    "Parser",
    "ReActParser",
    "find_json_object_spans",
    "get_parser",
]

SNIPPET_LIMIT = 200
"""Longest ``ParseError.snippet``, in characters (longer excerpts end in ``...``)."""

_DECODER = msgspec.json.Decoder()
# Inside braces: everything up to the next brace, skipping whole string literals (escapes
# included). It stops before a '"' whose string never ends. Possessive quantifiers keep it from
# backtracking, so it is linear even on truncated output.
_OBJECT_TEXT = re.compile(r'(?:[^{}"]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+', re.DOTALL)
# A brace group that never mentions one of these keys cannot be a call (e.g. LaTeX ``\frac{1}{2}``).
_CALL_KEY = re.compile(r'"(?:name|function)"')
_CONTROL_CHAR = re.compile(r"[\x00-\x1f]")
# Keys of a bare no-argument call such as {"name": "get_time"}.
_BARE_CALL_KEYS = frozenset({"name", "id", "type"})


def _snippet(text: str, start: int = 0, end: int | None = None) -> str:
    """``text[start:end]`` stripped and cut to at most ``SNIPPET_LIMIT`` characters."""
    stop = len(text) if end is None else end
    # Slice a bounded window first: the region may be a whole megabyte turn.
    piece = text[start : min(stop, start + 4 * SNIPPET_LIMIT)].strip()
    return piece if len(piece) <= SNIPPET_LIMIT else piece[: SNIPPET_LIMIT - 3] + "..."


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _reject_constant(name: str) -> Any:
    """The stdlib decoder's hook for NaN and Infinity, which JSON does not have."""
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(literal: str) -> float:
    """The stdlib decoder's float hook: overflow (``1e400``) is an error, as in msgspec."""
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"number {literal} is out of range")
    return value


def _decode_json(text: str, *, explain: bool = True) -> Any:
    """Decode JSON text, raising ``ValueError`` with a reason when it is not valid JSON.

    msgspec is the fast path. The stdlib decoder is the fallback: it accepts raw control characters
    (literal newlines) inside strings, which models often write in code arguments, and lone
    surrogates, and its messages say what it expected where.

    Args:
        text: The JSON text.
        explain: Run the stdlib decoder even when it is bound to fail too, only for its clearer
            message. Callers turn this off when the message will not be shown.
    """
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except UnicodeEncodeError:
        pass
    except msgspec.DecodeError as exc:
        if not explain and not _CONTROL_CHAR.search(text):
            raise ValueError(str(exc)) from None
    try:
        return json.loads(text, strict=False, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def find_json_object_spans(
    text: str, start: int = 0, end: int | None = None
) -> tuple[list[tuple[int, int]], int | None]:
    """Locate the outermost balanced ``{...}`` groups in ``text[start:end]``, in one linear pass.

    Braces inside JSON string literals (``"d = {1: '}'}"``) and escaped quotes do not count. Quotes
    outside any brace are prose (``it's``, ``"quoted"``) and are ignored. A ``{`` that is never
    closed (a stray brace, or output cut off mid-object) does not hide the groups that follow it.
    The groups are only candidates: decoding them is the caller's job.

    Args:
        text: The text to scan.
        start: Where to start scanning.
        end: Where to stop scanning (default: the end of ``text``).

    Returns:
        The ``(begin, end)`` slice bounds of every outermost closed group, in order, and the
        position of the first ``{`` that never closed (None when all closed).

    Example:
        >>> text = 'Use {"name": "python", "arguments": {"code": "d = {1: \\'}\\'}"}} now. {oops'
        >>> spans, unclosed = find_json_object_spans(text)
        >>> [text[a:b] for a, b in spans], text[unclosed:]
        (['{"name": "python", "arguments": {"code": "d = {1: \\'}\\'}"}}'], '{oops')
    """
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    opened: list[int] = []
    find, object_text = text.find, _OBJECT_TEXT.match
    pos = start
    while True:
        if not opened:
            pos = find("{", pos, end)
            if pos < 0:
                break
            opened.append(pos)
            pos += 1
        pos = object_text(text, pos, end).end()
        if pos >= end:
            break
        char = text[pos]
        if char == "{":
            opened.append(pos)
        elif char == "}":
            begin = opened.pop()
            # Groups closed earlier inside this one are not outermost any more.
            while spans and spans[-1][0] > begin:
                spans.pop()
            spans.append((begin, pos + 1))
        else:  # a string that never ends: the rest of the text is inside it
            break
        pos += 1
    return spans, (opened[0] if opened else None)


def _call_from_object(value: Any) -> ToolCall | str:
    """Validate one decoded JSON call; return the call, or what is wrong with it (for the model).

    Accepts ``{"name", "arguments"}`` (``"parameters"`` is an alias, as Llama 3 writes it), the
    OpenAI shape ``{"type": "function", "function": {...}, "id": ...}``, and ``arguments`` given as
    a string that holds a JSON object (OpenAI's own encoding). Missing arguments mean ``{}``.
    """
    if not isinstance(value, dict):
        return f"A tool call must be a JSON object, got {_json_type(value)}."
    call_id = value.get("id")
    function = value.get("function")
    if isinstance(function, dict):
        value = function
    if "name" not in value:
        return 'The tool call has no "name".'
    name = value["name"]
    if not isinstance(name, str) or not name:
        return f'"name" must be a non-empty string, got {"an empty string" if name == "" else _json_type(name)}.'
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = _decode_json(arguments)
        except ValueError as exc:
            return f'"arguments" of {name!r} is a string that is not valid JSON ({exc}); it must be a JSON object.'
    if not isinstance(arguments, dict):
        return f'"arguments" of {name!r} must be a JSON object, got {_json_type(arguments)}.'
    return ToolCall(name=name, arguments=arguments, id=call_id if isinstance(call_id, str) else None)


def _looks_like_call(value: dict[str, Any]) -> bool:
    """Whether a JSON object found in prose is meant as a call (and not, say, a JSON answer)."""
    if isinstance(value.get("function"), dict):
        return True
    return "name" in value and ("arguments" in value or "parameters" in value or value.keys() <= _BARE_CALL_KEYS)


def _to_json(value: Any) -> str:
    """One line of JSON with a space after ``:`` and ``,``, as ``json.dumps`` and chat templates write it."""
    return msgspec.json.format(msgspec.json.encode(value), indent=0).decode()


def _encode_call(call: ToolCall) -> str:
    """A call as one line of JSON: ``{"name": ..., "arguments": {...}}`` (plus ``"id"`` when set)."""
    if not isinstance(call.arguments, dict):
        raise ValueError(f"this format needs a dict of arguments, got {type(call.arguments).__name__}")
    obj: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
    if call.id is not None:
        obj["id"] = call.id
    return _to_json(obj)


class _Findings:
    """What one ``parse`` has found so far.

    Errors past ``max_errors`` are only counted, so that a megabyte of garbage costs no more than
    the scan itself.
    """

    __slots__ = ("calls", "errors", "expected", "max_errors", "omitted")

    def __init__(self, expected: str, max_errors: int) -> None:
        self.calls: list[ToolCall] = []
        self.errors: list[ParseError] = []
        self.expected = expected
        self.max_errors = max_errors
        self.omitted = 0

    @property
    def full(self) -> bool:
        """Whether further errors will only be counted (so they need no detailed message)."""
        return len(self.errors) >= self.max_errors

    def fail(self, problem: str, text: str = "", start: int = 0, end: int | None = None) -> None:
        """Record an error: ``problem`` plus the expected form, with ``text[start:end]`` as snippet."""
        if self.full:
            self.omitted += 1
            return
        self.errors.append(ParseError(f"{problem} Expected: {self.expected}", _snippet(text, start, end)))

    def result(self, max_calls: int) -> ParseResult:
        errors = self.errors
        if self.omitted:
            errors.append(
                ParseError(f"{self.omitted} more malformed tool call(s) not shown. Expected: {self.expected}")
            )
        calls = self.calls
        if len(calls) > max_calls:
            errors.append(
                ParseError(
                    f"Too many tool calls: expected at most {max_calls} per turn, so the last "
                    f"{len(calls) - max_calls} were ignored."
                )
            )
            calls = calls[:max_calls]
        return ParseResult(calls=calls, errors=errors)


class Parser(abc.ABC):
    """Reads the tool calls of one model turn in one format, and writes calls in that format.

    Subclasses set ``name`` and ``expected`` and implement ``_scan``, ``format_call`` and
    ``instructions``; ``parse`` applies the per-turn limits.

    Args:
        max_calls: Most calls accepted from one turn; the rest are dropped with one error.
        max_errors: Most errors reported for one turn; the rest are summed up in one error.

    Example:
        >>> parser = JSONParser(max_calls=1)
        >>> result = parser.parse('[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]')
        >>> [call.name for call in result.calls], len(result.errors)
        (['a'], 1)
    """

    name: ClassVar[str]
    expected: ClassVar[str]  # the expected form, quoted in every error message

    def __init__(self, *, max_calls: int = 32, max_errors: int = 8) -> None:
        if max_calls < 1 or max_errors < 0:
            raise ValueError(f"need max_calls >= 1 and max_errors >= 0, got {max_calls} and {max_errors}")
        self.max_calls = max_calls
        self.max_errors = max_errors

    def parse(self, text: str) -> ParseResult:
        """Find the tool calls in a whole model turn. Never raises on a ``str``.

        A turn without any call attempt (e.g. a final answer) gives an empty result.
        """
        found = _Findings(self.expected, self.max_errors)
        self._scan(text, found)
        return found.result(self.max_calls)

    @abc.abstractmethod
    def _scan(self, text: str, found: _Findings) -> None:
        """Add every call and error in ``text`` to ``found``, in text order."""

    @abc.abstractmethod
    def format_call(self, call: ToolCall) -> str:
        """Render ``call`` as model text in this format, such that ``parse`` reads it back.

        Raises:
            ValueError: The call cannot be written in this format.
        """

    @abc.abstractmethod
    def instructions(self) -> str:
        """A short paragraph for the system prompt on how to call tools in this format."""


class HermesParser(Parser):
    """Hermes / Qwen tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

    Any number of blocks per turn; text outside them is ignored. Inside a block the parser also
    accepts ``"parameters"`` for ``"arguments"`` (Llama 3), arguments given as a JSON string
    holding an object, the OpenAI ``{"function": {...}}`` shape, a JSON list of calls, and text
    around the object (e.g. a ```json fence). Each bad block gives one error; the good blocks of
    the same turn still count.

    Args:
        accept_unclosed: Accept a final block that lacks ``</tool_call>`` when its content is a
            complete call. Turn it on when generation stops at ``</tool_call>`` and the engine
            strips the stop string (vLLM's default); otherwise such a block is an error, since it
            usually means the output was cut off.
        max_calls: Most calls accepted from one turn.
        max_errors: Most errors reported for one turn.

    Example:
        >>> HermesParser().parse(
        ...     '<tool_call>{"name": "add", "arguments": "{\\\\"a\\\\": 1}"}</tool_call>'
        ... ).calls
        [ToolCall(name='add', arguments={'a': 1}, id=None)]
    """

    name = "hermes"
    expected = '<tool_call>{"name": "<tool name>", "arguments": {<arguments>}}</tool_call>'
    _TAG = re.compile(r"</?tool_call>")
    _OPEN = "<tool_call>"

    def __init__(self, *, accept_unclosed: bool = False, max_calls: int = 32, max_errors: int = 8) -> None:
        super().__init__(max_calls=max_calls, max_errors=max_errors)
        self.accept_unclosed = accept_unclosed

    def parse(self, text: str) -> ParseResult:
        if "tool_call>" not in text:  # no tag, open or closed: nothing to scan (a final answer)
            return ParseResult()
        return super().parse(text)

    def _scan(self, text: str, found: _Findings) -> None:
        body_start: int | None = None  # just after the open tag of the current block
        for tag in self._TAG.finditer(text):
            if tag.group() == self._OPEN:
                if body_start is not None:
                    found.fail(
                        "A <tool_call> block was not closed with </tool_call> before the next one began.",
                        text,
                        body_start - len(self._OPEN),
                        tag.start(),
                    )
                body_start = tag.end()
            elif body_start is not None:  # a stray </tool_call> outside a block is just text
                self._read_block(text, body_start, tag.start(), found)
                body_start = None
        if body_start is None:
            return
        if self.accept_unclosed:
            trial = _Findings(self.expected, 0)
            self._read_block(text, body_start, len(text), trial)
            if trial.calls and not trial.omitted:
                found.calls.extend(trial.calls)
                return
        found.fail(
            "The last <tool_call> block has no closing </tool_call> (was the output cut off?).",
            text,
            body_start - len(self._OPEN),
        )

    def _read_block(self, text: str, start: int, end: int, found: _Findings) -> None:
        body = text[start:end].strip()
        if not body:
            found.fail("Empty <tool_call> block.", "<tool_call></tool_call>")
            return
        try:
            value = _decode_json(body, explain=not found.full)
        except ValueError as exc:
            # Tolerate text around the object, e.g. a ```json fence inside the block.
            spans, unclosed = find_json_object_spans(text, start, end)
            if unclosed is not None:
                found.fail("The JSON inside <tool_call> has an unclosed '{' (was the output cut off?).", body)
                return
            if len(spans) != 1:
                found.fail(f"Invalid JSON inside <tool_call>: {exc}.", body)
                return
            try:
                value = _decode_json(text[spans[0][0] : spans[0][1]], explain=not found.full)
            except ValueError as inner:
                found.fail(f"Invalid JSON inside <tool_call>: {inner}.", body)
                return
        for item in value if isinstance(value, list) and value else [value]:
            call = _call_from_object(item)
            if isinstance(call, ToolCall):
                found.calls.append(call)
            else:
                found.fail(call, body)

    def format_call(self, call: ToolCall) -> str:
        """A ``<tool_call>`` block holding one line of JSON; needs dict arguments.

        Tags inside argument strings are written with JSON escapes (``<\\/``, ``\\u003c``), which
        decode to the same strings, so that they cannot end the block or open another one.
        Non-finite floats have no JSON form (msgspec writes them as null).
        """
        body = _encode_call(call).replace("</", "<\\/").replace(self._OPEN, "\\u003ctool_call>")
        return f"<tool_call>\n{body}\n</tool_call>"

    def instructions(self) -> str:
        example = self.format_call(ToolCall("search", {"query": "red shoes"}))
        return (
            "To call a tool, write a <tool_call> block holding a JSON object with the tool's "
            '"name" and an "arguments" object for its parameters. You may call several tools in one '
            "turn, one block per call; text outside the blocks is not executed. Example:\n"
            f"{example}"
        )


class JSONParser(Parser):
    """Plain JSON function calls anywhere in the turn.

    The turn may hold call objects ``{"name": ..., "arguments": {...}}`` or a JSON list of them,
    bare, inside a ```json fence, or amid prose. The OpenAI shape
    ``{"type": "function", "function": {"name": ..., "arguments": "<json string>"}}`` and
    ``"parameters"`` for ``"arguments"`` are accepted too. A JSON object counts as a call when it
    has ``"function"``, or ``"name"`` with ``"arguments"``/``"parameters"``, or only ``"name"``
    (plus ``"id"``/``"type"``); other JSON (e.g. an answer ``{"result": 4}``) is ignored. Text
    without calls gives an empty result; a brace group that mentions ``"name"`` or
    ``"function"`` but is not valid JSON, or is cut off, gives an error.

    Example:
        >>> JSONParser().parse('Sure:\\n```json\\n{"name": "search", "arguments": {"q": "x"}}\\n```').calls
        [ToolCall(name='search', arguments={'q': 'x'}, id=None)]
    """

    name = "json"
    expected = '{"name": "<tool name>", "arguments": {<arguments>}} (or a JSON list of such objects)'

    def _scan(self, text: str, found: _Findings) -> None:
        spans, unclosed = find_json_object_spans(text)
        for begin, end in spans:
            if not _CALL_KEY.search(text, begin, end):
                continue
            candidate = text[begin:end]
            try:
                value = _decode_json(candidate, explain=not found.full)
            except ValueError as exc:
                found.fail(f"Invalid JSON in tool call: {exc}.", candidate)
                continue
            if not _looks_like_call(value):
                continue
            call = _call_from_object(value)
            if isinstance(call, ToolCall):
                found.calls.append(call)
            else:
                found.fail(call, candidate)
        if unclosed is not None and self._mentions_call(text, unclosed, spans):
            found.fail("A tool call's JSON object is never closed (was the output cut off?).", text, unclosed)

    @staticmethod
    def _mentions_call(text: str, start: int, spans: list[tuple[int, int]]) -> bool:
        """Whether ``text[start:]`` names a call key outside the already-decoded ``spans``."""
        pos = start
        for begin, end in spans:
            if begin < start:  # closed groups lie wholly before or wholly after an unclosed brace
                continue
            if _CALL_KEY.search(text, pos, begin):
                return True
            pos = end
        return _CALL_KEY.search(text, pos) is not None

    def format_call(self, call: ToolCall) -> str:
        """One line of JSON; needs dict arguments. Non-finite floats have no JSON form."""
        return _encode_call(call)

    def instructions(self) -> str:
        example = self.format_call(ToolCall("search", {"query": "red shoes"}))
        return (
            'To call a tool, write a JSON object with the tool\'s "name" and an "arguments" object '
            "for its parameters; to call several tools at once, write a JSON list of such objects. "
            f"Example:\n{example}"
        )


class ReActParser(Parser):
    """ReAct actions: an ``Action: <tool name>`` line, then an ``Action Input: <input>`` line.

    Markers count at the start of a line (case-insensitive). An input runs until the next
    ``Action:``, ``Action Input:``, ``Observation:``, ``Thought:`` or ``Final Answer:`` line. It
    becomes a dict when it is a JSON object (also inside a ``` fence), a str when it is a JSON
    string (quotes removed), and otherwise stays the stripped raw text. An ``Action:`` without an
    input, or with an empty one, is a call without arguments (``{}``). Several pairs per turn are
    allowed. ``Final Answer:`` is not a call: the env reads answers itself. Tool names are taken
    verbatim from the first line after ``Action:``.

    Example:
        >>> ReActParser().parse(
        ...     'Thought: look it up\\nAction: search\\nAction Input: red shoes\\nObservation:'
        ... ).calls
        [ToolCall(name='search', arguments='red shoes', id=None)]
    """

    name = "react"
    expected = 'a line "Action: <tool name>" followed by a line "Action Input: <JSON object or text>"'
    _MARKER = re.compile(
        r"^[ \t]*(action[ \t]+input|action|observation|thought|final[ \t]+answer)[ \t]*:", re.IGNORECASE | re.MULTILINE
    )

    def _scan(self, text: str, found: _Findings) -> None:
        markers = list(self._MARKER.finditer(text))
        pending: str | None = None  # an Action still waiting for its input
        for index, marker in enumerate(markers):
            value_end = markers[index + 1].start() if index + 1 < len(markers) else len(text)
            kind = marker.group(1).lower()
            if kind == "action":
                if pending is not None:
                    found.calls.append(ToolCall(pending))
                pending = text[marker.end() : value_end].strip().partition("\n")[0].strip() or None
                if pending is None:
                    found.fail('"Action:" is not followed by a tool name.', text, marker.start(), value_end)
            elif kind.startswith("action"):
                if pending is None:
                    found.fail('"Action Input:" without an "Action:" line before it.', text, marker.start(), value_end)
                else:
                    found.calls.append(ToolCall(pending, self._read_input(text[marker.end() : value_end].strip())))
                    pending = None
            elif pending is not None:
                found.calls.append(ToolCall(pending))
                pending = None
        if pending is not None:
            found.calls.append(ToolCall(pending))

    @staticmethod
    def _read_input(raw: str) -> dict[str, Any] | str:
        """The arguments an ``Action Input`` (already stripped) stands for."""
        if not raw:
            return {}
        if raw[0] not in '{"`':
            return raw
        inner = raw
        if raw.startswith("```") and raw.endswith("```") and len(raw) >= 6:
            inner = raw[3:-3]
            tag, newline, rest = inner.partition("\n")
            if newline and (not tag.strip() or tag.strip().isidentifier()):  # drop a ```json tag
                inner = rest
        try:
            value = _decode_json(inner)
        except ValueError:
            return raw
        return value if isinstance(value, (dict, str)) else raw

    def format_call(self, call: ToolCall) -> str:
        """``Action:``/``Action Input:`` lines; dict arguments as JSON.

        A str argument is written raw when that reads back unchanged, and as a JSON string
        otherwise (it has a newline, outer whitespace, starts like JSON, or is empty).

        Raises:
            ValueError: The tool name is empty, has a newline, or has outer whitespace.
        """
        if not call.name or call.name != call.name.strip() or "\n" in call.name:
            raise ValueError(f"a ReAct tool name must be one non-empty stripped line, got {call.name!r}")
        arguments = call.arguments
        raw = isinstance(arguments, str) and arguments == arguments.strip() and arguments[:1] not in '{"`'
        rendered = arguments if raw and "\n" not in arguments else _to_json(arguments)
        return f"Action: {call.name}\nAction Input: {rendered}"

    def instructions(self) -> str:
        example = self.format_call(ToolCall("search", {"query": "red shoes"}))
        return (
            'To use a tool, write a line "Action: <tool name>" and then a line "Action Input: <input>", '
            "where the input is a JSON object of the tool's arguments (plain text is fine for a tool "
            "with one text parameter). Then stop and wait for the Observation. Example:\n"
            f"{example}"
        )


class BracketParser(Parser):
    """WebShop-style actions ``name[argument]``, e.g. ``search[red shoes]`` or ``click[Buy Now]``.

    Names match ``[A-Za-z_][A-Za-z0-9_]*``; the argument is the text up to the matching ``]``
    (nested brackets allowed: ``click[size [large]]``), taken verbatim as a str, except that
    ``\\[``, ``\\]`` and ``\\\\`` stand for ``[``, ``]`` and ``\\`` (``format_call`` uses them for
    unbalanced brackets). By default the whole stripped turn must be exactly one action, as in
    WebShop; with ``multiple=True`` every action in the prose is read.

    Args:
        multiple: Read every action in the text instead of requiring the turn to be one action.
        max_calls: Most calls accepted from one turn.
        max_errors: Most errors reported for one turn.

    Example:
        >>> BracketParser().parse("click[size [large]]").calls
        [ToolCall(name='click', arguments='size [large]', id=None)]
        >>> BracketParser(multiple=True).parse("First search[shoes], then click[Buy Now].").calls[1]
        ToolCall(name='click', arguments='Buy Now', id=None)
    """

    name = "bracket"
    expected = "name[argument], e.g. search[red shoes] or click[Buy Now]"
    _IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    # The lookbehind makes a match start only at the beginning of a word, which keeps finditer
    # linear on long words without brackets.
    _ACTION = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*\[")
    _TOKEN = re.compile(r"\\[\\\[\]]|[\[\]]")
    _ESCAPED = re.compile(r"\\([\\\[\]])")
    _SPECIAL = re.compile(r"([\\\[\]])")

    def __init__(self, *, multiple: bool = False, max_calls: int = 32, max_errors: int = 8) -> None:
        super().__init__(max_calls=max_calls, max_errors=max_errors)
        self.multiple = multiple

    def _pairs(self, text: str) -> dict[int, int]:
        """Map each unescaped ``[`` that gets closed to the position of its matching ``]``."""
        pairs: dict[int, int] = {}
        opened: list[int] = []
        for token in self._TOKEN.finditer(text):
            char = token.group()
            if char == "[":
                opened.append(token.start())
            elif char == "]" and opened:
                pairs[opened.pop()] = token.start()
        return pairs

    def _call(self, text: str, name_start: int, open_pos: int, close_pos: int) -> ToolCall:
        argument = text[open_pos + 1 : close_pos]
        if "\\" in argument:
            argument = self._ESCAPED.sub(r"\1", argument)
        return ToolCall(text[name_start:open_pos], argument)

    def _scan(self, text: str, found: _Findings) -> None:
        if self.multiple:
            self._scan_all(text, found)
            return
        turn = text.strip()
        action = self._ACTION.match(turn)
        if action is None:
            found.fail("No action found: the reply must be exactly one action.", turn)
            return
        open_pos = action.end() - 1
        close_pos = self._pairs(turn).get(open_pos)
        if close_pos is None:
            found.fail(f"Unbalanced brackets: the '[' after {turn[:open_pos]!r} is never closed.", turn)
        elif close_pos != len(turn) - 1:
            found.fail("Unexpected text after the action: the reply must be exactly one action.", turn)
        else:
            found.calls.append(self._call(turn, 0, open_pos, close_pos))

    def _scan_all(self, text: str, found: _Findings) -> None:
        pairs = self._pairs(text)
        resume = 0  # actions inside the argument of the previous one are part of that argument
        for action in self._ACTION.finditer(text):
            open_pos = action.end() - 1
            if open_pos < resume:
                continue
            close_pos = pairs.get(open_pos)
            if close_pos is None:
                found.fail("Unbalanced brackets: this '[' is never closed.", text, action.start())
                continue
            found.calls.append(self._call(text, action.start(), open_pos, close_pos))
            resume = close_pos + 1

    def format_call(self, call: ToolCall) -> str:
        """``name[argument]``; brackets are escaped with ``\\`` only when needed to read back.

        Dict arguments are written as their single value (so ``{"query": "shoes"}`` becomes
        ``search[shoes]`` and parses back as the str ``"shoes"``); an empty dict as ``name[]``;
        several entries as their JSON text, which parses back as a str.

        Raises:
            ValueError: The tool name is not an identifier.
        """
        if not self._IDENTIFIER.fullmatch(call.name):
            raise ValueError(f"bracket tool names must match [A-Za-z_][A-Za-z0-9_]*, got {call.name!r}")
        arguments = call.arguments
        if isinstance(arguments, dict):
            if not arguments:
                arguments = ""
            elif len(arguments) == 1:
                (value,) = arguments.values()
                arguments = value if isinstance(value, str) else _to_json(value)
            else:
                arguments = _to_json(arguments)
        if "\\" in arguments or not self._balanced(arguments):
            arguments = self._SPECIAL.sub(r"\\\1", arguments)
        return f"{call.name}[{arguments}]"

    @staticmethod
    def _balanced(argument: str) -> bool:
        depth = 0
        for char in argument:
            if char == "[":
                depth += 1
            elif char == "]":
                depth -= 1
                if depth < 0:
                    return False
        return depth == 0

    def instructions(self) -> str:
        how = (
            "Write each action as" if self.multiple else "Reply with exactly one action, and nothing else, in the form"
        )
        return (
            f"{how} name[argument], for example search[red shoes] or click[Buy Now]. "
            "The argument is plain text; it runs to the matching ']'."
        )


class CommandParser(Parser):
    """The whole turn, stripped, is one command: a call of ``tool`` with it as the ``argument``.

    The plain-command mode of text games, whose original step takes the text as the command: nothing
    in the turn is markup, so any non-empty turn is a call (the game answers a nonsensical one) and
    only an empty turn is an error.

    Args:
        tool: The tool each turn calls.
        argument: The name of its one argument.

    Example:
        >>> parser = CommandParser("act", "command")
        >>> parser.parse("  go to kitchen\\n").calls
        [ToolCall(name='act', arguments={'command': 'go to kitchen'}, id=None)]
        >>> parser.format_call(ToolCall("act", {"command": "open door to kitchen"}))
        'open door to kitchen'
    """

    name = "command"
    expected = "one command and nothing else, e.g. go to kitchen"

    def __init__(self, tool: str, argument: str, *, max_errors: int = 8) -> None:
        super().__init__(max_calls=1, max_errors=max_errors)
        self.tool = tool
        self.argument = argument

    def _scan(self, text: str, found: _Findings) -> None:
        command = text.strip()
        if command:
            found.calls.append(ToolCall(self.tool, {self.argument: command}))
        else:
            found.fail("The reply is empty.", text)

    def format_call(self, call: ToolCall) -> str:
        """The command itself.

        Raises:
            ValueError: a call of another tool, or a command that would not read back (empty, or with
                white space around it).
        """
        arguments = call.arguments
        command = arguments.get(self.argument) if isinstance(arguments, dict) else arguments
        if call.name != self.tool or not isinstance(command, str) or not command or command != command.strip():
            raise ValueError(f"only `{self.tool}` calls with a stripped, non-empty {self.argument!r} are commands")
        return command

    def instructions(self) -> str:
        return "Reply with exactly one command and nothing else."


PARSERS: dict[str, type[Parser]] = {cls.name: cls for cls in (HermesParser, JSONParser, ReActParser, BracketParser)}
"""Parser classes by format name."""


def get_parser(name_or_parser: str | Parser) -> Parser:
    """A parser instance: ``name_or_parser`` itself, or a default-configured parser of that name.

    Raises:
        ValueError: Unknown name (the message lists the known ones).
        TypeError: Neither a name nor a :class:`Parser`.

    Example:
        >>> get_parser("react").name
        'react'
    """
    if isinstance(name_or_parser, Parser):
        return name_or_parser
    if not isinstance(name_or_parser, str):
        raise TypeError(f"expected a parser name or a Parser, got {type(name_or_parser).__name__}")
    try:
        return PARSERS[name_or_parser]()
    except KeyError:
        raise ValueError(f"unknown parser {name_or_parser!r}; known parsers: {', '.join(sorted(PARSERS))}") from None
