"""Columns on screen: the one `width()` that lines up the course's tables."""

from __future__ import annotations

import re

import pytest

from vibe_agent.course.bench import TaskRecord, format_table
from vibe_agent.course.text import width


@pytest.mark.parametrize(("text", "columns"), [
    ("", 0),
    ("max_iters", 9),
    ("脚本模型", 8),
    ("한국어", 6),
    ("（3 次）：", 10),                # full-width brackets and colon take two
    ("ＡＢ", 4),                       # full-width Latin
    ("ｶﾀｶﾅ", 4),                     # half-width katakana take one
    ("✓ ✗", 3),                        # check marks are narrow
    ("✅ 挡住了", 9),                  # an emoji takes two
    ("e\u0301", 1),                    # e + combining acute accent: one column
    ("a\u200bb", 2),                   # a zero-width space takes none
    ("—", 1),                          # ambiguous width: one (a western terminal)
], ids=["empty", "ascii", "cjk", "hangul", "full-width-punctuation", "full-width-latin",
        "half-width-katakana", "check-marks", "emoji", "combining-mark", "zero-width-space",
        "ambiguous-dash"])
def test_width_counts_columns_on_screen(text, columns):
    assert width(text) == columns


def column_starts(line: str) -> list[int]:
    """Screen columns where a cell starts: the line's start, and after two or more spaces."""
    cells = re.split(r"(\s{2,})", line)
    return [width("".join(cells[:k])) for k in range(0, len(cells), 2)]


def test_bench_table_columns_line_up_with_chinese_cells():
    records = [TaskRecord(task="中文表格对齐", passed=True, stop_reason="answered", model_calls=3,
                          tokens=1234, seconds=2.5),
               TaskRecord(task="off_by_one", passed=False, stop_reason="max_iters（已达上限）",
                          model_calls=12, tokens=None, seconds=10.0)]
    header, *rows = format_table(records, 12.5).splitlines()[:3]
    assert len(column_starts(header)) == 8
    assert column_starts(header) == column_starts(rows[0]) == column_starts(rows[1])
