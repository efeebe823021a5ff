from shop.cart import MAX_QUANTITY, Cart
from shop.catalog import Catalog
from shop.models import Item

CATALOG = Catalog([Item("tea", "Green tea", 1500, 250), Item("cup", "Cup", 3000, 400)])


def test_adding_twice_adds_up():
    cart = Cart(CATALOG)
    cart.add("tea", 2)
    cart.add("tea", 1)
    assert cart.lines["tea"].quantity == 3
    assert cart.subtotal_cents == 4500


def test_quantity_is_capped():
    cart = Cart(CATALOG)
    cart.add("cup", 500)
    assert cart.lines["cup"].quantity == MAX_QUANTITY


def test_coupon_code_is_normalised():
    cart = Cart(CATALOG)
    cart.use_coupon("  spring10 ")
    assert cart.coupon_code == "SPRING10"
