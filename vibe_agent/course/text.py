"""Text as it looks on screen: how many columns a string takes in a terminal or a
notebook's output, so that tables of Chinese and English text line up.

`width("脚本模型")` is 8, not 4: a CJK character or a full-width punctuation mark takes
two columns, a combining accent none. The measuring is rich's (`rich.cells.cell_len`,
the table the terminal agent draws with): a kept Unicode width table, no hand-written
ranges.
"""

from __future__ import annotations

from rich.cells import cell_len


def width(text: str) -> int:
    """Columns `text` takes on screen: CJK characters, full-width punctuation and emoji
    take two, combining marks and zero-width characters none, the rest one.

    Args:
        text: one line of text (a control character such as a newline counts as zero).
    """
    return cell_len(text)
