"""WebShop data: the original files' loader (quirks and broken files), the generator, goals, price caps, splits."""

from __future__ import annotations

import hashlib
import json
import random
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from agentfly_envs.webshop import (
    DataError,
    FileCatalog,
    GeneratedCatalog,
    WebShopEnv,
    goals,
    shared_catalog,
    vocabulary,
)
from agentfly_envs.webshop.generator import GENERATOR_VERSION
from agentfly_envs.webshop.goals import GoalTasks, build_goals, price_cap, split_range
from agentfly_envs.webshop.products import RawProduct, decode_product, parse_price

REPO_ROOT = Path(__file__).resolve().parents[2]
UNTIDY = "\u200fItem model number\u200f : \u200f"


def record(asin, **fields):
    base = {
        "asin": asin,
        "name": f"Product {asin}",
        "full_description": "A fine thing.",
        "pricing": "$10.00",
        "images": ["https://example.com/a.jpg"],
        "product_category": "Beauty & Personal Care › Makeup › Lips",
        "average_rating": 4.5,
        "small_description": ["Soft", "Light"],
        "customization_options": "",
        "category": "beauty",
        "query": " Lipstick ",
        "page": 3,
        "product_information": {UNTIDY: "X-1", "\u200fDate First Available\u200f : \u200f": "June 1, 2021"},
        "brand": "Lumora",
    }
    return {**base, **fields}


PRODUCTS = [
    record(
        "B0LIP00001",
        name="Lumora Matte Lipstick, Ruby Red",
        pricing="$877.80",
        customization_options={
            "Color": [
                {"value": "Ruby Red", "image": "https://example.com/r.jpg"},
                {"value": " Black/White ", "image": None},
            ],
            "Size": None,
        },
    ),
    record("B0LIP00002", pricing="$12.99 to $24.99", customization_options={"Size": [{"value": "Pack of 2"}]}),
    record("B0LIP00003", pricing="", small_description="Just one line", average_rating=None),
    record("nan", name="skipped: asin nan"),
    record("B0123456789X", name="skipped: asin longer than 10"),
    record("B0LIP00001", name="skipped: a repeated asin"),
    record("B0LIP00004", pricing="$1,299.99"),
]
ATTRIBUTES = {
    "B0LIP00001": {
        "attributes": ["long lasting", "matte finish"],
        "instruction": "i want a long lasting lipstick",
        "instruction_attributes": ["long lasting"],
    },
    "B0LIP00002": {"attributes": ["vegan"], "instruction": None, "instruction_attributes": None},
}
HUMAN = {
    "B0LIP00001": [
        {
            "asin": "B0LIP00001",
            "instruction": "i need a long lasting lipstick in ruby red.",
            "attributes": ["long lasting"],
            "options": ["color: ruby red"],
            "instruction_attributes": ["long lasting"],
            "instruction_options": ["ruby red"],
            "assignment_id": "A1",
            "worker_id": "W1",
        },
        {
            "asin": "B0LIP00001",
            "instruction": "skipped: no attributes",
            "instruction_attributes": [],
            "instruction_options": [],
        },
    ],
    "B0LIP00002": [
        {
            "asin": "B0LIP00002",
            "instruction": "vegan lipstick pack of 2",
            "instruction_attributes": ["vegan"],
            "instruction_options": ["pack of 2"],
        }
    ],
    "B0NOTINDATA": [{"instruction": "a product that is not in the catalog", "instruction_attributes": ["x"]}],
}
REVIEWS = [
    {"asin": "B0LIP00001", "average_rating": 4.8, "reviews": [{"title": "Great", "stars": 5, "review": "Love it"}]}
]


def write(directory, *, products=PRODUCTS, attributes=ATTRIBUTES, human=HUMAN, reviews=REVIEWS, small=True):
    suffix = "_1000" if small else ""
    (directory / f"items_shuffle{suffix}.json").write_text(json.dumps(products, ensure_ascii=False))
    (directory / f"items_ins_v2{suffix}.json").write_text(json.dumps(attributes))
    if human is not None:
        (directory / "items_human_ins.json").write_text(json.dumps(human))
    if reviews is not None:
        (directory / "reviews.json").write_text(json.dumps(reviews))
    return directory


