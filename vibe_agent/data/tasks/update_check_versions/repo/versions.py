"""Release versions such as "1.10.2" (numbers separated by dots) and update checks."""


def sort_versions(versions: list[str]) -> list[str]:
    """`versions` from the oldest to the newest."""
    return sorted(versions)


def latest(versions: list[str]) -> str:
    """The newest of `versions`."""
    return sort_versions(versions)[-1]


def needs_update(current: str, available: list[str]) -> bool:
    """True when a version newer than `current` is available."""
    return latest([current, *available]) != current
