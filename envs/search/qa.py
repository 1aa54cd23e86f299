"""Question sets in the QA JSONL layout of FlashRAG and Search-R1 (NQ, HotpotQA, ...), as tasks.

One JSON object a line with a ``question`` and its ``golden_answers`` (a list of strings; a single
string is accepted), and optionally an ``id`` and a ``metadata`` object, which is kept as is::

    {"id": "test_0", "question": "who founded Quorin Institute?", "golden_answers": ["Alia Dorven"]}

Example:
    >>> from importlib.resources import files
    >>> tasks = load_qa(files("agentfly_envs.search") / "data" / "example_qa.jsonl")
    >>> tasks[0]["question"], tasks[0]["golden_answers"]
    ('In which country is Velmouth?', ['Aldaria'])
    >>> tasks[0]["prompt"]
    'Question: In which country is Velmouth?'
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from agentfly_envs.search.corpus import CorpusFormatError, open_text_file

__all__ = ["QARecord", "load_qa", "qa_task", "write_qa"]


class QARecord(msgspec.Struct, omit_defaults=True):
    """One question of a QA file.

    Attributes:
        question: The question text.
        golden_answers: Every accepted answer; a prediction matching any of them is correct.
        id: The question id; a missing one becomes the line's index.
        metadata: Anything else the set carries (for generated questions: hops, gold passage ids).
    """

    question: str
    golden_answers: list[str] | str
    id: str | int | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


_DECODER = msgspec.json.Decoder(QARecord)
_ENCODER = msgspec.json.Encoder()


def qa_task(record: QARecord | Mapping[str, Any], index: int = 0) -> dict[str, Any]:
    """A task dict (``id``, ``prompt``, ``question``, ``golden_answers``, ``metadata``) for a question."""
    if not isinstance(record, QARecord):
        record = msgspec.convert(record, QARecord)
    answers = [record.golden_answers] if isinstance(record.golden_answers, str) else list(record.golden_answers)
    return {
        "id": str(record.id if record.id is not None else index),
        "prompt": f"Question: {record.question}",
        "question": record.question,
        "golden_answers": answers,
        "metadata": dict(record.metadata),
    }


def load_qa(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a QA JSONL (or ``.jsonl.gz``) file into task dicts (see :func:`qa_task`).

    Raises:
        CorpusFormatError: naming the file and line of a broken record: not JSON, no ``question``,
            no or empty ``golden_answers``, an answer that is not a string; or a file with no question.
    """
    tasks: list[dict[str, Any]] = []
    with open_text_file(path) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = _DECODER.decode(line)
            except msgspec.ValidationError as error:
                raise CorpusFormatError(
                    f'{where}: not a QA record ({error}); expected {{"question": str, "golden_answers": [str, ...]}}'
                ) from None
            except msgspec.DecodeError as error:
                raise CorpusFormatError(f"{where}: not valid JSON ({error})") from None
            if not record.question.strip():
                raise CorpusFormatError(f"{where}: the question is empty")
            task = qa_task(record, len(tasks))
            if not task["golden_answers"] or not all(answer.strip() for answer in task["golden_answers"]):
                raise CorpusFormatError(f"{where}: golden_answers must hold at least one non-empty answer")
            tasks.append(task)
    if not tasks:
        raise CorpusFormatError(f"{path}: no questions in the file")
    return tasks


def write_qa(records: Iterable[QARecord], path: str | os.PathLike[str]) -> int:
    """Write questions as QA JSONL (gzip-compressed for ``.gz``); returns how many were written."""
    count = 0
    with open_text_file(path, "wb") as handle:
        for record in records:
            handle.write(_ENCODER.encode(record))
            handle.write(b"\n")
            count += 1
    return count