# ----------------------------------------------------------------------------------------- the loader


def test_loader_reads_every_quirk_of_the_original_schema(tmp_path):
    catalog = FileCatalog(write(tmp_path))
    assert [catalog.product(i).asin for i in range(len(catalog))] == [
        "B0LIP00001",
        "B0LIP00002",
        "B0LIP00003",
        "B0LIP00004",
    ]
    first, ranged, bare, thousands = (catalog.product(i) for i in range(4))
    assert (first.pricing, first.price_tag) == ((877.8,), "$877.8")
    assert first.options == {
        "color": ["ruby red", "black | white"]
    }  # lower case, "/" shown as " | ", null group dropped
    assert first.option_images == {"ruby red": "https://example.com/r.jpg", "black | white": None}
    assert first.attributes == ["long lasting", "matte finish"] and first.query == "lipstick"
    assert first.product_category.split(" › ") == ["Beauty & Personal Care", "Makeup", "Lips"]
    assert first.rating == 4.8 and [(r.title, r.score, r.body) for r in first.reviews] == [("Great", 5, "Love it")]
    assert (ranged.pricing, ranged.price_tag) == ((12.99, 24.99), "$12.99 to $24.99")
    assert 12.99 <= catalog.price(1) <= 24.99 and catalog.price(1) == FileCatalog(tmp_path).price(1)
    assert (bare.pricing, bare.price_tag, catalog.price(2)) == ((100.0,), "$100.0", 100.0)
    assert bare.options == {} and bare.bullet_points == ["Just one line"] and bare.rating == "N.A."
    assert bare.attributes == ["DUMMY_ATTR"] and ranged.rating == 4.5
    assert thousands.pricing == (1299.99,)
    assert catalog.ordinal("B0LIP00003") == 2 and catalog.ordinal("nan") is None


def test_goals_from_the_files_follow_the_original(tmp_path):
    catalog = FileCatalog(write(tmp_path))
    human = catalog.goals(human=True)
    assert sorted(goal["asin"] for goal in human) == [
        "B0LIP00001",
        "B0LIP00002",
    ]  # no attributes / not in catalog: skipped
    lipstick = next(goal for goal in human if goal["asin"] == "B0LIP00001")
    # The trailing period goes; the cap is the larger of two of 880, 890, 900, 910.
    assert lipstick["price_upper"] in (890.0, 900.0, 910.0)
    cap = f", and price lower than {lipstick['price_upper']:.2f} dollars"
    assert lipstick["instruction_text"] == "i need a long lasting lipstick in ruby red" + cap
    assert lipstick["goal_options"] == ["ruby red"] and lipstick["attributes"] == ["long lasting"]
    assert lipstick["name"] == "Lumora Matte Lipstick, Ruby Red" and lipstick["query"] == "lipstick"
    pack = next(goal for goal in human if goal["asin"] == "B0LIP00002")
    assert pack["instruction_text"].startswith("vegan lipstick pack of 2, and price lower than ")
    synthetic = catalog.goals(human=False)
    texts = sorted(goal["instruction_text"] for goal in synthetic)
    assert texts[0].startswith("i want a long lasting lipstick with color: black | white, and price lower than ")
    assert texts[1].startswith("i want a long lasting lipstick with color: ruby red, and price lower than ")
    assert {goal["weight"] for goal in synthetic} == {0.5}  # one attribute shared by both goals
    assert all(goal["goal_options"] in ({"color": "ruby red"}, {"color": "black | white"}) for goal in synthetic)


