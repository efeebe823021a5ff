"""Splitting a restaurant bill between friends (AA 制). Amounts are in cents."""


def split(total_cents: int, people: int) -> list[int]:
    """Each person's share, in cents.

    The shares add up to the total and differ by at most one cent; the
    people first in the list pay the extra cents.
    """
    if people < 1:
        raise ValueError("at least one person has to pay")
    share = total_cents // people
    return [share] * people


def shares_text(total_cents: int, names: list[str]) -> str:
    """One line per person, e.g. '小王 ¥3.34'."""
    lines = []
    for name, cents in zip(names, split(total_cents, len(names)), strict=True):
        lines.append(f"{name} ¥{cents // 100}.{cents % 100:02d}")
    return "\n".join(lines)
