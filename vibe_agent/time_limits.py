"""A tool call's time limit: the deadline a tool sees, and the thread it runs in.

Every tool runs under a time limit. Python cannot kill a thread, so a tool that
overruns is *abandoned*: it keeps running in a background (daemon) thread until it
returns by itself, and the model gets an error text at once. An abandoned call must
not act any more (the model was told it timed out), so a tool that writes or starts
processes asks `current_deadline()` first:

    deadline = current_deadline()        # None outside a time-limited call
    deadline.remaining()                 # seconds left: a command gets no more
    with deadline.acting():              # raises CallAbandoned once the registry gave up;
        write the file / run it          # an act already under way is waited for

so what it does either happens before the model hears "timed out", or never.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar


class ToolTimeout(TimeoutError):
    """A tool did not finish within its time limit (it was abandoned, not stopped).

    Args:
        message: what happened, for the trace.
        seconds: the limit, when the tool keeps its own (one registered with
            `timeout=None` that bounds its waits itself, e.g. an MCP server's tool).
    """

    def __init__(self, message: str = "", seconds: float | None = None) -> None:
        super().__init__(message)
        self.seconds = seconds


class CallAbandoned(ToolTimeout):
    """Raised inside a tool that tries to act after the registry gave up on its call."""


ACT_GRACE = 2.0  # seconds the registry waits, at the time limit, for an act under way


class CallDeadline:
    """The time limit of one running tool call, as the tool sees it.

    The registry makes one per call and abandons it at the time limit. From then on
    `acting()` refuses, so a late approval or a slow start cannot make the tool act
    after the model was told the call timed out.

    Args:
        seconds: the call's time limit.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self._abandoned = threading.Event()
        self._lock = threading.Lock()  # held while the tool acts
        self.acted = False

    @property
    def abandoned(self) -> bool:
        return self._abandoned.is_set()

    def remaining(self) -> float:
        """Seconds until the registry gives up (0 once it has)."""
        return 0.0 if self.abandoned else max(0.0, self.ends - time.monotonic())

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """Hold this while doing what must not happen after the call was abandoned
        (keep it short, or bounded by `remaining()`).

        Raises:
            CallAbandoned: the registry has already given up on this call.
        """
        with self._lock:
            if self.abandoned:
                raise CallAbandoned("the registry gave up on this call; it must not act")
            self.acted = True
            yield

    def abandon(self, wait: float) -> bool:
        """Give up on the call: no act starts from now on. An act under way is waited
        for (at most `wait` seconds); True when the tool has acted."""
        self._abandoned.set()
        if self._lock.acquire(timeout=wait):
            self._lock.release()
        return self.acted


_deadline: contextvars.ContextVar[CallDeadline | None] = contextvars.ContextVar(
    "tool_call_deadline", default=None)


def current_deadline() -> CallDeadline | None:
    """The time limit of the tool call running in this thread (None: no limit)."""
    return _deadline.get()


T = TypeVar("T")


class StillRunning(Exception):
    """`run_in_thread` stopped waiting: the call goes on in its thread, abandoned."""


def run_in_thread(fn: Callable[[], T], seconds: float, name: str,
                  grace: Callable[[], float] = lambda: 0.0) -> T:
    """Call `fn()` in a new daemon thread and wait at most `seconds` for it.

    The thread runs with a copy of the caller's context variables. Python cannot
    kill a thread: one still running after `seconds` is left to finish by itself
    (being a daemon, it never keeps the program from exiting). The registry runs
    every tool this way; the course's recorder runs every page download this way.

    Args:
        fn: what to call, without arguments.
        seconds: how long to wait.
        name: the thread's name (shown by debuggers and in `StillRunning`).
        grace: asked once, when `seconds` have passed and `fn` still runs: how many
            seconds more to wait (0: none).

    Raises:
        StillRunning: `fn` had not returned in time.
        BaseException: whatever `fn` raised, re-raised here.
    """
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=contextvars.copy_context().run, args=(work,),
                              name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        worker.join(grace())
    if worker.is_alive():
        raise StillRunning(f"{name} did not finish within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def run_with_time_limit(fn: Callable[..., Any], kwargs: dict[str, Any],
                        seconds: float | None) -> Any:
    """Call `fn(**kwargs)` and wait at most `seconds` for it (None: no limit).

    The call runs in its own thread (`run_in_thread`), with its `CallDeadline` as
    `current_deadline()`. If it is still running after `seconds`, the deadline is
    abandoned, `ToolTimeout` is raised and the thread is left to finish: it ends
    when `fn` returns. A tool that was in the middle of acting (`CallDeadline.acting`)
    is waited for a little longer, so its result is not reported as a time-out.

    Raises:
        ToolTimeout: `fn` did not finish in time.
        Exception: whatever `fn` raised, re-raised here.
    """
    if seconds is None:
        return fn(**kwargs)
    deadline = CallDeadline(seconds)

    def call() -> Any:
        _deadline.set(deadline)  # in the thread's own copy of the context
        return fn(**kwargs)

    def grace() -> float:  # it acted: wait for what it did
        return ACT_GRACE if deadline.abandon(ACT_GRACE) else 0.0

    try:
        return run_in_thread(call, seconds, f"tool-{getattr(fn, '__name__', 'fn')}", grace)
    except StillRunning:
        raise ToolTimeout(f"the tool did not finish within {seconds:g} s") from None
