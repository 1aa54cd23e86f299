"""The fuzz lane against ``agentfly-view``: random paths, query strings and headers against a run whose
folder also holds links to a secret outside it (a linked folder, a linked token file, a linked metrics file).

Asserted whatever is asked: no 5xx, no 2xx for a foreign host or origin, and the secret never served.
"""

from __future__ import annotations

import json
import os

import pytest
from fuzzing import headers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from agentfly_view.app import create_app
from agentfly_view.runs import RunDir
from agentfly_view.synthetic import write_synthetic_run

pytestmark = pytest.mark.fuzz

SECRET = b"SECRET-OUTSIDE-THE-RUN"
SERVER = "http://127.0.0.1:8600"
PARAMETERS = (
    "run",
    "runs",
    "source",
    "index",
    "offset",
    "limit",
    "success",
    "env",
    "outcome",
    "step",
    "q",
    "min_reward",
    "max_reward",
)
VALUES = st.sampled_from(
    ("0", "1", "-1", ".", "..", "../outside", "/etc", "linked", "eval", "1e309", "nan", "", "0,1", "%2e%2e")
) | st.text(max_size=8)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("view-fuzz")
    run = write_synthetic_run(root / "run", episodes=32, per_step=8)
    outside = root / "outside"
    write_synthetic_run(outside, episodes=4, per_step=4)
    (outside / "trajectories.jsonl").write_bytes(
        (outside / "trajectories.jsonl").read_bytes().replace(b"AgentFly/", SECRET)
    )
    secret = SECRET.decode()
    records = [json.loads(line) for line in (run / "tokens.jsonl").read_text().splitlines()]
    tokens = [{**record, "pieces": [secret] * len(record["token_ids"])} for record in records]
    (outside / "tokens.jsonl").write_text("".join(json.dumps(record) + "\n" for record in tokens))
    (outside / "metrics.jsonl").write_text(json.dumps({"step": 1, secret: 1.0}) + "\n")
    os.symlink(outside, run / "linked")
    os.mkdir(run / "eval")
    (run / "eval" / "trajectories.jsonl").write_bytes((run / "trajectories.jsonl").read_bytes())
    for name in ("tokens.jsonl", "metrics.jsonl"):  # the run's own, swapped for links to the secret ones
        (run / name).unlink()
        os.symlink(outside / name, run / name)
    os.symlink(outside / "tokens.jsonl", run / "eval" / "tokens.jsonl")
    return TestClient(create_app([RunDir(run)]), base_url=SERVER)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=st.data())
def test_random_requests_get_no_5xx_and_nothing_outside_the_run(client, data):
    chosen, foreign = data.draw(headers(8600, SERVER))
    path = data.draw(
        st.sampled_from(
            (
                "/",
                "/api/runs",
                "/api/curves",
                "/api/episodes",
                "/api/episode",
                "/api/episode?index=0",
                "/api/episode?source=eval&index=1",
                "/static/app.js",
                "/static/..%2f..%2fruns.py",
                "/linked/trajectories.jsonl",
            )
        )
        | st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=16).map(
            lambda text: "/" + text.lstrip("/")
        )  # "//x" would be a host to the client
    )
    query = data.draw(st.dictionaries(st.sampled_from(PARAMETERS), VALUES, max_size=4))
    response = client.get(path, params=query, headers=chosen)
    assert response.status_code < 500, (path, query, chosen, response.text[:300])
    assert SECRET not in response.content, (path, query)
    if foreign:
        assert response.status_code == 403, (path, query, chosen)
