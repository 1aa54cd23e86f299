"""What the BM25 indexes of Search-v0 and WebShop-v0 share: one English analyzer, its fields, its query.

Both originals search with Lucene through Pyserini: its default English analyzer (words split at
anything that is not a letter or a digit, lower-cased, Lucene's English stop words dropped, Porter
stemming) and a bag-of-words query, where any word may match and BM25 adds up the words that do. Here
tantivy does the same for both envs:

* :func:`english_analyzer` analyses documents and queries alike; indexes register it as :data:`ANALYZER`
  (:func:`create_index`, :func:`open_index_dir`).
* :func:`add_text_fields` adds the fields it analyses, with term frequencies and no positions: BM25
  needs no phrase queries, and positions would be the largest part of an index.
* :func:`any_term_query` is the bag of words over those fields, built from the analysed terms rather
  than by tantivy's query parser: a word the analyzer splits in two (``Shirley_Temple``) would become a
  phrase query there, which an index without positions refuses.

Example:
    >>> english_analyzer().analyze("The Shirley_Temple films, and SHIRLEY's")
    ['shirley', 'templ', 'film', 'shirley', 's']
    >>> builder = tantivy.SchemaBuilder()
    >>> schema = add_text_fields(builder, "title", "text", stored=True).build()
    >>> index = create_index(schema)
    >>> writer = index.writer(15_000_000, 1)
    >>> _ = writer.add_document(tantivy.Document(title="Shirley Temple", text="An American actress."))
    >>> _ = writer.commit(); index.reload()
    >>> query = any_term_query(schema, ("title", "text"), english_analyzer().analyze("shirley_temple actress"))
    >>> index.searcher().search(query, 1).count
    1
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import tantivy

__all__ = [
    "ANALYZER",
    "STOP_WORDS",
    "add_text_fields",
    "any_term_query",
    "create_index",
    "english_analyzer",
    "open_index_dir",
]

#: The name the analyzer is registered under; an index's schema records it for each analysed field.
ANALYZER = "agentfly_en"
#: Lucene's English stop words, which Pyserini's default analyzer drops (tantivy's "english" list is the same).
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)
#: Tokens of this many bytes (UTF-8) or more (pasted hashes, base64) are dropped rather than indexed.
MAX_TOKEN_BYTES = 40


def english_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer of documents and queries (see the module's docstring)."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_BYTES))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.custom_stopword(sorted(STOP_WORDS)))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def add_text_fields(builder: tantivy.SchemaBuilder, *names: str, stored: bool) -> tantivy.SchemaBuilder:
    """Add text fields analysed by :data:`ANALYZER`, indexed with term frequencies and no positions."""
    for name in names:
        builder.add_text_field(name, stored=stored, tokenizer_name=ANALYZER, index_option="freq")
    return builder


def create_index(schema: tantivy.Schema, directory: str | Path | None = None) -> tantivy.Index:
    """A new index of ``schema`` in the empty ``directory`` (None: in memory), ready to write."""
    index = tantivy.Index(schema, path=None if directory is None else str(directory))
    index.register_tokenizer(ANALYZER, english_analyzer())
    return index


def open_index_dir(directory: str | Path) -> tantivy.Index:
    """The index in ``directory``, with :data:`ANALYZER` registered.

    Raises:
        ValueError: when ``directory`` holds no readable index.
    """
    index = tantivy.Index.open(str(directory))
    index.register_tokenizer(ANALYZER, english_analyzer())
    return index


def any_term_query(schema: tantivy.Schema, fields: Sequence[str], terms: Sequence[str]) -> tantivy.Query:
    """The bag-of-words query of analysed ``terms``: one optional clause per term and field, repeats
    included, as Lucene scores a bag-of-words query (a word given twice counts twice)."""
    return tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Should, tantivy.Query.term_query(schema, field, term, index_option="freq"))
            for term in terms
            for field in fields
        ]
    )
