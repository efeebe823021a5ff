"""Money as whole cents: 1230 means 12.30 yuan."""


def parse_price(text: str) -> int:
    """A price as written on an order ("12.30", "12.3", "12") in cents."""
    yuan, _, fen = text.strip().partition(".")
    if len(fen) > 2:
        raise ValueError(f"a price has at most two decimals: {text!r}")
    return int(yuan) * 100 + int(fen.ljust(2, "0"))


def format_price(cents: int) -> str:
    """Cents as yuan for people: 1230 -> "12.30"."""
    return f"{cents // 100}.{cents % 100:02d}"
