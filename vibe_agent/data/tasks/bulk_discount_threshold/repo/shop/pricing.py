"""Pricing: from cart lines to the amounts a receipt shows."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import rules
from .cart import Cart
from .discounts import Discount, bulk_discount, member_discount


@dataclass
class PricedOrder:
    lines: list[tuple[str, int, int]]  # (name, quantity, subtotal cents)
    discounts: list[Discount] = field(default_factory=list)
    packing_fee: int = 0

    @property
    def subtotal(self) -> int:
        return sum(cents for _, _, cents in self.lines)

    @property
    def total(self) -> int:
        return self.subtotal - sum(d.cents for d in self.discounts) + self.packing_fee


def price(cart: Cart, *, is_member: bool = False) -> PricedOrder:
    """Price a cart: line subtotals, bulk discounts, the member discount, the packing fee."""
    order = PricedOrder([(line.product.name, line.quantity, line.subtotal_cents)
                         for line in cart.lines])
    for line in cart.lines:
        discount = bulk_discount(line)
        if discount is not None:
            order.discounts.append(discount)
    after_bulk = order.subtotal - sum(d.cents for d in order.discounts)
    member = member_discount(after_bulk, is_member)
    if member is not None:
        order.discounts.append(member)
    if 0 < order.total < rules.PACKING_FEE_BELOW:
        order.packing_fee = rules.PACKING_FEE
    return order