def test_expert_wins_on_hand_written_files(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("AGENTFLY_WEBSHOP_DATA", str(write(data)))
    env = WebShopEnv(split="all", cache_dir=str(tmp_path / "cache"))
    assert isinstance(env.catalog, FileCatalog) and len(env.tasks) == 2
    for index in range(2):
        env.reset(options={"task_index": index})
        while True:
            _, reward, terminated, _, info = env.step(env.expert_action())
            if terminated:
                break
        assert reward == 1.0, info["step"].reward_components
    assert shared_catalog() is env.catalog  # the same settings share one catalog
    env.close()


def test_num_products_and_variants(tmp_path):
    write(tmp_path)
    assert len(FileCatalog(tmp_path, num_products=2)) == 2
    with pytest.raises(DataError, match=r"items_shuffle\.json: file not found"):
        FileCatalog(tmp_path, variant="all")
    write(tmp_path, small=False, products=PRODUCTS[:2])
    assert len(FileCatalog(tmp_path, variant="all")) == 2 and len(FileCatalog(tmp_path)) == 4  # auto prefers _1000
    with pytest.raises(ValueError, match="data_variant must be"):
        FileCatalog(tmp_path, variant="tiny")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: (d / "items_shuffle_1000.json").write_text("[{"), r"items_shuffle_1000\.json: not valid JSON"),
        (
            lambda d: (d / "items_shuffle_1000.json").write_text("{}"),
            r"items_shuffle_1000\.json: expected a JSON list at the top level, got dict",
        ),
        (
            lambda d: write(d, products=[{k: v for k, v in record("B01").items() if k != "name"}]),
            r"items_shuffle_1000\.json: product 0 \(asin 'B01'\): Object missing required field `name`",
        ),
        (
            lambda d: write(d, products=[record("B01"), record("B02", name=7)]),
            r"product 1 \(asin 'B02'\): Expected `str`, got `int` - at `\$\.name`",
        ),
        (
            lambda d: write(d, products=[record("B01", customization_options=["red"])]),
            r"product 0 .*customization_options",
        ),
        (
            lambda d: write(d, products=[record("B01", customization_options={"Color": [{"image": "x"}]})]),
            r"missing required field `value` - at `\$\.customization_options\[\.\.\.\]\[0\]`",
        ),
        (
            lambda d: write(d, products=[record("B01", pricing="12.99")]),
            r"product 0 \(asin 'B01'\): pricing '12\.99' has no \$ amount",
        ),
        (
            lambda d: write(d, products=[record("B01", pricing="$1.2.3")]),
            r"pricing '\$1\.2\.3' has an amount that is not a number",
        ),
        (lambda d: write(d, products=["B01"]), r"product 0: expected an object, got str"),
        (lambda d: write(d, products=[]), r"items_shuffle_1000\.json: no usable product records"),
        (
            lambda d: write(d, attributes={"B01": {"attributes": "vegan"}}),
            r"items_ins_v2_1000\.json: entry 'B01': Expected `array",
        ),
        (lambda d: (d / "items_ins_v2_1000.json").unlink(), r"items_ins_v2_1000\.json: file not found"),
        (lambda d: write(d, reviews={"asin": "B01"}), r"reviews\.json: expected a JSON list"),
    ],
)
def test_broken_files_are_refused_naming_the_file_and_the_fault(tmp_path, change, message):
    write(tmp_path)
    change(tmp_path)
    with pytest.raises(DataError, match=message):
        FileCatalog(tmp_path)


def test_broken_or_missing_human_goals_fail_when_goals_are_built(tmp_path):
    write(tmp_path, human={"B0LIP00001": [{"instruction": "no attributes field"}]})
    catalog = FileCatalog(tmp_path)
    with pytest.raises(DataError, match=r"items_human_ins\.json: entry 'B0LIP00001': .*instruction_attributes"):
        catalog.goals()
    write(tmp_path, human=None)
    (tmp_path / "items_human_ins.json").unlink()
    catalog = FileCatalog(tmp_path)
    assert len(catalog.goals(human=False)) == 2
    with pytest.raises(
        DataError, match=r"items_human_ins\.json: file not found \(human goals need it; or use human_goals=False\)"
    ):
        catalog.goals(human=True)
    with pytest.raises(DataError, match="not a directory"):
        FileCatalog(tmp_path / "nowhere")


def test_price_parsing():
    assert parse_price("$5") == ((5.0,), "$5.0")
    assert parse_price("$1 $2 $3") == ((1.0, 2.0), "$1.0 to $2.0")
    assert parse_price(None) == ((100.0,), "$100.0")
    with pytest.raises(ValueError, match="no \\$ amount"):
        parse_price("free")


# ----------------------------------------------------------------------------------------- the generator


