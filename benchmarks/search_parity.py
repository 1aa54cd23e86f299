"""Search-v0 answer-scoring parity: this project's exact match beside Search-R1's ``qa_em``, on designed cases.

Three steps; the middle one imports only the original's two files (it never imports this project, and
this file holds none of the original's code)::

    # 0. The original's files, from a checkout or a mirror of PeterGriffinJin/Search-R1:
    mkdir -p /tmp/search-r1 && git --git-dir=MIRROR archive HEAD verl/utils/reward_score/qa_em.py \\
        scripts/data_process/nq_search.py | tar -x -C /tmp/search-r1
    # 1. Its values on the designed cases (any Python 3):
    python3 benchmarks/search_parity.py original --checkout /tmp/search-r1 \\
        --out tests/envs/fixtures/search_r1_em_parity.json.gz
    # 2. Compare (this project's venv): prints the mismatch counts and the first mismatches.
    .venv/bin/python benchmarks/search_parity.py compare tests/envs/fixtures/search_r1_em_parity.json.gz

The cases: strings for ``normalize_answer`` (articles, punctuation, case, white space, unicode, random
mixes); (prediction, golden answers) pairs for ``em_check``, with one or several golden answers and a
bare string as the golden answer; and final turns (several, nested, empty, unclosed and mis-cased
``<answer>`` tags) that the original scores with ``compute_score_em`` on its released prompt followed by
the turn cut as its rollout cuts one (at the first ``</search>``, else the first ``</answer>``).
Step 1's file is the fixture ``tests/envs/test_search_parity.py`` replays.

Of two answers in one turn, the original scores the first: ``qa_em``'s ``extract_solution`` takes the
last ``<answer>`` of the whole sequence, but its rollout (``_postprocess_responses`` in
``search_r1/llm_agent/generation.py``) has already cut the turn after its first ``</answer>``, so the
last answer of the sequence is the turn's first. The turns ``<answer>A</answer><answer>B</answer>`` and
``<answer>A</answer> then <answer>B</answer>`` check it.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import io
import json
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

BASES = [
    "Beijing", "Paris", "Barack Obama", "the Beatles", "1,234", "U.S.A.", "New York City", "an apple",
    "Théâtre du Châtelet", "naïve café", "Île-de-France", "yes", "no", "42", "3.14", "O'Neil", "Rock & Roll",
    "C++", "A Tale of Two Cities", "ＦＵＬＬＷＩＤＴＨ", "İstanbul", "straße", "Σίσυφος", "东京", "—dash—",
    "“quoted”", "a", "the", "an", "", "   ", "theory of the atom", "The The", "anthem", "Aaron", "then",
    "A.B.C.", "e.e. cummings", "Mr. T", "$100", "50%",
]  # fmt: skip
#: How many designed turns: the first answers of ``BASES``, each in every turn shape.
TURN_BASES = 30
#: A response that holds its own answer has more ``<answer>`` matches than the prompt alone.
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _variants(text: str) -> list[str]:
    return sorted(
        {
            text, text.lower(), text.upper(), text.title(), f"  {text}  ", f"\t{text}\n", f"The {text}",
            f"the {text}.", f"a {text}!", f"An {text}?", text.replace(" ", "  "), text.replace(" ", "\u00a0"),
            text.replace(" ", "-"), text.replace(".", ""), text + ",", f'"{text}"', f"({text})",
            text.replace("e", "é"), text.casefold(),
        }
    )  # fmt: skip


def design(seed: int = 15) -> dict[str, list[Any]]:
    """The cases: ``normalise`` strings, ``em`` (prediction, golden answers) and ``turns`` (turn, golden answers)."""
    rng = random.Random(seed)
    strings = {variant for base in BASES for variant in _variants(base)}
    for _ in range(300):
        strings.add("".join(rng.choice("aAthe n.,!?-'\"\u00a0\t\nÉé·—ß") for _ in range(rng.randint(0, 12))))
    em = []
    for base in BASES:
        for prediction in _variants(base):
            golds = [base]
            if rng.random() < 0.5:
                golds = [*rng.sample(BASES, 2), base]
                rng.shuffle(golds)
            em += [[prediction, golds], [prediction, [rng.choice(BASES)]], [prediction, base]]
    turns = []
    for base in BASES[:TURN_BASES]:
        golds, other = [base, rng.choice(BASES)], rng.choice(BASES)
        shapes = [
            f"<think>easy</think><answer>{base}</answer>", f"<answer> {base} </answer>", f"<answer>\n{base}\n</answer>",
            f"<answer>{other}</answer><answer>{base}</answer>", f"<answer>{base}</answer> then <answer>{other}</answer>",
            f"<answer>{base}</answer> trailing text", "<answer></answer>", f"<answer>{base}",
            f"<answer>x <answer>{base}</answer>", f"<ANSWER>{base}</ANSWER>", f"<answer>{base}</answer >",
            f"I think <answer>The {base}.</answer>", f"<answer>{base}</answer></answer>",
        ]  # fmt: skip
        turns += [[shape, golds] for shape in shapes]
    return {"normalise": sorted(strings), "em": em, "turns": turns}


def _cut(response: str) -> str:
    """How Search-R1's rollout ends a response: after the first ``</search>``, else the first ``</answer>``."""
    for tag in ("</search>", "</answer>"):
        if tag in response:
            return response.split(tag)[0] + tag
    return response


