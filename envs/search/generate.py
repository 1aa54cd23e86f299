"""An offline, seeded generator of a fictional encyclopedia and of questions that need it.

No Wikipedia dump or QA set can be downloaded here, so the default corpus is made up: countries,
cities, organisations and people with random attributes (years, populations, occupations, ...) and
relations between them (a person's birthplace is a city, an organisation's founder is a person),
written as short encyclopedia passages. Names are built from random syllables and every value is
drawn at random, so no answer can be guessed from a question or from world knowledge: it has to be
retrieved. Questions are single-hop ("In what year was Alia Dorven born?") and multi-hop, through
relations ("In what year was the founder of Quorin Institute born?").

Everything is a function of ``(num_entities, seed)``. Attributes live in numpy arrays and passages
are rendered on demand, so a million-passage corpus for benchmarks streams without being held in
memory. Output uses the real formats: :class:`~agentfly_envs.search.corpus.Passage` (wiki-18 layout
on disk) and :class:`~agentfly_envs.search.qa.QARecord` (QA JSONL), whose ``metadata`` records the
hops and the gold passage of each hop. Write both to disk with::

    python -m agentfly_envs.search.generate OUT_DIR --entities 100000 --seed 0

Example:
    >>> world = Encyclopedia(num_entities=60, seed=0)
    >>> record = world.questions()[0]
    >>> record.metadata["hops"], record.metadata["gold_ids"]
    (['language'], ['0'])
    >>> passage = world.passage(int(record.metadata["gold_ids"][0]))
    >>> passage.title == record.metadata["subject"]
    True
    >>> read_fact(passage.text, "country", "language") == record.golden_answers[0]
    True
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

from agentfly_envs.search.corpus import CorpusSource, Passage, format_contents, write_corpus
from agentfly_envs.search.qa import QARecord, write_qa

__all__ = ["ATTRIBUTES", "Attribute", "Encyclopedia", "GeneratedCorpus", "encyclopedia", "hop_query", "read_fact"]

#: Part of every generated corpus's fingerprint: bump it when the rendered text changes.
GENERATOR_VERSION = 1

_VALUE = r"(?P<value>[^.,;]+)"
_YEAR = r"(?P<value>\d{3,4})\b"


@dataclass(frozen=True)
class Attribute:
    """One fact about an entity of some kind, and how it is written, read and asked about.

    Attributes:
        sentence: How a passage states it: ``{name}``, ``{he}``/``{his}`` (capitalised ``{He}``),
            ``{a}`` (the article for the value) and ``{value}``.
        pattern: A regex with a ``value`` group that reads the fact back from the subject's passage.
        question: The question, around a noun phrase ``{x}`` naming the subject.
        keyword: Words for a follow-up search about the subject.
        target: For a relation, the kind of entity the value names; None for a plain value.
        phrase: For a relation, a noun phrase naming the value of ``{x}``, for multi-hop questions.
    """

    sentence: str
    pattern: str
    question: str
    keyword: str
    target: str | None = None
    phrase: str | None = None


#: kind -> attribute name -> how it is written. The first attribute's sentence opens the passage.
ATTRIBUTES: dict[str, dict[str, Attribute]] = {
    "country": {
        "capital": Attribute(
            "{name} is a nation governed from {value}.",
            rf"governed from {_VALUE}",
            "What is the capital of {x}?",
            "capital",
            target="city",
            phrase="the capital of {x}",
        ),
        "currency": Attribute(
            "Payments there are made in the {value}.",
            rf"made in the {_VALUE}",
            "What is the currency of {x}?",
            "currency",
        ),
        "language": Attribute(
            "Most people there speak {value}.",
            rf"people there speak {_VALUE}",
            "What language is mostly used in {x}?",
            "language",
        ),
    },
    "city": {
        "country": Attribute(
            "{name} is a town of {value}.",
            rf"is a town of {_VALUE}",
            "In which country is {x}?",
            "city country",
            target="country",
            phrase="the country in which {x} lies",
        ),
        "founded": Attribute(
            "Its first charter dates from {value}.",
            rf"charter dates from {_YEAR}",
            "In what year was {x} founded?",
            "founded",
        ),
        "population": Attribute(
            "It has {value} inhabitants.",
            r"has (?P<value>\d[\d,]*\d) inhabitants",
            "What is the population of {x}?",
            "population",
        ),
        "river": Attribute(
            "It stands on the banks of the {value}.",
            rf"banks of the {_VALUE}",
            "Which river flows through {x}?",
            "river",
        ),
    },
    "organisation": {
        "founded": Attribute(
            "{name} opened its doors in {value}.",
            rf"opened its doors in {_YEAR}",
            "In what year was {x} founded?",
            "founded",
        ),
        "founder": Attribute(
            "It was set up by {value}.",
            rf"set up by {_VALUE}",
            "Who founded {x}?",
            "founder",
            target="person",
            phrase="the founder of {x}",
        ),
        "headquarters": Attribute(
            "Its main offices stand in {value}.",
            rf"main offices stand in {_VALUE}",
            "In which city is {x} headquartered?",
            "headquarters",
            target="city",
            phrase="the city where {x} is headquartered",
        ),
        "industry": Attribute(
            "It trades in {value}.",
            rf"trades in {_VALUE}",
            "In which industry is {x} active?",
            "industry",
        ),
    },
    "person": {
        "birth_year": Attribute(
            "{name} was born in {value}.",
            rf"was born in {_YEAR}",
            "In what year was {x} born?",
            "born",
        ),
        "birthplace": Attribute(
            "{He} is a native of {value}.",
            rf"is a native of {_VALUE}",
            "In which city was {x} born?",
            "native of",
            target="city",
            phrase="the city where {x} was born",
        ),
        "occupation": Attribute(
            "{He} worked as {a} {value}.",
            rf"worked as an? {_VALUE}",
            "What was the occupation of {x}?",
            "worked as",
        ),
        "employer": Attribute(
            "For most of {his} career {he} served {value}.",
            rf"career (?:he|she) served {_VALUE}",
            "Which organisation employed {x}?",
            "employed by",
            target="organisation",
            phrase="the organisation that employed {x}",
        ),
    },
}

KINDS = tuple(ATTRIBUTES)

#: A closing sentence per kind; ``{other}`` names a random city. None of them states a fact.
FILLERS: dict[str, tuple[str, ...]] = {
    "country": (
        "Its coast is known for {topic}.",
        "Travellers from {other} often write about {topic}.",
        "Its archives hold records of {topic}.",
    ),
    "city": (
        "The old quarter is known for {topic}.",
        "A road built long ago links it to {other}.",
        "Local chronicles describe {topic}.",
    ),
    "organisation": (
        "It is known for {topic}.",
        "A branch office once opened in {other}.",
        "Its annual reports describe {topic}.",
    ),
    "person": (
        "{He} is remembered for {topic}.",
        "Letters from {his} later years are kept in {other}.",
        "{He} spent several summers in {other}.",
    ),
}
TOPICS = (
    "a treatise on tidal mills",
    "a long study of lichens",
    "a collection of lantern designs",
    "a survey of mountain passes",
    "a dispute over canal tolls",
    "an atlas of coastal winds",
    "a set of bronze bells",
    "a catalogue of migratory birds",
    "a festival of paper kites",
    "an essay on the weaving of sailcloth",
    "a bridge of white stone",
    "a feud with a rival guild",
    "a garden of medicinal herbs",
    "a chronicle of harsh winters",
    "an archive of folk songs",
    "a reform of the postal routes",
)
OCCUPATIONS = (
    "architect",
    "astronomer",
    "botanist",
    "cartographer",
    "chemist",
    "composer",
    "engineer",
    "glassblower",
    "historian",
    "illustrator",
    "jurist",
    "linguist",
    "mathematician",
    "navigator",
    "novelist",
    "painter",
    "pharmacist",
    "philosopher",
    "photographer",
    "physician",
    "playwright",
    "poet",
    "sculptor",
    "shipwright",
    "surveyor",
    "translator",
    "violinist",
    "watchmaker",
    "weaver",
    "zoologist",
)
INDUSTRIES = (
    "shipbuilding",
    "textiles",
    "publishing",
    "glassmaking",
    "rail transport",
    "brewing",
    "mining",
    "banking",
    "printing",
    "clockmaking",
    "pharmaceuticals",
    "telegraphy",
    "porcelain",
    "insurance",
    "aviation",
    "salt trade",
)
ORGANISATION_KINDS = (
    "Institute",
    "Works",
    "Company",
    "Society",
    "Foundry",
    "Press",
    "Bank",
    "Academy",
    "Observatory",
    "Guild",
    "Trading House",
    "Conservatory",
)
CITY_SUFFIXES = ("mouth", "holm", "ford", "haven", "bury", "stead", "wick", "gate", "mere", "port", "dale", "crest")
COUNTRY_SUFFIXES = ("aria", "land", "onia", "mark", "istan")
CURRENCY_UNITS = ("crown", "mark", "florin", "dinar", "thaler", "sol", "ducat", "real")
LANGUAGE_SUFFIXES = ("ish", "ese", "ic", "ian", "i")
PRONOUNS = ({"he": "he", "his": "his", "He": "He"}, {"he": "she", "his": "her", "He": "She"})

_ONSETS = (
    "b",
    "br",
    "c",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "st",
    "t",
    "th",
    "v",
    "z",
    "qu",
    "w",
    "y",
    "sk",
    "tr",
)
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ou", "ia")
_CODAS = ("", "", "", "n", "r", "l", "s", "th", "m", "nd", "rk", "x")


def _template_words() -> frozenset[str]:
    """Every word the templates and value lists use: generated names must not collide with them."""
    texts = [*TOPICS, *OCCUPATIONS, *INDUSTRIES, *ORGANISATION_KINDS, *CURRENCY_UNITS, "river"]
    for attributes in ATTRIBUTES.values():
        texts += [f"{a.sentence} {a.question} {a.keyword} {a.phrase or ''}" for a in attributes.values()]
    texts += [sentence for fillers in FILLERS.values() for sentence in fillers]
    return frozenset(re.findall(r"[a-z]+", " ".join(texts).lower()))


def _words(rng: np.random.Generator, count: int) -> list[str]:
    """``count`` distinct capitalised words of two or three syllables, 4 to 9 letters long."""
    reserved = _template_words()
    found: dict[str, None] = {}  # insertion-ordered, so the result depends only on the seed
    while len(found) < count:
        batch = max(64, 2 * (count - len(found)))
        syllables = np.where(rng.random(batch) < 0.75, 2, 3)
        onsets = rng.integers(len(_ONSETS), size=(batch, 3))
        vowels = rng.integers(len(_VOWELS), size=(batch, 3))
        codas = rng.integers(len(_CODAS), size=batch)
        for row in range(batch):
            word = "".join(_ONSETS[onsets[row, s]] + _VOWELS[vowels[row, s]] for s in range(syllables[row]))
            word += _CODAS[codas[row]]
            if 4 <= len(word) <= 9 and word not in reserved:
                found.setdefault(word.capitalize())
            if len(found) == count:
                break
    return list(found)


def _spread(rng: np.random.Generator, size: int) -> tuple[int, int, int]:
    """An affine bijection ``i -> (a*i + b) % size``: distinct name pairs for distinct entities."""
    while True:
        a = int(rng.integers(1, max(2, size)))
        if math.gcd(a, size) == 1:
            return a, int(rng.integers(size)), size


def _apply(spread: tuple[int, int, int], index: int) -> int:
    a, b, size = spread
    return (a * index + b) % size


def read_fact(text: str, kind: str, attribute: str) -> str | None:
    """Read an attribute's value back from a passage about an entity of ``kind``, or None.

    Example:
        >>> read_fact("Alia Dorven was born in 1843. She is a native of Velmouth.", "person", "birthplace")
        'Velmouth'
    """
    match = re.search(ATTRIBUTES[kind][attribute].pattern, text)
    return match.group("value").strip() if match else None


def hop_query(subject: str, kind: str, attribute: str) -> str:
    """The search a reader makes to learn ``attribute`` of ``subject``: its name and a keyword.

    Example:
        >>> hop_query("Alia Dorven", "person", "birth_year")
        'Alia Dorven born'
    """
    return f"{subject} {ATTRIBUTES[kind][attribute].keyword}"


def _chains(kind: str, hops: int) -> list[tuple[str, ...]]:
    """Every attribute path of exactly ``hops`` steps from ``kind``: relations, then any attribute."""
    if hops == 1:
        return [(name,) for name in ATTRIBUTES[kind]]
    return [
        (name, *rest)
        for name, attribute in ATTRIBUTES[kind].items()
        if attribute.target is not None
        for rest in _chains(attribute.target, hops - 1)
    ]


class Encyclopedia:
    """A fictional world of ``num_entities`` entities, its passages and its questions.

    Entity ``i`` is passage ``i`` (id ``str(i)``): countries first, then cities, organisations and
    people. About 1% are countries, 15% cities, 15% organisations and the rest people.

    Args:
        num_entities: Entities, hence passages; at least 30.
        seed: Everything (names, values, relations, wording, questions) follows from it.
    """

    def __init__(self, num_entities: int = 2_000, seed: int = 0) -> None:
        if num_entities < 30:
            raise ValueError(f"num_entities must be at least 30, got {num_entities}")
        self.num_entities = num_entities
        self.seed = seed
        rng = np.random.default_rng([seed, GENERATOR_VERSION])
        countries = max(3, num_entities // 100)
        cities = organisations = num_entities * 15 // 100
        people = num_entities - countries - cities - organisations
        self.counts = {"country": countries, "city": cities, "organisation": organisations, "person": people}
        self.offsets = dict(zip(KINDS, itertools.accumulate([0, countries, cities, organisations]), strict=True))

        given = max(8, math.isqrt(people))
        family = math.ceil(people * 1.5 / given) + 1
        city_roots = math.ceil(cities * 1.5 / len(CITY_SUFFIXES)) + 1
        org_roots = math.ceil(organisations * 1.5 / len(ORGANISATION_KINDS)) + 1
        rivers = cities // 3 + 1
        sizes = {
            "given": given,
            "family": family,
            "city": city_roots,
            "org": org_roots,
            "country": countries,
            "currency": countries,
            "language": countries,
            "river": rivers,
        }
        words = _words(rng, sum(sizes.values()))
        self._words: dict[str, list[str]] = {}
        for name, size in sizes.items():
            self._words[name], words = words[:size], words[size:]
        self._spreads = {
            "person": _spread(rng, given * family),
            "city": _spread(rng, city_roots * len(CITY_SUFFIXES)),
            "organisation": _spread(rng, org_roots * len(ORGANISATION_KINDS)),
        }

        # Relations: every country has a city (its capital); the rest is drawn at random.
        self.city_country = rng.integers(countries, size=cities)
        self.city_country[:countries] = np.arange(countries)
        self.country_capital = np.arange(countries)
        self.city_founded = rng.integers(700, 1850, size=cities)
        self.city_population = rng.integers(2_000, 3_000_000, size=cities)
        self.city_river = rng.integers(rivers, size=cities)
        self.person_birth = rng.integers(1700, 1990, size=people)
        self.person_birthplace = rng.integers(cities, size=people)
        self.person_occupation = rng.integers(len(OCCUPATIONS), size=people)
        self.person_employer = rng.integers(organisations, size=people)
        self.person_pronoun = rng.integers(2, size=people)
        self.org_founder = rng.integers(people, size=organisations)
        self.org_founded = np.minimum(
            self.person_birth[self.org_founder] + rng.integers(22, 70, size=organisations), 2015
        )
        self.org_headquarters = rng.integers(cities, size=organisations)
        self.org_industry = rng.integers(len(INDUSTRIES), size=organisations)
        # Wording: the order of the middle sentences, the closing sentence, its topic and city.
        self._order = rng.integers(6, size=num_entities)
        self._filler = rng.integers(3, size=num_entities)
        self._topic = rng.integers(len(TOPICS), size=num_entities)
        self._other = rng.integers(cities, size=num_entities)
        # Questions: which attribute path each entity is asked about, for each number of hops.
        self._question_pick = rng.integers(1 << 30, size=(num_entities, 4))
        self._questions: dict[int, list[QARecord]] = {}

    # ----------------------------------------------------------------- entities

    def __len__(self) -> int:
        return self.num_entities

    def kind(self, entity: int) -> tuple[str, int]:
        """The kind of an entity and its index among entities of that kind."""
        if not 0 <= entity < self.num_entities:
            raise IndexError(f"entity {entity} is outside 0..{self.num_entities - 1}")
        for kind in reversed(KINDS):
            if entity >= self.offsets[kind]:
                return kind, entity - self.offsets[kind]
        raise AssertionError("unreachable")

    def name(self, kind: str, local: int) -> str:
        """The name of the ``local``-th entity of ``kind``."""
        words = self._words
        if kind == "person":
            pair = _apply(self._spreads["person"], local)
            return f"{words['given'][pair // len(words['family'])]} {words['family'][pair % len(words['family'])]}"
        if kind == "city":
            pair = _apply(self._spreads["city"], local)
            return words["city"][pair // len(CITY_SUFFIXES)] + CITY_SUFFIXES[pair % len(CITY_SUFFIXES)]
        if kind == "organisation":
            pair = _apply(self._spreads["organisation"], local)
            kinds = ORGANISATION_KINDS
            return f"{words['org'][pair // len(kinds)]} {kinds[pair % len(kinds)]}"
        return words["country"][local] + COUNTRY_SUFFIXES[local % len(COUNTRY_SUFFIXES)]

    def value(self, kind: str, local: int, attribute: str) -> tuple[str, int | None]:
        """An attribute's value as written, and the local index of the entity it names (relations)."""
        words = self._words
        match kind, attribute:
            case "country", "capital":
                city = int(self.country_capital[local])
                return self.name("city", city), city
            case "country", "currency":
                return f"{words['currency'][local]} {CURRENCY_UNITS[local % len(CURRENCY_UNITS)]}", None
            case "country", "language":
                return words["language"][local] + LANGUAGE_SUFFIXES[local % len(LANGUAGE_SUFFIXES)], None
            case "city", "country":
                country = int(self.city_country[local])
                return self.name("country", country), country
            case "city", "founded":
                return str(self.city_founded[local]), None
            case "city", "population":
                return f"{int(self.city_population[local]):,}", None
            case "city", "river":
                return f"{words['river'][self.city_river[local]]} River", None
            case "organisation", "founded":
                return str(self.org_founded[local]), None
            case "organisation", "founder":
                person = int(self.org_founder[local])
                return self.name("person", person), person
            case "organisation", "headquarters":
                city = int(self.org_headquarters[local])
                return self.name("city", city), city
            case "organisation", "industry":
                return INDUSTRIES[self.org_industry[local]], None
            case "person", "birth_year":
                return str(self.person_birth[local]), None
            case "person", "birthplace":
                city = int(self.person_birthplace[local])
                return self.name("city", city), city
            case "person", "occupation":
                return OCCUPATIONS[self.person_occupation[local]], None
            case "person", "employer":
                organisation = int(self.person_employer[local])
                return self.name("organisation", organisation), organisation
        raise KeyError(f"no attribute {attribute!r} for {kind}")

    # ----------------------------------------------------------------- passages

    def passage(self, entity: int) -> Passage:
        """The encyclopedia passage about one entity."""
        kind, local = self.kind(entity)
        name = self.name(kind, local)
        pronouns = (
            PRONOUNS[int(self.person_pronoun[local])] if kind == "person" else {"he": "it", "his": "its", "He": "It"}
        )
        sentences = []
        for attribute_name, attribute in ATTRIBUTES[kind].items():
            value, _ = self.value(kind, local, attribute_name)
            article = "an" if value[0] in "aeiou" else "a"
            sentences.append(attribute.sentence.format(name=name, value=value, a=article, **pronouns))
        opening, middle = sentences[0], sentences[1:]
        orders = list(itertools.permutations(middle))
        middle = list(orders[int(self._order[entity]) % len(orders)])
        closing = FILLERS[kind][int(self._filler[entity])].format(
            topic=TOPICS[self._topic[entity]], other=self.name("city", int(self._other[entity])), **pronouns
        )
        return Passage(str(entity), name, " ".join([opening, *middle, closing]))

    def passages(self) -> Iterator[Passage]:
        """Every passage in id order, rendered one at a time."""
        return (self.passage(entity) for entity in range(self.num_entities))

    @functools.cached_property
    def fingerprint(self) -> str:
        """A hash of the corpus as written to disk: the key of its index."""
        digest = hashlib.blake2b(digest_size=16)
        encoder = msgspec.json.Encoder()
        for passage in self.passages():
            digest.update(encoder.encode({"id": passage.id, "contents": format_contents(passage.title, passage.text)}))
            digest.update(b"\n")
        return digest.hexdigest()

    def corpus(self) -> GeneratedCorpus:
        """The passages as a :class:`~agentfly_envs.search.corpus.CorpusSource`, to build indexes from."""
        return GeneratedCorpus(self)

    # ----------------------------------------------------------------- questions

    def follow(self, entity: int, chain: tuple[str, ...]) -> tuple[str, list[str], list[str]]:
        """Walk an attribute path from an entity: the answer, the names along it and their passage ids."""
        kind, local = self.kind(entity)
        names, ids = [self.name(kind, local)], [str(entity)]
        for step, attribute_name in enumerate(chain):
            value, target = self.value(kind, local, attribute_name)
            if step == len(chain) - 1:
                return value, names, ids
            kind, local = ATTRIBUTES[kind][attribute_name].target, target  # type: ignore[assignment]
            names.append(value)
            ids.append(str(self.offsets[kind] + local))
        raise ValueError("an attribute path needs at least one step")

    def question(self, entity: int, chain: tuple[str, ...]) -> QARecord | None:
        """The question that asks for the end of ``chain`` from ``entity``; None when it would be
        degenerate (the answer is an entity already named on the way, as in "the country of the
        capital of Aldaria")."""
        answer, names, ids = self.follow(entity, chain)
        if answer in names:
            return None
        kind, _ = self.kind(entity)
        phrase, current = names[0], kind
        for attribute_name in chain[:-1]:
            attribute = ATTRIBUTES[current][attribute_name]
            phrase, current = attribute.phrase.format(x=phrase), attribute.target  # type: ignore[union-attr,assignment]
        text = ATTRIBUTES[current][chain[-1]].question.format(x=phrase)
        text = text[0].upper() + text[1:]
        metadata = {"subject": names[0], "kind": kind, "hops": list(chain), "bridges": names[1:], "gold_ids": ids}
        return QARecord(text, [answer], metadata=metadata)

    def questions(self, max_hops: int = 2) -> list[QARecord]:
        """For each entity, one question of each length from 1 to ``max_hops`` hops (when one exists).

        Ids are ``"gen-<seed>-<n>"``; the list is memoised.
        """
        if not 1 <= max_hops <= 4:
            raise ValueError(f"max_hops must be between 1 and 4, got {max_hops}")
        if max_hops not in self._questions:
            records = []
            for entity in range(self.num_entities):
                kind, _ = self.kind(entity)
                for hops in range(1, max_hops + 1):
                    chains = _chains(kind, hops)
                    start = int(self._question_pick[entity, hops - 1])
                    for offset in range(len(chains)):  # the drawn path, or the next one that is not degenerate
                        record = self.question(entity, chains[(start + offset) % len(chains)])
                        if record is not None:
                            record.id = f"gen-{self.seed}-{len(records)}"
                            records.append(record)
                            break
            self._questions[max_hops] = records
        return self._questions[max_hops]


