"""@tool: schemas from type hints and docstrings, argument validation, failures as observations."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
from typing import Literal

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfly_env.core.text import truncate_text
from agentfly_env.tools.cache import MemoryCache
from agentfly_env.tools.tool import Tool, parse_docstring, tool


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@dataclasses.dataclass
class Point:
    """A point on the map."""

    x: float
    y: float = 0.0


class Filter(msgspec.Struct):
    field: str
    values: list[str] = []


def properties(t: Tool) -> dict:
    return t.schema["function"]["parameters"]["properties"]


def test_schema_has_openai_function_shape_and_docstring_descriptions():
    @tool
    def search(query: str, top_k: int = 5) -> str:
        """Search the index.

        Longer explanation that is not the summary.

        Args:
            query: Keywords to look for.
            top_k: How many results
                to return.

        Returns:
            The results.
        """
        return query

    schema = search.schema
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "search"
    assert schema["function"]["description"] == "Search the index. Longer explanation that is not the summary."
    params = schema["function"]["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {"type": "string", "description": "Keywords to look for."}
    assert params["properties"]["top_k"]["description"] == "How many results to return."
    assert params["properties"]["top_k"]["default"] == 5
    assert params["additionalProperties"] is False


def test_schema_for_optional_literal_enum_list_and_nested_types():
    @tool
    def plan(
        unit: Unit,
        mode: Literal["fast", "exact"],
        limit: int | None,
        points: list[Point],
        filters: list[Filter] | None = None,
    ) -> str:
        """Plan a route."""
        return "ok"

    props = properties(plan)
    assert props["unit"] == {"enum": ["celsius", "fahrenheit"]}
    assert sorted(props["mode"]["enum"]) == ["exact", "fast"] and list(props["mode"]) == ["enum"]
    assert props["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    point = props["points"]["items"]
    assert point["type"] == "object" and point["required"] == ["x"]
    assert point["properties"]["x"] == {"type": "number"}
    assert point["description"] == "A point on the map."
    nested = props["filters"]["anyOf"][0]["items"]
    assert nested["properties"]["values"] == {"type": "array", "items": {"type": "string"}, "default": []}
    assert "$ref" not in repr(plan.schema) and "$defs" not in repr(plan.schema)
    assert plan.schema["function"]["parameters"]["required"] == ["unit", "mode", "limit", "points"]


def test_injected_parameters_are_not_in_the_schema():
    @tool
    def look(direction: str, env=None, task=None) -> str:
        """Look somewhere."""
        return f"{direction} {task['id']}"

    assert list(properties(look)) == ["direction"]
    result = asyncio.run(look.call({"direction": "north"}, injected={"task": {"id": "t1"}}))
    assert result.output == "north t1"


async def test_arguments_are_validated_with_a_message_for_the_model():
    @tool
    def plan(unit: Unit, points: list[Point]) -> str:
        """Plan."""
        return f"{unit.value} {points[0].x}"

    ok = await plan.call({"unit": "celsius", "points": [{"x": 1.5}]})
    assert ok.error is None and ok.output == "celsius 1.5"
    wrong_type = await plan.call({"unit": "celsius", "points": [{"x": "far"}]})
    assert wrong_type.error == "invalid_arguments"
    assert "`plan`" in wrong_type.output and "$.points[0].x" in wrong_type.output
    bad_enum = await plan.call({"unit": "kelvin", "points": []})
    assert bad_enum.error == "invalid_arguments" and "kelvin" in bad_enum.output
    missing = await plan.call({"unit": "celsius"})
    assert "missing required field" in missing.output and "required: unit, points" in missing.output
    extra = await plan.call({"unit": "celsius", "points": [], "speed": 3})
    assert "unknown field `speed`" in extra.output
    not_object = await plan.call("celsius")
    assert not_object.error == "invalid_arguments" and "JSON object" in not_object.output


async def test_bare_string_binds_to_the_only_required_parameter():
    @tool
    def search(keywords: str, page: int = 1) -> str:
        """Search."""
        return f"{keywords}@{page}"

    assert (await search.call("red shoes")).output == "red shoes@1"


async def test_strict_false_coerces_strings_to_numbers():
    @tool(strict=False)
    def square(x: int) -> int:
        """Square."""
        return x * x

    assert (await square.call({"x": "7"})).output == "49"


async def test_a_tool_that_raises_becomes_an_observation():
    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise KeyError("missing thing")

    result = await broken.call({"x": 1}, call_id="c1")
    assert result.error == "tool_error" and result.call_id == "c1"
    assert result.output == "Error: `broken` failed: KeyError: 'missing thing'"


async def test_hanging_tools_time_out_async_and_blocking():
    @tool(timeout_s=0.05)
    async def sleepy() -> str:
        """Sleeps."""
        await asyncio.sleep(10)
        return "never"

    released = threading.Event()

    @tool(timeout_s=0.05, blocking=True)
    def stuck() -> str:
        """Blocks its thread until the test ends."""
        released.wait(timeout=30)
        return "late"

    try:  # the calls come back while `stuck` still blocks its thread: they did not wait for it
        results = await asyncio.gather(sleepy.call({}), stuck.call({}))
    finally:
        released.set()
    assert [r.error for r in results] == ["timeout", "timeout"]
    assert "timed out after 0.05 s" in results[0].output


async def test_blocking_tools_do_not_block_the_event_loop():
    loop_ran = threading.Event()

    @tool(blocking=True)
    def slow() -> str:
        """Slow sync work: done once the event loop has run meanwhile (on the loop's thread, never)."""
        return "done" if loop_ran.wait(timeout=10) else "the loop was blocked"

    async def ticker():
        await asyncio.sleep(0)
        loop_ran.set()

    task = asyncio.create_task(ticker())
    assert (await slow.call({})).output == "done"
    task.cancel()


async def test_huge_output_is_truncated_with_a_marker():
    @tool(max_output_chars=1000)
    def flood() -> str:
        """Too much."""
        return "x" * 1_000_000

    result = await flood.call({})
    assert len(result.output) <= 1000
    assert result.output.endswith("[truncated: 1000000 characters total]")


async def test_non_string_results_are_json_encoded():
    @tool
    def data() -> dict:
        """Structured output."""
        return {"a": [1, 2], "b": None}

    assert (await data.call({})).output == '{"a":[1,2],"b":null}'


async def test_a_cached_tool_looks_up_only_valid_arguments():
    runs = []

    @tool(cache=True)
    def lookup(query: str) -> str:
        """Look up."""
        runs.append(query)
        if query == "boom":
            raise RuntimeError("backend down")
        return query.upper()

    cache = MemoryCache()
    for bad in ({"q": "x"}, {"query": 3}, {}, ["x"]):
        assert (await lookup.call(bad, cache=cache)).error == "invalid_arguments"
    assert (cache.stats().hits, cache.stats().misses, runs) == (0, 0, [])  # no lookup, no run
    first = await lookup.call({"query": "x"}, cache=cache)
    again = await lookup.call("x", cache=cache)  # a bare string: the same validated arguments
    assert (first.output, first.cached, again.output, again.cached) == ("X", False, "X", True)
    failed = await lookup.call({"query": "boom"}, cache=cache)
    assert failed.error == "tool_error" and (await lookup.call({"query": "boom"}, cache=cache)).error == "tool_error"
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.sets, runs) == (1, 3, 1, ["x", "boom", "boom"])  # failures not stored
    uncached = tool(lambda query: query)  # a tool not declared cache=True ignores the cache
    assert not (await uncached.call({"query": "x"}, cache=cache)).cached and cache.stats().misses == 3


def test_decorated_functions_stay_callable():
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert add(2, 3) == 5


def test_programming_errors_are_raised_at_decoration():
    with pytest.raises(ValueError, match="no `resource` parameter"):
        tool(resource="sandbox")(lambda code: code)
    with pytest.raises(ValueError, match="cannot be cached"):

        @tool(resource="sandbox", cache=True)
        def run(code: str, resource=None) -> str:
            return code

    with pytest.raises(TypeError, match=r"\*args"):

        @tool
        def variadic(*args: int) -> int:
            return 0


def test_parse_docstring_stops_at_the_next_section():
    summary, params = parse_docstring(
        """Summary line.

        Args:
            a (int): First.
            b: Second,
                continued.

        Raises:
            ValueError: not a parameter.
        """
    )
    assert summary == "Summary line."
    assert params == {"a": "First.", "b": "Second, continued."}


@settings(max_examples=200)
@given(st.text(max_size=3000), st.integers(min_value=40, max_value=2000))
def test_truncate_text_never_exceeds_the_bound(text, bound):
    out = truncate_text(text, bound)
    assert len(out) <= bound
    if len(text) <= bound:
        assert out == text
    else:
        assert out.endswith(f"[truncated: {len(text)} characters total]")
