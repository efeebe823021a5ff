"""The catalog: which products the shop sells, at which unit price."""

from __future__ import annotations

from dataclasses import dataclass

from .money import parse_price


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    unit_cents: int
    category: str = "general"


class Catalog:
    """Products by SKU."""

    def __init__(self, products: list[Product] | None = None) -> None:
        self._products: dict[str, Product] = {}
        for product in products or []:
            self.add(product)

    def add(self, product: Product) -> None:
        if product.sku in self._products:
            raise ValueError(f"duplicate SKU {product.sku}")
        if product.unit_cents < 0:
            raise ValueError(f"negative price for {product.sku}")
        self._products[product.sku] = product

    def get(self, sku: str) -> Product:
        try:
            return self._products[sku]
        except KeyError:
            raise KeyError(f"unknown SKU {sku}") from None

    @classmethod
    def from_lines(cls, lines: list[str]) -> Catalog:
        """Lines like 'PEN-01,Gel pen,3.50,stationery'."""
        products = []
        for line in lines:
            if not line.strip() or line.startswith("#"):
                continue
            sku, name, price, *rest = [part.strip() for part in line.split(",")]
            products.append(Product(sku, name, parse_price(price), rest[0] if rest else "general"))
        return cls(products)


DEMO_CATALOG = Catalog.from_lines([
    "PEN-01,Gel pen,3.50,stationery",
    "NOTE-A5,A5 notebook,12.00,stationery",
    "MUG-01,Coffee mug,25.90,kitchen",
    "TEA-50,Green tea 50g,18.80,food",
])
