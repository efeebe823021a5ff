import pytest

from shop.cart import Cart
from shop.catalog import DEMO_CATALOG


def test_adding_twice_adds_to_the_line():
    cart = Cart(DEMO_CATALOG)
    cart.add("PEN-01", 4)
    cart.add("PEN-01", 6)
    assert [(line.product.sku, line.quantity) for line in cart.lines] == [("PEN-01", 10)]
    assert len(cart) == 10


def test_remove_part_and_all():
    cart = Cart(DEMO_CATALOG)
    cart.add("MUG-01", 3)
    cart.remove("MUG-01", 1)
    assert len(cart) == 2
    cart.remove("MUG-01")
    assert cart.lines == []


def test_unknown_sku_and_bad_quantity():
    cart = Cart(DEMO_CATALOG)
    with pytest.raises(KeyError):
        cart.add("NOPE")
    with pytest.raises(ValueError):
        cart.add("PEN-01", 0)
