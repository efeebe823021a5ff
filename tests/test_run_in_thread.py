"""`run_in_thread`, the one run-in-a-thread-with-a-deadline helper: the registry runs every
tool with it, the recorder every page download. Real threads, short real waits."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vibe_agent.registry import StillRunning, run_in_thread

LIMIT = 0.2  # seconds a call is waited for in these tests
GRACE = 0.3  # the extra wait a caller asks for at the limit

colour: contextvars.ContextVar[str] = contextvars.ContextVar("colour", default="none")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of each test, so an abandoned call's thread ends with it."""
    event = threading.Event()
    yield event
    event.set()


def finish_after(seconds: float, value: Any = "done") -> Callable[[], Any]:
    def call() -> Any:
        time.sleep(seconds)
        return value
    return call


def boom() -> None:
    raise KeyError("the call's own error")


@pytest.mark.parametrize(("call", "grace", "expected"), [
    (lambda: 42, 0.0, 42),
    (finish_after(LIMIT / 4), 0.0, "done"),
    (finish_after(LIMIT * 1.5), GRACE, "done"),  # late, but within the grace it asked for
    (colour.get, 0.0, "red"),  # the caller's context variables, copied
    (lambda: threading.current_thread().daemon, 0.0, True),
    (lambda: threading.current_thread().name, 0.0, "worker-x"),
], ids=["value", "in-time", "within-the-grace", "context-copied", "daemon", "named"])
def test_the_call_s_value_comes_back(call, grace, expected):
    colour.set("red")
    assert run_in_thread(call, LIMIT, "worker-x", lambda: grace) == expected


@pytest.mark.parametrize(("raised", "expected"), [
    (KeyError("the call's own error"), KeyError),
    (TimeoutError("the call's own time-out"), TimeoutError),  # never taken for an overrun
    (SystemExit(3), SystemExit),
], ids=["error", "its-own-timeout-error", "base-exception"])
def test_the_call_s_exception_is_raised_again_as_it_was(raised, expected):
    def call() -> None:
        raise raised

    with pytest.raises(expected) as caught:
        run_in_thread(call, LIMIT, "worker-x")
    assert caught.value is raised


@pytest.mark.parametrize("grace", [0.0, GRACE], ids=["no-grace", "grace-too-short"])
def test_a_call_that_overruns_is_abandoned_at_the_limit_plus_the_grace(release, grace):
    start = time.monotonic()
    with pytest.raises(StillRunning, match="worker-x did not finish within 0.2 s"):
        run_in_thread(release.wait, LIMIT, "worker-x", lambda: grace)
    waited = time.monotonic() - start
    assert LIMIT + grace <= waited < LIMIT + grace + 1.0


@pytest.mark.parametrize(("call", "asked"), [
    (finish_after(0.0), []),
    (finish_after(LIMIT * 1.5), [1]),
], ids=["finished-in-time: not asked", "overran: asked once"])
def test_the_grace_is_asked_for_only_when_the_call_overruns(call, asked):
    calls: list[int] = []

    def grace() -> float:
        calls.append(1)
        return GRACE

    run_in_thread(call, LIMIT, "worker-x", grace)
    assert calls == asked
