"""AgentFly/Search-v0: answer scoring, the real-format loaders, the generator, the BM25 index and the env."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentfly_env
from agentfly_env.core.types import ToolCall
from agentfly_env.runners.checker import rollout
from agentfly_envs._tantivy import STOP_WORDS, english_analyzer
from agentfly_envs.search import SearchEnv
from agentfly_envs.search.answers import exact_match, f1_score, normalize_answer
from agentfly_envs.search.corpus import (
    CorpusFile,
    CorpusFormatError,
    Passage,
    decode_passage,
    format_contents,
    iter_corpus,
    parse_contents,
    write_corpus,
)
from agentfly_envs.search.generate import ATTRIBUTES, Encyclopedia, encyclopedia, hop_query, read_fact
from agentfly_envs.search.generate import main as generate_main
from agentfly_envs.search.index import INDEX_DIR_ENV, INDEX_FORMAT, ensure_index, query_terms
from agentfly_envs.search.qa import load_qa
from agentfly_envs.search.retrieval import parse_hits
from agentfly_envs.search.web import SearchProvider, WebResult, parse_web_results, register_provider

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One index directory per module: the default corpus is indexed once for all these tests."""
    return tmp_path_factory.mktemp("search-index")


def make_env(index_dir: Path, **kwargs) -> SearchEnv:
    return SearchEnv(index_dir=index_dir, progress=False, **kwargs)


# --- answers: normalisation, EM, F1 ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Cat", "cat"),
        ("  a   cat!! ", "cat"),
        ("An apple.", "apple"),
        ("Paris, France", "paris france"),
        ("THE END", "end"),
        ("theory of the atom", "theory of atom"),  # articles go only as whole words
        ("U.S.A.", "usa"),
        ("an", ""),
        ("1,234,567", "1234567"),
    ],
)
def test_normalisation_drops_articles_punctuation_and_case(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_exact_match_and_f1_take_the_best_golden_answer() -> None:
    assert exact_match("the Velmouth.", ["Aldaria", "velmouth"]) == 1.0
    assert exact_match("Velmouth Port", ["Velmouth"]) == 0.0
    assert exact_match(None, ["x"]) == 0.0
    assert f1_score("Velmouth Port", ["Aldaria", "Velmouth"]) == pytest.approx(2 / 3)
    assert f1_score("yes", ["no"]) == 0.0 and f1_score("no", ["no"]) == 1.0
    assert f1_score("no answer here", ["no"]) == 0.0  # yes/no/noanswer only match exactly (HotpotQA)
    assert f1_score("", ["x"]) == 0.0 and f1_score("x", []) == 0.0


@settings(deadline=None)
@given(st.text(max_size=40), st.lists(st.text(max_size=20), max_size=3))
def test_scores_are_bounded_and_consistent(prediction: str, golden: list[str]) -> None:
    assert normalize_answer(normalize_answer(prediction)) == normalize_answer(prediction)
    em, f1 = exact_match(prediction, golden), f1_score(prediction, golden)
    assert em in (0.0, 1.0) and 0.0 <= f1 <= 1.0
    if em == 1.0 and normalize_answer(prediction):
        assert f1 == 1.0
    assert exact_match(prediction, [*golden, prediction]) == 1.0


# --- the real formats ----------------------------------------------------------------------------

CORPUS_LINES = [
    '{"id": "0", "contents": "\\"Aaron\\"\\nAaron is a prophet, high priest, and the brother of Moses."}',
    "",
    '{"id": 17, "contents": "\\"Velmouth (city)\\"\\nA city.\\nIts second line."}',
    '{"id": "w-3", "title": "Split Layout", "text": "Title and text in their own fields."}',
]


def test_corpus_reads_both_layouts(tmp_path: Path) -> None:
    plain = tmp_path / "corpus.jsonl"
    plain.write_text("\n".join(CORPUS_LINES) + "\n")
    compressed = tmp_path / "corpus.jsonl.gz"
    compressed.write_bytes(gzip.compress(plain.read_bytes()))
    expected = [
        Passage("0", "Aaron", "Aaron is a prophet, high priest, and the brother of Moses."),
        Passage("17", "Velmouth (city)", "A city.\nIts second line."),
        Passage("w-3", "Split Layout", "Title and text in their own fields."),
    ]
    assert list(iter_corpus(plain)) == expected
    assert list(iter_corpus(compressed)) == expected
    assert CorpusFile(plain).total == plain.stat().st_size
    assert CorpusFile(compressed).total is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "1", "contents": "\\"T\\"\\ntext"', "not valid JSON"),
        ('{"contents": "\\"T\\"\\ntext"}', "missing required field `id`"),
        ('{"id": "1", "title": "only a title"}', 'needs "contents"'),
        ('{"id": "1", "contents": 42}', "Expected `str | null`"),
        ('["id", "contents"]', "Expected `object`"),
        ('{"id": "1", "contents": ""}', "empty"),
    ],
)
def test_broken_corpus_lines_are_rejected_with_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(CORPUS_LINES[0] + "\n" + line + "\n")
    with pytest.raises(CorpusFormatError, match=f"broken.jsonl:2: .*{message}"):
        list(iter_corpus(path))


