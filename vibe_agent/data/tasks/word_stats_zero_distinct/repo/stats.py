"""Word statistics for the writing assistant's side panel."""

from collections import Counter

from tokens import words


def text_stats(text: str, top: int = 3) -> dict:
    """Total words, distinct words, and the `top` most frequent words with their counts."""
    found = words(text)
    total = sum(1 for _ in found)
    counts = Counter(found)
    return {"total": total, "distinct": len(counts), "top": counts.most_common(top)}
