"""The monthly sales summary: one line per region, then the grand total."""

from sales.formatting import format_cents
from sales.loader import load_sales
from sales.totals import grand_total, totals_by_region


def monthly_report(csv_text: str, month: str) -> str:
    """The summary of `month` ('2024-05'), regions in alphabetical order."""
    sales = [sale for sale in load_sales(csv_text) if sale.day.strftime("%Y-%m") == month]
    lines = [f"{month} 销售汇总"]
    for region, cents in sorted(totals_by_region(sales).items()):
        lines.append(f"{region}：{format_cents(cents)}")
    lines.append(f"合计：{format_cents(grand_total(sales))}")
    return "\n".join(lines)
