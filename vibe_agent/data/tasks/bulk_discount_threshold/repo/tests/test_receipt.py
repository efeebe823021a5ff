from shop.cart import Cart
from shop.catalog import DEMO_CATALOG
from shop.checkout import checkout
from shop.receipt import render_receipt


def receipt_of(*items, member=False):
    cart = Cart(DEMO_CATALOG)
    for sku, qty in items:
        cart.add(sku, qty)
    return render_receipt(checkout(cart, is_member=member))


def test_ten_pens_show_the_bulk_discount():
    text = receipt_of(("PEN-01", 10), ("MUG-01", 1))
    assert "满 10 件 90 折：Gel pen" in text
    assert text.splitlines()[-1].endswith("¥57.40")


def test_eleven_pens_show_the_bulk_discount():
    text = receipt_of(("PEN-01", 11), ("MUG-01", 1))
    assert "满 10 件 90 折：Gel pen" in text
    assert text.splitlines()[-1].endswith("¥60.55")


def test_small_order_has_no_discount_line():
    text = receipt_of(("MUG-01", 1))
    assert "折" not in text
    assert text.splitlines()[-1].endswith("¥27.90")
