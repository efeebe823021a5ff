"""The demo tools the agent can call: a clock, a calculator, a web fetcher and two fakes.

Each public method of `DemoTools` is one tool. The registry turns a bound method into
a tool definition: the name is the method name, the description is the first
docstring paragraph and the JSON Schema comes from the type hints and the `Args:`
section, so those are written for the model to read.

Rules every tool here follows:

- The outside world (clock, network) is reached only through `self.world`, so a
  lesson can replay the tools from a cassette.
- Bad input from the model never raises: the tool returns text starting with
  "Error:" that says what to do next. Only real bugs raise.
- Nothing hangs and nothing is silently cut: the calculator bounds the size of its
  numbers, the fetcher has one deadline and a byte cap, and truncation is announced.
- The fetcher reads only public web pages: an address on this computer or a private
  network is refused, after every redirect too (see "fetching web pages" below).
"""

from __future__ import annotations

import ast
import contextlib
import ipaddress
import math
import operator
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx2

from vibe_agent.registry import ToolRegistry
from vibe_agent.world import World, real_world

FETCH_DEADLINE_S = 10.0  # seconds for a whole fetch: connecting, headers, body, redirects
MAX_BYTES = 200_000  # a page is cut after this many bytes, counted after decompression
MAX_REDIRECTS = 5  # redirects a fetch follows, each new address checked again
MAX_EXPRESSION_CHARS = 500  # longer calculator input is refused before parsing
MAX_INT_BITS = 10_000  # about 3,000 decimal digits: the biggest integer the calculator builds

TIMEZONE_EXAMPLES = "Asia/Shanghai, Europe/London, America/New_York or UTC"


# --- calculator -------------------------------------------------------------------

# The allow-list: these operators and nothing else.
BINARY_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
UNARY_OPERATORS: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}

# What people (and models) type instead of ASCII: 17 × 23, 10 ÷ 4, （1＋2）, １２.
NORMALISE = str.maketrans(
    {"×": "*", "÷": "/", "−": "-", "（": "(", "）": ")", "＋": "+", "－": "-", "＊": "*", "／": "/"}
    | {chr(ord("０") + digit): str(digit) for digit in range(10)}
)

ALLOWED = "Use only numbers, + - * / // % ** and parentheses."
TOO_LARGE = "the result is too large. Try smaller numbers."


class CalculatorError(ValueError):
    """The expression cannot be computed; the message is shown to the model."""


# Words for the syntax the calculator refuses, so the error says what went wrong.
REFUSED_SYNTAX: dict[type[ast.AST], str] = {
    ast.Call: "a function call",
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Compare: "a comparison",
    ast.BoolOp: "and/or",
    ast.Lambda: "a lambda",
    ast.BitXor: "the operator ^ (for powers write **)",
    ast.BitOr: "the operator |",
    ast.BitAnd: "the operator &",
    ast.LShift: "the operator <<",
    ast.RShift: "the operator >>",
    ast.MatMult: "the operator @",
    ast.Invert: "the operator ~",
    ast.Not: "the operator not",
}


def _describe(node: ast.AST) -> str:
    """Name a disallowed piece of syntax in words the model understands."""
    if isinstance(node, ast.Name):
        return f"the name '{node.id}'"
    if isinstance(node, ast.Constant):
        return f"the value {node.value!r}"
    return REFUSED_SYNTAX.get(type(node), f"'{type(node).__name__}'")


def _check_size(value: int | float) -> int | float:
    """Refuse results too big to be useful (huge integers, infinite floats)."""
    if isinstance(value, complex):
        raise CalculatorError("the result is not a real number. Check the expression.")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(TOO_LARGE)
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError(TOO_LARGE)
    return value


def _power_is_too_big(left: int | float, right: int | float) -> bool:
    """Guess, before computing, whether an integer power would exceed MAX_INT_BITS.

    Only int ** non-negative int can grow without limit (9**9**9 would run for
    hours). Float powers overflow at once with OverflowError, which we catch.
    """
    if not (isinstance(left, int) and isinstance(right, int) and right >= 0):
        return False
    return abs(left) > 1 and left.bit_length() * right > MAX_INT_BITS


