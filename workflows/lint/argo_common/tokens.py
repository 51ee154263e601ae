"""Splitting a short expression (a `depends`, a retry expression) into tokens with one regular expression."""

from __future__ import annotations

import re
from collections.abc import Iterator

KEYWORDS = {"and": "&&", "or": "||", "not": "!"}  # expr's words for the operators


def scan(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Each match of `pattern` from the start of `text` to its end; ValueError at the first place where
    nothing matches, naming what is left."""
    position, end = 0, len(text.rstrip())
    while position < end:
        match = pattern.match(text, position)
        if not match or match.end() == position:
            raise ValueError(text[position:])
        yield match
        position = match.end()