def score_with_original(checkout: Path) -> dict[str, Any]:
    """The original's values on the designed cases (imports only its ``qa_em`` and its prompt text)."""
    spec = importlib.util.spec_from_file_location("qa_em", checkout / "verl/utils/reward_score/qa_em.py")
    assert spec is not None and spec.loader is not None
    qa_em = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(qa_em)
    template = (checkout / "scripts/data_process/nq_search.py").read_text()
    body = template.split('prefix = f"""', 1)[1].split('"""', 1)[0]
    prompt = eval(f'f"""{body}"""', {"question": "who?"})  # the released prompt, its f-string as written
    cases = design()
    values: dict[str, Any] = {
        "normalise": [[text, qa_em.normalize_answer(text)] for text in cases["normalise"]],
        "em": [[prediction, golds, qa_em.em_check(prediction, golds)] for prediction, golds in cases["em"]],
    }
    turns = []
    for turn, golds in cases["turns"]:
        sequence = prompt + _cut(turn)
        with contextlib.redirect_stdout(io.StringIO()):  # it prints one case in 64
            score = qa_em.compute_score_em(sequence, {"target": golds})
        answered = len(ANSWER.findall(sequence)) > len(ANSWER.findall(prompt))
        turns.append([turn, golds, answered, score])
    values["turns"] = turns
    values["source"] = (
        "Search-R1 qa_em.py: normalize_answer, em_check, and compute_score_em on the nq_search base prompt "
        "plus the cut turn; turns rows: [turn, golden answers, the turn holds a complete answer, score]"
    )
    return values


def mismatches(values: dict[str, Any], index_dir: str | Path) -> dict[str, list[Any]]:
    """Where this project differs from the original's values. Turns run through ``SearchEnv``: one with a
    complete answer must end with the original's score; one without must not end (a documented departure:
    the original would score its prompt's example answer)."""
    from agentfly_envs.search import SearchEnv
    from agentfly_envs.search.answers import exact_match, normalize_answer

    differing: dict[str, list[Any]] = {
        "normalise": [row for row in values["normalise"] if normalize_answer(row[0]) != row[1]],
        "em": [row for row in values["em"] if exact_match(row[0], row[1]) != row[2]],
        "turns": [],
    }
    env = SearchEnv(num_entities=60, index_dir=index_dir, progress=False)
    for turn, golds, answered, score in values["turns"]:
        task = {"prompt": "Question: who?", "question": "who?", "golden_answers": golds}
        env.reset(seed=0, options={"task": task})
        _, reward, terminated, _, _ = env.step(turn)
        if terminated != answered or (answered and reward != score):
            differing["turns"].append([turn, golds, score, reward, terminated])
    return differing


def read_json(path: Path) -> Any:
    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8") as handle:
        return json.load(handle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    original = commands.add_parser("original", help="score the designed cases with Search-R1's qa_em")
    original.add_argument("--checkout", type=Path, required=True, help="holds the original's two files")
    original.add_argument("--out", type=Path, required=True)
    commands.add_parser("compare", help="compare this project with the original's values").add_argument(
        "values", type=Path
    )
    args = parser.parse_args(argv)
    if args.command == "original":
        values = score_with_original(args.checkout)
        with gzip.open(args.out, "wt", encoding="utf-8") as handle:
            json.dump(values, handle, ensure_ascii=False)
        print(f"{', '.join(f'{len(values[key])} {key}' for key in ('normalise', 'em', 'turns'))} -> {args.out}")
        return 0
    values = read_json(args.values)
    with tempfile.TemporaryDirectory() as index_dir:
        differing = mismatches(values, index_dir)
    for key, rows in differing.items():
        print(f"{key}: {len(rows)} of {len(values[key])} differ")
        for row in rows[:5]:
            print(f"  {row}")
    credited = sum(1 for _, _, answered, score in values["turns"] if not answered and score)
    print(f"(unanswered turns the original scores from its prompt's example answer: {credited})")
    return 1 if any(differing.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