def test_generated_records_are_in_the_original_schema_with_its_quirks():
    catalog = GeneratedCatalog(3000, seed=4, num_goals=0)
    raws = [catalog.raw_product(i) for i in range(3000)]
    for raw in raws:
        decode_product(raw)  # every record validates as an items_shuffle record
        assert set(RawProduct.__struct_fields__) <= set(raw)
    pricing = Counter("empty" if not r["pricing"] else "range" if " to " in r["pricing"] else "one" for r in raws)
    assert pricing["empty"] > 20 and pricing["range"] > 100 and pricing["one"] > 2000
    assert sum(r["customization_options"] == "" for r in raws) > 20
    assert (
        sum(isinstance(r["customization_options"], dict) and None in r["customization_options"].values() for r in raws)
        > 20
    )
    assert any(
        "/" in o["value"]
        for r in raws
        if r["customization_options"]
        for v in r["customization_options"].values()
        if v
        for o in v
    )
    assert len({r["category"] for r in raws}) == 5 and len({r["query"] for r in raws}) >= 40
    assert all(" › " in r["product_category"] and r["asin"].startswith("B0") and len(r["asin"]) == 10 for r in raws)
    assert len({r["name"] for r in raws}) == 3000  # model numbers make titles distinct


def test_generation_is_deterministic_by_seed_and_order_free():
    first, again, other = GeneratedCatalog(500, seed=1), GeneratedCatalog(500, seed=1), GeneratedCatalog(500, seed=2)
    assert [first.product(i) for i in (499, 3, 250)] == [again.product(i) for i in (499, 3, 250)]
    assert first.product(3) != other.product(3) and first.goals() == again.goals()
    asins = [first.asin(i) for i in range(500)]
    assert len(set(asins)) == 500 and [first.ordinal(a) for a in asins] == list(range(500))
    assert first.ordinal("B0!!!!!!!!") is None and first.ordinal("short") is None
    big = GeneratedCatalog(1_000_000, seed=1, num_goals=10)
    assert big.product(999_999).asin == big.asin(999_999) and big.ordinal(big.asin(123_456)) == 123_456


