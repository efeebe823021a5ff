import pytest

from shop.money import format_cents, parse_price, percent_of


@pytest.mark.parametrize(("text", "cents"), [("12.30", 1230), ("¥12.3", 1230), ("0.05", 5),
                                             ("1,200", 120000), ("7", 700)])
def test_parse_price(text, cents):
    assert parse_price(text) == cents


@pytest.mark.parametrize("text", ["", "1.234", "¥"])
def test_parse_price_rejects(text):
    with pytest.raises(ValueError):
        parse_price(text)


@pytest.mark.parametrize(("cents", "text"), [(1230, "¥12.30"), (5, "¥0.05"), (-350, "-¥3.50")])
def test_format_cents(cents, text):
    assert format_cents(cents) == text


def test_percent_rounds_half_up():
    assert percent_of(3500, 10) == 350
    assert percent_of(25, 10) == 3  # 2.5 cents -> 3
