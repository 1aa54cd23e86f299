"""WebShop's search index: BM25 results, built once per catalog, kept on disk, safe with concurrent builders."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentfly_envs.webshop.index as index_module
from agentfly_envs.webshop import GeneratedCatalog, open_index
from agentfly_envs.webshop.index import MANIFEST, MAX_QUERY_TERMS, default_cache_dir, document_text
from agentfly_envs.webshop.products import Product

CATALOG = GeneratedCatalog(600, seed=11, num_goals=200)


@pytest.fixture
def fresh(monkeypatch):
    """An empty in-process table of open indexes, as in a new process."""
    monkeypatch.setattr(index_module, "_OPEN", {})


def index_dirs(cache: Path) -> list[Path]:
    return sorted(path for path in cache.iterdir() if path.name.startswith("index-"))


def test_search_ranks_bm25_and_breaks_ties_by_ordinal(tmp_path):
    index = open_index(CATALOG, tmp_path)
    assert len(index) == 600
    for ordinal in (0, 123, 599):
        assert index.search(CATALOG.product(ordinal).title)[0] == ordinal
    results = index.search("our")  # a word in most documents: many equal-ish scores
    assert len(results) == 50 and len(set(results)) == 50
    assert index.search("our", limit=7) == results[:7]
    assert index.search("  ,.;!? ") == [] and index.search("") == []
    assert index.search("The AND of, a: to") == []  # only stop words (Lucene's English list)
    # Punctuation and query syntax are only separators; case does not matter.
    assert index.search('"DESK" AND lamp: (+usb)') == index.search("desk and lamp usb")
    # Only the first MAX_QUERY_TERMS words count.
    assert index.search(" ".join(["zzz"] * MAX_QUERY_TERMS + ["lamp"])) == []
    goals = CATALOG.goals()
    found = sum(CATALOG.ordinal(goal["asin"]) in index.search(goal["instruction_text"]) for goal in goals)
    assert found / len(goals) > 0.8  # the instruction alone usually finds the product in a small catalog


def test_two_builds_of_a_catalog_rank_ties_the_same(tmp_path, fresh):
    queries = ("our", "daily use", "lamp", "color size", "design", "red")
    first = open_index(CATALOG, tmp_path / "a")
    second = open_index(CATALOG, tmp_path / "b")
    assert first is not second
    for query in queries:
        for limit in (3, 7, 50):
            assert first.search(query, limit) == second.search(query, limit), (query, limit)


def test_documents_hold_title_description_bullets_options_and_attributes():
    product = Product(
        asin="B0X",
        title="Title Words",
        query="q",
        category="c",
        product_category="A › B",
        description="Described.",
        bullet_points=["Bullet one", "Bullet two"],
        pricing=(1.0,),
        price_tag="$1.0",
        options={"color": ["red", "blue"]},
        option_images={},
        attributes=["DUMMY_ATTR"],
    )
    assert document_text(product) == "Title Words Described. Bullet one Bullet two color: red, blue "
    with_attributes = document_text(
        Product(
            **{**{f: getattr(product, f) for f in product.__struct_fields__}, "attributes": ["vegan", "gluten free"]}
        )
    )
    assert with_attributes.endswith("color: red, blue vegan, gluten free")


def test_built_once_then_reused_from_disk(tmp_path, fresh):
    first = open_index(CATALOG, tmp_path)
    assert open_index(CATALOG, tmp_path) is first  # the same object in one process
    manifest = json.loads((first.path / MANIFEST).read_text())
    assert manifest["num_docs"] == 600 and manifest["fingerprint"] == CATALOG.fingerprint
    assert 0 <= manifest["documents_s"] <= manifest["build_s"]
    index_module._OPEN.clear()  # as if in a new process: found on disk, not rebuilt
    again = open_index(CATALOG, tmp_path)
    assert again is not first and again.manifest == manifest and index_dirs(tmp_path) == [first.path]
    assert again.search("desk lamp") == first.search("desk lamp")
    other = open_index(GeneratedCatalog(601, seed=11), tmp_path)  # another catalog: another index
    assert len(index_dirs(tmp_path)) == 2 and len(other) == 601


def test_a_damaged_index_or_a_dead_builder_leftover_is_replaced(tmp_path, fresh):
    built = open_index(CATALOG, tmp_path)
    leftover = tmp_path / f".{built.path.name}.deadbeef.tmp"
    leftover.mkdir()
    (built.path / MANIFEST).write_text(json.dumps({**built.manifest, "num_docs": 5}))
    index_module._OPEN.clear()
    rebuilt = open_index(CATALOG, tmp_path)
    assert rebuilt.manifest["num_docs"] == 600 and not leftover.exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == [built.path.name]
    for name in [p.name for p in rebuilt.path.iterdir() if p.name.endswith(".idx")][:1]:
        (rebuilt.path / name).unlink()  # a segment file gone
    index_module._OPEN.clear()
    assert open_index(CATALOG, tmp_path).search(CATALOG.product(3).title)[0] == 3


BUILDER = textwrap.dedent(
    """
    import json, sys
    from agentfly_envs.webshop import GeneratedCatalog, open_index
    index = open_index(GeneratedCatalog(3000, seed=12), sys.argv[1])
    print(json.dumps({"path": str(index.path), "built": index.manifest["build_s"],
                      "results": [index.search(q) for q in ("desk lamp", "red lipstick", "our daily use")]}))
    """
)


def test_concurrent_builders_in_two_processes_share_one_index(tmp_path):
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", BUILDER, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
        outputs.append(json.loads(stdout))
    assert outputs[0]["path"] == outputs[1]["path"] and outputs[0]["results"] == outputs[1]["results"]
    assert outputs[0]["built"] == outputs[1]["built"]  # one built it; the other waited and opened that one
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == [Path(outputs[0]["path"]).name]


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    for variable in ("AGENTFLY_WEBSHOP_CACHE_DIR", "AGENTFLY_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "agentfly" / "webshop"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "agentfly" / "webshop"
    monkeypatch.setenv("AGENTFLY_CACHE_DIR", str(tmp_path / "agentfly"))
    assert default_cache_dir() == tmp_path / "agentfly" / "webshop"
    monkeypatch.setenv("AGENTFLY_WEBSHOP_CACHE_DIR", str(tmp_path / "webshop"))
    assert default_cache_dir() == tmp_path / "webshop"
