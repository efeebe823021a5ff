"""Reading the sales export (CSV with the columns day, region, amount)."""

import csv
import io
from dataclasses import dataclass
from datetime import date

from sales.parsing import parse_cents, parse_day, parse_region


@dataclass(frozen=True)
class Sale:
    """One order: when, where, and how much in cents (negative for a refund)."""

    day: date
    region: str
    cents: int


def load_sales(csv_text: str) -> list[Sale]:
    """Every order in the export; the header row and blank lines are skipped."""
    rows = [row for row in csv.reader(io.StringIO(csv_text)) if row]
    return [
        Sale(parse_day(day), parse_region(region), parse_cents(amount))
        for day, region, amount in rows[1:]
    ]
