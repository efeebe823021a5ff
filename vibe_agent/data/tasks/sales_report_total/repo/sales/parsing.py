"""Turning the text fields of the sales export into values."""

from datetime import date


def parse_day(text: str) -> date:
    """An ISO date such as '2024-05-01'."""
    return date.fromisoformat(text.strip())


def parse_region(text: str) -> str:
    """The region name without surrounding spaces; an empty field is '未知'."""
    return text.strip() or "未知"


def parse_cents(text: str) -> int:
    """An amount such as '19.99', '¥1,234.5' or '-3.00' (refunds), in cents.

    Amounts have at most two decimals.
    """
    cleaned = text.strip().replace("¥", "").replace(",", "")
    return int(float(cleaned) * 100)
