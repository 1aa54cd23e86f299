"""What the servers' fuzz lane sends: hypothesis strategies for headers, bodies and JSON of every shape.

The lane (``pytest -m fuzz``: tests/serve/test_serve_fuzz.py, tests/train/test_gateway_fuzz.py,
tests/view/test_view_fuzz.py) plays these against ``agentfly-serve``, the gateway and ``agentfly-view``
on loopback, bounded in examples, and asserts what every server owes a client whatever it sends: no 5xx
for the client's own fault, nothing refused let through (a foreign host or origin, a body that is not
JSON), the server still answering afterwards, nothing of one session seen by another, nothing left open.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: Hosts a request may claim: loopback in its spellings, and names or addresses a rebinding page sends.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "127.0.0.2")
FOREIGN_HOSTS = ("evil.example", "127.0.0.1.nip.io", "10.0.0.1", "[::2]", "0.0.0.0", "localhost.evil.example")
CONTENT_TYPES = (
    "application/json",
    "application/json; charset=utf-8",
    "application/vnd.api+json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "",
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


def nested_text(levels: int) -> str:
    """A JSON array ``levels`` deep."""
    return "[" * levels + "]" * levels


@st.composite
def headers(draw: st.DrawFn, port: int, origin_of_server: str) -> tuple[dict[str, str], bool]:
    """Request headers, and whether a guard must refuse them whatever the body (a foreign host or origin)."""
    chosen: dict[str, str] = {}
    foreign = False
    host = draw(st.sampled_from(("own", "loopback", "foreign", "none")))
    if host == "loopback":
        chosen["Host"] = f"{draw(st.sampled_from(LOOPBACK_HOSTS))}:{port}"
    elif host == "foreign":
        chosen["Host"] = f"{draw(st.sampled_from(FOREIGN_HOSTS))}:{port}"
        foreign = True
    elif host == "own":
        chosen["Host"] = origin_of_server.removeprefix("http://")
    origin = draw(st.sampled_from(("none", "own", "foreign", "null")))
    if origin == "own" and host in ("own", "none"):
        chosen["Origin"] = origin_of_server
    elif origin in ("foreign", "null"):
        chosen["Origin"] = "null" if origin == "null" else f"http://{draw(st.sampled_from(FOREIGN_HOSTS))}"
        foreign = True
    kind = draw(st.sampled_from(CONTENT_TYPES))
    if kind:
        chosen["Content-Type"] = kind
    if draw(st.booleans()):
        chosen[draw(st.sampled_from(("X-Anything", "Accept", "User-Agent")))] = draw(
            st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20)
        )
    return chosen, foreign


def is_json_type(headers: dict[str, str]) -> bool:
    kind = headers.get("Content-Type", "").partition(";")[0].strip()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def bodies(limit: int, shaped: st.SearchStrategy[Any] = JSON) -> st.SearchStrategy[bytes]:
    """Request bodies: JSON of the expected shape or of any, cut-off JSON, bytes, deep nesting, one past the limit."""
    as_json = shaped.map(lambda value: json.dumps(value).encode())
    return st.one_of(
        as_json,
        JSON.map(lambda value: json.dumps(value).encode()),
        as_json.map(lambda body: body[: len(body) // 2]),
        st.binary(max_size=64),
        st.integers(60, 300).map(lambda levels: nested_text(levels).encode()),
        st.just(b""),
        st.integers(1, 64).map(lambda extra: b" " * (limit + extra)),
    )
