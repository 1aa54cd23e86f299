"""Answer scoring: SQuAD/HotpotQA normalisation, exact match and token F1 against golden answers.

The normalisation is the one of the SQuAD v1.1 evaluation script, which HotpotQA, Natural Questions
in FlashRAG and Search-R1 all reuse: lower case, drop punctuation, drop the articles *a*, *an*,
*the*, and collapse white space. A prediction is scored against every golden answer and keeps the
best score; a bare string is one golden answer, as in Search-R1's ``em_check`` (not a sequence of
characters). F1 follows HotpotQA: *yes*, *no* and *noanswer* only match themselves exactly.

Exact match equals Search-R1's ``qa_em.em_check`` (PeterGriffinJin/Search-R1): 0 of 807 normalised
strings and 0 of 1,620 (prediction, golden answers) cases differ, nor 0 of 390 final turns scored
through ``SearchEnv`` against ``compute_score_em`` on the released prompt (``benchmarks/search_parity.py``;
``tests/envs/test_search_parity.py`` replays the values). Two documented departures: a None prediction scores 0 (the
original raises), and a turn without a complete ``<answer>`` tag does not end the episode, where the
original, extracting over prompt and response together, would score its prompt's example answer
(*Beijing*).

Example:
    >>> normalize_answer("  The Eiffel-Tower! ")
    'eiffeltower'
    >>> exact_match("the velmouth", ["Velmouth", "Port Velmouth"])
    1.0
    >>> round(f1_score("Port of Velmouth", ["Port Velmouth"]), 3)
    0.8
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

__all__ = ["exact_match", "f1_score", "normalize_answer"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ONLY_EXACT = frozenset({"yes", "no", "noanswer"})


def normalize_answer(text: str) -> str:
    """Lower case, remove punctuation, articles and extra white space (SQuAD's ``normalize_answer``)."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _golden(golden_answers: str | Sequence[str]) -> Sequence[str]:
    return [golden_answers] if isinstance(golden_answers, str) else golden_answers


def exact_match(prediction: str | None, golden_answers: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals any normalised golden answer, else 0.0."""
    if prediction is None:
        return 0.0
    predicted = normalize_answer(prediction)
    return float(any(predicted == normalize_answer(gold) for gold in _golden(golden_answers)))


def _token_f1(predicted: str, gold: str) -> float:
    if (predicted in _ONLY_EXACT or gold in _ONLY_EXACT) and predicted != gold:
        return 0.0
    predicted_tokens, gold_tokens = predicted.split(), gold.split()
    common = sum((Counter(predicted_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str | None, golden_answers: str | Sequence[str]) -> float:
    """The best token-level F1 of the normalised prediction against any golden answer."""
    if prediction is None:
        return 0.0
    predicted = normalize_answer(prediction)
    return max((_token_f1(predicted, normalize_answer(gold)) for gold in _golden(golden_answers)), default=0.0)
