"""Checkout: price the cart, take the goods out of stock, return the priced order."""

from __future__ import annotations

from .cart import Cart
from .inventory import Inventory
from .pricing import PricedOrder, price


def checkout(cart: Cart, inventory: Inventory | None = None, *,
             is_member: bool = False) -> PricedOrder:
    """The priced order for `cart`; with an inventory, its stock is taken first."""
    if len(cart) == 0:
        raise ValueError("the cart is empty")
    if inventory is not None:
        inventory.take({line.product.sku: line.quantity for line in cart.lines})
    return price(cart, is_member=is_member)
