"""An invoice: lines of (price as written, quantity); 10% off from 100 yuan on."""

from shop.money import format_price, parse_price

DISCOUNT_FROM = 100_00  # cents: orders of 100 yuan or more get 10% off


def subtotal(lines: list[tuple[str, int]]) -> int:
    """The sum of price times quantity, in cents."""
    return sum(parse_price(price) * quantity for price, quantity in lines)


def total(lines: list[tuple[str, int]]) -> int:
    """What the customer pays, in cents."""
    amount = subtotal(lines)
    if amount >= DISCOUNT_FROM:
        amount -= amount // 10
    return amount


def summary(lines: list[tuple[str, int]]) -> str:
    return f"合计 {format_price(subtotal(lines))} 元，应付 {format_price(total(lines))} 元"
