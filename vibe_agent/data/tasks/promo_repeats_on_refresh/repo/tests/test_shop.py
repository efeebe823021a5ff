from catalog import STATS, products_in
from shop import category_page, cheapest

FRUIT_PAGE = ["今日特价：草莓", "香蕉", "苹果", "葡萄"]


def names(products):
    return [product["name"] for product in products]


def test_fruit_page_stays_the_same_on_every_visit():
    for _ in range(3):
        assert names(category_page("水果")) == FRUIT_PAGE


def test_drinks_page_has_no_promotion():
    assert names(category_page("饮品")) == ["牛奶", "橙汁"]


def test_cheapest_ignores_the_page_promotion():
    category_page("水果")
    assert cheapest("水果") == "香蕉"
    assert names(products_in("水果")) == ["香蕉", "苹果", "葡萄"]


def test_the_database_is_read_once_per_category():
    before = STATS["queries"]
    for _ in range(5):
        category_page("饮品")
        category_page("水果")
        cheapest("水果")
    assert STATS["queries"] - before <= 2
