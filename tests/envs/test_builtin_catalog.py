"""``agentfly-env`` on the suite's own envs: every manifest holds (``validate`` on every registered id), and ``list``
and ``describe`` say what the manifests say.

Parametrized over the registry, so an env that registers itself is validated without touching this file. One
episode per policy keeps it short; the envs with heavy backends (ScienceWorld's JVMs, ALFWorld's engines) take
most of the time, in Gymnasium's checker (several resets) and the seeded-determinism rollout.
"""

from __future__ import annotations

import json

import msgspec
import pytest

import agentfly_env
from agentfly_env import Manifest, manifest_of, registration
from agentfly_env.runners.catalog import CatalogEntry, catalog, main
from agentfly_env.runners.validation import validate
from agentfly_envs import ENVS

pytest.importorskip("starlette", reason="validate's serve round trip needs the serve extra")


def failures(report) -> dict[str, dict[str, str]]:
    return {
        level.name: {check.name: check.detail for check in level.checks if not check.passed}
        for level in report.levels
        if not level.passed
    }


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_validate_passes_on_every_env_of_the_suite(env_id):
    report = validate(env_id, episodes=1)
    assert report.passed, failures(report)
    assert [check.name for level in report.levels for check in level.checks if check.passed] == [
        "manifest",
        "env and spaces",
        "tools",
        "turn budget",
        "expert declared",
        "gymnasium checker",
        "same seed, same episode",
        "sync equals async",
        "serve round trip",
        "pool lends and takes back",
        "bad actions are observations",
        "expert",
        "do-nothing",
        "random",
        "returns in range",
    ]


def test_the_mixture_has_no_manifest_of_its_own():
    """Mix-v0 is its components (their manifests apply): it is listed, and validate says why it cannot pass."""
    report = validate("AgentFly/Mix-v0", episodes=1)
    static = failures(report)["static"]
    assert static["manifest"].startswith("no manifest")
    assert static["env and spaces"].startswith("it cannot be made from its registration alone (it needs arguments)")
    assert [level.skipped for level in report.levels[1:]] == ["not run: the static level failed"] * 2


def test_every_env_of_the_suite_has_a_manifest_under_its_id():
    for env_id in ENVS:
        manifest = manifest_of(env_id)
        assert manifest.id == env_id and manifest.extra is not None and manifest.expert is not None
        assert msgspec.convert(msgspec.to_builtins(manifest), Manifest) == manifest


def test_list_shows_every_registered_env_one_line_each(capsys):
    assert main(["list"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert set(agentfly_env.registered_ids()) <= set(lines)
    words = lines["AgentFly/Math-v0"].split()
    assert words[1:] == ["math", "calculator", "reward", "0..1", "extra", "math", "(installed)"]
    assert "act, look, inventory, valid_actions" in lines["AgentFly/ScienceWorld-v0"]
    assert "reward -1..1" in lines["AgentFly/ScienceWorld-v0"]
    assert lines["AgentFly/Mix-v0"].split(None, 1)[1] == "(no manifest registered)"


def test_list_json_says_what_each_manifest_says(capsys):
    assert main(["list", "--json"]) == 0
    entries = {entry.id: entry for entry in msgspec.json.decode(capsys.readouterr().out, type=list[CatalogEntry])}
    assert entries == {entry.id: entry for entry in catalog()}
    for env_id in ENVS:
        manifest, entry = manifest_of(env_id), entries[env_id]
        assert (entry.family, entry.tools, entry.reward_range, entry.extra, entry.installed) == (
            manifest.family,
            manifest.tool_names,
            manifest.reward.range,
            manifest.extra,
            True,  # the dev install has every env's extra
        )
    assert entries["AgentFly/Mix-v0"] == CatalogEntry(
        id="AgentFly/Mix-v0", manifest=False, problem="no manifest registered"
    )


def test_list_says_which_extra_an_env_needs_when_it_is_missing(tmp_path, monkeypatch, capsys):
    (tmp_path / "needs_an_extra.py").write_text(
        "from agentfly_env.extras import requires_extra\n"
        "with requires_extra('engine', 'no_such_engine_module', feature='CatalogTest/NeedsExtra-v0'):\n"
        "    import no_such_engine_module\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registration.MANIFESTS, "CatalogTest/NeedsExtra-v0", "needs_an_extra:MANIFEST")
    entry = next(entry for entry in catalog() if entry.id == "CatalogTest/NeedsExtra-v0")
    problem = "CatalogTest/NeedsExtra-v0 needs the 'engine' extra (no_such_engine_module is not installed): pip install 'agentfly-gym[engine]'"
    assert entry == CatalogEntry(id=entry.id, manifest=False, extra="engine", installed=False, problem=problem)
    assert main(["list"]) == 0
    # The id column is as wide as the longest registered id (other tests may have registered more).
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("CatalogTest/NeedsExtra-v0 ")]
    assert line.split(maxsplit=1) == ["CatalogTest/NeedsExtra-v0", f"({problem})"]


def test_describe_math_shows_its_manifest_and_an_expert_episode(capsys):
    assert main(["describe", "AgentFly/Math-v0"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("AgentFly/Math-v0: Reasoning problems from reasoning-gym's generators")
    assert "  tools        calculator(expression: string)\n" in text
    assert "  extra        math (installed): pip install 'agentfly-gym[math]'\n" in text
    assert (
        '\nTool schemas:\n  {"name": "calculator", "description": "Evaluate an arithmetic expression exactly. ' in text
    )
    assert text.rstrip().endswith("return 1, solved, 2 turns, terminated")

    assert main(["describe", "AgentFly/Math-v0", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert msgspec.convert(described["manifest"], Manifest) == manifest_of("AgentFly/Math-v0")
    assert described["installed"] is True and described["problem"] is None
    steps = described["example"]["steps"]
    assert steps[0]["tool_calls"][0]["name"] == "calculator" and steps[-1]["reward"] == 1.0
