"""Payments: a small interface to the payment provider, and a fake for tests."""

from __future__ import annotations

from dataclasses import dataclass


class PaymentDeclined(Exception):
    pass


@dataclass
class Receipt:
    reference: str
    cents: int


class FakeProvider:
    """Accepts every card except those ending in 0000; keeps what it charged."""

    def __init__(self) -> None:
        self.charged: list[Receipt] = []

    def charge(self, card: str, cents: int) -> Receipt:
        if cents <= 0:
            raise ValueError("nothing to charge")
        if card.endswith("0000"):
            raise PaymentDeclined("the card was declined")
        receipt = Receipt(f"pay-{len(self.charged) + 1:05d}", cents)
        self.charged.append(receipt)
        return receipt
