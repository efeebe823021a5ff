"""Split a list of items into numbered pages. Page numbers start at 1."""


def page_count(total: int, per_page: int) -> int:
    """How many pages it takes to show `total` items, `per_page` at a time."""
    return -(-total // per_page)


def get_page(items: list, page: int, per_page: int = 10) -> list:
    """The items shown on `page`; an empty list past the last page."""
    if page < 1:
        raise ValueError(f"page must be 1 or more, got {page}")
    start = page * per_page
    return items[start : start + per_page]


def page_label(page: int, total: int, per_page: int = 10) -> str:
    """The caption above a page, e.g. '第 1-10 条，共 25 条'."""
    first = (page - 1) * per_page + 1
    last = min(page * per_page, total)
    return f"第 {first}-{last} 条，共 {total} 条"
