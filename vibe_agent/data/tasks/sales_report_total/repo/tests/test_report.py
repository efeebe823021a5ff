from sales.report import monthly_report

EXPORT = """day,region,amount
2024-04-30,华南,50.00
2024-05-02,华南,19.99
2024-05-03,华东,"¥1,234.50"
2024-05-03,华南,0.29
2024-05-09,华北,4.35
2024-05-17,华东,-3.01
2024-05-20,华南,100.00
2024-05-21,华北,1.15
"""


def test_may_report():
    assert monthly_report(EXPORT, "2024-05") == "\n".join(
        [
            "2024-05 销售汇总",
            "华东：¥1,231.49",
            "华北：¥5.50",
            "华南：¥120.28",
            "合计：¥1,357.27",
        ]
    )


def test_april_report():
    assert monthly_report(EXPORT, "2024-04") == "2024-04 销售汇总\n华南：¥50.00\n合计：¥50.00"


def test_a_month_without_sales():
    assert monthly_report(EXPORT, "2024-06") == "2024-06 销售汇总\n合计：¥0.00"
