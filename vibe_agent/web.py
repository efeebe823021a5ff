"""Reading a web page for the model: `read_page`, the fetcher behind the `fetch_url` tool.

The URL comes from the model, so it is untrusted input. It may point at this computer
(http://127.0.0.1:8888 is the learner's Jupyter), at the local network, or at a cloud
metadata service (http://169.254.169.254). Unless it is called with allow_private=True
(for a course-local test server), a fetch therefore:

  1. resolves the host name and refuses it if ANY of its addresses is not public;
  2. checks the address the socket really connected to before sending a byte, so a
     DNS answer that changes between step 1 and the connection (DNS rebinding) is
     caught as well;
  3. follows redirects itself, at most MAX_REDIRECTS, checking each new address again;
  4. keeps one deadline for everything (connecting, headers, body, redirects): a
     watchdog cuts the connection when it passes, however slowly bytes trickle in;
  5. keeps at most MAX_BYTES bytes of the page, counted after decompression (a small
     gzip bomb never grows large in memory), and says when it cut the page.

    read_page(http, url)
      check the URL -> GET under a _FetchGuard (steps 1, 2, 4)
        -> a redirect? check its target and GET again, at most MAX_REDIRECTS (step 3)
        -> read_body: the bytes up to MAX_BYTES, before the deadline (step 5)
        -> Page(text, capped)

Steps 1, 2 and 4 hook into httpx's connection through its "trace" extension, so they
run only where a socket is really opened: a page replayed from a cassette opens none.
Every failure is a `FetchError` whose message tells the model what to do next.
Residual risks: behind an HTTP proxy the proxy resolves the name again (step 2 cannot
see its connection) and a name this computer cannot resolve is left to the proxy; the
system resolver's own timeout is not covered by the deadline.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2

FETCH_DEADLINE_S = 10.0  # seconds for a whole fetch: connecting, headers, body, redirects
MAX_BYTES = 200_000  # a page is cut after this many bytes, counted after decompression
MAX_REDIRECTS = 5  # redirects a fetch follows, each new address checked again


class FetchError(Exception):
    """A page could not be read; the message is shown to the model."""


class FetchRefused(FetchError):
    """The URL leads to an address fetch_url must not read (this computer, a private net)."""


class FetchTimeout(FetchError):
    """The fetch did not finish before its deadline."""


@dataclass
class Page:
    """The decoded text of a web page.

    Attributes:
        text: the page text, decoded with the charset the server declared (else UTF-8).
        capped: True when reading stopped at the byte cap, so the page is longer.
    """

    text: str
    capped: bool


# Sent with every fetch: a fresh connection each time, so that it is checked and the
# watchdog owns its socket (a kept-alive connection would skip both).
FETCH_HEADERS = {"Connection": "close"}


def read_page(http: httpx2.Client, url: str, timeout: float = FETCH_DEADLINE_S,
              max_bytes: int = MAX_BYTES, allow_private: bool = False) -> Page:
    """GET an http(s) URL and return its text, reading at most `max_bytes` bytes.

    Redirects are followed here, at most MAX_REDIRECTS, each new address checked like
    the first (steps 1-3 of the module docstring). One deadline covers the whole fetch.

    Args:
        http: the HTTP client to use (normally `world.http`).
        url: an http:// or https:// address.
        timeout: seconds allowed for the whole fetch, redirects included.
        max_bytes: keep at most this many bytes of the page (after decompression).
        allow_private: also read loopback and private addresses (a course-local server).

    Raises:
        FetchError: bad URL, refused address, HTTP error status, too slow, network failure
            or corrupt compressed data.
    """
    url = url.strip()
    _check_url(url)
    try:
        guard = _FetchGuard(url, timeout, allow_private)
    except httpx2.InvalidURL as exc:
        raise FetchError(f"could not fetch {url} ({exc}). Check the address.") from None
    with guard:
        for _ in range(MAX_REDIRECTS + 1):
            result = _get_once(http, url, guard, max_bytes)
            if isinstance(result, Page):
                return result
            url = result
    raise FetchError(f"{guard.first_url} redirected more than {MAX_REDIRECTS} times. "
                     "Try another URL.")


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise FetchError(f"'{url}' is not an http:// or https:// URL. Give a full web address.")


def _get_once(http: httpx2.Client, url: str, guard: _FetchGuard, max_bytes: int
              ) -> Page | str:
    """One GET within the guard: the page, or the URL it redirects to."""
    try:
        guard.url = httpx2.URL(url)
        with http.stream("GET", url, headers=FETCH_HEADERS, timeout=guard.remaining(),
                         follow_redirects=False, extensions={"trace": guard.trace}) as response:
            if response.is_redirect:  # a 3xx with a Location header
                location = response.headers["location"]
                target = str(response.url.join(location))
                if urlsplit(target).scheme not in ("http", "https"):
                    raise FetchError(f"{url} redirects to '{location}', which is not an "
                                     "http:// or https:// URL. Try another URL.")
                return target
            if response.status_code >= 400:
                raise FetchError(f"HTTP {response.status_code} from {url}. Try another URL.")
            body, capped = read_body(response, guard.deadline, max_bytes)
            return Page(text=_decode(body, response.charset_encoding), capped=capped)
    except (FetchTimeout, httpx2.TimeoutException):
        raise guard.too_slow() from None
    except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
        if time.monotonic() >= guard.deadline:  # the watchdog cut the connection
            raise guard.too_slow() from None
        raise FetchError(f"could not fetch {url} ({exc}). Check the address.") from None


def read_body(response: httpx2.Response, deadline: float, max_bytes: int = MAX_BYTES
              ) -> tuple[bytes, bool]:
    """Read a response's body within a byte cap and a deadline.

    The cap counts decompressed bytes, and httpx2 decompresses in steps of at most
    1 MiB, so a small gzip bomb never grows far past `max_bytes` in memory. The
    course's recorder reads pages with this function too, so a recording never
    holds more than `fetch_url` would see.

    Args:
        response: a response whose body was not read yet (from `http.stream()`, or
            straight from a transport).
        deadline: the `time.monotonic()` value by which reading must be done.
        max_bytes: keep at most this many bytes (after decompression).

    Returns:
        The body, at most `max_bytes` long, and whether reading stopped at the cap.

    Raises:
        httpx2.ReadTimeout: the deadline passed.
        httpx2.HTTPError: the network failed or the compressed data is corrupt.
    """
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if time.monotonic() > deadline:  # a page that trickles in
            raise httpx2.ReadTimeout("the page did not load in time")
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    if time.monotonic() > deadline:  # the watchdog may have cut the body short
        raise httpx2.ReadTimeout("the page did not load in time")
    return bytes(body), False


def _decode(body: bytes, charset: str | None) -> str:
    """Decode with the declared charset; fall back to UTF-8. Bad bytes become '�'."""
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # the server named a charset Python does not know
        return body.decode("utf-8", errors="replace")


# --- the guard: which addresses a fetch may reach, and its deadline watchdog -------

# The kinds of address fetch_url refuses, in the order they are named (127.0.0.1 is also
# "private" to the ipaddress module; "loopback" says more).
FORBIDDEN_KINDS = ("loopback", "unspecified", "link_local", "multicast", "reserved", "private")


def forbidden_kind(address: str) -> str | None:
    """Say why an IP address is off limits for fetch_url, or None for a public address.

    Args:
        address: an IPv4 or IPv6 address as text; an IPv6 zone ("fe80::1%eth0") is ignored.

    Returns:
        "loopback", "unspecified", "link-local", "multicast", "reserved", "private",
        "non-public" (e.g. 100.64.0.1, carrier-grade NAT), or None.
    """
    ip = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:  # ::ffff:127.0.0.1
        ip = ip.ipv4_mapped
    for kind in FORBIDDEN_KINDS:
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    return None if ip.is_global else "non-public"


class _FetchGuard:
    """One fetch's address checks (steps 1-2) and its deadline watchdog (step 4).

    httpx calls `trace(event, info)` at each step of opening a connection; an exception
    raised there stops the request before anything is sent.
    """

    def __init__(self, url: str, timeout: float, allow_private: bool) -> None:
        self.first_url = url
        self.url = httpx2.URL(url)  # the URL being fetched now (changes on a redirect)
        self.timeout = timeout
        self.allow_private = allow_private
        self.deadline = time.monotonic() + timeout
        self._direct = False  # True when the socket goes to self.url's host (no proxy)
        self._sockets: list[socket.socket] = []
        self._done = self._expired = False
        self._lock = threading.Lock()
        self._watchdog = threading.Timer(timeout, self._expire)
        self._watchdog.daemon = True

    def __enter__(self) -> _FetchGuard:
        self._watchdog.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._done = True
        self._watchdog.cancel()

    def too_slow(self) -> FetchTimeout:
        return FetchTimeout(f"{self.first_url} did not load within {self.timeout:g} s. "
                            "Try again later or try another URL.")

    def remaining(self) -> float:
        """Seconds left before the deadline (raises once it has passed)."""
        left = self.deadline - time.monotonic()
        if left <= 0 or self._expired:
            raise self.too_slow()
        return left

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx's trace hook: check addresses, and hand each new socket to the watchdog."""
        if event == "connection.connect_tcp.started":
            self._direct = info["host"] == self.url.raw_host.decode("ascii")
            if not self.allow_private:
                self._check_name()
        elif event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info["return_value"]
            self._watch(stream.get_extra_info("socket"))
            if event.startswith("connection.connect_tcp") and self._direct \
                    and not self.allow_private:
                self._check_peer(stream)

    def _check_name(self) -> None:
        """Step 1: every address the host resolves to must be public."""
        port = self.url.port or (443 if self.url.scheme == "https" else 80)
        try:
            found = socket.getaddrinfo(self.url.raw_host.decode("ascii"), port,
                                       type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):  # unresolvable here: the connection will say so
            return
        for *_, sockaddr in found:
            self._refuse_if_forbidden(str(sockaddr[0]))

    def _check_peer(self, stream: Any) -> None:
        """Step 2: the address the socket really reached must be public too."""
        try:
            self._refuse_if_forbidden(str(stream.get_extra_info("server_addr")[0]))
        except FetchRefused:
            stream.close()
            raise

    def _refuse_if_forbidden(self, address: str) -> None:
        kind = forbidden_kind(address)
        if kind is not None:
            host = self.url.host
            where = address if host == address else f"{host} ({address})"
            raise FetchRefused(
                f"refused to fetch {self.url}: {where} is a {kind} address. fetch_url only "
                "reads public web pages; give a public http:// or https:// URL.")

    def _watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self._expired:  # the deadline passed while connecting
                self._cut(sock)

    def _expire(self) -> None:
        """Step 4: the deadline passed; cut every socket, so a blocked read returns."""
        with self._lock:
            if self._done:
                return
            self._expired = True
            for sock in self._sockets:
                self._cut(sock)

    @staticmethod
    def _cut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # already closed
            # the plain socket's method, also for a TLS socket (its own would drop TLS state)
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
