import unicodedata

from table import pad, render


def columns(text):
    """Terminal columns: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def test_english_table():
    rows = [("name", "qty"), ("apple", "3"), ("kiwi", "12")]
    assert render(rows) == "name  | qty\napple | 3\nkiwi  | 12"


def test_chinese_table():
    rows = [("名称", "数量"), ("苹果", "3"), ("banana", "12")]
    assert render(rows) == "名称   | 数量\n苹果   | 3\nbanana | 12"


def bar_positions(line):
    """The terminal column of each '|' in `line`."""
    return [columns(line[:index]) for index, char in enumerate(line) if char == "|"]


def test_bars_line_up_in_a_mixed_table():
    rows = [
        ("商品", "产地", "价格"),
        ("Ｔ恤", "上海", "59"),
        ("mug", "Jingdezhen", "25"),
        ("茶叶", "杭州", "1280"),
    ]
    positions = [bar_positions(line) for line in render(rows).splitlines()]
    assert positions == [[5, 18]] * 4


def test_pad_counts_terminal_columns():
    assert pad("中文", 6) == "中文  "
    assert pad("ab", 6) == "ab    "
    assert pad("中文字符", 4) == "中文字符"
