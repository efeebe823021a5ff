import doctest

import pytest

import batching
from batching import batch_count, batches


def test_the_last_batch_keeps_the_rest():
    assert batches(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]


@pytest.mark.parametrize("total", range(0, 12))
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_no_item_is_dropped(total, size):
    items = list(range(total))
    result = batches(items, size)
    assert [item for batch in result for item in batch] == items
    assert len(result) == batch_count(total, size)


def test_size_zero_is_refused():
    with pytest.raises(ValueError):
        batches([1], 0)


def test_the_documented_examples_hold():
    # The docstrings keep their examples, and every example is right.
    result = doctest.testmod(batching)
    assert result.attempted >= 5
    assert result.failed == 0
