"""shop: a small point-of-sale library (amounts are integer cents)."""

from .cart import Cart
from .catalog import Catalog, Product
from .checkout import checkout
from .receipt import render_receipt

__all__ = ["Cart", "Catalog", "Product", "checkout", "render_receipt"]
