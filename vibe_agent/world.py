"""The outside world the demo tools touch: a clock and an HTTP client.

Tools never call `datetime.now()` or open sockets on their own; they ask a
`World`. Live mode hands them the real clock and a real HTTP client. Replay mode
hands them a clock and an HTTP client served from the same cassette as the model's
responses, so a lesson replays byte for byte while the tools' own code still runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx2


def system_clock() -> datetime:
    """The machine's current time, timezone-aware (UTC)."""
    return datetime.now(UTC)


@dataclass
class World:
    """What the tools may read from outside the program.

    Attributes:
        now: returns the current time as an aware datetime.
        http: the HTTP client `fetch_url` uses (its transport may be a cassette).
    """

    now: Callable[[], datetime] = system_clock
    http: httpx2.Client = field(default_factory=lambda: httpx2.Client(follow_redirects=True))


def real_world() -> World:
    """A world with the system clock and a fresh real HTTP client."""
    return World()
