"""Context growth: every round resends the whole history, so it only grows.

The loop keeps the full `messages` list (it is the record of what happened), but
what is SENT each round can be a shorter version of it. A strategy is a function
`messages -> messages` passed to `run_agent(..., prepare=...)`. This file holds a
first, simple one: shorten old tool results, which are usually the bulkiest part
(a fetched page, a long listing) and are rarely needed word for word later.

Whatever a strategy drops, the model no longer sees: measure the saving AND
check the answer did not change (lesson 07 does both).
"""

from __future__ import annotations

from typing import Any


def trim_old_tool_results(messages: list[dict[str, Any]], keep_last: int = 1,
                          max_chars: int = 60) -> list[dict[str, Any]]:
    """A copy of `messages` in which older tool results are cut to `max_chars`.

    The most recent `keep_last` tool results stay whole, and every tool message
    keeps its `tool_call_id`, so the tool_calls protocol stays intact. A result is
    only replaced when the cut version (with its note) is really shorter.

    Args:
        messages: the full history (not modified).
        keep_last: how many of the newest tool results to keep unchanged.
        max_chars: how much of an older tool result to keep.
    """
    tool_positions = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    old = set(tool_positions[:-keep_last] if keep_last else tool_positions)
    trimmed = []
    for i, message in enumerate(messages):
        content = str(message.get("content") or "")
        if i in old:
            cut = f"{content[:max_chars]}… [trimmed: {len(content) - max_chars} more characters]"
            if len(cut) < len(content):  # a short result would only grow by the note
                message = {**message, "content": cut}
        trimmed.append(message)
    return trimmed


def prompt_tokens_per_round(usage: list[dict[str, Any] | None]) -> list[int | None]:
    """The prompt tokens each round reported (None where the API sent no usage)."""
    return [u.get("prompt_tokens") if u else None for u in usage]
