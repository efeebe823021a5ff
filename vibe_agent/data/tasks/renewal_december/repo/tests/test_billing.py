from datetime import date, timedelta

import pytest

from billing import add_month, days_until_renewal


@pytest.mark.parametrize(
    ("day", "expected"),
    [
        (date(2024, 3, 15), date(2024, 4, 15)),
        (date(2024, 1, 31), date(2024, 2, 29)),
        (date(2023, 1, 31), date(2023, 2, 28)),
        (date(2024, 3, 31), date(2024, 4, 30)),
        (date(2024, 11, 30), date(2024, 12, 30)),
        (date(2024, 12, 15), date(2025, 1, 15)),
        (date(2023, 12, 31), date(2024, 1, 31)),
        (date(2099, 12, 1), date(2100, 1, 1)),
    ],
)
def test_add_month(day, expected):
    assert add_month(day) == expected


def test_every_day_of_two_years():
    day = date(2023, 1, 1)
    while day.year < 2025:
        following = add_month(day)
        assert 28 <= (following - day).days <= 31
        assert following.month == day.month % 12 + 1
        day += timedelta(days=1)


def test_days_until_renewal_across_new_year():
    assert days_until_renewal(date(2024, 12, 20), date(2024, 12, 15)) == 26
