"""Coupons: the codes the shop has handed out, read from a CSV file."""

from __future__ import annotations

import csv
from datetime import date
from pathlib import Path

from .models import Coupon


class CouponBook:
    def __init__(self, coupons: list[Coupon]) -> None:
        self._by_code = {coupon.code: coupon for coupon in coupons}

    @classmethod
    def from_csv(cls, path: Path) -> CouponBook:
        """Read code,percent_off,expires_on,min_total_cents rows (dates as 2026-12-31)."""
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        return cls([Coupon(r["code"].upper(), int(r["percent_off"]),
                           date.fromisoformat(r["expires_on"]), int(r["min_total_cents"]))
                    for r in rows])

    def get(self, code: str) -> Coupon | None:
        """The coupon with this code, or None; whether it still applies is pricing's job."""
        return self._by_code.get(code.strip().upper())

    def codes(self) -> list[str]:
        return sorted(self._by_code)
