"""Search-v0 scores answers as Search-R1 does: values its own ``qa_em`` computed, replayed here.

The fixture holds what PeterGriffinJin/Search-R1's ``verl/utils/reward_score/qa_em.py`` (commit
a14dc3a) returned on the cases ``benchmarks/search_parity.py`` designs: its ``normalize_answer``, its
``em_check``, and its ``compute_score_em`` on the released prompt followed by a final turn cut as its
rollout cuts one. No code of the original is here, only its outputs.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agentfly_bench.search_parity import mismatches, read_json
from agentfly_envs.search.answers import exact_match, f1_score, normalize_answer

FIXTURE = Path(__file__).parent / "fixtures" / "search_r1_em_parity.json.gz"


def test_normalisation_exact_match_and_final_turns_equal_search_r1(tmp_path: Path) -> None:
    values = read_json(FIXTURE)
    assert (len(values["normalise"]), len(values["em"]), len(values["turns"])) == (807, 1620, 390)
    assert any(isinstance(golds, str) for _, golds, _ in values["em"])  # a bare string is one golden answer
    assert {answered for _, _, answered, _ in values["turns"]} == {True, False}
    assert mismatches(values, tmp_path) == {"normalise": [], "em": [], "turns": []}


@given(st.text(), st.lists(st.text(), max_size=4) | st.text())
def test_normalisation_is_idempotent_and_scores_stay_in_range(prediction: str, golds: list[str] | str) -> None:
    normalised = normalize_answer(prediction)
    assert normalize_answer(normalised) == normalised
    assert exact_match(prediction, golds) in (0.0, 1.0)
    assert 0.0 <= f1_score(prediction, golds) <= 1.0
    listed = [golds] if isinstance(golds, str) else golds
    assert exact_match(prediction, golds) == exact_match(prediction, listed)
    assert exact_match(prediction, [*listed, prediction]) == 1.0
