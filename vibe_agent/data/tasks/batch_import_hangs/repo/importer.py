"""Import rows in batches: how many batches it takes, and how big each one is."""


def batches_needed(total: int, batch_size: int) -> int:
    """How many batches import `total` rows, at most `batch_size` rows per batch."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    remaining = total
    batches = 0
    while remaining != 0:
        remaining -= batch_size
        batches += 1
    return batches


def batch_sizes(total: int, batch_size: int) -> list[int]:
    """The size of every batch, in order; only the last one may be smaller."""
    return [min(batch_size, total - number * batch_size)
            for number in range(batches_needed(total, batch_size))]
