"""``@tool``: plain Python functions as tools with an OpenAI function schema and validated arguments.

The schema comes from the type hints and the Google-style docstring (``Args:`` section). Supported
parameter types are whatever msgspec understands: ``str``, numbers, ``bool``, ``list[...]``,
``Optional[...]``, ``Literal[...]``, enums, nested dataclasses, msgspec Structs and TypedDicts.

Four parameter names are reserved and injected by the env rather than given by the model:
``env`` (the env instance), ``task`` (the current task dict), ``resource`` (an instance leased from
the pool named by ``@tool(resource=...)`` for the whole episode) and ``turn`` (the turn's
:class:`~agentfly_env.tools.turn.TurnReport`, to end the episode, cut it short or count an error).

Example:
    >>> @tool
    ... def add(a: int, b: int = 1) -> int:
    ...     '''Add two integers.
    ...
    ...     Args:
    ...         a: The first addend.
    ...         b: The second addend.
    ...     '''
    ...     return a + b
    >>> add.schema["function"]["parameters"]["required"]
    ['a']
    >>> import asyncio
    >>> asyncio.run(add.call({"a": 2, "b": 3})).output
    '5'
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import msgspec

from agentfly_env.core.aio import call_function
from agentfly_env.core.text import truncate_text
from agentfly_env.core.types import ToolResult
from agentfly_env.resources.pool import ResourceBrokenError
from agentfly_env.tools.cache import Cache, cache_key

#: Parameter names the env fills in; they never appear in the schema.
INJECTED_PARAMETERS = frozenset({"env", "task", "resource", "turn"})

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_SECTION_HEADER = re.compile(r"^\s*[A-Z][A-Za-z ]*:\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and the descriptions under ``Args:``.

    Example:
        >>> parse_docstring('''Look up a word.
        ...
        ... Args:
        ...     word: The word to look up.
        ...         Case does not matter.
        ... ''')
        ('Look up a word.', {'word': 'The word to look up. Case does not matter.'})
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    index = 0
    while index < len(lines) and not _ARGS_HEADER.match(lines[index]):
        if _SECTION_HEADER.match(lines[index]):
            break
        summary.append(lines[index])
        index += 1
    current: str | None = None
    params_indent = 0
    if index < len(lines) and _ARGS_HEADER.match(lines[index]):
        for line in lines[index + 1 :]:
            if line.strip() and not line.startswith((" ", "\t")):
                break  # the next section starts at column 0
            match = _ARG_LINE.match(line)
            indent = len(line) - len(line.lstrip())
            if match and (current is None or indent <= params_indent):
                current = match.group(1).lstrip("*")
                params_indent = indent
                params[current] = match.group(2).strip()
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return " ".join(part.strip() for part in summary if part.strip()), params


def _inline_refs(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """Replace ``$ref`` pointers by their definitions: chat templates and small models read flat schemas."""
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in seen:  # a recursive type: keep the reference rather than loop forever
                return {"type": "object"}
            resolved = _inline_refs(defs[name], defs, seen + (name,))
            extra = {key: value for key, value in node.items() if key != "$ref"}
            return {**resolved, **extra}
        return {key: _inline_refs(value, defs, seen) for key, value in node.items() if key != "title"}
    if isinstance(node, list):
        return [_inline_refs(item, defs, seen) for item in node]
    return node


def _stringify(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return str(value)


class Tool:
    """A callable tool: the wrapped function, its schema, and how the env should run it.

    Build one with :func:`tool` rather than directly.

    Attributes:
        name: The name the model calls the tool by.
        description: The summary line of the docstring.
        schema: The OpenAI function schema: ``{"type": "function", "function": {...}}``.
        parameters: The JSON schema of the model-given arguments.
        The other attributes are the arguments below, as given.

    Args:
        function: The sync or async function to wrap.
        name: Overrides the function's name.
        description: Overrides the docstring summary.
        timeout_s: Per-call wall-clock limit (None for none). A sync function only honours it with
            ``blocking=True``: an inline call cannot be interrupted.
        blocking: Run a sync function in a worker thread.
        resource: Pool name; a resource leased from it for the episode is passed as ``resource``.
        cache: Cache results by tool name and arguments in the env's cache.
        strict: Reject arguments of the wrong type instead of coercing (``"3"`` for an int).
        max_output_chars: Output longer than this is truncated with a marker.
        examples: Plausible argument dicts, used by the action space's ``sample()``.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = 30.0,
        blocking: bool = False,
        resource: str | None = None,
        cache: bool = False,
        strict: bool = True,
        max_output_chars: int | None = 16_384,
        examples: list[dict[str, Any]] | None = None,
    ) -> None:
        if cache and resource is not None:
            raise ValueError(f"tool {name or function.__name__!r}: a stateful tool (resource=) cannot be cached")
        self.function = function
        self.name = name or function.__name__
        self.timeout_s = timeout_s
        self.blocking = blocking
        self.resource = resource
        self.cache = cache
        self.strict = strict
        self.max_output_chars = max_output_chars
        self.examples = list(examples or [])

        summary, arg_docs = parse_docstring(function.__doc__)
        self.description = description or summary or self.name
        hints = typing.get_type_hints(function, include_extras=True)
        signature = inspect.signature(function)
        self.injected = [p for p in signature.parameters if p in INJECTED_PARAMETERS]
        if resource is not None and "resource" not in self.injected:
            raise ValueError(f"tool {self.name!r} declares resource={resource!r} but has no `resource` parameter")
        if cache and "turn" in self.injected:
            raise ValueError(
                f"tool {self.name!r} reports to its turn, so it cannot be cached (a cache hit would not run it)"
            )
        fields: list[tuple[Any, ...]] = []
        for parameter in signature.parameters.values():
            if parameter.name in INJECTED_PARAMETERS:
                continue
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args/**kwargs cannot be described to a model")
            annotation = hints.get(parameter.name, Any)
            if parameter.name in arg_docs:
                annotation = Annotated[annotation, msgspec.Meta(description=arg_docs[parameter.name])]
            if parameter.default is parameter.empty:
                fields.append((parameter.name, annotation))
            else:
                fields.append((parameter.name, annotation, parameter.default))
        # The arguments become a Struct: msgspec then validates them and writes the JSON schema.
        self.arguments_type = msgspec.defstruct(
            f"{self.name}_arguments", fields, forbid_unknown_fields=True, kw_only=True
        )
        self.parameter_names = [field[0] for field in fields]
        self.required = [field[0] for field in fields if len(field) == 2]
        raw = msgspec.json.schema(self.arguments_type)
        self.parameters: dict[str, Any] = _inline_refs(raw, raw.get("$defs", {}))
        self.parameters.pop("$defs", None)
        self.schema: dict[str, Any] = {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly (no validation), so decorated functions stay usable."""
        return self.function(*args, **kwargs)

    def bind_arguments(self, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """Validate model-given arguments and return them as keyword arguments.

        A bare string (ReAct or bracket formats) binds to the tool's only parameter, or to its only
        required one.

        Raises:
            ValueError: with a message written for the model.
        """
        if isinstance(arguments, str):
            # A bare string fills the only parameter, or else the only required one.
            targets = self.parameter_names if len(self.parameter_names) == 1 else self.required
            if len(targets) != 1:
                expected = ", ".join(self.parameter_names) or "no arguments"
                raise ValueError(
                    f"tool `{self.name}` takes {expected}; pass the arguments as a JSON object, not a bare string"
                )
            arguments = {targets[0]: arguments}
        if not isinstance(arguments, Mapping):
            raise ValueError(f"arguments of `{self.name}` must be a JSON object")
        try:
            converted = msgspec.convert(arguments, self.arguments_type, strict=self.strict)
        except msgspec.ValidationError as error:
            message = str(error)
            if "missing required field" in message:
                message += f" (required: {', '.join(self.required)})"
            raise ValueError(f"invalid arguments for `{self.name}`: {message}") from None
        return {name: getattr(converted, name) for name in self.parameter_names}

    async def call(
        self,
        arguments: Mapping[str, Any] | str,
        *,
        call_id: str | None = None,
        injected: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        cache: Cache | None = None,
    ) -> ToolResult:
        """Run the tool and describe the outcome; never raises for bad arguments or tool failures.

        Args:
            arguments: What the model passed.
            call_id: The id of the call, copied into the result.
            injected: Values for the reserved parameters (``env``, ``task``, ``resource``, ``turn``).
            timeout_s: Overrides the tool's own timeout.
            cache: For a tool declared ``cache=True``: where its results are looked up and stored, keyed
                by the tool's name and its validated arguments (so ``"x"`` and ``{"query": "x"}`` share an
                entry). Arguments that do not validate are not looked up: they count as neither a hit
                nor a miss. Only successful results are stored.

        Example:
            >>> from agentfly_env.tools.cache import MemoryCache
            >>> @tool(cache=True)
            ... def square(x: int) -> int:
            ...     return x * x
            >>> async def three_calls(cache):
            ...     return [(await square.call(arguments, cache=cache)).cached for arguments in ({"x": 3}, {"x": 3}, {"y": 3})]
            >>> cache = MemoryCache()
            >>> asyncio.run(three_calls(cache)), (cache.stats().hits, cache.stats().misses)
            ([False, True, False], (1, 1))
        """
        timeout = self.timeout_s if timeout_s is None else timeout_s
        try:
            kwargs = self.bind_arguments(arguments)
        except ValueError as error:
            return ToolResult(self.name, str(error), "invalid_arguments", call_id)
        cache = cache if self.cache else None  # a tool not declared cache=True is never cached
        key = cache_key(f"tool:{self.name}", kwargs) if cache is not None else ""
        if cache is not None and (hit := await cache.get(key)) is not None:
            return ToolResult(self.name, hit.decode(), None, call_id, cached=True)
        if self.injected:
            injected = injected or {}
            for parameter in self.injected:
                kwargs[parameter] = injected.get(parameter)
        try:
            async with asyncio.timeout(timeout):
                value = await call_function(self.function, kwargs, blocking=self.blocking)
        except TimeoutError:
            return ToolResult(
                self.name,
                f"Error: `{self.name}` timed out after {timeout:g} s and was stopped.",
                "timeout",
                call_id,
            )
        except ResourceBrokenError as error:
            return ToolResult(self.name, f"Error: `{self.name}` failed: {error}.", "resource_broken", call_id)
        except Exception as error:  # the model sees what went wrong, the episode goes on
            return ToolResult(
                self.name,
                f"Error: `{self.name}` failed: {type(error).__name__}: {error}",
                "tool_error",
                call_id,
            )
        output = truncate_text(_stringify(value), self.max_output_chars)
        if cache is not None:
            await cache.set(key, output.encode())
        return ToolResult(self.name, output, None, call_id)


def tool(function: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Turn a sync or async function into a :class:`Tool`; usable bare (``@tool``) or with options
    (``@tool(timeout_s=5, cache=True)``), which are :class:`Tool`'s keyword arguments."""
    if function is not None:
        return Tool(function, **options)
    return functools.partial(Tool, **options)