@settings(deadline=None)
@given(st.binary(max_size=200))
def test_any_corpus_line_decodes_or_fails_clearly(line: bytes) -> None:
    try:
        passage = decode_passage(line, "f:1")
    except CorpusFormatError as error:
        assert str(error).startswith("f:1: ")
    else:
        assert isinstance(passage.id, str) and (passage.title or passage.text)


single_line = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")), max_size=30)


@settings(deadline=None)
@given(st.lists(st.tuples(single_line, st.text(max_size=60)), min_size=1, max_size=5))
def test_written_corpus_reads_back(tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, str]]) -> None:
    passages = [Passage(str(i), title.strip(), text.strip()) for i, (title, text) in enumerate(rows)]
    passages = [p for p in passages if p.title or p.text]
    path = tmp_path_factory.mktemp("roundtrip") / "corpus.jsonl"
    assert write_corpus(passages, path) == len(passages)
    assert [(p.id, p.title, " ".join(p.text.split())) for p in iter_corpus(path)] == [
        (p.id, p.title, " ".join(p.text.split())) for p in passages
    ]


def test_contents_round_trip_keeps_quotes_inside_titles() -> None:
    assert parse_contents(format_contents('"Quoted" title', "text")) == ('"Quoted" title', "text")
    assert parse_contents("no quotes\nbody") == ("no quotes", "body")


