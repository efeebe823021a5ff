import pytest

from bill import shares_text, split


def test_ten_yuan_for_three():
    assert split(1000, 3) == [334, 333, 333]


def test_even_split():
    assert split(1200, 4) == [300, 300, 300, 300]


def test_two_extra_cents():
    assert split(2002, 4) == [501, 501, 500, 500]


@pytest.mark.parametrize("people", range(1, 8))
def test_shares_always_add_up(people):
    for total in range(0, 300):
        shares = split(total, people)
        assert sum(shares) == total
        assert max(shares) - min(shares) <= 1
        assert shares == sorted(shares, reverse=True)


def test_text():
    assert shares_text(1000, ["小王", "小李", "小张"]) == "小王 ¥3.34\n小李 ¥3.33\n小张 ¥3.33"


def test_nobody_to_pay():
    with pytest.raises(ValueError):
        split(1000, 0)
