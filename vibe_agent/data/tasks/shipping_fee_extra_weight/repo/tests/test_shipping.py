import json
from pathlib import Path

import pytest

from shipping import fee_text, shipping_fee

CASES = json.loads((Path(__file__).parent / "cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['region']}-{c['weight_g']}g")
def test_fee(case: dict, region_wanted: str) -> None:
    if region_wanted not in ("all", case["region"]):
        pytest.skip(f"only {region_wanted} is checked")
    assert shipping_fee(case["weight_g"], case["region"]) == case["fee"]


def test_fee_text() -> None:
    assert fee_text(1500) == "运费 ¥10.00"
    assert fee_text(2000, "remote") == "运费 ¥25.00"


def test_a_parcel_weighs_something() -> None:
    with pytest.raises(ValueError):
        shipping_fee(0)