def _evaluate(node: ast.AST) -> int | float:
    """Walk the syntax tree, allowing only numbers and the arithmetic operators."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(
            node.value, bool):
        return _check_size(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPERATORS:
        return UNARY_OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and _power_is_too_big(left, right):
            raise CalculatorError(TOO_LARGE)
        return _check_size(BINARY_OPERATORS[type(node.op)](left, right))
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        node = node.op  # the shape is fine, the operator is not
    raise CalculatorError(f"{_describe(node)} is not allowed. {ALLOWED}")


def format_number(value: int | float) -> str:
    """Integers exactly; floats with up to 12 significant digits (0.1 + 0.2 -> 0.3)."""
    if isinstance(value, int):
        return str(value)
    return f"{value:.12g}"


# --- fetching web pages -----------------------------------------------------------
#
# The URL comes from the model, so it is untrusted input. It may point at this computer
# (http://127.0.0.1:8888 is the learner's Jupyter), at the local network, or at a cloud
# metadata service (http://169.254.169.254). Unless the tools were built with
# allow_private=True (for a course-local test server), a fetch therefore:
#   1. resolves the host name and refuses it if ANY of its addresses is not public;
#   2. checks the address the socket really connected to before sending a byte, so a
#      DNS answer that changes between step 1 and the connection (DNS rebinding) is
#      caught as well;
#   3. follows redirects itself, at most MAX_REDIRECTS, checking each new address again;
#   4. keeps one deadline for everything (connecting, headers, body, redirects): a
#      watchdog cuts the connection when it passes, however slowly bytes trickle in.
# Steps 1, 2 and 4 hook into httpx's connection through its "trace" extension, so they
# run only where a socket is really opened: a page replayed from a cassette opens none.
# Residual risks: behind an HTTP proxy the proxy resolves the name again (step 2 cannot
# see its connection) and a name this computer cannot resolve is left to the proxy; the
# system resolver's own timeout is not covered by the deadline.


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


# The kinds of address fetch_url refuses, in the order they are named (127.0.0.1 is also
# "private" to the ipaddress module; "loopback" says more).
FORBIDDEN_KINDS = ("loopback", "unspecified", "link_local", "multicast", "reserved", "private")

# Sent with every fetch: a fresh connection each time, so that it is checked and the
# watchdog owns its socket (a kept-alive connection would skip both).
FETCH_HEADERS = {"Connection": "close"}


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


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise FetchError(f"'{url}' is not an http:// or https:// URL. Give a full web address.")


def read_page(http: httpx2.Client, url: str, timeout: float = FETCH_DEADLINE_S,
              max_bytes: int = MAX_BYTES, allow_private: bool = False) -> Page:
    """GET an http(s) URL and return its text, reading at most `max_bytes` bytes.

    Redirects are followed here, at most MAX_REDIRECTS, each new address checked like
    the first (see the comment above `FetchError`). One deadline covers the whole fetch.

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
    """Read a streamed response's body within a byte cap and a deadline.

    The cap counts decompressed bytes, and httpx2 decompresses in steps of at most
    1 MiB, so a small gzip bomb never grows far past `max_bytes` in memory.

    Args:
        response: a response opened with `stream()` and not read yet.
        deadline: the `time.monotonic()` value by which reading must be done.
        max_bytes: keep at most this many bytes (after decompression).

    Returns:
        The body, at most `max_bytes` long, and whether reading stopped at the cap.

    Raises:
        FetchTimeout: the deadline passed.
        httpx2.HTTPError: the network failed or the compressed data is corrupt.
    """
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if time.monotonic() > deadline:  # a page that trickles in
            raise FetchTimeout(f"{response.url} did not load in time.")
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True
    if time.monotonic() > deadline:  # the watchdog may have cut the body short
        raise FetchTimeout(f"{response.url} did not load in time.")
    return bytes(body), False


def _decode(body: bytes, charset: str | None) -> str:
    """Decode with the declared charset; fall back to UTF-8. Bad bytes become '�'."""
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # the server named a charset Python does not know
        return body.decode("utf-8", errors="replace")


# --- fake data for the two "tools the model cannot really run" --------------------

FAKE_WEATHER = {
    "Beijing": "sunny, 12°C, light north wind",
    "Shanghai": "light rain, 16°C, humidity 85%",
    "Guangzhou": "cloudy, 24°C, humidity 70%",
    "Shenzhen": "showers, 25°C, humidity 80%",
}
CITY_ALIASES = {"北京": "Beijing", "上海": "Shanghai", "广州": "Guangzhou", "深圳": "Shenzhen"}

FAKE_STOCKS = {
    "600519": "Kweichow Moutai: 1,520.00 CNY, +0.8% today",
    "000001": "Ping An Bank: 11.35 CNY, -0.4% today",
    "AAPL": "Apple Inc.: 228.50 USD, +1.2% today",
    "TSLA": "Tesla Inc.: 251.10 USD, -2.3% today",
}

DEMO_NOTE = "(demo data, not real)"


# --- the tools ------------------------------------------------------------------


