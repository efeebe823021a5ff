"""Shipping fees: a price for the first kilogram, then one for every started 500 g."""

FIRST_WEIGHT_G = 1000
STEP_G = 500
PRICES = {  # region -> (the first kilogram, each started 500 g after it), in cents
    "mainland": (800, 200),
    "remote": (1500, 500),
}


def shipping_fee(weight_g: int, region: str = "mainland") -> int:
    """The fee in cents for a parcel of `weight_g` grams sent to `region`."""
    if weight_g <= 0:
        raise ValueError("a parcel must weigh something")
    first, per_step = PRICES[region]
    extra_g = max(0, weight_g - FIRST_WEIGHT_G)
    steps = extra_g // STEP_G
    return first + steps * per_step


def fee_text(weight_g: int, region: str = "mainland") -> str:
    """The fee as the checkout page shows it, e.g. "运费 ¥10.00"."""
    cents = shipping_fee(weight_g, region)
    return f"运费 ¥{cents // 100}.{cents % 100:02d}"
