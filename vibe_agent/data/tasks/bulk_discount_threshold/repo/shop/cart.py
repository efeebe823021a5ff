"""The cart: what the customer picked, one line per product."""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import Catalog, Product


@dataclass
class Line:
    product: Product
    quantity: int

    @property
    def subtotal_cents(self) -> int:
        return self.product.unit_cents * self.quantity


class Cart:
    """Lines in the order they were first added; adding a product again adds to its line."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._lines: dict[str, Line] = {}

    def add(self, sku: str, quantity: int = 1) -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        product = self.catalog.get(sku)
        line = self._lines.get(sku)
        if line is None:
            self._lines[sku] = Line(product, quantity)
        else:
            line.quantity += quantity

    def remove(self, sku: str, quantity: int | None = None) -> None:
        line = self._lines[sku]
        if quantity is None or quantity >= line.quantity:
            del self._lines[sku]
        else:
            line.quantity -= quantity

    @property
    def lines(self) -> list[Line]:
        return list(self._lines.values())

    def __len__(self) -> int:
        return sum(line.quantity for line in self._lines.values())
