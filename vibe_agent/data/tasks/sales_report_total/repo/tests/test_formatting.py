import pytest

from sales.formatting import format_cents


@pytest.mark.parametrize(
    ("cents", "text"),
    [(0, "¥0.00"), (5, "¥0.05"), (123450, "¥1,234.50"), (-301, "-¥3.01"), (10**8, "¥1,000,000.00")],
)
def test_format_cents(cents, text):
    assert format_cents(cents) == text
