import pytest

from shop.cart import Cart
from shop.catalog import DEMO_CATALOG
from shop.checkout import checkout
from shop.inventory import Inventory, OutOfStock


def order_of(*items, member=False):
    cart = Cart(DEMO_CATALOG)
    for sku, qty in items:
        cart.add(sku, qty)
    return checkout(cart, is_member=member)


@pytest.mark.parametrize(("qty", "bulk_off"), [(9, 0), (10, 350), (11, 385), (20, 700)])
def test_bulk_discount_from_ten_pens(qty, bulk_off):
    order = order_of(("PEN-01", qty))
    taken_off = sum(d.cents for d in order.discounts)
    assert taken_off == bulk_off


def test_exactly_ten_notebooks_get_the_bulk_discount():
    order = order_of(("NOTE-A5", 10))
    assert [d.cents for d in order.discounts] == [1200]
    assert order.total == 10800


def test_food_never_gets_the_bulk_discount():
    assert order_of(("TEA-50", 12)).discounts == []


def test_member_discount_comes_after_bulk():
    order = order_of(("PEN-01", 10), member=True)
    assert [d.cents for d in order.discounts] == [350, 158]  # 5 % of 3150, half up
    assert order.total == 2992 + 200  # below 30.00: packing fee


def test_packing_fee_only_below_thirty():
    assert order_of(("MUG-01", 1)).packing_fee == 200
    assert order_of(("MUG-01", 2)).packing_fee == 0


def test_checkout_takes_stock_all_or_nothing():
    stock = Inventory({"PEN-01": 5, "MUG-01": 1})
    cart = Cart(DEMO_CATALOG)
    cart.add("PEN-01", 5)
    cart.add("MUG-01", 2)
    with pytest.raises(OutOfStock):
        checkout(cart, stock)
    assert stock.available("PEN-01") == 5
