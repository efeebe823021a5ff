"""Fixtures shared by the unit tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest
from terminal_helpers import ScriptedEndpoint

Route = Callable[[BaseHTTPRequestHandler], None]


@pytest.fixture
def tapes(tmp_path, monkeypatch):
    """Record into and replay from a temporary cassette folder, with no key around."""
    monkeypatch.setenv("VIBE_AGENT_CASSETTES", str(tmp_path))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VIBE_AGENT_MODE", "VIBE_AGENT_MODEL",
                 "VIBE_AGENT_FALLBACK", "VIBE_AGENT_RECORD_SOURCE", "VIBE_AGENT_TIMEOUT",
                 "VIBE_AGENT_CONNECT_TIMEOUT", "VIBE_AGENT_MAX_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    return tmp_path


@contextmanager
def _loopback_servers() -> Iterator[Callable[[Callable[[str], Route | None]], str]]:
    """Start HTTP servers on 127.0.0.1 (never another interface); all stop on exit.

    The callable it yields takes `find(path) -> handler or None` and returns the base
    URL; a handler gets the request handler and writes the whole response itself.
    Paths without a handler get a 404.
    """
    servers: list[ThreadingHTTPServer] = []

    def start(find: Callable[[str], Route | None]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def _route(self) -> None:
                route = find(self.path.split("?", 1)[0])
                if route is None:
                    self.send_error(404)
                    return
                try:
                    route(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as it should

            do_GET = do_POST = _route  # noqa: N815 - the http.server API

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    try:
        yield start
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, Route]], str]]:
    """`serve({"/path": handler})`: an HTTP server on 127.0.0.1 with these routes; returns
    its base URL."""
    with _loopback_servers() as start:
        yield lambda routes: start(routes.get)


@pytest.fixture(scope="session")
def serve_model() -> Iterator[Callable[..., str]]:
    """Serve a scripted model over real HTTP on 127.0.0.1, as an OpenAI-compatible provider.

    `serve_model(model, key="test-key")` returns the base URL (ending in /v1); with `key`,
    a request without `Authorization: Bearer <key>` gets a 401.
    """
    def provider(model: httpx2.BaseTransport, key: str | None) -> Route:
        def answer(request: BaseHTTPRequestHandler) -> None:
            if key is not None and request.headers["authorization"] != f"Bearer {key}":
                request.send_error(401)
                return
            body = request.rfile.read(int(request.headers["content-length"]))
            response = model.handle_request(httpx2.Request(
                "POST", f"http://127.0.0.1{request.path}", content=body))
            request.send_response(response.status_code)
            request.send_header("content-type", "application/json")
            request.end_headers()
            request.wfile.write(response.read())
        return answer

    with _loopback_servers() as start:
        yield lambda model, key=None: start(lambda path: provider(model, key)) + "/v1"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """`ScriptedEndpoint` (tests/terminal_helpers.py) on 127.0.0.1: its base URL (.../v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
