"""The catalogue: every item the shop sells, looked up by SKU."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from .models import Item


class Catalog:
    def __init__(self, items: list[Item]) -> None:
        self._items = {item.sku: item for item in items}

    @classmethod
    def from_csv(cls, path: Path) -> Catalog:
        """Read sku,name,price_cents,weight_g rows."""
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        return cls([Item(r["sku"], r["name"], int(r["price_cents"]), int(r["weight_g"]))
                    for r in rows])

    def __iter__(self) -> Iterator[Item]:
        return iter(self._items.values())

    def find(self, sku: str) -> Item:
        """The item with this SKU; KeyError names the SKU when there is none."""
        try:
            return self._items[sku]
        except KeyError:
            raise KeyError(f"no item with SKU {sku!r}") from None

    def search(self, words: str) -> list[Item]:
        """Items whose name contains every word (case does not matter)."""
        wanted = words.lower().split()
        return [item for item in self if all(w in item.name.lower() for w in wanted)]
