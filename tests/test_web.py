"""Tests for the web fetcher (vibe_agent/web.py) through the two tools that call it,
fetch_url and page_length, against a real HTTP server on 127.0.0.1: decoding, byte caps,
one deadline, and the refusal of this computer and private networks."""

from __future__ import annotations

import functools
import socket
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx2
import pytest

from vibe_agent.tools import DemoTools
from vibe_agent.web import MAX_BYTES, MAX_REDIRECTS, forbidden_kind
from vibe_agent.world import World

# --- fetch_url and page_length against a local server -------------------------------

UTF8_TEXT = "<p>Hello, 世界</p>"
GBK_TEXT = "中文页面：你好，世界"
HUGE_BYTES = 5_000_000
ENDLESS_LIMIT = 64_000_000  # the "endless" page stops here, so a broken test still ends
BOMB_BYTES = 20_000_000  # what the gzip bomb expands to (about 20 KB on the wire)
SLOW_SECONDS = 3.0
TRICKLE_STEP = 0.1  # seconds between the bytes of a trickling page
TEST_TIMEOUT = 0.5
PATIENT = 10.0  # the deadline of rows that are not about the deadline
HEADERS_ON_A_TRICKLE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


@functools.cache
def gzip_bomb() -> bytes:
    """BOMB_BYTES of zeros, gzip-compressed a megabyte at a time (never all in memory)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)  # | 16: gzip framing
    megabyte = bytes(1_000_000)
    parts = [packer.compress(megabyte) for _ in range(BOMB_BYTES // len(megabyte))]
    return b"".join([*parts, packer.flush()])


def gzip_bytes(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    return packer.compress(data) + packer.flush()


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)  # no zlib header
    return packer.compress(data) + packer.flush()


class Handler(BaseHTTPRequestHandler):
    """Serves the test pages, and forwards nothing: a proxy request (absolute URL) is
    answered as if for the page at its path. `self.server` carries `stop`, `seen` (every
    request line's target), `endless_written` and `endless_done`."""

    def log_message(self, format: str, *args: object) -> None:  # keep pytest output quiet
        pass

    def send_body(self, body: bytes, content_type: str, status: int = 200,
                  encoding: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client stopped reading early (the byte cap on /huge)
            pass

    def redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        server = self.server
        server.seen.append(self.path)  # type: ignore[attr-defined]
        path = urlsplit(self.path).path  # also for a proxy's absolute-form target
        if path == "/utf8":
            self.send_body(UTF8_TEXT.encode(), "text/html; charset=utf-8")
        elif path == "/gbk":
            self.send_body(GBK_TEXT.encode("gbk"), "text/html; charset=gbk")
        elif path == "/invalid":
            self.send_body(b"caf\xe9 ok", "text/plain")
        elif path == "/unknown-charset":
            self.send_body("héllo".encode(), "text/plain; charset=klingon")
        elif path == "/long":
            self.send_body(b"a" * 5000, "text/plain")
        elif path == "/empty":
            self.send_body(b"", "text/plain")
        elif path == "/huge":
            self.send_body(b"x" * HUGE_BYTES, "text/plain")
        elif path == "/gzip":
            self.send_body(gzip_bytes(UTF8_TEXT.encode()), "text/html; charset=utf-8", 200, "gzip")
        elif path == "/deflate-raw":
            self.send_body(raw_deflate(UTF8_TEXT.encode()), "text/html; charset=utf-8", 200,
                           "deflate")
        elif path == "/gzip-bomb":
            self.send_body(gzip_bomb(), "text/plain", 200, "gzip")
        elif path == "/gzip-twice":
            self.send_body(gzip_bytes(gzip_bytes(b"hi")), "text/plain", 200, "gzip, gzip")
        elif path == "/gzip-corrupt":
            self.send_body(b"\x1f\x8b not really gzip", "text/plain", 200, "gzip")
        elif path == "/endless":
            self.send_endless()
        elif path == "/slow":
            server.stop.wait(SLOW_SECONDS)  # type: ignore[attr-defined]
            self.send_body(b"too late", "text/plain")
        elif path == "/trickle":
            self.send_trickle(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", b"." * 100)
        elif path == "/trickle-headers":
            self.send_trickle(b"", HEADERS_ON_A_TRICKLE)
        elif path == "/redirect":
            self.redirect("/utf8")
        elif path == "/redirect-loop":
            self.redirect("/redirect-loop")
        elif path == "/redirect-to-file":
            self.redirect("file:///etc/passwd")
        elif path.startswith("/slow-redirect/"):  # /slow-redirect/3 -> /2 -> /1 -> /0 -> /utf8
            server.stop.wait(0.2)  # type: ignore[attr-defined]
            hops = int(path.rpartition("/")[2])
            self.redirect(f"/slow-redirect/{hops - 1}" if hops else "/utf8")
        elif path == "/to-loopback":
            self.redirect(f"http://127.0.0.1:{server.server_port}/utf8?from=redirect")
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

    def send_trickle(self, at_once: bytes, slowly: bytes) -> None:
        """Write `at_once`, then `slowly` one byte every TRICKLE_STEP: each read is quick,
        but the whole takes long (bounded: it stops when the client hangs up)."""
        self.close_connection = True
        try:
            self.wfile.write(at_once)
            for byte in slowly:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                if self.server.stop.wait(TRICKLE_STEP):  # type: ignore[attr-defined]
                    break
        except OSError:
            pass


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.stop = threading.Event()  # type: ignore[attr-defined]
    server.seen = []  # type: ignore[attr-defined]
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
    """Tools allowed to reach the course-local server (real sockets, only to 127.0.0.1)."""
    with httpx2.Client() as client:
        yield DemoTools(World(http=client), fetch_timeout=TEST_TIMEOUT, allow_private=True)


@pytest.fixture(scope="module")
def patient() -> Iterator[DemoTools]:
    """The same tools with a deadline no honest answer of the local server comes near."""
    with httpx2.Client() as client:
        yield DemoTools(World(http=client), fetch_timeout=PATIENT, allow_private=True)


@pytest.fixture(scope="module")
def guarded() -> Iterator[DemoTools]:
    """Tools as the agent gets them: private addresses refused, redirects as in the real
    world's client (which follows them on its own)."""
    with httpx2.Client(follow_redirects=True) as client:
        yield DemoTools(World(http=client), fetch_timeout=TEST_TIMEOUT)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/utf8", UTF8_TEXT),
        ("/gbk", GBK_TEXT),
        ("/invalid", "caf\ufffd ok"),
        ("/unknown-charset", "héllo"),
        ("/empty", "(the page is empty)"),
        ("/gzip", UTF8_TEXT),
        ("/deflate-raw", UTF8_TEXT),
        ("/gzip-twice", "hi"),
        ("/redirect", UTF8_TEXT),
        ("/slow-redirect/1", UTF8_TEXT),
    ],
    ids=["utf8", "gbk-declared", "invalid-bytes", "unknown-charset-falls-back", "empty",
         "gzip", "deflate-without-header", "gzip-twice", "redirect-followed",
         "two-redirects-in-time"],
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


def test_fetch_url_gzip_bomb_stops_at_the_byte_cap(tools: DemoTools, base_url: str) -> None:
    gzip_bomb()  # build it before measuring
    tracemalloc.start()
    try:
        result = tools.page_length(base_url + "/gzip-bomb")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"gzip bomb ({len(gzip_bomb())} bytes -> {BOMB_BYTES}): peak {peak / 1e6:.2f} MB")
    assert result == (f"The page {base_url}/gzip-bomb has at least {MAX_BYTES} characters "
                      f"(reading stopped at the {MAX_BYTES}-byte cap).")
    assert peak < BOMB_BYTES / 4  # decompressed in bounded steps, never the whole bomb


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


TOO_SLOW = "did not load within 0.5 s"


@pytest.mark.parametrize(
    ("url", "phrase"),
    [
        ("file:///etc/passwd", "not an http"),
        ("ftp://x", "not an http"),
        ("not a url", "not an http"),
        ("http://", "not an http"),
        ("", "not an http"),
        ("{base}/missing", "HTTP 404"),
        ("{base}/redirect-loop", f"redirected more than {MAX_REDIRECTS} times"),
        ("{base}/redirect-to-file", "redirects to 'file:///etc/passwd', which is not"),
        ("{base}/slow", TOO_SLOW),
        ("{base}/trickle", TOO_SLOW),
        ("{base}/trickle-headers", TOO_SLOW),
        ("{base}/slow-redirect/4", TOO_SLOW),
        ("{base}/gzip-corrupt", "could not fetch"),
        ("http://127.0.0.1:{closed}/", "could not fetch"),
    ],
    ids=[
        "file-scheme",
        "ftp-scheme",
        "not-a-url",
        "no-host",
        "empty",
        "404",
        "redirect-loop",
        "redirect-to-file",
        "slow-answer",
        "trickling-body",
        "trickling-headers",
        "redirects-past-the-deadline",
        "corrupt-gzip",
        "connection-refused",
    ],
)
@pytest.mark.parametrize("tool", ["fetch_url", "page_length"])
def test_fetch_errors(tools: DemoTools, patient: DemoTools, base_url: str, tool: str, url: str,
                      phrase: str) -> None:
    """Rows about the deadline get the short one; the others a long one, so that a loaded
    machine answering a 404 slowly cannot turn it into a timeout."""
    url = url.format(base=base_url, closed=_closed_port())
    deadline, fetcher = (TEST_TIMEOUT, tools) if phrase == TOO_SLOW else (PATIENT, patient)
    start = time.monotonic()
    result = getattr(fetcher, tool)(url)
    assert result.startswith("Error:")
    assert phrase in result
    assert time.monotonic() - start < 2 * deadline  # nothing hangs


@pytest.mark.parametrize(
    "path",
    ["/trickle-headers", "/trickle", "/slow-redirect/4"],
    ids=["headers-trickle", "body-trickles", "each-redirect-slow"],
)
def test_one_deadline_for_the_whole_fetch(tools: DemoTools, base_url: str, path: str) -> None:
    """Each read is quick, so a per-read timeout never fires: only the deadline stops it."""
    start = time.monotonic()
    result = tools.fetch_url(base_url + path)
    elapsed = time.monotonic() - start
    print(f"{path}: gave up after {elapsed:.3f} s (deadline {TEST_TIMEOUT} s)")
    assert result == (f"Error: {base_url}{path} did not load within 0.5 s. "
                      "Try again later or try another URL.")
    assert TEST_TIMEOUT <= elapsed < TEST_TIMEOUT + 0.3


def test_fetch_url_rejects_bad_max_chars(tools: DemoTools, base_url: str) -> None:
    assert tools.fetch_url(base_url + "/utf8", max_chars=0).startswith("Error:")


# --- fetch_url refuses this computer and private networks ---------------------------

LOOPBACK = [
    # (how the host is written, the kind the error names, id)
    ("127.0.0.1", "loopback", "dotted-quad"),
    ("localhost", "loopback", "name"),
    ("127.1", "loopback", "short-form"),
    ("0.0.0.0", "unspecified", "unspecified"),
    ("2130706433", "loopback", "integer"),
    ("0x7f.0.0.1", "loopback", "hex"),
    ("user@127.0.0.1", "loopback", "userinfo"),
    ("user:pw@localhost", "loopback", "userinfo-password"),
    ("[::1]", "loopback", "ipv6"),
    ("[::ffff:127.0.0.1]", "loopback", "ipv4-mapped-ipv6"),
]


@pytest.mark.parametrize(("host", "kind"), [row[:2] for row in LOOPBACK],
                         ids=[row[2] for row in LOOPBACK])
@pytest.mark.parametrize("tool", ["fetch_url", "page_length"])
def test_loopback_is_refused(guarded: DemoTools, server: ThreadingHTTPServer, tool: str,
                             host: str, kind: str) -> None:
    target = f"/utf8?probe={tool}-{host}"
    result = getattr(guarded, tool)(f"http://{host}:{server.server_port}{target}")
    assert result.startswith("Error: refused to fetch http://")
    assert f"is a {kind} address" in result
    assert "public" in result  # what to do instead
    assert target not in server.seen  # type: ignore[attr-defined]  # nothing was sent


PRIVATE = [
    ("10.0.0.1", "private", "ten-net"),
    ("172.16.0.1", "private", "172-16"),
    ("192.168.1.1", "private", "home-router"),
    ("169.254.169.254", "link-local", "cloud-metadata"),
    ("[fe80::1]", "link-local", "ipv6-link-local"),
    ("[fc00::1]", "private", "ipv6-unique-local"),
    ("224.0.0.1", "multicast", "multicast"),
    ("[ff02::1]", "multicast", "ipv6-multicast"),
    ("240.0.0.1", "reserved", "reserved"),
    ("100.64.0.1", "non-public", "carrier-grade-nat"),
]


@pytest.mark.parametrize(("host", "kind"), [row[:2] for row in PRIVATE],
                         ids=[row[2] for row in PRIVATE])
def test_private_addresses_are_refused_before_connecting(guarded: DemoTools, host: str,
                                                         kind: str) -> None:
    start = time.monotonic()
    result = guarded.fetch_url(f"http://{host}/")
    assert result.startswith("Error: refused to fetch")
    assert f"is a {kind} address" in result
    assert time.monotonic() - start < 0.2  # refused at once: no connection was tried


ADDRESSES = [
    # (address, the kind forbidden_kind names or None for public)
    ("127.0.0.1", "loopback"),
    ("::1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("10.0.0.1", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("169.254.169.254", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("224.0.0.1", "multicast"),
    ("240.0.0.1", "reserved"),
    ("100.64.0.1", "non-public"),
    ("8.8.8.8", None),
    ("93.184.215.14", None),
    ("2606:4700::1111", None),
]


@pytest.mark.parametrize(("address", "expected"), ADDRESSES, ids=[row[0] for row in ADDRESSES])
def test_forbidden_kind(address: str, expected: str | None) -> None:
    assert forbidden_kind(address) == expected


def test_redirect_to_loopback_is_refused(server: ThreadingHTTPServer, base_url: str) -> None:
    """A public page that redirects to this computer. The test server plays the public
    site through a proxy (on loopback, as a learner's local proxy would be)."""
    with httpx2.Client(proxy=base_url, follow_redirects=True) as client:
        tools = DemoTools(World(http=client), fetch_timeout=TEST_TIMEOUT)
        result = tools.fetch_url("http://public.test/to-loopback")
    assert "http://public.test/to-loopback" in server.seen  # type: ignore[attr-defined]
    assert result.startswith(f"Error: refused to fetch {base_url}/utf8?from=redirect: ")
    assert "is a loopback address" in result
    assert not any("from=redirect" in seen for seen in server.seen)  # type: ignore[attr-defined]


def test_a_local_proxy_still_works(base_url: str) -> None:
    """The proxy's own address is the learner's choice: only the target is checked."""
    with httpx2.Client(proxy=base_url) as client:
        tools = DemoTools(World(http=client), fetch_timeout=TEST_TIMEOUT)
        assert tools.fetch_url("http://public.test/utf8") == UTF8_TEXT


def test_dns_rebinding_is_caught_at_connect(guarded: DemoTools, server: ThreadingHTTPServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The name looks public when checked, then resolves to 127.0.0.1 when connecting."""
    real_getaddrinfo = socket.getaddrinfo
    answers = iter(["93.184.215.14"])  # the first lookup: a public address

    def rebinding_dns(host: str, *args: object, **kwargs: object) -> list:
        if host == "rebind.test":
            host = next(answers, "127.0.0.1")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_dns)
    result = guarded.fetch_url(f"http://rebind.test:{server.server_port}/utf8?probe=rebind")
    assert result.startswith("Error: refused to fetch http://rebind.test:")
    assert "rebind.test (127.0.0.1) is a loopback address" in result
    assert "/utf8?probe=rebind" not in server.seen  # type: ignore[attr-defined]


def test_allow_private_reaches_a_course_local_server(base_url: str) -> None:
    with httpx2.Client() as client:
        assert DemoTools(World(http=client)).fetch_url(base_url + "/utf8").startswith(
            "Error: refused")
        assert DemoTools(World(http=client), allow_private=True).fetch_url(
            base_url + "/utf8") == UTF8_TEXT
