"""The outside world the demo tools touch: a clock and an HTTP client.

Tools never call `datetime.now()` or open sockets on their own; they ask a
`World`. Live mode hands them the real clock and a real HTTP client. Replay mode
hands them a clock and an HTTP client served from the same cassette as the model's
responses, so a lesson replays byte for byte while the tools' own code still runs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import httpx2


def system_clock() -> datetime:
    """The machine's current time, timezone-aware (UTC)."""
    return datetime.now(UTC)


FOLLOW_REDIRECTS = True  # the same in every mode, so live, record and replay agree


def http_client(transport: httpx2.BaseTransport | None = None) -> httpx2.Client:
    """The HTTP client the tools use, over `transport` (None: the network).

    Every mode builds its client here, so redirects are handled the same way whether
    the pages come from the network, a recording or the course's own files.
    """
    return httpx2.Client(transport=transport, follow_redirects=FOLLOW_REDIRECTS)


class World:
    """What the tools may read from outside the program.

    Args:
        now: returns the current time as an aware datetime.
        http: the HTTP client `fetch_url` uses (its transport may be a cassette);
            by default a real client, created on first use.
    """

    def __init__(self, now: Callable[[], datetime] = system_clock,
                 http: httpx2.Client | None = None) -> None:
        self.now = now
        self._http = http

    @property
    def http(self) -> httpx2.Client:
        if self._http is None:  # creating a client costs ~40 ms (TLS set-up): only when needed
            self._http = http_client()
        return self._http


def real_world() -> World:
    """A world with the system clock and a real HTTP client."""
    return World()
