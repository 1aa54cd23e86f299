"""``agentfly-env describe`` and ``validate`` on plug-ins (catalog_plugins.py), the manifest record, and the
requirement parsing that says whether an extra is installed.

A plug-in that keeps its manifest's word passes every level; each broken one fails at the level where its
fault shows, for that fault, and the levels after it do not run. The suite's own envs (and ``list``, which
reads every manifest) are checked in tests/envs/test_catalog.py: these tests stay on the core.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfly_env import Manifest, manifest_of
from agentfly_env.extras import Requirement, declared_extras, extra_installed, parse_requirement
from agentfly_env.runners.catalog import main
from agentfly_env.runners.validation import Report, validate

pytest.importorskip("starlette", reason="validate's serve round trip needs the serve extra")

import catalog_plugins  # noqa: E402  (registers the CatalogTest/* ids)


def failures(report: Report) -> dict[str, dict[str, str]]:
    """level -> {check: reason} of the checks that failed."""
    return {
        level.name: {check.name: check.detail for check in level.checks if not check.passed}
        for level in report.levels
        if not level.passed
    }


def test_a_plugin_that_keeps_its_manifests_word_passes_every_level():
    report = validate("CatalogTest/Shout-v0", episodes=2)
    assert report.passed, failures(report)
    assert [(level.name, level.passed, level.skipped) for level in report.levels] == [
        ("static", True, None),
        ("runtime", True, None),
        ("semantic", True, None),
    ]
    semantic = {check.name: check.detail for check in report.levels[2].checks}
    assert semantic["expert"] == "returns 1, 1 on seeds 0-1 (maximum 1)"
    assert semantic["do-nothing"] == "returns 0, 0, below 1"


@pytest.mark.parametrize(
    ("env_id", "level", "check", "reason"),
    [
        (
            "CatalogTest/HalfPay-v0",
            "semantic",
            "expert",
            "the expert's return stays below the maximum 1 on seed 0: 0.5, seed 1: 0.5",
        ),
        ("CatalogTest/NoExpert-v0", "semantic", "expert", "no scripted expert (expert_action())"),
        ("CatalogTest/Unseeded-v0", "runtime", "same seed, same episode", "reset observations differ for seed 1"),
        ("CatalogTest/Unseeded-v0", "runtime", "gymnasium checker", "env.reset(seed=123)` is non-deterministic"),
        (
            "CatalogTest/RaisesOnMalformed-v0",
            "runtime",
            "bad actions are observations",
            "step('') raised ValueError: cannot read ''",
        ),
        ("CatalogTest/WrongTools-v0", "static", "tools", "the manifest lists tools [], the env offers ['shout']"),
        ("CatalogTest/NoManifest-v0", "static", "manifest", "no manifest: register the id with agentfly_env.register"),
        (
            "CatalogTest/Dawdles-v0",
            "semantic",
            "expert",
            "the expert's return stays below the maximum 1 on seed 0: 0 (truncated: max_turns)",
        ),
    ],
)
def test_each_broken_plugin_fails_at_its_level_for_its_fault(env_id, level, check, reason):
    report = validate(env_id, episodes=2)
    failed = failures(report)
    assert not report.passed and next(iter(failed)) == level, failed  # the first level that fails is its own
    assert reason in failed[level][check]
    names = [lvl.name for lvl in report.levels]
    assert all(lvl.skipped == f"not run: the {level} level failed" for lvl in report.levels[names.index(level) + 1 :])


def test_a_manifest_that_misdescribes_its_env_fails_the_static_level_saying_each_fault():
    static = failures(validate("CatalogTest/BadManifest-v0", episodes=1))["static"]
    assert set(static) == {"manifest", "turn budget"}
    assert static["manifest"].split("; ") == [
        "its id is 'CatalogTest/Elsewhere-v0'",
        "empty: family",
        "the description is more than one line",
        "the expert's budget 4 is not above the turn budget 4",
        "the link 'https://pypi.org/project/shout' is a package index, not the project's own page",
        f"agentfly-gym declares no extra 'no-such-extra' (it has {', '.join(declared_extras())})",
    ]
    assert static["turn budget"] == "the manifest says 4 turns, the env has 3"


def test_an_expert_past_the_turn_budget_is_validated_with_the_budget_its_manifest_gives_it():
    """The expert alone plays with ``expert_turns``: do-nothing and random keep the env's own three turns."""
    report = validate("CatalogTest/DawdlesWithItsBudget-v0", episodes=2)
    assert report.passed, failures(report)
    semantic = {check.name: check.detail for check in report.levels[2].checks}
    assert semantic["expert"] == (
        "returns 1, 1 on seeds 0-1 (maximum 1) with the expert's budget of 4 turns (longest 4; the env's 3)"
    )
    assert semantic["do-nothing"] == "returns 0, 0, below 1"


def test_a_reward_below_its_maximum_is_caught_only_where_it_is_paid():
    """HalfPay's runtime is sound (its episodes repeat, serve and pool alike): its fault is semantic alone."""
    report = validate("CatalogTest/HalfPay-v0", episodes=1)
    assert [level.passed for level in report.levels] == [True, True, False]
    assert failures(report) == {"semantic": {"expert": "the expert's return stays below the maximum 1 on seed 0: 0.5"}}


