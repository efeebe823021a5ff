"""Request matching: how a replayed request finds its recording, and why it missed.

A chat request is looked up by its body, normalised (None and empty values dropped,
keys sorted) and with its volatile parts (test-run durations, object addresses)
replaced by placeholders; headers never count. A page is looked up by its method and
URL. When a request matches nothing, `differences` names every field that differs
from a recording and `distance` ranks the recordings, so the miss message can point
at the nearest one.
"""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher
from typing import Any

ABSENT = "<没有>"  # a field one of the two requests does not have


def normalise(value: Any) -> Any:
    """Drop None and empty values recursively; dict keys come out sorted."""
    if isinstance(value, dict):
        cleaned = {k: normalise(v) for k, v in sorted(value.items())}
        return {k: v for k, v in cleaned.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


# Parts of a tool result that are never the same twice: how long a test run took
# ("14 passed in 0.05s", unittest's "Ran 3 tests in 0.001s") and where an object
# lived ("<Store object at 0x7f8a88cd5710>"). A request quoting them must still replay.
VOLATILE = [
    (re.compile(r"\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d\d:\d\d\))?"), "in <duration>"),
    (re.compile(r"\bat 0x[0-9a-f]{6,16}\b"), "at 0x<address>"),
]


def without_volatile(text: str) -> str:
    """`text` with test-run durations and object addresses replaced by placeholders."""
    for pattern, placeholder in VOLATILE:
        text = pattern.sub(placeholder, text)
    return text


def request_key(body: dict[str, Any]) -> str:
    """The lookup key for a chat request: its normalised body as canonical JSON,
    volatile parts (test-run durations, object addresses) left out."""
    return without_volatile(json.dumps(normalise(body), sort_keys=True, ensure_ascii=False))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """`{"messages": [{"content": "x"}]}` -> `{"messages[0].content": "x"}`."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out |= flatten(v, f"{prefix}.{k}" if prefix else k)
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out |= flatten(v, f"{prefix}[{i}]")
        return out
    return {prefix: value}


def _short(value: Any, width: int = 60) -> str:
    if value == ABSENT:
        return ABSENT
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _differing(recorded: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    old, new = flatten(normalise(recorded)), flatten(normalise(now))
    return [(path, old.get(path, ABSENT), new.get(path, ABSENT))
            for path in sorted(old.keys() | new.keys())
            if not _same(old.get(path, ABSENT), new.get(path, ABSENT))]


def _same(old: Any, new: Any) -> bool:
    """Equal values; texts that differ only in volatile parts count as equal."""
    if isinstance(old, str) and isinstance(new, str):
        return without_volatile(old) == without_volatile(new)
    return old == new


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Every field that differs, as `path：录制文件里 '…' | 现在 '…'`."""
    return [f"{path}：录制文件里 {_short(old)} | 现在 {_short(new)}"
            for path, old, new in _differing(recorded, now)]


def distance(recorded: dict[str, Any], now: dict[str, Any]) -> float:
    """How far apart two requests are: each differing field counts 0..1 by how much differs."""
    return sum(1 - SequenceMatcher(None, str(old), str(new)).ratio()
               for _, old, new in _differing(recorded, now))


def page_key(request: dict[str, Any]) -> str:
    """The lookup key for a page: its method and URL."""
    return f"{request['method'].upper()} {request['url']}"

