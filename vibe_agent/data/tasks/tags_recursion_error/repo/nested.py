"""Flattening nested lists and tuples."""

from collections.abc import Iterable


def flatten(items: Iterable) -> list:
    """Every leaf of `items`, in order, at any depth of lists and tuples.

    Strings and bytes are leaves: flatten(["ab", ["c"]]) is ["ab", "c"], never split into letters.
    """
    flat = []
    for item in items:
        if isinstance(item, Iterable):
            flat.extend(flatten(item))
        else:
            flat.append(item)
    return flat
