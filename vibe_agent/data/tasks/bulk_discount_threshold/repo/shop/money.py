"""Money as integer cents: parsing, formatting and percentages."""

from __future__ import annotations


def parse_price(text: str) -> int:
    """'12.30' or '¥12.3' -> 1230 cents."""
    cleaned = text.strip().removeprefix("¥").replace(",", "")
    if not cleaned:
        raise ValueError("empty price")
    whole, _, fraction = cleaned.partition(".")
    if len(fraction) > 2:
        raise ValueError(f"too many decimals in {text!r}")
    return int(whole or "0") * 100 + int(fraction.ljust(2, "0") or "0")


def format_cents(cents: int) -> str:
    """1230 -> '¥12.30'; negative amounts get a minus sign in front."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}¥{cents // 100}.{cents % 100:02d}"


def percent_of(cents: int, percent: int) -> int:
    """`percent` % of an amount, rounded half up to a whole cent."""
    return (cents * percent + 50) // 100
