"""Bounding the text a model reads: observations and tool outputs never flood its context."""

from __future__ import annotations


def truncate_text(text: str, max_chars: int | None) -> str:
    """Cut ``text`` to at most ``max_chars`` characters, ending with a marker that says how much went.

    Example:
        >>> truncate_text("abcdefghij" * 10, 60)[-37:]
        '... [truncated: 100 characters total]'
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    marker = f"\n... [truncated: {len(text)} characters total]"
    return text[: max(0, max_chars - len(marker))] + marker
