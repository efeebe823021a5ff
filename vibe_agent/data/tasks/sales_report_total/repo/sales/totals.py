"""Adding up sales."""

from sales.loader import Sale


def totals_by_region(sales: list[Sale]) -> dict[str, int]:
    """Cents per region."""
    totals: dict[str, int] = {}
    for sale in sales:
        totals[sale.region] = totals.get(sale.region, 0) + sale.cents
    return totals


def grand_total(sales: list[Sale]) -> int:
    """Cents over all regions."""
    return sum(sale.cents for sale in sales)
