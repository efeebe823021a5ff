"""Checkout: turn a cart into a paid order (stock reserved, coupon priced, paid)."""

from __future__ import annotations

from datetime import date

from .cart import Cart
from .coupons import CouponBook
from .inventory import Inventory
from .models import Order
from .orders import OrderLog
from .payments import FakeProvider, PaymentDeclined
from .pricing import price
from .shipping import shipping_cents


def checkout(cart: Cart, card: str, *, inventory: Inventory, coupons: CouponBook,
             orders: OrderLog, provider: FakeProvider, today: date) -> Order:
    """Place the order; on a declined payment the stock is released again."""
    if cart.is_empty():
        raise ValueError("the cart is empty")
    wanted = {sku: line.quantity for sku, line in cart.lines.items()}
    inventory.reserve(wanted)
    quote = price(cart.subtotal_cents, cart.coupon_code, coupons, today)
    weight = sum(line.item.weight_g * line.quantity for line in cart.lines.values())
    shipping = shipping_cents(quote.total_cents, weight)
    try:
        provider.charge(card, quote.total_cents + shipping)
    except PaymentDeclined:
        inventory.release(wanted)
        raise
    order = Order(orders.next_number(), list(cart.lines.values()), quote.total_cents,
                  cart.coupon_code, shipping, paid=True)
    if quote.coupon_note:
        order.notes.append(quote.coupon_note)
    orders.append(order)
    return order
