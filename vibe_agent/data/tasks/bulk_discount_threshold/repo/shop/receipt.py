"""The printed receipt: one line per product, the discounts, the total."""

from __future__ import annotations

from .money import format_cents
from .pricing import PricedOrder

WIDTH = 32


def _row(left: str, right: str) -> str:
    return f"{left}{' ' * max(1, WIDTH - len(left) - len(right))}{right}"


def render_receipt(order: PricedOrder) -> str:
    """The receipt as text, WIDTH characters wide."""
    rows = [_row(f"{name} x{qty}", format_cents(cents)) for name, qty, cents in order.lines]
    rows.append("-" * WIDTH)
    rows += [_row(d.label, format_cents(-d.cents)) for d in order.discounts]
    if order.packing_fee:
        rows.append(_row("包装费", format_cents(order.packing_fee)))
    rows.append(_row("合计", format_cents(order.total)))
    return "\n".join(rows)
