"""The order log: every order placed, one JSON object per line."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from .models import Order


class OrderLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._next = self._count() + 1

    def _count(self) -> int:
        if not self.path.exists():
            return 0
        with self.path.open(encoding="utf-8") as handle:
            return sum(1 for line in handle if line.strip())

    def next_number(self) -> int:
        number, self._next = self._next, self._next + 1
        return number

    def append(self, order: Order) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(asdict(order), ensure_ascii=False, default=str) + "\n")
