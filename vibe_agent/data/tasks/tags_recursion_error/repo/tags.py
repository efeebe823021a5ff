"""Tags of an article, collected from its sections."""

from nested import flatten


def article_tags(sections: list) -> list[str]:
    """All tags of the sections (nested freely), without repeats, in first-seen order."""
    seen: dict[str, None] = {}
    for tag in flatten(sections):
        seen.setdefault(tag.strip(), None)
    return list(seen)
