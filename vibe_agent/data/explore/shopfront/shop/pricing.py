"""Pricing: the subtotal, a coupon's discount, and the total the customer pays."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from .coupons import CouponBook
from .models import Coupon


@dataclass(frozen=True)
class Price:
    subtotal_cents: int
    discount_cents: int
    coupon_note: str | None = None

    @property
    def total_cents(self) -> int:
        return self.subtotal_cents - self.discount_cents


def coupon_problem(coupon: Coupon | None, subtotal_cents: int, today: date) -> str | None:
    """Why a coupon cannot be used today, or None when it can."""
    if coupon is None:
        return "unknown coupon code"
    if coupon.expires_on < today:
        return f"coupon {coupon.code} expired on {coupon.expires_on.isoformat()}"
    if subtotal_cents < coupon.min_total_cents:
        return f"coupon {coupon.code} needs a subtotal of {coupon.min_total_cents} cents"
    return None


def price(subtotal_cents: int, code: str | None, coupons: CouponBook, today: date) -> Price:
    """The price of a cart; a coupon that cannot be used is noted, never applied."""
    if not code:
        return Price(subtotal_cents, 0)
    coupon = coupons.get(code)
    problem = coupon_problem(coupon, subtotal_cents, today)
    if problem or coupon is None:
        return Price(subtotal_cents, 0, problem)
    discount = subtotal_cents * coupon.percent_off // 100
    return Price(subtotal_cents, discount, f"coupon {coupon.code}: -{coupon.percent_off}%")
