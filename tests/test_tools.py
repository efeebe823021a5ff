"""Tests for the demo tools: the calculator against Python's own arithmetic, the clock
with a fixed time, and the web fetcher against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import math
import operator
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vibe_agent.tools import MAX_BYTES, DemoTools
from vibe_agent.world import World


def _no_network(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError(f"this test must not use the network: {request.url}")


def offline_world(now: datetime | None = None) -> World:
    """A world whose HTTP client fails the test if used (and is cheap to build)."""
    http = httpx2.Client(transport=httpx2.MockTransport(_no_network))
    return World(http=http) if now is None else World(now=lambda: now, http=http)


OFFLINE = DemoTools(offline_world())


# --- calculator -------------------------------------------------------------------


def assert_result(result: str, expected: int | float) -> None:
    """The calculator's answer (after the last ' = ') equals Python's value."""
    assert not result.startswith("Error:"), result
    answer = result.rpartition(" = ")[2]
    if isinstance(expected, int):
        assert answer == str(expected)
    else:  # floats are printed with 12 significant digits
        assert math.isclose(float(answer), expected, rel_tol=1e-11, abs_tol=1e-300)


GOOD = [
    # (expression, Python's value, id)
    ("17 × 23", 17 * 23, "times-sign"),
    ("17 * 23", 17 * 23, "multiply"),
    ("2 + 3 * 4", 2 + 3 * 4, "precedence"),
    ("(2 + 3) * 4", (2 + 3) * 4, "parentheses"),
    ("-5 + 2", -5 + 2, "unary-minus"),
    ("-(3 - 10)", -(3 - 10), "minus-parentheses"),
    ("-2 ** 2", -(2**2), "minus-binds-looser-than-power"),
    ("+7", +7, "unary-plus"),
    ("2 ** 3 ** 2", 2 ** (3**2), "power-right-associative"),
    ("2 ** 10", 2**10, "power"),
    ("2 ** -1", 2**-1, "negative-exponent"),
    ("2 ** 0.5", 2**0.5, "float-exponent"),
    ("2 ** 1000", 2**1000, "big-int"),
    ("10 / 4", 10 / 4, "true-division"),
    ("10 ÷ 4", 10 / 4, "division-sign"),
    ("1256 / 7", 1256 / 7, "page-length-over-7"),
    ("17 // 5", 17 // 5, "floor-division"),
    ("-17 // 5", -17 // 5, "floor-division-negative"),
    ("17 % 5", 17 % 5, "modulo"),
    ("-17 % 5", -17 % 5, "modulo-negative"),
    ("7.5 % 2", 7.5 % 2, "float-modulo"),
    ("1.5 * 4", 1.5 * 4, "float"),
    ("0.1 + 0.2", 0.1 + 0.2, "float-rounding"),
    ("1e3 + 1", 1e3 + 1, "scientific-notation"),
    ("（１＋２）×３", (1 + 2) * 3, "full-width"),
    ("  42  ", 42, "spaces"),
]


@pytest.mark.parametrize(
    ("expression", "expected"), [row[:2] for row in GOOD], ids=[row[2] for row in GOOD]
)
def test_calculator_matches_python(expression: str, expected: int | float) -> None:
    assert_result(OFFLINE.calculator(expression), expected)


def test_calculator_shows_the_expression() -> None:
    assert OFFLINE.calculator("17 × 23") == "17 * 23 = 391"


OPERATORS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
}
# An expression is a pair (text, value); value None means Python raised ZeroDivisionError.
Expr = tuple[str, int | float | None]


def _number(n: int) -> Expr:
    return (f"({n})" if n < 0 else str(n), n)


def _binary(parts: tuple[Expr, str, Expr]) -> Expr:
    (left_text, left), op, (right_text, right) = parts
    try:
        value = None if left is None or right is None else OPERATORS[op](left, right)
    except ZeroDivisionError:
        value = None
    return (f"({left_text} {op} {right_text})", value)


def _power(parts: tuple[Expr, int]) -> Expr:
    (text, base), exponent = parts
    return (f"({text} ** {exponent})", None if base is None else base**exponent)


def _combine(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    binary = st.tuples(children, st.sampled_from(list(OPERATORS)), children).map(_binary)
    return binary | st.tuples(children, st.integers(0, 4)).map(_power)


expressions = st.recursive(st.integers(-20, 20).map(_number), _combine, max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(expressions)
def test_calculator_property(expr: Expr) -> None:
    text, expected = expr
    result = OFFLINE.calculator(text)
    if expected is None:
        assert result.startswith("Error: division by zero"), result
    else:
        assert_result(result, expected)


REJECTED = [
    # (expression, a phrase the error must contain, id)
    ("__import__('os')", "function call", "dunder-import"),
    ("abs(-1)", "function call", "call"),
    ("().__class__", "attribute access", "attribute"),
    ("x[0]", "indexing", "subscript"),
    ("x + 1", "name 'x'", "name"),
    ("'abc' * 3", "value 'abc'", "string"),
    ("True + 1", "value True", "bool"),
    ("1j * 2", "value 1j", "complex"),
    ("1 < 2", "comparison", "comparison"),
    ("lambda: 1", "lambda", "lambda"),
    ("2 ^ 10", "**", "xor-hints-power"),
    ("1 << 3", "<<", "shift"),
    ("[1, 2]", "not allowed", "list"),
    ("9**9**9", "too large", "tower-9"),
    ("10**10**10", "too large", "tower-10"),
    ("2**100000", "too large", "big-power"),
    ("(2**5000) * (2**5001)", "too large", "big-product"),
    ("1e308 * 10", "too large", "float-overflow"),
    ("2**5000 * 1.0", "too large", "int-to-float-overflow"),
    ("10.0 ** 400", "too large", "float-power-overflow"),
    ("(-8) ** 0.5", "real number", "complex-result"),
    ("1/0", "division by zero", "divide-by-zero"),
    ("1//0", "division by zero", "floor-divide-by-zero"),
    ("1%0", "division by zero", "modulo-zero"),
    ("0 ** -1", "division by zero", "zero-negative-power"),
    ("", "empty", "empty"),
    ("   ", "empty", "blank"),
    ("1 +", "not a valid", "syntax-error"),
    ("1; 2", "not a valid", "two-statements"),
    ("1+" * 300 + "1", "longer than", "too-long"),
]


@pytest.mark.parametrize(
    ("expression", "phrase"), [row[:2] for row in REJECTED], ids=[row[2] for row in REJECTED]
)
def test_calculator_rejects(expression: str, phrase: str) -> None:
    result = OFFLINE.calculator(expression)
    assert result.startswith("Error:")
    assert phrase in result


def test_calculator_power_tower_returns_quickly() -> None:
    start = time.perf_counter()
    result = OFFLINE.calculator("9**9**9")
    print(f"9**9**9 took {(time.perf_counter() - start) * 1000:.3f} ms")
    assert result.startswith("Error:")


# --- current_time -----------------------------------------------------------------

FIXED = datetime(2026, 11, 30, 13, 13, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("Asia/Shanghai", "2026-11-30 21:13:05 Asia/Shanghai (UTC+08:00)"),
        ("America/New_York", "2026-11-30 08:13:05 America/New_York (UTC-05:00)"),
        ("Asia/Kolkata", "2026-11-30 18:43:05 Asia/Kolkata (UTC+05:30)"),
    ],
    ids=["shanghai", "new-york", "half-hour-offset"],
)
def test_current_time(zone: str, expected: str) -> None:
    assert DemoTools(offline_world(FIXED)).current_time(zone) == expected


def test_current_time_default_is_shanghai() -> None:
    assert DemoTools(offline_world(FIXED)).current_time().endswith("Asia/Shanghai (UTC+08:00)")


@pytest.mark.parametrize(
    "zone",
    ["Mars/Olympus", "Beijing", "", "../../etc/passwd"],
    ids=["unknown", "city", "empty", "path"],
)
def test_current_time_unknown_zone(zone: str) -> None:
    result = DemoTools(offline_world(FIXED)).current_time(zone)
    assert result.startswith("Error:")
    assert "Asia/Shanghai" in result  # the error shows valid examples


# --- fetch_url and page_length against a local server -------------------------------

UTF8_TEXT = "<p>Hello, 世界</p>"
GBK_TEXT = "中文页面：你好，世界"
HUGE_BYTES = 5_000_000
ENDLESS_LIMIT = 64_000_000  # the "endless" page stops here, so a broken test still ends
SLOW_SECONDS = 3.0
TEST_TIMEOUT = 0.5


class Handler(BaseHTTPRequestHandler):
    """Serves the test pages; `self.server` carries `stop`, `endless_written`, `endless_done`."""

    def log_message(self, format: str, *args: object) -> None:  # keep pytest output quiet
        pass

    def send_body(self, body: bytes, content_type: str, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client stopped reading early (the byte cap on /huge)
            pass

    def do_GET(self) -> None:
        server = self.server
        if self.path == "/utf8":
            self.send_body(UTF8_TEXT.encode(), "text/html; charset=utf-8")
        elif self.path == "/gbk":
            self.send_body(GBK_TEXT.encode("gbk"), "text/html; charset=gbk")
        elif self.path == "/invalid":
            self.send_body(b"caf\xe9 ok", "text/plain")
        elif self.path == "/unknown-charset":
            self.send_body("héllo".encode(), "text/plain; charset=klingon")
        elif self.path == "/long":
            self.send_body(b"a" * 5000, "text/plain")
        elif self.path == "/empty":
            self.send_body(b"", "text/plain")
        elif self.path == "/huge":
            self.send_body(b"x" * HUGE_BYTES, "text/plain")
        elif self.path == "/endless":
            self.send_endless()
        elif self.path == "/slow":
            server.stop.wait(SLOW_SECONDS)  # type: ignore[attr-defined]
            self.send_body(b"too late", "text/plain")
        elif self.path == "/trickle":
            self.send_trickle()
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/utf8")
            self.end_headers()
        else:
            self.send_body(b"not found", "text/plain", status=404)

    def send_endless(self) -> None:
        """A body with no length that keeps coming until the client hangs up."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        chunk, written = b"y" * 65536, 0
        try:
            while written < ENDLESS_LIMIT:
                self.wfile.write(chunk)
                written += len(chunk)
        except OSError:  # the client closed the connection: that is the point
            pass
        self.server.endless_written = written  # type: ignore[attr-defined]
        self.server.endless_done.set()  # type: ignore[attr-defined]

    def send_trickle(self) -> None:
        """One byte every 0.1 s: each read is quick, but the page never finishes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        try:
            for _ in range(100):
                self.wfile.write(b".")
                self.wfile.flush()
                if self.server.stop.wait(0.1):  # type: ignore[attr-defined]
                    break
        except OSError:
            pass


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.stop = threading.Event()  # type: ignore[attr-defined]
    server.endless_done = threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    server.stop.set()  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


@pytest.fixture
def base_url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def tools() -> Iterator[DemoTools]:
    """Tools with a real HTTP client (real sockets, only ever to 127.0.0.1)."""
    with httpx2.Client() as client:
        yield DemoTools(World(http=client), fetch_timeout=TEST_TIMEOUT)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/utf8", UTF8_TEXT),
        ("/gbk", GBK_TEXT),
        ("/invalid", "caf\ufffd ok"),
        ("/unknown-charset", "héllo"),
        ("/empty", "(the page is empty)"),
    ],
    ids=["utf8", "gbk-declared", "invalid-bytes", "unknown-charset-falls-back", "empty"],
)
def test_fetch_url_decodes(tools: DemoTools, base_url: str, path: str, expected: str) -> None:
    assert tools.fetch_url(base_url + path) == expected


def test_fetch_url_truncates_to_max_chars(tools: DemoTools, base_url: str) -> None:
    result = tools.fetch_url(base_url + "/long", max_chars=100)
    assert result == "a" * 100 + "\n\n[truncated: showing 100 of 5000 characters]"


def test_fetch_url_huge_page_stops_at_the_byte_cap(tools: DemoTools, base_url: str) -> None:
    result = tools.fetch_url(base_url + "/huge", max_chars=10)
    assert result.startswith("x" * 10 + "\n\n")
    assert f"showing 10 of {MAX_BYTES} characters" in result
    assert f"[truncated at the {MAX_BYTES}-byte cap]" in result


def test_page_length_endless_page_reads_only_the_cap(
    tools: DemoTools, base_url: str, server: ThreadingHTTPServer
) -> None:
    result = tools.page_length(base_url + "/endless")
    assert result == (
        f"The page {base_url}/endless has at least {MAX_BYTES} characters "
        f"(reading stopped at the {MAX_BYTES}-byte cap)."
    )
    # The server stops writing once the client hangs up; what it sent beyond the cap
    # sat in socket buffers, never in the tool's memory.
    assert server.endless_done.wait(5)  # type: ignore[attr-defined]
    assert server.endless_written < ENDLESS_LIMIT  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/utf8", len(UTF8_TEXT)), ("/gbk", len(GBK_TEXT)), ("/long", 5000)],
    ids=["utf8", "gbk-counts-characters-not-bytes", "long"],
)
def test_page_length(tools: DemoTools, base_url: str, path: str, expected: int) -> None:
    expected_text = f"The page {base_url}{path} has {expected} characters."
    assert tools.page_length(base_url + path) == expected_text


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("url", "phrase"),
    [
        ("file:///etc/passwd", "not an http"),
        ("ftp://x", "not an http"),
        ("not a url", "not an http"),
        ("http://", "not an http"),
        ("", "not an http"),
        ("{base}/missing", "HTTP 404"),
        ("{base}/redirect", "Fetch that URL instead"),
        ("{base}/slow", "did not answer within 0.5 s"),
        ("{base}/trickle", "took longer than 0.5 s"),
        ("http://127.0.0.1:{closed}/", "could not fetch"),
    ],
    ids=[
        "file-scheme",
        "ftp-scheme",
        "not-a-url",
        "no-host",
        "empty",
        "404",
        "redirect-not-followed",
        "slow-answer",
        "trickling-body",
        "connection-refused",
    ],
)
@pytest.mark.parametrize("tool", ["fetch_url", "page_length"])
def test_fetch_errors(tools: DemoTools, base_url: str, tool: str, url: str, phrase: str) -> None:
    url = url.format(base=base_url, closed=_closed_port())
    start = time.monotonic()
    result = getattr(tools, tool)(url)
    assert result.startswith("Error:")
    assert phrase in result
    assert time.monotonic() - start < 5 * TEST_TIMEOUT  # nothing hangs


def test_fetch_url_rejects_bad_max_chars(tools: DemoTools, base_url: str) -> None:
    assert tools.fetch_url(base_url + "/utf8", max_chars=0).startswith("Error:")


# --- the fake data tools ----------------------------------------------------------


@pytest.mark.parametrize(
    ("city", "expected"),
    [
        ("Beijing", "Beijing: "),
        ("北京", "Beijing: "),
        (" shanghai ", "Shanghai: "),
        ("上海", "Shanghai: "),
    ],
    ids=["english", "chinese", "lowercase-spaces", "chinese-shanghai"],
)
def test_get_weather_known(city: str, expected: str) -> None:
    result = OFFLINE.get_weather(city)
    assert result.startswith(expected)
    assert "not real" in result


@pytest.mark.parametrize(
    ("code", "expected"),
    [("600519", "600519 Kweichow Moutai"), ("AAPL", "AAPL Apple"), ("aapl", "AAPL Apple")],
    ids=["a-share", "ticker", "lowercase-ticker"],
)
def test_get_stock_known(code: str, expected: str) -> None:
    result = OFFLINE.get_stock(code)
    assert result.startswith(expected)
    assert "not real" in result


@pytest.mark.parametrize(
    ("tool", "argument", "known"),
    [("get_weather", "Atlantis", "Beijing"), ("get_stock", "XYZ", "600519")],
    ids=["weather", "stock"],
)
def test_fake_tools_unknown(tool: str, argument: str, known: str) -> None:
    result = getattr(OFFLINE, tool)(argument)
    assert result.startswith("Error:")
    assert known in result  # the error lists what is known


def test_fake_tools_are_deterministic() -> None:
    assert OFFLINE.get_weather("北京") == OFFLINE.get_weather("Beijing")