class DemoTools:
    """The tools of the course's demo agent, sharing one `World`.

    Args:
        world: the clock and HTTP client the tools use; None means the real ones.
        fetch_timeout: seconds `fetch_url` and `page_length` may take for a whole fetch.
        allow_private: let `fetch_url` and `page_length` read this computer and private
            networks. Off by default (the model's URL is untrusted); on only for a
            course-local server, e.g. in tests.
    """

    def __init__(self, world: World | None = None, fetch_timeout: float = FETCH_DEADLINE_S,
                 allow_private: bool = False) -> None:
        self.world = world if world is not None else real_world()
        self.fetch_timeout = fetch_timeout
        self.allow_private = allow_private

    def current_time(self, timezone: str = "Asia/Shanghai") -> str:
        """Get the current date and time in a timezone.

        Args:
            timezone: an IANA timezone name such as Asia/Shanghai, Europe/London or UTC.
        """
        try:
            zone = ZoneInfo(timezone.strip())
        except (ZoneInfoNotFoundError, ValueError):
            return f"Error: unknown timezone '{timezone}'. Use a name such as {TIMEZONE_EXAMPLES}."
        local = self.world.now().astimezone(zone)
        offset = local.utcoffset()  # never None for an aware time in a ZoneInfo zone
        minutes = int(offset.total_seconds()) // 60 if offset is not None else 0
        sign = "+" if minutes >= 0 else "-"
        hours, minutes = divmod(abs(minutes), 60)
        return f"{local:%Y-%m-%d %H:%M:%S} {zone.key} (UTC{sign}{hours:02d}:{minutes:02d})"

    def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression, e.g. "17 * 23" or "(2 + 3) ** 2 / 7".

        Args:
            expression: numbers with + - * / // % ** and parentheses; × and ÷ also work.
        """
        text = expression.translate(NORMALISE).strip()
        if not text:
            return f"Error: the expression is empty. {ALLOWED}"
        if len(text) > MAX_EXPRESSION_CHARS:
            return f"Error: the expression is longer than {MAX_EXPRESSION_CHARS} characters."
        try:
            value = _evaluate(ast.parse(text, mode="eval"))
        except SyntaxError:
            return f"Error: '{text}' is not a valid arithmetic expression. {ALLOWED}"
        except CalculatorError as exc:
            return f"Error: {exc}"
        except ZeroDivisionError:
            return "Error: division by zero. Check the expression and try again."
        except OverflowError:
            return f"Error: {TOO_LARGE}"
        return f"{text} = {format_number(value)}"

    def fetch_url(self, url: str, max_chars: int = 2000) -> str:
        """Download a web page and return its text (raw HTML for HTML pages).

        Args:
            url: the full http:// or https:// address of the page.
            max_chars: return at most this many characters of the page.
        """
        if max_chars < 1:
            return "Error: max_chars must be at least 1."
        try:
            page = read_page(self.world.http, url, timeout=self.fetch_timeout,
                             allow_private=self.allow_private)
        except FetchError as exc:
            return f"Error: {exc}"
        notes = []
        if len(page.text) > max_chars:
            notes.append(f"[truncated: showing {max_chars} of {len(page.text)} characters]")
        if page.capped:
            notes.append(f"[truncated at the {MAX_BYTES}-byte cap]")
        return "\n\n".join([page.text[:max_chars] or "(the page is empty)", *notes])

    def page_length(self, url: str) -> str:
        """Download a web page and count the characters of its text.

        Args:
            url: the full http:// or https:// address of the page.
        """
        try:
            page = read_page(self.world.http, url, timeout=self.fetch_timeout,
                             allow_private=self.allow_private)
        except FetchError as exc:
            return f"Error: {exc}"
        if page.capped:
            return (
                f"The page {url} has at least {len(page.text)} characters "
                f"(reading stopped at the {MAX_BYTES}-byte cap)."
            )
        return f"The page {url} has {len(page.text)} characters."

    def get_weather(self, city: str) -> str:
        """Get today's weather for a city (demo data, not real).

        Args:
            city: the city name in English or Chinese, e.g. Beijing or 北京.
        """
        name = CITY_ALIASES.get(city.strip(), city.strip().title())
        if name not in FAKE_WEATHER:
            return f"Error: no weather for '{city}'. Known cities: {', '.join(FAKE_WEATHER)}."
        return f"{name}: {FAKE_WEATHER[name]} {DEMO_NOTE}"

    def get_stock(self, code: str) -> str:
        """Get the latest price of a stock (demo data, not real).

        Args:
            code: the stock code or ticker, e.g. 600519 or AAPL.
        """
        key = code.strip().upper()
        if key not in FAKE_STOCKS:
            return f"Error: no price for '{code}'. Known codes: {', '.join(FAKE_STOCKS)}."
        return f"{key} {FAKE_STOCKS[key]} {DEMO_NOTE}"


# The demo agent's tools, in the order the model sees them.
DEMO_TOOL_NAMES = ("current_time", "calculator", "fetch_url", "page_length", "get_weather",
                   "get_stock")


def demo_registry(world: World | None = None, names: tuple[str, ...] = DEMO_TOOL_NAMES
                  ) -> ToolRegistry:
    """A registry holding the demo tools, all sharing one world.

    Args:
        world: the clock and HTTP client (e.g. `world_of(client)` to replay them from
            the same cassette as the model); None means the real ones.
        names: which tools to register, in order.
    """
    tools = DemoTools(world)
    registry = ToolRegistry()
    for name in names:
        registry.register(getattr(tools, name))
    return registry
