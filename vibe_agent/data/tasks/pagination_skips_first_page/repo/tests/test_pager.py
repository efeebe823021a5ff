import pytest

from pager import get_page, page_count, page_label

ITEMS = [f"item{number}" for number in range(1, 26)]  # item1 … item25


def test_first_page_starts_with_the_first_item():
    assert get_page(ITEMS, 1) == ITEMS[:10]


def test_last_page_holds_the_rest():
    assert get_page(ITEMS, 3) == ITEMS[20:]


def test_past_the_last_page_is_empty():
    assert get_page(ITEMS, 4) == []


def test_small_pages():
    letters = list("abcdefg")
    pages = [get_page(letters, page, per_page=3) for page in (1, 2, 3)]
    assert pages == [["a", "b", "c"], ["d", "e", "f"], ["g"]]


@pytest.mark.parametrize("per_page", [1, 4, 7, 10, 25, 30])
def test_every_item_is_on_exactly_one_page(per_page):
    pages = [get_page(ITEMS, page, per_page) for page in range(1, page_count(25, per_page) + 1)]
    assert [item for page in pages for item in page] == ITEMS


def test_label_matches_the_page():
    assert page_label(1, 25) == "第 1-10 条，共 25 条"
    assert page_label(3, 25) == "第 21-25 条，共 25 条"


def test_page_zero_is_refused():
    with pytest.raises(ValueError):
        get_page(ITEMS, 0)