def test_validate_exit_codes_and_json(capsys):
    assert main(["validate", "CatalogTest/Shout-v0", "--import", "catalog_plugins", "--episodes", "1"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "agentfly-env validate CatalogTest/Shout-v0 (1 episode per policy)"
    assert "  pass  serve round trip " in text and text.splitlines()[-1].startswith("PASS: every level passes")

    assert main(["validate", "CatalogTest/HalfPay-v0", "--episodes", "1", "--json"]) == 1
    report = msgspec.json.decode(capsys.readouterr().out, type=Report)
    assert report.env_id == "CatalogTest/HalfPay-v0" and not report.passed
    assert report.levels[2].checks[0].detail == "the expert's return stays below the maximum 1 on seed 0: 0.5"


def test_the_console_script_imports_a_module_of_the_working_directory(tmp_path):
    """``agentfly-env validate ID --import my_envs`` in a user's project folder finds ``my_envs.py`` there, as
    ``python -m`` would (a console script's path does not hold the working directory)."""
    plugins = Path(catalog_plugins.__file__).parent
    (tmp_path / "my_envs.py").write_text(f"import sys\nsys.path.insert(0, {str(plugins)!r})\nimport catalog_plugins\n")
    script = Path(sys.executable).with_name("agentfly-env")
    argv = [str(script), "validate", "CatalogTest/Shout-v0", "--import", "my_envs", "--episodes", "1"]
    ran = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:] + ran.stdout[-2000:]
    assert ran.stdout.splitlines()[-1].startswith("PASS: every level passes")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["lists"],
        ["validate"],
        ["validate", "CatalogTest/No-such-v0"],
        ["validate", "CatalogTest/Shout-v0", "--import", "no_such_module_anywhere"],
        ["describe", "CatalogTest/Shout-v0", "--episodes", "2"],
        ["list", "--import", "catalog_plugins"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "usage: agentfly-env" in capsys.readouterr().err


def _positive_int(text: str) -> bool:
    try:
        return int(text) >= 1
    except ValueError:
        return False


@given(st.text().filter(lambda text: not _positive_int(text)))
def test_episodes_must_be_a_positive_integer(text):
    with pytest.raises(SystemExit) as exit_:
        main(["validate", "CatalogTest/Shout-v0", "--episodes", text])
    assert exit_.value.code == 2


def test_describe_prints_the_manifest_and_an_expert_episode(capsys):
    assert main(["describe", "CatalogTest/Shout-v0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "CatalogTest/Shout-v0: Shout the word you are given."
    assert "  tools        shout(word: string)" in lines
    assert "  benchmark    none: an env of its own" in lines
    assert "  extra        none" in lines
    assert "Example episode (expert, seed 0):" in lines
    assert lines[-1] == "  return 1, solved, 2 turns, terminated"

    assert main(["describe", "CatalogTest/Shout-v0", "--json", "--seed", "3"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert msgspec.convert(described["manifest"], Manifest) == catalog_plugins.MANIFEST
    example = described["example"]
    answer = gym.make("CatalogTest/Shout-v0").reset(seed=3)[1]["task"]["answer"]
    assert (example["policy"], example["seed"], example["task"]["answer"]) == ("expert", 3, answer)
    assert example["steps"][-1]["action"] == f"<answer>{answer}</answer>" and example["steps"][-1]["reward"] == 1.0


def test_describe_without_a_manifest_or_an_expert(capsys):
    assert main(["describe", "CatalogTest/NoManifest-v0"]) == 1
    assert capsys.readouterr().out.strip() == "CatalogTest/NoManifest-v0: no manifest registered"
    assert main(["describe", "CatalogTest/NoExpert-v0"]) == 0
    assert "Example episode (random (no expert), seed 0):" in capsys.readouterr().out


def test_manifests_are_registered_with_their_id_and_load_lazily():
    assert manifest_of("CatalogTest/HalfPay-v0").id == "CatalogTest/HalfPay-v0"
    assert manifest_of("CatalogTest/NoManifest-v0") is None


def test_a_manifest_named_by_module_and_attribute_loads_when_asked_for(monkeypatch):
    from agentfly_env import registration

    monkeypatch.setitem(registration.MANIFESTS, "CatalogTest/Lazy-v0", "catalog_plugins:MANIFEST")
    assert manifest_of("CatalogTest/Lazy-v0") is catalog_plugins.MANIFEST
    monkeypatch.setitem(registration.MANIFESTS, "CatalogTest/Lazy-v0", "catalog_plugins:TASKS")
    with pytest.raises(TypeError, match="is a ListTasks, not a Manifest"):
        manifest_of("CatalogTest/Lazy-v0")


_NAME = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,20}[A-Za-z0-9])?", fullmatch=True)
_EXTRA = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)


@given(
    name=_NAME,
    extras=st.lists(_EXTRA, max_size=3),
    version=st.sampled_from(["", "==1.0", ">=1.2,<3", " (>=2)", " @ https://example.org/x.whl"]),
    extra=st.none() | _EXTRA,
    quote=st.sampled_from(['"', "'"]),
    other=st.sampled_from(["", 'python_version >= "3.11" and ', 'sys_platform == "linux" and ']),
)
def test_requirement_lines_are_read_back(name, extras, version, extra, quote, other):
    line = name + (f"[{','.join(extras)}]" if extras else "") + version
    if extra is not None:
        line += f"; {other}extra == {quote}{extra}{quote}"
    elif other:
        line += f"; {other.removesuffix(' and ')}"
    assert parse_requirement(line) == Requirement(name, tuple(extras), extra)


def test_an_extra_is_installed_when_everything_it_names_is():
    assert extra_installed("serve") is True  # starlette is importable here (see the skip above)
    assert extra_installed("no-such-extra") is None
    assert extra_installed("serve", distribution="no-such-distribution-anywhere") is None
