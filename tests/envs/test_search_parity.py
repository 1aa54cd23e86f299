"""Search-v0 scores answers as Search-R1 does: values its own ``qa_em`` computed, replayed here.

The fixture holds what PeterGriffinJin/Search-R1's ``verl/utils/reward_score/qa_em.py`` returned on
designed cases (articles, punctuation, case, white space, unicode, several golden answers, a bare
string as the golden answer, empty answers, several and malformed ``<answer>`` tags): its
``normalize_answer``, its ``em_check``, and its ``compute_score_em`` on the released prompt followed by
a final turn cut as its rollout cuts one. No code of the original is here, only its outputs.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfly_envs.search import SearchEnv
from agentfly_envs.search.answers import exact_match, f1_score, normalize_answer

FIXTURE = Path(__file__).parent / "fixtures" / "search_r1_em_parity.json.gz"


@pytest.fixture(scope="module")
def original() -> dict:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def test_normalisation_equals_search_r1(original: dict) -> None:
    differing = [(text, value) for text, value in original["normalise"] if normalize_answer(text) != value]
    assert len(original["normalise"]) > 800 and differing == []


def test_exact_match_equals_search_r1_em_check(original: dict) -> None:
    cases = original["em"]
    differing = [(prediction, golds) for prediction, golds, value in cases if exact_match(prediction, golds) != value]
    assert len(cases) > 1_600 and any(isinstance(golds, str) for _, golds, _ in cases)
    assert differing == []


def test_final_turns_score_as_search_r1_compute_score_em(original: dict, tmp_path: Path) -> None:
    """A turn with a complete answer ends with the original's score; one without does not end (the
    original would score its prompt's example answer, a departure documented in ``answers``)."""
    env = SearchEnv(num_entities=60, index_dir=tmp_path, progress=False)
    differing = []
    for turn, golds, answered, value in original["turns"]:
        task = {"prompt": "Question: who?", "question": "who?", "golden_answers": golds}
        env.reset(seed=0, options={"task": task})
        _, reward, terminated, _, _ = env.step(turn)
        if (terminated, reward if answered else 0.0) != (answered, value if answered else 0.0):
            differing.append((turn, golds, value, reward, terminated))
    assert sum(answered for _, _, answered, _ in original["turns"]) > 250 and differing == []


@given(st.text(), st.lists(st.text(), max_size=4) | st.text())
def test_normalisation_is_idempotent_and_scores_stay_in_range(prediction: str, golds: list[str] | str) -> None:
    normalised = normalize_answer(prediction)
    assert normalize_answer(normalised) == normalised
    assert exact_match(prediction, golds) in (0.0, 1.0)
    assert 0.0 <= f1_score(prediction, golds) <= 1.0
    if isinstance(golds, str):
        assert exact_match(prediction, golds) == exact_match(prediction, [golds])
    assert exact_match(prediction, [*golds, prediction] if isinstance(golds, list) else [golds, prediction]) == 1.0
