"""Stock levels: a checkout takes what it sells out of stock."""

from __future__ import annotations


class OutOfStock(Exception):
    pass


class Inventory:
    def __init__(self, stock: dict[str, int] | None = None) -> None:
        self._stock = dict(stock or {})

    def available(self, sku: str) -> int:
        return self._stock.get(sku, 0)

    def take(self, wanted: dict[str, int]) -> None:
        """Take every quantity in `wanted`, or nothing at all when one is short."""
        short = {sku: qty for sku, qty in wanted.items() if self.available(sku) < qty}
        if short:
            names = ", ".join(f"{sku} (wanted {qty}, have {self.available(sku)})"
                              for sku, qty in sorted(short.items()))
            raise OutOfStock(f"not enough stock: {names}")
        for sku, qty in wanted.items():
            self._stock[sku] -= qty
