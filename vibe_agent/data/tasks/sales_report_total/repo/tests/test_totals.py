from sales.loader import load_sales
from sales.totals import grand_total, totals_by_region


def export(amounts):
    return "day,region,amount\n" + "".join(f"2024-05-01,华东,{a}\n" for a in amounts)


def test_every_price_from_0_to_30_yuan_adds_up():
    prices = [f"{cents // 100}.{cents % 100:02d}" for cents in range(3000)]
    assert grand_total(load_sales(export(prices))) == sum(range(3000))


def test_refunds_add_up():
    refunds = [f"-{cents // 100}.{cents % 100:02d}" for cents in range(1, 1000)]
    assert totals_by_region(load_sales(export(refunds))) == {"华东": -sum(range(1, 1000))}
