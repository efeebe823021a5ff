"""Fixtures shared by the unit tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest

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


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, Route]], str]]:
    """Start an HTTP server on 127.0.0.1 (never another interface) with the given routes.

    `serve({"/path": handler})` returns the server's base URL; each handler receives the
    request handler and writes the whole response itself. Unknown paths get a 404.
    """
    servers: list[ThreadingHTTPServer] = []

    def start(routes: dict[str, Route]) -> str:
        class Handler(BaseHTTPRequestHandler):
            def _route(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
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

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def serve_model() -> Iterator[Callable[..., str]]:
    """Serve a scripted model over real HTTP on 127.0.0.1, as an OpenAI-compatible provider.

    `serve_model(model, key="test-key")` returns the base URL (ending in /v1); with `key`,
    a request without `Authorization: Bearer <key>` gets a 401.
    """
    servers: list[ThreadingHTTPServer] = []

    def start(model: httpx2.BaseTransport, key: str | None = None) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                if key is not None and self.headers["authorization"] != f"Bearer {key}":
                    self.send_error(401)
                    return
                body = self.rfile.read(int(self.headers["content-length"]))
                response = model.handle_request(httpx2.Request(
                    "POST", f"http://127.0.0.1{self.path}", content=body))
                self.send_response(response.status_code)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(response.read())

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/v1"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
