"""Stock levels: how many of each item are left, reserved at checkout."""

from __future__ import annotations

import threading


class OutOfStock(Exception):
    def __init__(self, sku: str, left: int) -> None:
        super().__init__(f"only {left} left of {sku}")
        self.sku, self.left = sku, left


class Inventory:
    def __init__(self, stock: dict[str, int]) -> None:
        self._stock = dict(stock)
        self._lock = threading.Lock()

    def left(self, sku: str) -> int:
        return self._stock.get(sku, 0)

    def reserve(self, wanted: dict[str, int]) -> None:
        """Take all the quantities at once, or none of them."""
        with self._lock:
            for sku, quantity in wanted.items():
                if self._stock.get(sku, 0) < quantity:
                    raise OutOfStock(sku, self._stock.get(sku, 0))
            for sku, quantity in wanted.items():
                self._stock[sku] -= quantity

    def release(self, wanted: dict[str, int]) -> None:
        """Give reserved quantities back (a payment that failed)."""
        with self._lock:
            for sku, quantity in wanted.items():
                self._stock[sku] = self._stock.get(sku, 0) + quantity
