"""A customer's cart: items and quantities, before checkout."""

from __future__ import annotations

from .catalog import Catalog
from .models import Line

MAX_QUANTITY = 99


class Cart:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.lines: dict[str, Line] = {}
        self.coupon_code: str | None = None

    def add(self, sku: str, quantity: int = 1) -> None:
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        line = self.lines.get(sku)
        if line is None:
            self.lines[sku] = Line(self.catalog.find(sku), min(quantity, MAX_QUANTITY))
        else:
            line.quantity = min(line.quantity + quantity, MAX_QUANTITY)

    def remove(self, sku: str) -> None:
        self.lines.pop(sku, None)

    def use_coupon(self, code: str) -> None:
        """Remember the code; pricing decides at checkout whether it still applies."""
        self.coupon_code = code.strip().upper() or None

    @property
    def subtotal_cents(self) -> int:
        return sum(line.cents for line in self.lines.values())

    def is_empty(self) -> bool:
        return not self.lines
