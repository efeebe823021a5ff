"""Splitting English text into words."""

import re
from collections.abc import Iterator

WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def words(text: str) -> Iterator[str]:
    """The words of `text` in lower case, one at a time: "Don't stop" gives don't, stop."""
    return (match.group() for match in WORD.finditer(text.lower()))