def test_generated_catalog_written_as_files_loads_back_identically(tmp_path):
    generated = GeneratedCatalog(400, seed=7, num_goals=500)
    loaded = FileCatalog(generated.write(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "items_human_ins.json",
        "items_ins_v2.json",
        "items_shuffle.json",
        "reviews.json",
    ]
    assert list(loaded.products()) == list(generated.products())
    assert loaded.goals(human=True) == generated.goals(human=True)
    assert loaded.goals(human=False) == generated.goals(human=False)
    assert [loaded.price(i) for i in range(400)] == [generated.price(i) for i in range(400)]


#: SHA-256 of the files of GeneratedCatalog(1200, seed=7, num_goals=2000, price_seed=7), as generated when its
#: words were Python tables: moving them to vocabulary.json changed no byte. A change to the generator's
#: output must bump GENERATOR_VERSION (cached indexes are keyed by it) and update these.
GENERATED_DIGESTS = {
    "items_human_ins.json": "2671de6aff3440de156259ec24ebd7641a7a46335469eb2f6c49c452df6382b1",
    "items_ins_v2.json": "deed358d7ad16becc2a94605f6bf5485aa18e45b49672878015b76b07899ee1f",
    "items_shuffle.json": "2d8d80d2acd85ea2929e10f3462d73281e23c4b97c7e214472240935185a4ff5",
    "reviews.json": "586b80a94bb9fb4704923aafefef2df8c72110efec62c48cab0b5cb9457bf136",
}


def test_generated_files_are_byte_for_byte_those_of_generator_version_2(tmp_path):
    assert GENERATOR_VERSION == 2
    written = GeneratedCatalog(1200, seed=7, num_goals=2000, price_seed=7).write(tmp_path)
    assert {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in written.iterdir()} == GENERATED_DIGESTS


def test_the_words_are_package_data_read_into_immutable_tables():
    package_data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "vocabulary.json" in package_data["agentfly_envs.webshop"]
    assert (Path(vocabulary.__file__).parent / "vocabulary.json").is_file()
    kinds = [kind for kinds in vocabulary.CATEGORIES.values() for kind in kinds]
    assert len(kinds) == 40 and all(isinstance(kind, vocabulary.ProductType) for kind in kinds)
    assert all(
        isinstance(values, tuple) for kind in kinds for values in (kind.path, kind.attributes, *kind.options.values())
    )
    assert sorted(vocabulary.REVIEW_TITLES) == sorted(vocabulary.REVIEW_BODIES) == [1, 2, 3, 4, 5]


def test_generated_goals_ask_for_what_their_product_has():
    catalog = GeneratedCatalog(1000, seed=0)
    built = catalog.goals()
    assert len(built) == 3000 and catalog.goals() is built
    for goal in built[:300]:
        product = catalog.product(catalog.ordinal(goal["asin"]))
        assert set(goal["attributes"]) <= set(product.attributes)
        values = {value for values in product.options.values() for value in values}
        assert set(goal["goal_options"]) <= values
        assert goal["price_upper"] > catalog.price(catalog.ordinal(goal["asin"]))
        assert goal["instruction_text"].endswith(f", and price lower than {goal['price_upper']:.2f} dollars")


# ----------------------------------------------------------------------------------------- goals and splits


def test_price_caps():
    caps = {price_cap(34.99, random.Random(seed))[0] for seed in range(200)}
    assert caps == {50.0, 60.0, 70.0}  # the larger of two of 40, 50, 60, 70
    assert price_cap(985.0, random.Random(0)) == (1_000_000.0, "")  # only 990 is above: no cap
    assert price_cap(975.0, random.Random(0))[0] == 990.0  # 980 and 990: both drawn
    upper, clause = price_cap(5.0, random.Random(3))
    assert clause == f", and price lower than {upper:.2f} dollars" and upper in (20.0, 30.0, 40.0)


def test_splits_are_the_original_positions_or_their_proportions():
    assert (split_range(6910, "test"), split_range(6910, "eval"), split_range(6910, "train")) == (
        range(500),
        range(500, 1500),
        range(1500, 6910),
    )
    assert (split_range(600, "test"), split_range(600, "eval"), split_range(600, "train")) == (
        range(100),
        range(100, 300),
        range(300, 600),
    )
    assert split_range(10, "all") == range(10)
    with pytest.raises(ValueError, match="split must be one of"):
        split_range(10, "valid")


def test_the_goal_list_is_shuffled_with_the_fixed_seed(monkeypatch):
    catalog = GeneratedCatalog(200, seed=3, num_goals=300)
    shuffled = build_goals(catalog)
    monkeypatch.setattr(goals, "GOAL_SHUFFLE_SEED", 1)
    other = build_goals(catalog)
    assert shuffled != other and sorted(map(json.dumps, shuffled)) == sorted(map(json.dumps, other))
    assert build_goals(catalog) == other


def test_goal_tasks_sample_by_weight():
    weighted = [{"instruction_text": f"goal {i}", "weight": 9.0 if i == 2 else 1.0} for i in range(12)]
    tasks = GoalTasks(weighted, "all")
    rng = np.random.default_rng(0)
    counts = Counter(tasks.sample(rng)["goal_index"] for _ in range(4000))
    assert counts[2] / 4000 == pytest.approx(9 / 20, abs=0.04) and set(counts) == set(range(12))
    uniform = GoalTasks([{"instruction_text": "x"}] * 12, "train")
    assert len(uniform) == 6 and uniform[0]["id"] == "train/6"


def test_goals_that_match_no_product_name_the_cause(tmp_path):
    # Every human goal names a product outside the catalog: say so (not "use split='all'", already set).
    write(tmp_path, human={"B0NOTINDATA": HUMAN["B0NOTINDATA"]})
    with pytest.raises(DataError, match=r"none of its 4 products has a human goal in items_human_ins\.json") as error:
        WebShopEnv(data_dir=tmp_path, split="all", cache_dir=str(tmp_path / "cache"))
    assert "split='all'" not in str(error.value) and "human_goals=False" in str(error.value)
    # The products have goals, but none with instruction attributes (the original skips those).
    write(tmp_path, human={"B0LIP00001": HUMAN["B0LIP00001"][1:]})
    with pytest.raises(DataError, match=r"of its 1 products with a human goal .* all have empty instruction_attr"):
        FileCatalog(tmp_path).goals(human=True)
