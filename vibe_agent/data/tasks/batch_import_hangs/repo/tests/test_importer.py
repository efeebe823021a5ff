import pytest

from importer import batch_sizes, batches_needed


def test_batches_that_divide_evenly() -> None:
    assert batches_needed(10, 5) == 2
    assert batch_sizes(9, 3) == [3, 3, 3]


def test_one_row_per_batch() -> None:
    assert batch_sizes(4, 1) == [1, 1, 1, 1]


def test_nothing_to_import() -> None:
    assert batches_needed(0, 4) == 0
    assert batch_sizes(0, 4) == []


def test_a_batch_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        batches_needed(10, 0)


def test_the_last_batch_may_be_smaller() -> None:
    assert batch_sizes(10, 3) == [3, 3, 3, 1]
    assert batches_needed(7, 2) == 4
    assert batch_sizes(2, 5) == [2]
