"""Plain-text tables for the terminal, with columns that line up."""


def pad(text: str, width: int) -> str:
    """`text` followed by spaces so that it fills `width` terminal columns."""
    return text + " " * (width - len(text))


def render(rows: list[tuple[str, ...]]) -> str:
    """The rows as lines, cells separated by ' | ', each column as wide as its widest cell."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [
        " | ".join(pad(cell, width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)
