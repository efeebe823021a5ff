"""Transports: a cassette replayed or recorded under a genuine `openai.OpenAI` client.

Replay sits UNDER the SDK (its `http_client` transport), so the SDK parses real JSON:

    openai.OpenAI(http_client=httpx2.Client(transport=ReplayTransport(cassette, fallback)))

    a request -> in the cassette? -> yes: the recorded response
                                  -> no, strict replay: ReplayMiss, naming the nearest
                                     recording and every field that differs
                                  -> no, offline: the `Fallback` answers, and says so

`RecordTransport` passes requests to the real model (or the real web) and writes what
came back into the cassette; it reads pages with fetch_url's byte cap and deadline
(`vibe_agent.web.read_body`). `replay_world` and `record_world` give the tools a
clock and pages from the same cassette as the model.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx2

from ..registry import StillRunning, run_in_thread
from ..web import FETCH_DEADLINE_S, MAX_BYTES, read_body
from ..world import World, http_client
from .cassette import Cassette
from .matching import normalise
from .sse import event_stream, parse_events

# ---------------------------------------------------------------------------
# Offline: what a cassette lacks is answered by a fallback, always labelled
# ---------------------------------------------------------------------------


def say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Fallback:
    """Answers the requests, pages and clock readings an offline cassette lacks.

    A fallback never passes itself off as the recording: the first time it answers
    (once per kind: model, page, clock) it prints one Chinese line naming the cassette
    and what differed, and every model response it gives carries `label` as its
    `model` field.

    Args:
        model: makes the transport of the model that answers and the base URL it listens
            on (None: the request's own URL); called on first use.
        label: the `model` name written into every fallback response.
        about: who answers, in Chinese, e.g. "脚本参考模型（程序，不是 LLM）".
        pages: the transport for pages the cassette lacks.
        pages_about: where those pages come from, in Chinese.
        clock: the clock when the cassette holds no reading.
        say: prints the one-line notices.
    """

    def __init__(self, model: Callable[[], tuple[httpx2.BaseTransport, str | None]], *,
                 label: str, about: str, pages: httpx2.BaseTransport, pages_about: str,
                 clock: Callable[[], datetime],
                 say: Callable[[str], None] = say_on_stderr) -> None:
        self._make_model = model
        self._model: httpx2.BaseTransport | None = None
        self._base_url: str | None = None
        self.label, self.about = label, about
        self.pages, self.pages_about, self.clock = pages, pages_about, clock
        self.say = say
        self.answered = 0  # model requests answered by the fallback
        self._told: set[str] = set()

    def _tell(self, kind: str, line: str) -> None:
        if kind not in self._told:
            self._told.add(kind)
            self.say(line)

    def chat(self, request: httpx2.Request, cassette: Cassette | None) -> httpx2.Response:
        body = _chat_body(request)
        self._tell("chat", self._chat_notice(body, cassette))
        if self._model is None:
            self._model, self._base_url = self._make_model()
        if self._base_url is not None:
            base = self._base_url.rstrip("/")
            request = httpx2.Request(request.method, f"{base}/chat/completions",
                                     headers={"content-type": "application/json"},
                                     content=request.content, extensions=request.extensions)
        response = self._model.handle_request(request)
        content = response.read()
        response.close()
        self.answered += 1
        try:
            data = json.loads(content)
        except ValueError:
            data = None
        if isinstance(data, dict) and "model" in data:
            data["model"] = self.label
            content = json.dumps(data, ensure_ascii=False).encode("utf-8")
        return httpx2.Response(response.status_code, content=content,
                               headers={"content-type": "application/json"})

    def _chat_notice(self, body: dict[str, Any], cassette: Cassette | None) -> str:
        who = f"由{self.about}回答，回答的 model 字段标为 “{self.label}”"
        if cassette is None:
            return f"离线：没有指定录制文件，这个 client 的请求都{who}。"
        found = cassette.nearest(body)
        if found is None:
            why = "录制文件里一次模型调用也没有"
        else:
            number, _, diff = found
            fields = "、".join(line.split("：", 1)[0] for line in diff[:3])
            more = f" 等 {len(diff)} 处" if len(diff) > 3 else ""
            why = f"{fields}{more}和录制文件里第 {number} 次模型调用不同"
        return (f"离线回退：录制文件 {cassette.where} 里没有这个请求（{why}），"
                f"这一步和之后没录到的请求{who}，不是录制的。")

    def page(self, request: httpx2.Request, cassette: Cassette | None) -> httpx2.Response:
        if cassette is not None:
            self._tell("page", f"离线回退：录制文件 {cassette.where} 里没有 {request.method} "
                               f"{request.url}，改从{self.pages_about}读取。")
        return self.pages.handle_request(request)

    def now(self, cassette: Cassette | None) -> datetime:
        if cassette is not None:
            self._tell("clock", f"离线回退：录制文件 {cassette.where} 里没有时钟读数，"
                                "改用本机时钟。")
        return self.clock()


# ---------------------------------------------------------------------------
# Transports: replay from a cassette, or record through to an upstream
# ---------------------------------------------------------------------------


def _chat_body(request: httpx2.Request) -> dict[str, Any]:
    return json.loads(request.content or b"{}")


def _is_chat(request: httpx2.Request) -> bool:
    return request.url.path.endswith("/chat/completions")


class ReplayTransport(httpx2.BaseTransport):
    """Serves chat completions and pages from a cassette; never touches the network.

    Args:
        cassette: the recording; None (offline without a cassette) sends everything
            to the fallback.
        fallback: answers what the cassette lacks; None replays strictly (ReplayMiss).
    """

    def __init__(self, cassette: Cassette | None, fallback: Fallback | None = None) -> None:
        self.cassette = cassette
        self.fallback = fallback

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        tape, fallback = self.cassette, self.fallback
        if _is_chat(request):
            body = _chat_body(request)
            if fallback is not None and (tape is None or not tape.has_chat(body)):
                return fallback.chat(request, tape)
            response = tape.chat_response(body)
            if "stream" in response:  # served as server-sent events, chunk by chunk
                chunks = [event["chunk"] for event in response["stream"]]
                return httpx2.Response(response["status"], content=event_stream(chunks),
                                       headers={"content-type": "text/event-stream"})
            return httpx2.Response(response["status"], json=response["body"])
        if fallback is not None and (tape is None
                                     or not tape.has_page(request.method, str(request.url))):
            return fallback.page(request, tape)
        return _page_response(tape.http_response(request.method, str(request.url)), request)


class RecordTransport(httpx2.BaseTransport):
    """Passes requests to an upstream transport and writes what came back.

    Pages are read the way `fetch_url` reads them, so a recording never holds more
    than the tool would see: at most `max_bytes` bytes after decompression (a gzip
    bomb is never inflated past it), within `deadline` seconds overall (headers
    included). A redirect is recorded with its target, so following it behaves the
    same live, while recording and in replay.

    Args:
        cassette: where interactions are written.
        upstream: the real model endpoint, or the real source of pages.
        max_bytes: the page cap (fetch_url's MAX_BYTES).
        deadline: seconds for a whole page download (fetch_url's FETCH_DEADLINE_S).
    """

    def __init__(self, cassette: Cassette, upstream: httpx2.BaseTransport, *,
                 max_bytes: int = MAX_BYTES, deadline: float = FETCH_DEADLINE_S) -> None:
        self.cassette = cassette
        self.upstream = upstream
        self.max_bytes = max_bytes
        self.deadline = deadline

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if _is_chat(request):
            return self._chat(request)
        return self._page(request)

    def _chat(self, request: httpx2.Request) -> httpx2.Response:
        body = _chat_body(request)
        number = sum(1 for i in self.cassette.interactions if i["kind"] == "chat") + 1
        temperatures = self.cassette.provenance.setdefault("temperature", [])
        if body.get("temperature", "default") not in temperatures:
            temperatures.append(body.get("temperature", "default"))
        started = time.perf_counter()
        try:
            response = self.upstream.handle_request(request)
            if body.get("stream") and response.status_code == 200 and "event-stream" in (
                    response.headers.get("content-type", "")):
                return self._stream(body, response, started, number)
            content = response.read()
            response.close()
        except httpx2.TransportError as exc:
            self.cassette.fail(f"第 {number} 次模型调用没有得到响应（{type(exc).__name__}："
                               f"{exc}）")
            raise
        try:
            data = json.loads(content)
        except ValueError:
            start = " ".join(content[:80].decode("utf-8", "replace").split())
            self.cassette.fail(f"第 {number} 次模型调用的响应不是 JSON（HTTP "
                               f"{response.status_code}，开头是 {start!r}；"
                               "OPENAI_BASE_URL 是不是少了 /v1？）")
        else:
            self.cassette.add({"kind": "chat", "request": normalise(body),
                               "response": {"status": response.status_code, "body": data}})
        return httpx2.Response(response.status_code, content=content,
                               headers=_safe_headers(response.headers))

    def _stream(self, body: dict[str, Any], response: httpx2.Response, started: float,
                number: int) -> httpx2.Response:
        """Record a streamed reply as its chunks, each with the milliseconds after the
        request at which it arrived (real timings: lesson 15 shows time to first token)."""
        raw, events, pending = bytearray(), [], b""

        def add(text: bytes) -> None:
            at = round((time.perf_counter() - started) * 1000, 1)
            events.extend({"t_ms": at, "chunk": chunk} for chunk in parse_events(text))

        try:
            for piece in response.stream:
                raw += piece
                pending += piece.replace(b"\r\n", b"\n")
                *complete, pending = pending.split(b"\n\n")
                add(b"\n\n".join(complete) + b"\n\n")
            add(pending)
        except ValueError:
            self.cassette.fail(f"第 {number} 次模型调用的流式响应里有不是 JSON 的数据块")
        finally:
            response.close()
        if events:
            self.cassette.add({"kind": "chat", "request": normalise(body),
                               "response": {"status": 200, "stream": events}})
        else:
            self.cassette.fail(f"第 {number} 次模型调用的流式响应里一个数据块也没有")
        return httpx2.Response(200, content=bytes(raw),
                               headers={"content-type": "text/event-stream"})

    def _page(self, request: httpx2.Request) -> httpx2.Response:
        key = {"method": request.method, "url": str(request.url)}
        try:
            record = _read_page_capped(self.upstream, request, self.max_bytes, self.deadline)
        except httpx2.TransportError as exc:
            self.cassette.add({"kind": "http", "request": key,
                               "response": {"error": type(exc).__name__, "message": str(exc)}})
            raise
        self.cassette.add({"kind": "http", "request": key, "response": record})
        return _page_response(record, request)


# Errors a recorded page can replay: the same exception type the live fetch raised.
_PAGE_ERRORS: dict[str, type[httpx2.TransportError]] = {
    cls.__name__: cls for cls in (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.ReadTimeout,
                                  httpx2.ReadError, httpx2.RemoteProtocolError,
                                  httpx2.DecodingError, httpx2.PoolTimeout, httpx2.WriteTimeout)}


def _read_page_capped(upstream: httpx2.BaseTransport, request: httpx2.Request,
                      max_bytes: int, deadline: float) -> dict[str, Any]:
    """GET a page through `upstream` with fetch_url's caps; the record to store.

    The body is read by fetch_url's own reader (`read_body`). The download runs in a
    helper thread (`run_in_thread`) so that one deadline covers everything, even a
    server that trickles its headers a byte at a time.
    """
    request.headers["accept-encoding"] = "gzip, deflate"  # decoded by every install
    ends = time.monotonic() + deadline
    opened: list[httpx2.Response] = []  # closed from here if the download overruns

    def download() -> tuple[httpx2.Response, bytes, bool]:
        response = upstream.handle_request(request)
        opened.append(response)
        content, capped = read_body(response, ends, max_bytes)
        response.close()
        return response, content, capped

    try:
        response, content, capped = run_in_thread(download, deadline, "record-page")
    except StillRunning:
        for response in opened:
            _close_quietly(response)
        raise httpx2.ReadTimeout(f"the page took longer than {deadline:g} s",
                                 request=request) from None
    except httpx2.TransportError:
        raise
    except Exception as error:  # noqa: BLE001 - replayed as a network error
        raise httpx2.ReadError(f"{type(error).__name__}: {error}", request=request) from None
    record: dict[str, Any] = {"status": response.status_code,
                              "content_type": response.headers.get("content-type", "")}
    if response.headers.get("location"):
        record["location"] = response.headers["location"]
    if capped:
        record["truncated_at"] = max_bytes
    try:
        record["text"] = content.decode("utf-8")
    except UnicodeDecodeError:
        record["base64"] = base64.b64encode(content).decode("ascii")
    return record


def _close_quietly(response: httpx2.Response) -> None:
    try:
        response.close()
    except Exception:  # noqa: BLE001 - a stream closed from another thread may complain
        pass


def _safe_headers(headers: httpx2.Headers) -> dict[str, str]:
    """Only the content type survives a recording (never cookies or keys)."""
    kind = headers.get("content-type")
    return {"content-type": kind} if kind else {}


def _page_response(record: dict[str, Any], request: httpx2.Request) -> httpx2.Response:
    if "error" in record:
        raise _PAGE_ERRORS.get(record["error"], httpx2.ConnectError)(
            record.get("message", record["error"]), request=request)
    content = (base64.b64decode(record["base64"]) if "base64" in record
               else record.get("text", "").encode("utf-8"))
    headers = {"content-type": record["content_type"]} if record.get("content_type") else {}
    if record.get("location"):
        headers["location"] = record["location"]
    return httpx2.Response(record["status"], headers=headers, content=content, request=request)


def replay_world(cassette: Cassette | None, fallback: Fallback | None = None) -> World:
    """Tools' clock and pages, served from the cassette (and the fallback, offline)."""

    def now() -> datetime:
        if fallback is not None and (cassette is None or not cassette.has_clock()):
            return fallback.now(cassette)
        return cassette.clock_value()

    return World(now=now, http=http_client(ReplayTransport(cassette, fallback)))


def record_world(cassette: Cassette, clock: Callable[[], datetime],
                 pages: httpx2.BaseTransport) -> World:
    """Tools' clock and pages from the real sources, each reading written into the cassette.

    Args:
        cassette: where readings are written.
        clock: the real clock.
        pages: the transport that really fetches pages.
    """

    def now() -> datetime:
        value = clock()
        cassette.add({"kind": "clock", "value": value.isoformat()})
        return value

    return World(now=now, http=http_client(RecordTransport(cassette, pages)))
