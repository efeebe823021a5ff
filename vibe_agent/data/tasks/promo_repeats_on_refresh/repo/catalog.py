"""The product catalogue. Reading the product database is slow, so results are cached."""

from functools import cache

# (name, category, price in cents): a stand-in for the real database.
DATABASE = (
    ("葡萄", "水果", 1280),
    ("苹果", "水果", 550),
    ("香蕉", "水果", 320),
    ("橙汁", "饮品", 990),
    ("牛奶", "饮品", 680),
)
STATS = {"queries": 0}  # how often the database was read


@cache
def products_in(category: str) -> list[dict]:
    """The products of `category`, cheapest first."""
    STATS["queries"] += 1
    rows = sorted((row for row in DATABASE if row[1] == category), key=lambda row: row[2])
    return [{"name": name, "price_cents": price} for name, _, price in rows]
