"""What the shop's pages show."""

from catalog import products_in

PROMOTIONS = {"水果": {"name": "今日特价：草莓", "price_cents": 990, "promotion": True}}


def category_page(category: str) -> list[dict]:
    """The products listed on a category page: today's promotion first, if there is one."""
    products = products_in(category)
    promotion = PROMOTIONS.get(category)
    if promotion:
        products.insert(0, promotion)
    return products


def cheapest(category: str) -> str:
    """The name of the cheapest product of `category` in the catalogue."""
    return products_in(category)[0]["name"]