def test_qa_reads_list_and_string_answers_and_keeps_metadata(tmp_path: Path) -> None:
    path = tmp_path / "nq.jsonl"
    path.write_text(
        '{"id": "test_0", "question": "who got the first nobel prize in physics?", '
        '"golden_answers": ["Wilhelm Conrad R\\u00f6ntgen"]}\n'
        "\n"
        '{"question": "which city?", "golden_answers": "Velmouth", "metadata": {"type": "bridge"}}\n'
    )
    first, second = load_qa(path)
    assert first == {
        "id": "test_0",
        "prompt": "Question: who got the first nobel prize in physics?",
        "question": "who got the first nobel prize in physics?",
        "golden_answers": ["Wilhelm Conrad Röntgen"],
        "metadata": {},
    }
    assert (second["id"], second["golden_answers"], second["metadata"]) == ("1", ["Velmouth"], {"type": "bridge"})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "q?"}\n', "missing required field `golden_answers`"),
        ('{"question": "q?", "golden_answers": []}\n', "at least one non-empty answer"),
        ('{"question": "q?", "golden_answers": [""]}\n', "at least one non-empty answer"),
        ('{"question": "q?", "golden_answers": [3]}\n', "Expected `str`"),
        ('{"question": " ", "golden_answers": ["a"]}\n', "the question is empty"),
        ('{"golden_answers": ["a"]}\n', "missing required field `question`"),
        ("question: q?\n", "not valid JSON"),
        ("\n\n", "no questions"),
    ],
)
def test_broken_qa_files_are_rejected(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(content)
    with pytest.raises(CorpusFormatError, match=message):
        load_qa(path)


# --- the generated encyclopedia ------------------------------------------------------------------


def test_generation_is_a_function_of_the_seed() -> None:
    first, again, other = Encyclopedia(200, seed=3), Encyclopedia(200, seed=3), Encyclopedia(200, seed=4)
    assert list(first.passages()) == list(again.passages())
    assert first.questions() == again.questions()
    assert first.fingerprint == again.fingerprint != other.fingerprint
    assert [p.title for p in first.passages()] != [p.title for p in other.passages()]


def test_generator_writes_the_real_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert generate_main([str(tmp_path), "--entities", "60", "--seed", "2", "--gzip"]) == 0
    assert "60 passages and 120 questions" in capsys.readouterr().out
    world = Encyclopedia(60, seed=2)
    assert list(iter_corpus(tmp_path / "corpus.jsonl.gz")) == list(world.passages())
    tasks = load_qa(tmp_path / "qa.jsonl.gz")
    assert [(t["id"], t["question"], t["golden_answers"], t["metadata"]) for t in tasks] == [
        (q.id, q.question, q.golden_answers, q.metadata) for q in world.questions()
    ]


def test_every_fact_reads_back_from_its_passage() -> None:
    world = Encyclopedia(300, seed=1)
    assert len({world.passage(i).title for i in range(len(world))}) == len(world)  # names are unique
    for entity in range(len(world)):
        kind, local = world.kind(entity)
        passage = world.passage(entity)
        assert passage.id == str(entity) and passage.title == world.name(kind, local)
        for attribute in ATTRIBUTES[kind]:
            assert read_fact(passage.text, kind, attribute) == world.value(kind, local, attribute)[0]


def test_questions_are_single_and_multi_hop_and_need_retrieval() -> None:
    world = encyclopedia(2_000, 0)
    questions = world.questions()
    assert Counter(len(q.metadata["hops"]) for q in questions) == {1: 2_000, 2: 2_000}
    answers_by_template: defaultdict[tuple, list[str]] = defaultdict(list)
    for record in questions:
        answer = record.golden_answers[0]
        # The answer is nowhere in the question: it has to be looked up.
        assert normalize_answer(answer) not in normalize_answer(record.question)
        metadata = record.metadata
        assert len(metadata["gold_ids"]) == len(metadata["hops"]) == len(metadata["bridges"]) + 1
        answers_by_template[(metadata["kind"], *metadata["hops"])].append(answer)
    # Every kind of question has many different answers: none can be guessed from its wording.
    assert len(answers_by_template) >= 30
    assert all(len(set(answers)) >= min(3, len(answers)) for answers in answers_by_template.values())


def test_every_generated_gold_passage_is_retrieved_for_its_own_terms(index_dir: Path) -> None:
    world = encyclopedia(2_000, 0)
    index = ensure_index(world.corpus(), index_dir, progress=False)
    searched = 0
    for record in world.questions():
        metadata = record.metadata
        kind, subject = metadata["kind"], metadata["subject"]
        for hop, (attribute, gold) in enumerate(zip(metadata["hops"], metadata["gold_ids"], strict=True)):
            query = record.question if hop == 0 else hop_query(subject, kind, attribute)
            ids = [hit.id for hit in index.search(query, k=3)]
            assert gold in ids, f"{query!r}: gold passage {gold} not in the top 3 {ids}"
            searched += 1
            subject = metadata["bridges"][hop] if hop < len(metadata["bridges"]) else None
            kind = ATTRIBUTES[kind][attribute].target
    assert searched == 6_000


# --- the index -------------------------------------------------------------------------------


def test_index_is_built_once_and_keyed_by_the_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(Encyclopedia(60, seed=0).passages(), corpus)
    first = ensure_index(CorpusFile(corpus), tmp_path / "indexes", progress=False)
    assert first.num_docs == 60 and first.meta["passages"] == 60
    assert ensure_index(CorpusFile(corpus), tmp_path / "indexes", progress=False) is first  # opened, not rebuilt
    # Another corpus, another index; the same content under another name shares the first one.
    other = tmp_path / "other.jsonl"
    write_corpus(Encyclopedia(60, seed=1).passages(), other)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(corpus.read_bytes())
    assert ensure_index(CorpusFile(other), tmp_path / "indexes", progress=False).path != first.path
    assert ensure_index(CorpusFile(copy), tmp_path / "indexes", progress=False) is first
    names = sorted(p.name for p in (tmp_path / "indexes").iterdir() if p.is_dir())
    assert [name.split("-")[0] for name in names] == ["bm25", "bm25", "fingerprints"]
    assert first.by_row(7).id == "7"
    with pytest.raises(IndexError):
        first.by_row(60)


BUILDER = """
import sys, time
from agentfly_envs.search.corpus import CorpusFile
from agentfly_envs.search.index import ensure_index
index = ensure_index(CorpusFile(sys.argv[1]), sys.argv[2], progress=False)
print(index.path, index.meta["build_seconds"], index.num_docs)
"""


def test_concurrent_builders_build_once_and_atomically(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(Encyclopedia(3_000, seed=5).passages(), corpus)
    indexes = tmp_path / "indexes"
    indexes.mkdir()
    # A temp dir left by a builder of this corpus that died: removed, never used.
    stale = indexes / f".bm25-v{INDEX_FORMAT}-{CorpusFile(corpus).fingerprint()}.building-dead"
    stale.mkdir()
    (stale / "meta.json").write_text("{}")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    builders = [
        subprocess.Popen(
            [sys.executable, "-c", BUILDER, str(corpus), str(indexes)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    outputs = []
    for builder in builders:
        out, err = builder.communicate(timeout=120)
        assert builder.returncode == 0, err
        outputs.append(out.split())
    assert len({tuple(out) for out in outputs}) == 1  # one path, one build time: built once, by one of them
    assert outputs[0][2] == "3000"
    leftovers = [p.name for p in indexes.iterdir() if ".building-" in p.name]
    assert leftovers == [] and not stale.exists()


@settings(deadline=None, max_examples=60)
@given(st.text(max_size=80))
@example("Shirley_Temple")  # a word the analyzer splits in two: never a phrase query
@example("the of_a")
@example("x" * 40)
def test_any_query_text_is_searched_or_refused_for_what_it_is(index_dir: Path, query: str) -> None:
    index = ensure_index(encyclopedia(2_000, 0).corpus(), index_dir, progress=False)
    words = query_terms(query)
    if english_analyzer().analyze(" ".join(words)):  # something to match: searched, whatever the syntax
        assert len(index.search(query, 3)) <= 3
        return
    with pytest.raises(ValueError) as refused:
        index.search(query, 3)
    if not words:
        assert "no searchable words" in str(refused.value)
    elif all(word in STOP_WORDS for word in words):
        assert "only common words" in str(refused.value)
    else:
        assert "too long to be indexed" in str(refused.value)


def test_stop_words_are_refused_and_words_are_stemmed(index_dir: Path) -> None:
    index = ensure_index(encyclopedia(2_000, 0).corpus(), index_dir, progress=False)
    with pytest.raises(ValueError, match="only common words"):
        index.search("The, of a... is it?", 3)
    with pytest.raises(ValueError, match="too long to be indexed"):
        index.search("the " + "x" * 40, 3)
    assert index.search("charters", 3) == index.search("charter", 3) != []


def test_a_wikipedia_title_with_underscores_is_searched_as_its_words(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    passages = [
        Passage("0", "Shirley Temple", "Shirley Temple was an American actress, singer and diplomat."),
        Passage("1", "Temple", "A temple is a building reserved for spiritual rituals."),
        Passage("2", "Shirley, Derbyshire", "Shirley is a village in the Derbyshire Dales."),
    ]
    write_corpus(passages, corpus)
    index = ensure_index(CorpusFile(corpus), tmp_path / "indexes", progress=False)
    assert index.search("Shirley_Temple", 3) == index.search("Shirley Temple", 3)
    assert index.search("Shirley_Temple", 1)[0].title == "Shirley Temple"
    world = encyclopedia(2_000, 0)  # generated titles of two words, written as Wikipedia's URLs write them
    generated = ensure_index(world.corpus(), tmp_path / "indexes", progress=False)
    titles = [world.passage(row).title for row in range(len(world)) if " " in world.passage(row).title]
    assert len(titles) > 1_000
    assert all(generated.search(title.replace(" ", "_"), 1)[0].title == title for title in titles)


# --- the env -----------------------------------------------------------------------------------


def test_oracle_reader_scores_em_one_on_a_sample(index_dir: Path) -> None:
    for split in ("train", "test"):
        env = make_env(index_dir, split=split)
        episodes = [rollout(env, seed) for seed in range(60)]
        assert all(t.steps[-1].reward_components == {"em": 1.0, "f1": 1.0} for t in episodes)
        hops = Counter(len(t.task["metadata"]["hops"]) for t in episodes)
        assert hops[1] > 0 and hops[2] > 0
        # The reader searched once per hop and answered: 1-hop questions take 2 steps, 2-hop ones 3.
        assert all(len(t.steps) == len(t.task["metadata"]["hops"]) + 1 for t in episodes)
        env.close()


def test_the_oracle_reads_the_passages_it_gets(index_dir: Path) -> None:
    # Passages cut before their facts: the reader cannot find the answer, and says so.
    env = make_env(index_dir, passage_chars=20)
    trajectory = rollout(env, seed=0)
    assert trajectory.steps[-1].reward_components["em"] == 0.0
    assert "<answer>unknown</answer>" in trajectory.steps[-1].action
    env.close()


def test_splits_are_disjoint_and_cover_the_questions(index_dir: Path) -> None:
    train, test = make_env(index_dir, split="train"), make_env(index_dir, split="test")
    train_ids = {train.tasks[i]["id"] for i in range(len(train.tasks))}
    test_ids = {test.tasks[i]["id"] for i in range(len(test.tasks))}
    assert not train_ids & test_ids and len(train_ids | test_ids) == 4_000
    assert 0.05 < len(test_ids) / 4_000 < 0.15


def test_step_reports_em_and_f1_and_f1_can_be_the_reward(index_dir: Path) -> None:
    env = make_env(index_dir, reward_metric="f1")
    env.reset(options={"task": {"prompt": "Question: who?", "question": "who?", "golden_answers": ["Alia Dorven"]}})
    _, reward, terminated, _, info = env.step("<answer>the alia</answer>")
    assert terminated and reward == pytest.approx(2 / 3)
    assert info["step"].reward_components == {"em": 0.0, "f1": pytest.approx(2 / 3)} and not info["step"].success


def test_bad_input_never_raises_and_is_counted(index_dir: Path) -> None:
    env = make_env(index_dir, max_observation_chars=300)
    env.reset(seed=0)
    cases = {
        '<tool_call>{"name": "retrieve", "arguments": {"query": "?!"}}</tool_call>': "tool_error",
        '<tool_call>{"name": "retrieve", "arguments": {"q": "x"}}</tool_call>': "invalid_arguments",
        '<tool_call>{"name": "retrieve", "arguments": {"query": 7}}</tool_call>': "invalid_arguments",
        '<tool_call>{"name": "google", "arguments": {"query": "x"}}</tool_call>': "unknown_tool",
        '<tool_call>{"name": "retrieve", "arguments": ': "parse_error",
        "I think I will just wait.": "no_action",
    }
    for action, error in cases.items():
        env.reset(seed=0)
        observation, reward, terminated, truncated, info = env.step(action)
        assert info["step"].errors == {error: 1}, action
        assert reward == 0.0 and not terminated and not truncated and observation
    env.reset(seed=0)
    observation, *_ = env.step('<tool_call>{"name": "retrieve", "arguments": {"query": "?!"}}</tool_call>')
    assert "no searchable words" in observation
    # A huge query is searched (its first words), and the observation stays bounded.
    long_query = " ".join(["velmouth river population"] * 2_000)
    observation, *_, info = env.step(env.parser.format_call(ToolCall("retrieve", {"query": long_query})))
    assert info["step"].errors == {} and len(observation) <= 300 and "truncated" in observation


def test_seeded_reset_repeats_and_info_describes_the_corpus(index_dir: Path) -> None:
    env = make_env(index_dir)
    first, info = env.reset(seed=11)
    again, _ = env.reset(seed=11)
    assert first == again and first.startswith("Question: ")
    assert info["corpus"]["passages"] == 2_000 and info["corpus"]["retrieval"] == "bm25"
    assert [tool["function"]["name"] for tool in info["tools"]] == ["retrieve"]
    env.action_space.seed(0)
    samples = [env.action_space.sample() for _ in range(30)]
    assert any('"name": "retrieve"' in s for s in samples) and any("<answer>" in s for s in samples)


def test_constructor_rejects_bad_options(index_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tools must name"):
        make_env(index_dir, tools=["retrieve", "browse"])
    with pytest.raises(ValueError, match="both corpus= and qa="):
        make_env(index_dir, corpus=tmp_path / "corpus.jsonl")
    with pytest.raises(ValueError, match="reward_metric"):
        make_env(index_dir, reward_metric="bleu")
    with pytest.raises(ValueError, match="retrieval must be"):
        make_env(index_dir, retrieval="sparse")
    with pytest.raises(ValueError, match="top_k"):
        make_env(index_dir, top_k=0)
    with pytest.raises(FileNotFoundError):
        make_env(index_dir, corpus=tmp_path / "missing.jsonl", qa=tmp_path / "missing-qa.jsonl")


def test_env_runs_on_files_in_the_real_formats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus, qa = tmp_path / "wiki.jsonl.gz", tmp_path / "nq.jsonl"
    corpus_lines = [
        {"id": "0", "contents": '"Aaron"\nAaron is a prophet, high priest, and the brother of Moses.'},
        {"id": "1", "contents": '"Velmouth"\nVelmouth is a port town on the Quen estuary.'},
        {"id": "2", "contents": '"Moses"\nMoses is considered the most important prophet in Judaism.'},
    ]
    corpus.write_bytes(gzip.compress("".join(json.dumps(line) + "\n" for line in corpus_lines).encode()))
    qa.write_text(
        json.dumps({"id": "q0", "question": "Who was the brother of Moses?", "golden_answers": ["Aaron"]}) + "\n"
    )
    monkeypatch.setenv(INDEX_DIR_ENV, str(tmp_path / "from-env"))
    env = gym.make("AgentFly/Search-v0", corpus=corpus, qa=qa, progress=False)
    obs, info = env.reset(seed=0)
    assert obs == "Question: Who was the brother of Moses?" and info["corpus"]["passages"] == 3
    observation, *_ = env.step(env.unwrapped.expert_action())
    hits = parse_hits(observation)
    assert {(hit.id, hit.title) for hit in hits} == {("0", "Aaron"), ("2", "Moses")}  # no shared word with Velmouth
    *_, reward, terminated, _, info = env.step(env.unwrapped.expert_action())
    assert terminated and reward == 1.0
    assert any(p.name.startswith("bm25-") for p in (tmp_path / "from-env").iterdir())
    env.close()


class BrokenProvider(SearchProvider):
    name = "broken"
    description = "a provider whose backend is down"

    async def search(self, query: str, k: int) -> list[WebResult]:
        raise ConnectionError("search backend unreachable")


def test_web_search_uses_a_provider_and_never_fakes_results(index_dir: Path) -> None:
    env = make_env(index_dir, tools=["web_search"])
    trajectory = rollout(env, seed=2)  # the reader works through web_search alone
    assert trajectory.total_reward == 1.0
    first = trajectory.steps[0].observation
    assert first.startswith("Results from the local passage index (offline; not the live web):")
    results = parse_web_results(first)
    assert results and all(r.url.startswith("local://passage/") for r in results)

    register_provider("broken", lambda retriever: BrokenProvider())
    both = make_env(index_dir, tools=["retrieve", "web_search"], web_search_provider="broken")
    both.reset(seed=0)
    observation, *_, info = both.step('<tool_call>{"name": "web_search", "arguments": {"query": "x"}}</tool_call>')
    assert "search backend unreachable" in observation and info["step"].errors == {"tool_error": 1}
    assert parse_web_results(observation) == []
    with pytest.raises(ValueError, match="unknown web search provider"):
        make_env(index_dir, tools=["web_search"], web_search_provider="nope")


def test_the_bm25_env_does_not_import_torch(index_dir: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys, gymnasium as gym, agentfly_env
        env = gym.make("AgentFly/Search-v0", index_dir={str(index_dir)!r}, progress=False)
        env.reset(seed=0)
        env.step(env.unwrapped.expert_action())
        print(sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_registered() -> None:
    assert "AgentFly/Search-v0" in agentfly_env.registered_ids()
