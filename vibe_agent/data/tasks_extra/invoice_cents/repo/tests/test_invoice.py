from shop.invoice import subtotal, summary, total


def test_subtotal():
    assert subtotal([("12.3", 2), ("0.5", 3)]) == 2610


def test_no_discount_below_100_yuan():
    assert total([("99.99", 1)]) == 9999


def test_discount_from_exactly_100_yuan():
    assert total([("25", 4)]) == 9000
    assert total([("50.0", 2)]) == 9000


def test_discount_above_100_yuan():
    assert total([("120", 1)]) == 10800


def test_summary():
    assert summary([("33.3", 3), ("0.1", 1)]) == "合计 100.00 元，应付 90.00 元"
