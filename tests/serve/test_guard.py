"""The request guard every server shares (agentfly_env.serve.guard): its nesting reader against a parser's
depth, its host and origin rules, and the ASGI layer that hands a route the body it read."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfly_env.serve.guard import GuardRules, RequestGuard, is_loopback, json_too_deep

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=30,
)
# Brackets, quotes and backslashes inside strings: what a naive bracket count gets wrong.
TRICKY_TEXT = st.text(alphabet='[]{}"\\ax', max_size=12)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


def nested(levels: int, leaf: Any) -> Any:
    for level in range(levels):
        leaf = [leaf] if level % 2 else {"k[": leaf}
    return leaf


@settings(max_examples=300, deadline=None)
@given(
    value=JSON | st.builds(nested, st.integers(0, 12), TRICKY_TEXT), limit=st.integers(1, 8), ascii_only=st.booleans()
)
def test_nesting_is_read_as_a_json_parser_reads_it(value, limit, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert json_too_deep(text, limit) == (depth(value) > limit)
    assert json_too_deep(text.encode("utf-8"), limit) == (depth(value) > limit)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200) | st.text(max_size=200), limit=st.integers(1, 5))
def test_any_bytes_are_read_without_an_error(data, limit):
    assert json_too_deep(data, limit) in (True, False)


def test_deep_and_huge_documents_are_read_fast_and_right():
    assert json_too_deep("[" * 100_000 + "]" * 100_000) and not json_too_deep("[" * 64 + "]" * 64)
    assert not json_too_deep(json.dumps(["[" * 100_000]))  # all of it inside one string


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8000", True),
        ("127.1.2.3", True),
        ("localhost", True),
        ("LOCALHOST:1", True),
        ("[::1]:80", True),
        ("", True),  # no Host at all (HTTP/1.0): no browser sends that
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.nip.io:80", False),
        ("0.0.0.0:8000", False),
        ("[::]:80", False),
        ("192.168.1.1", False),
    ],
)
def test_hosts_are_loopback_or_named_on_purpose(host, allowed):
    headers = {"host": host} if host else {}
    assert (GuardRules().refusal(headers) is None) == allowed
    assert GuardRules(allow_remote=True).refusal(headers) is None
    name = host[1 : host.index("]")] if host.startswith("[") else host.partition(":")[0]
    assert GuardRules(allowed_hosts=(name or "x",)).refusal(headers) is None


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://127.0.0.1:8000", True),
        ("https://127.0.0.1:8000", True),  # the same host and port: the server's own page
        ("http://127.0.0.1:8001", False),
        ("http://localhost:8000", False),  # another origin, though the same machine
        ("http://evil.example", False),
        ("null", False),
        ("", False),
    ],
)
def test_origins_are_the_servers_own_or_allowed_on_purpose(origin, allowed):
    headers = {"host": "127.0.0.1:8000", "origin": origin}
    assert (GuardRules().refusal(headers) is None) == allowed
    assert GuardRules(allowed_origins=(origin or "x",)).refusal(headers) is None or origin == ""
    assert GuardRules(allowed_origins=("*",)).refusal(headers) is None


def test_is_loopback():
    assert all(map(is_loopback, ["127.0.0.1", "::1", "[::1]", "localhost", "127.255.0.1"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.0.0.1", "example.com", ""]))


async def call(rules: GuardRules, chunks: list[bytes], headers: dict[str, str]) -> tuple[int, bytes, bytes | None]:
    """One HTTP request through the guard: the status, the body answered, and the body the app read."""
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    seen: list[bytes] = []
    sent: list[dict[str, Any]] = []

    async def app(scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }
    await RequestGuard(app, rules)(scope, receive, send)
    return sent[0]["status"], sent[1]["body"], seen[0] if seen else None


@settings(max_examples=100, deadline=None)
@given(value=JSON, cuts=st.lists(st.integers(0, 400), max_size=4))
def test_the_route_reads_the_body_the_guard_read_in_any_chunks(value, cuts):
    body = json.dumps(value).encode()
    chunks = [body[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(body)], strict=True)]
    rules = GuardRules(max_body_bytes=256, max_json_depth=3)
    status, answer, seen = asyncio.run(call(rules, chunks, {"content-type": "application/json"}))
    expected = 413 if len(body) > 256 else 400 if depth(value) > 3 else 200
    assert status == expected, answer
    assert seen == (body if status == 200 else None)
    if status != 200:
        assert set(json.loads(answer)) == {"detail"}
