"""The shop's data: plain dataclasses shared by every module."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date


@dataclass(frozen=True)
class Item:
    sku: str
    name: str
    price_cents: int
    weight_g: int = 0


@dataclass(frozen=True)
class Coupon:
    code: str
    percent_off: int  # 10 means 10 % off the items
    expires_on: date  # the last day the coupon can be used
    min_total_cents: int = 0


@dataclass
class Line:
    item: Item
    quantity: int

    @property
    def cents(self) -> int:
        return self.item.price_cents * self.quantity


@dataclass
class Order:
    number: int
    lines: list[Line]
    total_cents: int
    coupon_code: str | None = None
    shipping_cents: int = 0
    paid: bool = False
    notes: list[str] = field(default_factory=list)
