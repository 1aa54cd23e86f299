"""The original WebShop reward of a purchase (``get_reward`` of ``web_agent_site/engine/goal.py``).

``score = (attributes matched + options matched + price ok) / (goal attributes + goal options + 1) * r_type``

* **r_type**, the kind of product: 1.0 if the purchase has the goal's search query, shares at least two
  levels of its category path, or shares more than 20% of the nouns of its title; else 0.5. Then 0.1 if
  under 10% of the goal title's nouns are shared, and 0.0 if none is.
* **attributes**: a goal attribute matches when one of the product's attributes has a fuzzy token-set
  ratio above 85 with it (thefuzz's scoring: ASCII-folded, lower-cased, punctuation dropped, rounded), or
  when it is a substring of the lower-cased title, bullet points or description.
* **options**: each chosen option matches when (after colour normalisation: the first of a list of base
  colours found in the text) a ``size`` equals a goal option, another option has a fuzzy ratio above 85
  with one, or its value is a substring of the title, bullet points or description. As in the original,
  every chosen option that matches counts, so extra matching choices can lift the score above 1.
* **price**: 1 if the price charged is at most the goal's cap.

Every part is reported in ``components`` (as the original's ``verbose`` info).

Example:
    >>> fuzzy_ratio("Long-Lasting!", "long lasting"), normalize_color("navy blue | white")
    (100, 'blue')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from agentfly_env.rewards import RewardResult, reward
from agentfly_envs.webshop.nouns import NounExtractor
from agentfly_envs.webshop.products import Product

__all__ = [
    "COLORS",
    "attribute_reward",
    "fuzzy_ratio",
    "normalize_color",
    "option_reward",
    "type_reward",
    "webshop_reward",
]

#: Option names matched exactly rather than fuzzily.
EXACT_MATCH_OPTIONS = ("size",)
#: A fuzzy ratio above this counts as a match.
FUZZY_THRESHOLD = 85
#: The base colours an option value is normalised to, in the original's order (the first found wins).
COLORS = (
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze brown burgundy "
    "camel camo caramel champagne charcoal cheetah chestnut chocolate christmas coffee cognac copper coral "
    "cranberry cream crystal dark denim eggplant elephant espresso fuchsia gold granite grape graphite grass "
    "gray green grey heather indigo ivory ivy khaki lavender lemon leopard light lilac lime magenta maroon "
    "mauve merlot midnight mint mocha multicolor mushroom mustard natural navy nude olive orange peach "
    "pewter pink plum purple rainbow red rose royal rust sand sapphire seashell silver skull slate steel "
    "stone stonewash sunflower tan taupe teal tiger turquoise violet walnut wheat white wine yellow"
).split()
# thefuzz's "force_ascii" removes the code points 128-255 (and only those) before scoring.
_LATIN1 = dict.fromkeys(range(128, 256))


def fuzzy_ratio(first: str, second: str) -> int:
    """thefuzz's ``fuzz.token_set_ratio`` (what the original calls): 0-100, rounded."""
    return round(
        fuzz.token_set_ratio(default_process(first.translate(_LATIN1)), default_process(second.translate(_LATIN1)))
    )


def normalize_color(text: str) -> str:
    """The first base colour named in ``text`` (substring match), or ``text`` unchanged."""
    for color in COLORS:
        if color in text:
            return color
    return text


def _in_text(phrase: str, product: Product) -> bool:
    """Whether ``phrase`` occurs in the product's lower-cased title, bullet points or description."""
    return (
        phrase in product.title.lower()
        or phrase in " ".join(product.bullet_points).lower()
        or phrase in product.description.lower()
    )


def type_reward(product: Product, goal: Mapping[str, Any], nouns: NounExtractor) -> dict[str, float]:
    """``r_type`` and its parts: ``query_match``, ``category_match``, ``title_score``."""
    query_match = product.query == goal["query"]
    purchased_path = {level.strip() for level in product.product_category.split("›")}
    goal_path = {level.strip() for level in goal["product_category"].split("›")}
    category_match = len(purchased_path & goal_path) >= 2
    desired = nouns(goal["name"])
    # As the original: shared distinct nouns over all the goal's noun tokens (repeats included).
    title_score = len(set(nouns(product.title)) & set(desired)) / len(desired) if desired else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {
        "r_type": r_type,
        "query_match": float(query_match),
        "category_match": float(category_match),
        "title_score": title_score,
    }


def attribute_reward(product: Product, attributes: Sequence[str]) -> int:
    """How many goal ``attributes`` the product has."""
    matched = 0
    for wanted in attributes:
        if any(fuzzy_ratio(have, wanted) > FUZZY_THRESHOLD for have in product.attributes) or _in_text(wanted, product):
            matched += 1
    return matched


def option_reward(product: Product, goal_options: Sequence[str], chosen: Mapping[str, str]) -> int:
    """How many ``chosen`` options (name to value) match the goal's option values."""
    wanted = [normalize_color(option) for option in goal_options]
    matched = 0
    for name, value in chosen.items():
        value = normalize_color(value)
        if name.lower() in EXACT_MATCH_OPTIONS:
            hit = value in wanted
        else:
            hit = any(fuzzy_ratio(option, value) > FUZZY_THRESHOLD for option in wanted)
        if hit or _in_text(value, product):
            matched += 1
    return matched


@reward(name="webshop")
def webshop_reward(
    purchased: Product,
    purchased_options: Mapping[str, str],
    price: float,
    goal: Mapping[str, Any],
    nouns: NounExtractor,
) -> RewardResult:
    """The original reward of buying ``purchased`` with ``purchased_options`` at ``price`` for ``goal``.

    Args:
        purchased: The product bought.
        purchased_options: The options chosen on its page (name to value).
        price: The price charged.
        goal: The goal (``attributes``, ``goal_options`` as a list or a name-to-value dict,
            ``price_upper``, ``query``, ``product_category``, ``name``).
        nouns: Finds a title's nouns (spaCy or the heuristic).
    """
    kind = type_reward(purchased, goal, nouns)
    attributes = list(goal["attributes"])
    goal_options = goal["goal_options"]
    goal_options = list(goal_options.values()) if isinstance(goal_options, Mapping) else list(goal_options)
    price_ok = price <= goal["price_upper"] if goal["price_upper"] > 0 else None
    attributes_matched = attribute_reward(purchased, attributes)
    options_matched = option_reward(purchased, goal_options, purchased_options)
    parts = len(attributes) + len(goal_options) + 1
    score = (attributes_matched + options_matched + float(bool(price_ok))) / parts * kind["r_type"]
    components = {
        **kind,
        "r_att": attributes_matched / len(attributes) if attributes else 0.0,
        "w_att": len(attributes) / parts,
        "attributes_matched": float(attributes_matched),
        "options_matched": float(options_matched),
    }
    if goal_options:
        components.update(r_option=options_matched / len(goal_options), w_option=len(goal_options) / parts)
    if price_ok is not None:
        components.update(r_price=float(price_ok), w_price=1 / parts)
    return RewardResult(
        score,
        components,
        details={
            "asin": purchased.asin,
            "options": dict(purchased_options),
            "price": price,
            "goal_asin": goal.get("asin"),
            "title_nouns": nouns.method,
        },
    )