class GeneratedCorpus(CorpusSource):
    """An :class:`Encyclopedia`'s passages as a corpus source; its fingerprint hashes the rendered text.

    Args:
        world: The encyclopedia.
    """

    unit = "passages"

    def __init__(self, world: Encyclopedia) -> None:
        self.world = world
        self.description = f"generated encyclopedia ({world.num_entities} entities, seed {world.seed})"
        self.total = world.num_entities

    def fingerprint(self, memo_dir: object = None) -> str:
        return self.world.fingerprint

    def stream(self, advance: Callable[[int], object] | None = None) -> Iterator[Passage]:
        for passage in self.world.passages():
            if advance is not None:
                advance(1)
            yield passage


@functools.lru_cache(maxsize=8)
def encyclopedia(num_entities: int = 2_000, seed: int = 0) -> Encyclopedia:
    """A shared :class:`Encyclopedia`: envs made with the same arguments generate it once per process."""
    return Encyclopedia(num_entities, seed)


def main(argv: list[str] | None = None) -> int:
    """Write a generated corpus and its questions to ``OUT_DIR/corpus.jsonl`` and ``OUT_DIR/qa.jsonl``."""
    parser = argparse.ArgumentParser(prog="python -m agentfly_envs.search.generate", description=main.__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--entities", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-hops", type=int, default=2)
    parser.add_argument("--gzip", action="store_true", help="write .jsonl.gz")
    args = parser.parse_args(argv)
    world = Encyclopedia(args.entities, args.seed)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    suffix = ".jsonl.gz" if args.gzip else ".jsonl"
    passages = write_corpus(world.passages(), args.out_dir / f"corpus{suffix}")
    questions = write_qa(world.questions(args.max_hops), args.out_dir / f"qa{suffix}")
    print(f"wrote {passages} passages and {questions} questions to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
