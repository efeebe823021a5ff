"""Progress messages for long downloads."""


def progress_bar(done: int, total: int, width: int = 20) -> str:
    """A bar such as '[#####---------------]'; a total of 0 counts as finished."""
    filled = width if total == 0 else done * width // total
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def progress_text(done: int, total: int) -> str:
    """The message under the bar, e.g. '已完成 3/12（25.0%）'."""
    ratio = done / total if total else 1.0
    return f"已完成 {done}/{total}（{ratio:.1f}%）"
