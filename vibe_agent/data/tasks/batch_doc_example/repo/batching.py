"""Split work into batches of a fixed size.

The last batch may be shorter than the others; no item is ever dropped.
"""


def batches(items: list, size: int) -> list[list]:
    """Consecutive batches of `size` items.

    >>> batches([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4]]
    >>> batches(["a", "b", "c"], 3)
    [['a', 'b', 'c']]
    >>> batches([], 3)
    []
    """
    if size < 1:
        raise ValueError("size must be at least 1")
    return [items[start : start + size] for start in range(0, len(items), size)]


def batch_count(total: int, size: int) -> int:
    """How many batches `total` items make.

    >>> batch_count(5, 2)
    3
    >>> batch_count(0, 2)
    0
    """
    return -(-total // size)
