"""The original WebShop reward of a purchase (``get_reward`` of ``web_agent_site/engine/goal.py``), rule for rule.

``score = (attributes matched + options matched + price ok) / (goal attributes + goal options + 1) * r_type``

* **r_type**, the kind of product: 1.0 if the purchase has the goal's search query, shares at least two
  levels of its category path, or shares more than 20% of the nouns of its title; else 0.5. Then 0.1 if
  under 10% of the goal title's nouns are shared, and 0.0 if none is.
* **attributes**: a goal attribute matches when one of the product's attributes has a fuzzy token-set
  ratio above 85 with it, or when it is a substring of the lower-cased title, bullet points or description.
* **options**: a goal option matches when one of the chosen option values has a fuzzy token-set ratio
  above 85 with it, both first normalised to the first base colour they contain (:func:`normalize_color`).
  At most one match per goal option, so the score never exceeds 1.
* **price**: 1 if the price charged is at most the goal's cap.

The original's quirks, reproduced on purpose (the parity harness ``benchmarks/webshop_parity.py`` checks them
against the released code, and ``tests/envs/test_webshop_parity.py`` replays its values):

* **The fuzzy ratio is thefuzz 0.19.0's** (the version ``requirements.txt`` pins, which without
  python-Levenshtein scores with :class:`difflib.SequenceMatcher`): not symmetric, and lower than
  rapidfuzz's Indel ratio on some pairs. The product's text is always the first argument, as in the original.
* **Dict-style goals** (synthetic goals: option name to value) are scored by their ``(name, value)`` pairs,
  because the original passes ``goal_options.items()``: a pair normalises to a colour only when its value
  *is* a base colour (tuple membership, not substring), and is otherwise scored as the text of the pair,
  ``"('size', 'x-large')"``, whose tokens include the option's name (``size x large``).
* **Option values are not matched against the product text**, only against the chosen values; attributes
  are (a goal attribute is looked up as given, not lower-cased, in the lower-cased text).
* **Colour normalisation is by substring**, in the list's order: ``"machine wash"`` is ``"ash"`` and
  ``"dark navy"`` is ``"dark"``.
* **The goal title's nouns count with repeats** in the denominator of ``title_score``, the shared ones once.
* **Where the original fails, this scores 0**: a goal without attributes (``r_att`` divides by zero there)
  gives ``r_att`` 0, and a cap of 0 or less (``None`` added to a number there) gives no price point. Neither
  occurs in the original's goals (every goal has attributes, every cap is at least 10).

Every part is reported in ``components`` (as the original's ``verbose`` info).

Example:
    >>> token_set_ratio("Long-Lasting!", "long lasting"), normalize_color("navy blue | white")
    (100, 'blue')
    >>> normalize_color(("color", "black")), token_set_ratio("x-large", ("size", "x-large"))
    ('black', 100)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentfly_env.tools.rewards import RewardResult, reward
from agentfly_envs.webshop.nouns import NounExtractor
from agentfly_envs.webshop.products import Product

__all__ = [
    "COLORS",
    "attribute_reward",
    "goal_option_items",
    "normalize_color",
    "option_reward",
    "token_set_ratio",
    "type_reward",
    "webshop_reward",
]

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
# thefuzz 0.19's "force_ascii" deletes the code points 128-255 (and only those) before scoring.
_LATIN1 = dict.fromkeys(range(128, 256))
# thefuzz 0.19's processing: every non-word character (Unicode \W; "_" is a word character) to a space.
_NON_WORD = re.compile(r"\W", re.UNICODE)

#: A goal option as the original scores it: a value, or a dict-style goal's ``(name, value)`` pair.
GoalOption = str | tuple[str, str]


def _process(value: object) -> str:
    """thefuzz 0.19's ``full_process(force_ascii=True)``: non-strings as ``str()``, then ASCII, words, lower."""
    text = value if isinstance(value, str) else str(value)
    return _NON_WORD.sub(" ", text.translate(_LATIN1)).lower().strip()


def _ratio(first: str, second: str) -> int:
    """thefuzz 0.19's ``fuzz.ratio`` without python-Levenshtein: difflib's ratio, in percent, rounded."""
    if first == second:
        return 100
    if not first or not second:
        return 0
    return round(100 * difflib.SequenceMatcher(None, first, second).ratio())


def token_set_ratio(first: object, second: object) -> int:
    """thefuzz 0.19.0's ``fuzz.token_set_ratio`` (what the original calls): 0-100; order matters a little.

    Both texts are processed (:func:`_process`) and split into token sets; the sorted shared tokens are
    compared with each side's shared-then-own tokens, and the two sides with each other; the best counts.
    """
    if first is None or second is None:
        return 0
    tokens = [set(_process(text).split()) for text in (first, second)]
    if not tokens[0] or not tokens[1]:
        return 0
    shared = " ".join(sorted(tokens[0] & tokens[1]))
    own = [f"{shared} {' '.join(sorted(mine - theirs))}".strip() for mine, theirs in (tokens, tokens[::-1])]
    return max(_ratio(shared, own[0]), _ratio(shared, own[1]), _ratio(own[0], own[1]))


def normalize_color(option: GoalOption) -> GoalOption:
    """The first base colour ``in`` the option (a substring of a value; an item of a pair), or the option."""
    for color in COLORS:
        if color in option:
            return color
    return option


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
    """How many goal ``attributes`` the product has (fuzzily among its attributes, or verbatim in its text)."""
    matched = 0
    for wanted in attributes:
        if any(token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in product.attributes) or _in_text(
            wanted, product
        ):
            matched += 1
    return matched


def goal_option_items(goal_options: Sequence[str] | Mapping[str, str]) -> list[GoalOption]:
    """The goal options as the original scores them: a list's values, a dict's ``(name, value)`` pairs."""
    return list(goal_options.items()) if isinstance(goal_options, Mapping) else list(goal_options)


def option_reward(goal_options: Sequence[GoalOption], chosen: Sequence[str]) -> int:
    """How many goal options one of the ``chosen`` values matches (see :func:`goal_option_items`)."""
    chosen = [normalize_color(value) for value in chosen]
    return sum(
        any(token_set_ratio(value, normalize_color(option)) > FUZZY_THRESHOLD for value in chosen)
        for option in goal_options
    )


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
    goal_options = goal_option_items(goal["goal_options"])
    price_ok = price <= goal["price_upper"] if goal["price_upper"] > 0 else None
    attributes_matched = attribute_reward(purchased, attributes)
    options_matched = option_reward(goal_options, list(purchased_options.values()))
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
