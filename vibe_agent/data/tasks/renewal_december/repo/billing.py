"""Monthly subscriptions: when the next charge falls due."""

import calendar
from datetime import date


def add_month(day: date) -> date:
    """The same day of the following month, or that month's last day if it is shorter."""
    month = day.month % 12 + 1
    last_day = calendar.monthrange(day.year, month)[1]
    return day.replace(month=month, day=min(day.day, last_day))


def days_until_renewal(today: date, last_charge: date) -> int:
    """Days from `today` until the charge after `last_charge`."""
    return (add_month(last_charge) - today).days
