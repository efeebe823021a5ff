"""Discounts: which lines and orders get money off, and how much."""

from __future__ import annotations

from dataclasses import dataclass

from . import rules
from .cart import Line
from .money import percent_of


@dataclass(frozen=True)
class Discount:
    label: str
    cents: int  # how much is taken off (positive)


def qualifies_for_bulk(line: Line) -> bool:
    """True when a line is big enough for the bulk discount (see rules.py)."""
    if line.product.category in rules.NO_BULK_CATEGORIES:
        return False
    return line.quantity > rules.BULK_MIN_QUANTITY


def bulk_discount(line: Line) -> Discount | None:
    """The bulk discount of one line, or None."""
    if not qualifies_for_bulk(line):
        return None
    label = f"满 {rules.BULK_MIN_QUANTITY} 件 {100 - rules.BULK_PERCENT} 折：{line.product.name}"
    return Discount(label, percent_of(line.subtotal_cents, rules.BULK_PERCENT))


def member_discount(cents: int, is_member: bool) -> Discount | None:
    """Members' discount on an order total (after the bulk discounts), or None."""
    if not is_member or cents <= 0:
        return None
    label = f"会员 {100 - rules.MEMBER_PERCENT} 折"
    return Discount(label, percent_of(cents, rules.MEMBER_PERCENT))
