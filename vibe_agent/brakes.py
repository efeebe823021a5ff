"""The brakes of lesson 05: what stops an agent that spins instead of finishing.

A model that cannot finish rarely raises an error: it calls the same tool again,
goes round between two or three calls, or keeps getting tool errors; a runaway reply
asks for a thousand calls at once. Each brake has a limit in `Brakes`, one validated
settings object, and a `StopReason` of its own; a limit of 0 switches the repeat,
cycle, tool-error and calls-per-reply brakes off, while `max_iters` (the round
limit, counted by the loop itself) can never be switched off.

    call_key(name, arguments)           a call's identity: name + canonical JSON
    is_repeat(previous_calls, ...)      the same call `max_repeats` times in a row
    find_cycle(previous_calls, ...)     A, B, A, B: 2 to `max_cycle` calls, twice round
    ToolErrorBrake(limit).record(ok)    `max_tool_errors` failing results in a row
    too_many_calls(number, ...)         a reply's call past `max_calls_per_reply`
    capped(text, limit)                 one tool result cut to `max_result_chars`, its
                                        note of what was cut included

`is_repeat` and `ToolErrorBrake` have the names lesson 05's exercises give them.
`spinning` is where the loop asks the repeat and cycle brakes about one call: a
refused call is not run, and its step gets the error text the model reads instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .stops import Stop, StopReason
from .trace import TraceStep, shorten

MAX_RESULT_CHARS = 20_000  # the most one tool result may put into the history
# The most tool calls one reply may ask for: far above what a model working on a task
# asks at once (the lessons' models ask for at most 4), low enough that a runaway reply
# (1,000 calls) runs no more than this many before the run stops.
MAX_CALLS_PER_REPLY = 32


@dataclass(frozen=True)
class Brakes:
    """The limits of one run, checked once when they are made.

    A setting that makes no sense is a harness bug, not a model's mistake, so it
    raises ValueError here, before a single request is sent.
    """

    max_iters: int = 6  # most model calls in one run (at least 1: cannot be switched off)
    max_repeats: int = 3  # the max_repeats-th identical call in a row is refused (0: off)
    max_cycle: int = 3  # 2 to max_cycle calls going round a second time are refused (0: off)
    max_tool_errors: int = 3  # stop after this many failing tool results in a row (0: off)
    max_result_chars: int = MAX_RESULT_CHARS  # most characters of one tool result (0: no cap)
    max_refusals: int = 3  # finish-check refusals sent back; one more ends it (0: judged once)
    max_calls_per_reply: int = MAX_CALLS_PER_REPLY  # calls past it are not run (0: no limit)

    def __post_init__(self) -> None:
        if self.max_iters < 1:
            raise ValueError("max_iters must be at least 1: the round brake cannot be "
                             "switched off")
        if self.max_repeats == 1 or self.max_repeats < 0:
            raise ValueError(f"max_repeats={self.max_repeats}: the limit-th identical call in "
                             "a row is refused, so 1 would refuse every call; use 0 (off) or "
                             "2 or more")
        if self.max_cycle == 1 or self.max_cycle < 0:
            raise ValueError(f"max_cycle={self.max_cycle}: a cycle has 2 or more calls; "
                             "use 0 (off) or 2 or more")
        if self.max_tool_errors < 0 or self.max_result_chars < 0:
            raise ValueError("max_tool_errors and max_result_chars must be 0 (off) or more")
        if self.max_refusals < 0:
            raise ValueError("max_refusals must be 0 or more")
        if self.max_calls_per_reply < 0:
            raise ValueError(f"max_calls_per_reply={self.max_calls_per_reply}: use 0 (no "
                             "limit) or more")


def call_key(name: str, arguments: str) -> str:
    """The identity of a call for the repeat and cycle brakes: name plus canonical arguments."""
    try:
        canonical = json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, a number too long, nesting too deep
        canonical = (arguments or "").strip()
    return f"{name}:{canonical}"


def is_repeat(previous_calls: list[tuple[str, str]], name: str, arguments: str,
              limit: int) -> bool:
    """True when this call makes `limit` identical calls in a row (limit 0: never).

    Args:
        previous_calls: (name, arguments) of every call so far, oldest first.
        name: this call's tool name.
        arguments: this call's argument text.
        limit: how many identical calls in a row are refused: the limit-th is not run.
    """
    if limit <= 0:
        return False
    this, in_a_row = call_key(name, arguments), 1
    for tool, args in reversed(previous_calls):
        if in_a_row >= limit or call_key(tool, args) != this:
            break
        in_a_row += 1
    return in_a_row >= limit


def find_cycle(previous_calls: list[tuple[str, str]], name: str, arguments: str,
               longest: int) -> list[tuple[str, str]]:
    """The calls of a cycle this call completes for the second time in a row, else [].

    A cycle is 2 to `longest` calls, not all the same, that come twice in a row in the
    same order: A, B, A, B or A, B, C, A, B, C. (One call over and over is
    `is_repeat`'s job.) `longest` 0 switches the check off.

    Args:
        previous_calls: (name, arguments) of every call so far, oldest first.
        name: this call's tool name.
        arguments: this call's argument text.
        longest: the longest cycle to look for.
    """
    if longest < 2:
        return []
    calls = [*previous_calls[-(2 * longest - 1):], (name, arguments)]
    keys = [call_key(*call) for call in calls]
    for length in range(2, longest + 1):
        last, before = keys[-length:], keys[-2 * length:-length]
        if len(keys) >= 2 * length and last == before and len(set(last)) > 1:
            return calls[-length:]
    return []


class ToolErrorBrake:
    """Counts failing tool results in a row; a success resets the count (limit 0: off)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.failures_in_a_row = 0

    def record(self, ok: bool) -> bool:
        """Count one tool result; True when `limit` results in a row have failed."""
        self.failures_in_a_row = 0 if ok else self.failures_in_a_row + 1
        return self.limit > 0 and self.failures_in_a_row >= self.limit


def shown(name: str, arguments: str) -> str:
    """A call on one short line, for stop messages: name(arguments)."""
    return shorten(f"{name}({arguments})", 100)


def spinning(previous_calls: list[tuple[str, str]], step: TraceStep,
             brakes: Brakes) -> Stop | None:
    """The repeat and cycle brakes for one tool call (its step), which then joins
    `previous_calls`.

    When the call must not run, the step's outcome becomes "refused" and its result
    the error text the model reads instead, and the Stop the brake asks for is
    returned; otherwise None.
    """
    name, arguments = step.tool or "", step.arguments or ""
    stop = None
    if is_repeat(previous_calls, name, arguments, brakes.max_repeats):
        before = brakes.max_repeats - 1
        stop = Stop(StopReason.REPEATED_CALL, f"同一个调用 {shown(name, arguments)} 连续出现 "
                    f"{brakes.max_repeats} 次，已停止。")
        step.result = (f"Error: this exact call was already made {before} "
                       f"time{'s' * (before > 1)} in a row; it was not run again.")
    elif cycle := find_cycle(previous_calls, name, arguments, brakes.max_cycle):
        path = " → ".join(shown(*call) for call in cycle)
        stop = Stop(StopReason.CYCLE, f"调用在 {path} 之间来回打转（连续转了两圈），已停止。")
        step.result = (f"Error: these calls go round in a cycle a second time ({path}); "
                       "this call was not run again.")
    previous_calls.append((name, arguments))
    if stop:
        step.outcome = "refused"
    return stop


def too_many_calls(number: int, asked: int, step: TraceStep, brakes: Brakes) -> Stop | None:
    """The calls-per-reply brake for the `number`-th call (its step) of a reply of `asked`.

    The first call past `max_calls_per_reply` is refused (its step's outcome becomes
    "refused", its result the error text the model reads) and the Stop is returned;
    the loop answers the reply's later calls "not run". None: within the limit.
    """
    limit = brakes.max_calls_per_reply
    if not limit or number <= limit:
        return None
    step.outcome = "refused"
    step.result = (f"Error: not run: this reply asks for {asked} tool calls, more than the "
                   f"{limit} one reply may ask for (max_calls_per_reply).")
    return Stop(StopReason.TOO_MANY_CALLS, f"一次回复里要了 {asked} 个工具调用，超过了上限 "
                f"{limit}（max_calls_per_reply）：只运行了前 {limit} 个，已停止。")


def capped(text: str, limit: int) -> str:
    """At most `limit` characters of a tool result, the note of what was cut included
    (0: no cap). A limit too small for the note keeps the first `limit` characters only."""
    if not limit or len(text) <= limit:
        return text
    widest = _cut_note(limit, len(text), len(text))  # no shorter than the note used below
    kept = limit - len(widest)
    if kept <= 0:
        return text[:limit]
    return text[:kept] + _cut_note(kept, len(text), len(text) - kept)


def _cut_note(kept: int, total: int, cut: int) -> str:
    return (f"\n\n[truncated by the agent loop: showing the first {kept} of {total} "
            f"characters, {cut} cut]")
