import pytest

from shop.money import format_price, parse_price


@pytest.mark.parametrize(("text", "cents"), [
    ("12.30", 1230), ("12.3", 1230), ("12", 1200), ("0.05", 5), ("0.5", 50), (" 7.9 ", 790),
])
def test_parse_price(text, cents):
    assert parse_price(text) == cents


def test_too_many_decimals():
    with pytest.raises(ValueError):
        parse_price("1.234")


def test_format_price():
    assert [format_price(c) for c in (1230, 5, 100_00)] == ["12.30", "0.05", "100.00"]


def test_format_a_refund():
    assert [format_price(c) for c in (-50, -1230, -100_00, -5)] == [
        "-0.50", "-12.30", "-100.00", "-0.05"]
