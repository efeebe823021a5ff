"""Shipping: the fee for an order by weight, free above a threshold."""

from __future__ import annotations

FREE_FROM_CENTS = 9900
BASE_CENTS = 800
PER_KG_CENTS = 300


def shipping_cents(total_cents: int, weight_g: int) -> int:
    """Free from FREE_FROM_CENTS on; else a base fee plus a fee per started kilogram."""
    if total_cents >= FREE_FROM_CENTS:
        return 0
    started_kg = max(0, (weight_g - 1) // 1000)
    return BASE_CENTS + started_kg * PER_KG_CENTS
