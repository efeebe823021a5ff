"""How amounts are written in reports."""


def format_cents(cents: int) -> str:
    """Cents as yuan with thousands separators: 123450 → '¥1,234.50', -301 → '-¥3.01'."""
    sign = "-" if cents < 0 else ""
    yuan, fen = divmod(abs(cents), 100)
    return f"{sign}¥{yuan:,}.{fen:02d}"
