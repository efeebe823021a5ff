from datetime import date

from shop.coupons import CouponBook
from shop.models import Coupon
from shop.pricing import price

BOOK = CouponBook([Coupon("SPRING10", 10, date(2026, 5, 31)),
                   Coupon("BIG20", 20, date(2026, 12, 31), min_total_cents=10000)])


def test_a_valid_coupon_takes_its_percent_off():
    quote = price(5000, "spring10", BOOK, date(2026, 5, 1))
    assert quote.total_cents == 4500


def test_the_last_day_still_counts():
    assert price(5000, "SPRING10", BOOK, date(2026, 5, 31)).discount_cents == 500


def test_an_expired_coupon_is_noted_not_applied():
    quote = price(5000, "SPRING10", BOOK, date(2026, 6, 1))
    assert quote.discount_cents == 0 and "expired" in quote.coupon_note


def test_a_minimum_total():
    assert price(5000, "BIG20", BOOK, date(2026, 6, 1)).discount_cents == 0
