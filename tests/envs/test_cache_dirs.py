"""One variable, $AGENTFLY_CACHE_DIR, moves everything the envs build once and reuse (and the trainer's
converted models); each env's own variable still moves its folder alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfly_env.resources.cache_dir import cache_dir
from agentfly_envs.alfworld.games import GeneratedGames
from agentfly_envs.search import SearchEnv
from agentfly_envs.webshop import WebShopEnv
from agentfly_train.models import model_cache_dir

OWN_VARIABLES = {
    "search": "AGENTFLY_SEARCH_INDEX_DIR",
    "webshop": "AGENTFLY_WEBSHOP_CACHE_DIR",
    "alfworld": "AGENTFLY_ALFWORLD_CACHE_DIR",
    "models": "AGENTFLY_MODEL_CACHE",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home, with none of the cache variables set."""
    for variable in ("AGENTFLY_CACHE_DIR", "XDG_CACHE_HOME", *OWN_VARIABLES.values()):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_every_env_builds_under_agentfly_cache_dir(tmp_path: Path, home: Path, monkeypatch) -> None:
    root = tmp_path / "cache"
    monkeypatch.setenv("AGENTFLY_CACHE_DIR", str(root))
    search = SearchEnv(num_entities=60, progress=False)
    webshop = WebShopEnv(num_products=100, split="all")
    game_file = Path(GeneratedGames("valid_seen", size=1)[0]["game_file"])
    assert search.index.path.is_relative_to(root / "search")
    assert webshop.index.path.is_relative_to(root / "webshop")
    assert game_file.is_file() and game_file.is_relative_to(root / "alfworld")
    assert model_cache_dir() == root / "models"
    assert sorted(path.name for path in root.iterdir()) == ["alfworld", "search", "webshop"]
    assert not home.exists()  # nothing went to ~/.cache
    search.close()
    webshop.close()


def test_the_default_root_and_each_env_variable(tmp_path: Path, home: Path, monkeypatch) -> None:
    assert {name: cache_dir(name, variable) for name, variable in OWN_VARIABLES.items()} == {
        name: home / ".cache" / "agentfly" / name for name in OWN_VARIABLES
    }
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("search") == tmp_path / "xdg" / "agentfly" / "search"
    monkeypatch.setenv("AGENTFLY_CACHE_DIR", "~/agentfly")  # a ~ is the home, as in a shell
    assert cache_dir("search") == home / "agentfly" / "search"
    for name, variable in OWN_VARIABLES.items():
        monkeypatch.setenv(variable, str(tmp_path / f"own-{name}"))
    assert SearchEnv(num_entities=60, progress=False).index.path.is_relative_to(tmp_path / "own-search")
    assert model_cache_dir() == tmp_path / "own-models" and model_cache_dir(tmp_path / "given") == tmp_path / "given"
