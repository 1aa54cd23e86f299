"""Search-v0 scores answers as Search-R1 does: values its own ``qa_em`` computed, replayed here.

The fixture holds what PeterGriffinJin/Search-R1's ``verl/utils/reward_score/qa_em.py`` (commit
a14dc3a) returned on the cases ``benchmarks/search_parity.py`` designs: its ``normalize_answer``, its
``em_check``, and its ``compute_score_em`` on the released prompt followed by a final turn cut as its
rollout cuts one. No code of the original is here, only its outputs.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agentfly_bench.search_parity import mismatches, read_json
from agentfly_envs.search import SearchEnv
from agentfly_envs.search.answers import exact_match, f1_score, normalize_answer

FIXTURE = Path(__file__).parent / "fixtures" / "search_r1_em_parity.json.gz"


def test_normalisation_exact_match_and_final_turns_equal_search_r1(tmp_path: Path) -> None:
    values = read_json(FIXTURE)
    assert (len(values["normalise"]), len(values["em"]), len(values["turns"])) == (807, 1620, 390)
    assert any(isinstance(golds, str) for _, golds, _ in values["em"])  # a bare string is one golden answer
    assert {answered for _, _, answered, _ in values["turns"]} == {True, False}
    assert mismatches(values, tmp_path) == {"normalise": [], "em": [], "turns": []}


def test_of_two_answers_in_a_turn_the_first_counts_as_in_search_r1(tmp_path: Path) -> None:
    two = re.compile(r"<answer>(.*?)</answer>(?: then )?<answer>(.*?)</answer>", re.DOTALL)
    rows = [(two.fullmatch(turn), golds, score) for turn, golds, _, score in read_json(FIXTURE)["turns"]]
    rows = [(match.groups(), golds, score) for match, golds, score in rows if match]
    assert len(rows) == 60
    # The original's score is the first answer's wherever the two answers score differently.
    telling = [
        (first, golds, score)
        for (first, second), golds, score in rows
        if exact_match(first, golds) != exact_match(second, golds)
    ]
    assert len(telling) > 40 and all(score == exact_match(first, golds) for first, golds, score in telling)
    env = SearchEnv(num_entities=60, index_dir=tmp_path, progress=False)
    env.reset(seed=0, options={"task": {"prompt": "Who?", "question": "Who?", "golden_answers": ["Paris"]}})
    _, reward, terminated, _, info = env.step("<answer>Paris</answer> or rather <answer>Lyon</answer>")
    assert (reward, terminated, info["answer"]) == (1.0, True, "Paris")
    env.close()


@given(st.text(), st.lists(st.text(), max_size=4) | st.text())
def test_normalisation_is_idempotent_and_scores_stay_in_range(prediction: str, golds: list[str] | str) -> None:
    normalised = normalize_answer(prediction)
    assert normalize_answer(normalised) == normalised
    assert exact_match(prediction, golds) in (0.0, 1.0)
    assert 0.0 <= f1_score(prediction, golds) <= 1.0
    listed = [golds] if isinstance(golds, str) else golds
    assert exact_match(prediction, golds) == exact_match(prediction, listed)
    assert exact_match(prediction, [*listed, prediction]) == 1.0
