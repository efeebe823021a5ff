"""Why a run ends: the `StopReason` a result carries, and the `Stop` that ends it.

Every way out of `run_agent` has a name here. Only ANSWERED is the normal exit; the
others are the brakes (`vibe_agent.brakes`), a model service that failed or sent a
reply the loop cannot use, an answer max_tokens cut off, a reply past its limits
(`vibe_agent.reply`), and lesson 12's finish check. The
code that sees a reason to stop raises `Stop`; the loop catches it in exactly one
place and turns it into the result. This file is on its own so that the loop, the
brakes and the reply checks can all name the reasons without importing each other.
"""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    """Why a run ended. Only ANSWERED means the model gave a final answer."""

    ANSWERED = "answered"
    MAX_ITERS = "max_iters"  # brake: the round limit
    REPEATED_CALL = "repeated_call"  # brake: the same call N times in a row
    CYCLE = "cycle"  # brake: the same 2 or 3 calls going round twice (A, B, A, B)
    TOOL_ERRORS = "tool_errors"  # brake: tools kept failing
    TOO_MANY_CALLS = "too_many_calls"  # brake: one reply asked for more calls than allowed
    PROVIDER_ERROR = "provider_error"  # the model service failed or sent an unusable reply
    CONTEXT_TOO_LONG = "context_too_long"  # the history no longer fits the model's window
    FINISH_REFUSED = "finish_refused"  # the finish check refused the answer too often
    CUT_OFF = "cut_off"  # the answer stopped at max_tokens (finish_reason "length"): unfinished
    REPLY_TOO_LONG = "reply_too_long"  # one reply passed its ReplyLimits (time, bytes, arguments)


class Stop(Exception):
    """Ends a run: a brake, or a provider failure. Carries the reason and one line for people."""

    def __init__(self, reason: StopReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
