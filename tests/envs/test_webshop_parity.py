"""WebShop equals the released code (princeton-nlp/WebShop): its reward rule for rule, its pages action for action.

Every expected value here was computed by the released code (thefuzz 0.19.0, spaCy 3.8.18 with the
``en_core_web_sm`` 3.8.0 pipeline, Flask 2.1.2, beautifulsoup4 4.11.1), never by this project: the 2,400
designed purchases of ``fixtures/webshop_reward_parity.json.gz`` (made and scored by
``benchmarks/webshop_parity.py``), the single-rule cases below, one per quirk the module docstring of
``agentfly_envs.webshop.reward`` lists, and digests of the released text env's pages on 300 walks
(``fixtures/webshop_pages_parity.json.gz``, from ``benchmarks/webshop_pages_parity.py``).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfly_bench.webshop_pages_parity import differences, write_catalog
from agentfly_bench.webshop_parity import mismatches, read_json
from agentfly_envs.webshop.env import OriginalActionParser
from agentfly_envs.webshop.nouns import noun_extractor
from agentfly_envs.webshop.products import Product
from agentfly_envs.webshop.reward import (
    attribute_reward,
    goal_option_items,
    normalize_color,
    option_reward,
    token_set_ratio,
    webshop_reward,
)

FIXTURE = Path(__file__).parent / "fixtures" / "webshop_reward_parity.json.gz"
PAGES = Path(__file__).parent / "fixtures" / "webshop_pages_parity.json.gz"


def test_the_reward_equals_the_originals_on_2400_designed_purchases():
    data = read_json(FIXTURE)
    kinds = {case["kind"] for case in data["cases"]}
    assert len(data["cases"]) == 2400 and {"right", "partial", "near_miss", "any_product"} <= kinds
    assert {type(goal["goal_options"]) for goal in data["goals"]} == {list, dict}
    assert mismatches(data) == []


# The original's ``fuzz.token_set_ratio`` (thefuzz 0.19.0, difflib): (first, second, value, value swapped).
RATIOS = [
    ("resistant oils", "resistant sole", 86, 79),  # not symmetric: the product's text comes first
    ("hair long sole", "oils hair long", 79, 86),
    ("Water-Proof", "waterproof", 48, 48),
    ("snake_case", "snake case", 50, 50),  # "_" is a word character
    ("naïve", "nave", 100, 100),  # code points 128-255 are deleted
    ("heat resistant", "heat protectant", 76, 76),
    ("sulfate free", "sulfate-free shampoo", 100, 100),  # a subset of tokens scores 100
    ("easy to clean", "easy clean", 100, 100),
]


@pytest.mark.parametrize(("first", "second", "forward", "backward"), RATIOS)
def test_token_set_ratio_is_thefuzz_0_19(first, second, forward, backward):
    assert (token_set_ratio(first, second), token_set_ratio(second, first)) == (forward, backward)


@given(st.text(max_size=30), st.text(max_size=30))
def test_token_set_ratio_is_an_integer_percentage(first, second):
    value = token_set_ratio(first, second)
    assert isinstance(value, int) and 0 <= value <= 100


@given(st.lists(st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True), min_size=1, max_size=5))
def test_token_set_ratio_is_100_on_the_same_words_in_any_order_case_and_punctuation(words):
    assert token_set_ratio(" ".join(words), "-".join(reversed(words)).upper() + "!") == 100


# The original's ``get_option_reward`` (chosen values, goal options as the original passes them): matches.
OPTIONS = [
    (["large"], ["x-large"], 1),  # "large" is a subset of "x large"
    (["royal blue", "x-large"], ["navy blue", "xx-large"], 2),  # both "blue"; "x large" ~ "xx large" (93)
    (["dark navy"], ["navy blue"], 0),  # "dark" is a colour and comes first
    (["machine wash"], ["ash grey"], 1),  # both "ash", by substring
    (["resistant sole"], ["resistant oils"], 1),  # both "tan" (resis-tan-t)
    (["pack of 12"], ["12 pack"], 1),
    (["black", "black"], ["black", "black", "black"], 3),  # at most one per goal option: never above 1
    ([], [], 0),
    (["large"], {"size": "x-large"}, 1),  # a dict goal is scored by its (name, value) pairs
    (["size"], {"size": "x-large"}, 1),  # ... so the option's name matches it
    (["color"], {"color": "navy blue"}, 1),
    (["navy blue"], {"color": "navy blue"}, 1),  # the pair is no colour ("navy blue" is not an item)
    (["black"], {"color": "black"}, 1),  # the pair is "black" (an item)
    (["jet black"], {"color": "jet black"}, 1),
]


@pytest.mark.parametrize(("chosen", "goal_options", "matches"), OPTIONS)
def test_option_reward_is_the_originals(chosen, goal_options, matches):
    assert option_reward(goal_option_items(goal_options), chosen) == matches


def test_dict_goal_pairs_normalise_to_a_colour_only_when_the_value_is_one():
    assert normalize_color(("color", "black")) == "black"
    assert normalize_color(("color", "navy blue")) == ("color", "navy blue")
    assert normalize_color("navy blue") == "blue"


def product(**fields):
    base = {
        "asin": "B0TEST0001",
        "title": "",
        "query": "q",
        "category": "",
        "product_category": "A",
        "description": "",
        "bullet_points": [],
        "pricing": (10.0,),
        "price_tag": "$10.0",
        "options": {},
        "option_images": {},
        "attributes": [],
    }
    return Product(**{**base, **fields})


@pytest.mark.parametrize(
    ("fields", "wanted", "matches"),
    [
        ({"attributes": ["resistant oils"]}, "resistant sole", 1),  # ratio(product's, goal's) = 86
        ({"attributes": ["resistant sole"]}, "resistant oils", 0),  # 79 the other way round
        ({"attributes": ["hair long sole"]}, "oils hair long", 0),
        ({"title": "Deep Moisturizing Cream"}, "Deep Moisturizing", 0),  # the goal's text is not lower-cased
        ({"title": "Deep Moisturizing Cream"}, "deep moisturizing", 1),
    ],
)
def test_attribute_reward_is_the_originals(fields, wanted, matches):
    assert attribute_reward(product(**fields), [wanted]) == matches


# ----------------------------------------------------------------------------------------- bounds

_words = st.text(alphabet="abcdeilnorstuvxy -/_é12", max_size=16)
_goal_options = st.one_of(st.lists(_words, max_size=4), st.dictionaries(_words, _words, max_size=4))


@given(
    title=_words,
    attributes=st.lists(_words, max_size=4),
    goal_attributes=st.lists(_words, max_size=4),
    goal_options=_goal_options,
    chosen=st.dictionaries(_words, _words, max_size=5),
    price=st.floats(0, 2000),
    cap=st.floats(0.01, 2000),
    query=st.sampled_from(["q", "other"]),
)
def test_the_reward_stays_within_0_and_1_for_any_goal_and_purchase(
    title, attributes, goal_attributes, goal_options, chosen, price, cap, query
):
    goal = {
        "name": title[::-1],
        "query": query,
        "product_category": "A › B",
        "attributes": goal_attributes,
        "goal_options": goal_options,
        "price_upper": cap,
    }
    purchased = product(title=title, attributes=attributes or ["DUMMY_ATTR"], bullet_points=[title], description=title)
    context = {
        "purchased": purchased,
        "purchased_options": chosen,
        "price": price,
        "goal": goal,
        "nouns": noun_extractor("heuristic"),
    }
    result = asyncio.run(webshop_reward.compute(context))
    assert 0.0 <= result.score <= 1.0


# ----------------------------------------------------------------------------------------- pages


def test_every_page_equals_the_released_text_envs_on_300_walks(tmp_path):
    """Both text modes, the clickables, the search bar, rewards and episode ends, page for page: search,
    results (past the last page too), item, its sub-pages (Attributes with show_attrs), done; searches from
    any page, clicks on what the page does not offer, values with spaces around them, turns the original
    reads its own way (text after the action, a leading space or newline), option values that JSON escapes,
    empty descriptions and feature lists."""
    data = read_json(PAGES)
    actions = [action for walk in data["walks"] for action in walk["actions"]]
    clicks = ("next >", "< prev", "back to search", "description", "features", "reviews", "attributes", "buy now")
    assert {f"click[{name}]" for name in clicks} <= set(actions)
    assert any(walk["show_attrs"] for walk in data["walks"]) and not all(walk["show_attrs"] for walk in data["walks"])
    assert sum(len(walk["digests"]) for walk in data["walks"]) == 4002
    data_dir = write_catalog(tmp_path / "data", data["num_products"], data["seed"])
    found = differences(data, data_dir, tmp_path / "cache")
    first = found[0][:4] if found else None
    assert not found, f"{len(found)} pages differ from the original's; the first (walk, step, what, ours): {first}"


# ----------------------------------------------------------------------------------------- actions

#: The pattern the released text env reads a turn with (``parse_action`` in ``engine/engine.py``).
RELEASED_ACTION = re.compile(r"(.+)\[(.+)\]")


@given(st.text(alphabet="ab[] \n", max_size=14) | st.text(max_size=30))
def test_actions_are_read_as_the_released_text_env_reads_them(turn):
    match = RELEASED_ACTION.match(turn)
    calls = OriginalActionParser().parse(turn).calls
    if match is None or not re.fullmatch(r"[A-Za-z_]\w*", match.group(1), re.ASCII):
        assert calls == []  # no action, or a name that is none: nothing happens either way
    else:
        assert [(call.name, call.arguments) for call in calls] == [match.groups()]
