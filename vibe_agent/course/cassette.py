"""Cassettes: recorded model responses, pages and clock readings, replayed at the transport.

A cassette is a readable JSON file:

    {"format": 1, "name": "demo_reference",
     "provenance": {"source": "scripted-reference", "model": "vibe-reference", ...},
     "interactions": [
        {"kind": "chat",  "request": {...normalised body...},
                          "response": {"status": 200, "body": {...ChatCompletion...}}},
        {"kind": "http",  "request": {"method": "GET", "url": "https://example.com/"},
                          "response": {"status": 200, "content_type": "text/html", "text": "..."}},
        {"kind": "clock", "value": "2026-11-30T13:00:00+00:00"}]}

Replay sits UNDER a genuine `openai.OpenAI` client (its `http_client` transport),
so the SDK parses real JSON. Requests are matched on their normalised body (None
and empty values dropped, keys sorted), never on headers. A request that was not
recorded raises `ReplayMiss` naming the nearest recording and every differing
field. Nothing secret is ever written: no headers at all, so no key, no
Authorization, no cookie.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import httpx2

from ..world import World

FORMAT = 1
SOURCES = ("scripted-reference", "real-model", "live-provider")


class ReplayMiss(LookupError):
    """A request that the cassette does not hold (the cell changed, or the world did)."""

    def _render_traceback_(self) -> list[str]:
        """What Jupyter shows: the explanation alone. The SDK's frames between the cell
        and the cassette say nothing a learner can act on (IPython's own hook)."""
        text = str(self).removeprefix("ReplayMiss: ")
        return f"\x1b[0;31mReplayMiss\x1b[0m: {text}".splitlines()


class CassetteError(ValueError):
    """A cassette file that cannot be used (missing, malformed, or without provenance)."""


# ---------------------------------------------------------------------------
# Normalising and comparing request bodies
# ---------------------------------------------------------------------------


def normalise(value: Any) -> Any:
    """Drop None and empty values recursively; dict keys come out sorted."""
    if isinstance(value, dict):
        cleaned = {k: normalise(v) for k, v in sorted(value.items())}
        return {k: v for k, v in cleaned.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


# Parts of a tool result that are never the same twice: how long a test run took
# ("14 passed in 0.05s", unittest's "Ran 3 tests in 0.001s") and where an object
# lived ("<Store object at 0x7f8a88cd5710>"). A request quoting them must still replay.
VOLATILE = [
    (re.compile(r"\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d\d:\d\d\))?"), "in <duration>"),
    (re.compile(r"\bat 0x[0-9a-f]{6,16}\b"), "at 0x<address>"),
]


def without_volatile(text: str) -> str:
    """`text` with test-run durations and object addresses replaced by placeholders."""
    for pattern, placeholder in VOLATILE:
        text = pattern.sub(placeholder, text)
    return text


def request_key(body: dict[str, Any]) -> str:
    """The lookup key for a chat request: its normalised body as canonical JSON,
    volatile parts (test-run durations, object addresses) left out."""
    return without_volatile(json.dumps(normalise(body), sort_keys=True, ensure_ascii=False))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """`{"messages": [{"content": "x"}]}` -> `{"messages[0].content": "x"}`."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out |= flatten(v, f"{prefix}.{k}" if prefix else k)
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out |= flatten(v, f"{prefix}[{i}]")
        return out
    return {prefix: value}


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _differing(recorded: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    old, new = flatten(normalise(recorded)), flatten(normalise(now))
    return [(path, old.get(path, "<absent>"), new.get(path, "<absent>"))
            for path in sorted(old.keys() | new.keys())
            if not _same(old.get(path, "<absent>"), new.get(path, "<absent>"))]


def _same(old: Any, new: Any) -> bool:
    """Equal values; texts that differ only in volatile parts count as equal."""
    if isinstance(old, str) and isinstance(new, str):
        return without_volatile(old) == without_volatile(new)
    return old == new


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Every field that differs, as `path: recorded '…' | now '…'`."""
    return [f"{path}: recorded {_short(old)} | now {_short(new)}"
            for path, old, new in _differing(recorded, now)]


def distance(recorded: dict[str, Any], now: dict[str, Any]) -> float:
    """How far apart two requests are: each differing field counts 0..1 by how much differs."""
    return sum(1 - SequenceMatcher(None, str(old), str(new)).ratio()
               for _, old, new in _differing(recorded, now))


# ---------------------------------------------------------------------------
# The cassette file
# ---------------------------------------------------------------------------


@dataclass
class Cassette:
    """Interactions plus provenance; replays chat responses, pages and clock readings."""

    name: str
    provenance: dict[str, Any]
    interactions: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None
    autosave: bool = False  # record mode: write the file after every interaction

    def __post_init__(self) -> None:
        # One lock per cassette: concurrent tasks (the bench) record into one cassette,
        # and a replay lookup counts what it served (read-modify-write).
        self._lock = threading.RLock()
        self._index()

    def _index(self) -> None:
        """Build the lookup tables once, so a lookup costs the same for any cassette size."""
        self._chat: dict[str, list[int]] = defaultdict(list)
        self._http: dict[str, list[int]] = defaultdict(list)
        self._clock: list[int] = []
        self._served: dict[str, int] = defaultdict(int)
        self._used: set[int] = set()
        for i, item in enumerate(self.interactions):
            self._index_one(i, item)

    def _index_one(self, i: int, item: dict[str, Any]) -> None:
        if item["kind"] == "chat":
            self._chat[request_key(item["request"])].append(i)
        elif item["kind"] == "http":
            self._http[_http_key(item["request"])].append(i)
        elif item["kind"] == "clock":
            self._clock.append(i)

    # -- files ---------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        path = Path(path)
        if not path.exists():
            raise CassetteError(f"cassette not found: {path}")
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or "interactions" not in data:
            raise CassetteError(f"{path} is not a format-{FORMAT} cassette")
        if data.get("provenance", {}).get("source") not in SOURCES:
            raise CassetteError(f"{path} has no provenance source (one of {SOURCES})")
        return cls(data["name"], data["provenance"], data["interactions"], path)

    def to_json(self) -> str:
        data = {"format": FORMAT, "name": self.name, "provenance": self.provenance,
                "interactions": self.interactions}
        return json.dumps(data, ensure_ascii=False, indent=1) + "\n"

    def save(self, path: str | Path | None = None) -> Path:
        with self._lock:
            target = Path(path or self.path or f"{self.name}.json")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.to_json(), encoding="utf-8")
            self.path = target
            return target

    # -- recording -----------------------------------------------------------

    def add(self, item: dict[str, Any]) -> None:
        with self._lock:
            self.interactions.append(item)
            self._index_one(len(self.interactions) - 1, item)
            if self.autosave:  # a run that crashes half-way still leaves what it recorded
                self.save()

    # -- replaying -----------------------------------------------------------

    def _take(self, key: str, indices: list[int]) -> dict[str, Any]:
        """The next recording for this key; once all were served, the last one again
        (so re-running a cell replays what it showed before)."""
        with self._lock:
            n = self._served[key]
            self._served[key] = n + 1
            index = indices[min(n, len(indices) - 1)]
            self._used.add(index)
            return self.interactions[index]

    def unused_chats(self) -> list[int]:
        """Numbers (from 1) of chat recordings nobody asked for yet."""
        chats = [i for i, item in enumerate(self.interactions) if item["kind"] == "chat"]
        return [n for n, i in enumerate(chats, 1) if i not in self._used]

    def chat_response(self, body: dict[str, Any]) -> dict[str, Any]:
        key = request_key(body)
        if key not in self._chat:
            raise ReplayMiss(self.miss_report(body))
        return self._take(key, self._chat[key])["response"]

    def http_response(self, method: str, url: str) -> dict[str, Any]:
        key = _http_key({"method": method, "url": url})
        if key not in self._http:
            recorded = sorted({i["request"]["url"] for i in self.interactions
                               if i["kind"] == "http"})
            raise ReplayMiss(
                f"cassette {self.name!r} has no recording of {method} {url}. "
                f"Recorded pages: {', '.join(recorded) or '(none)'}. "
                "Fetch a recorded page, or run live (VIBE_AGENT_MODE=live) to fetch for real."
            )
        return self._take(key, self._http[key])["response"]

    def clock_value(self) -> datetime:
        if not self._clock:
            raise ReplayMiss(f"cassette {self.name!r} holds no clock reading; "
                             "record it again, or run live to read the real clock.")
        return datetime.fromisoformat(self._take("clock", self._clock)["value"])

    def miss_report(self, body: dict[str, Any]) -> str:
        """Why a chat request missed: the nearest recording and each differing field."""
        where = self.path or self.name
        chats = [i for i in self.interactions if i["kind"] == "chat"]
        head = f"ReplayMiss: cassette {where} has no recording of this request."
        remedy = ("What to do: run the cell exactly as it was (restore your edit), or run "
                  "against a model: VIBE_AGENT_MODE=live (with OPENAI_API_KEY) or "
                  "VIBE_AGENT_MODE=local, or re-record with `python -m vibe_agent record`.")
        if not chats:
            return f"{head}\nThe cassette holds no chat recordings.\n{remedy}"
        n = min(range(len(chats)), key=lambda k: distance(chats[k]["request"], body))
        diff = differences(chats[n]["request"], body)
        count = len(diff)
        shown = "\n".join(f"  {line}" for line in diff[:12])
        more = f"\n  … and {len(diff) - 12} more" if len(diff) > 12 else ""
        return (f"{head}\nNearest recording: chat #{n + 1} of {len(chats)}, "
                f"{count} differing field(s):\n{shown}{more}\n{remedy}")


def _http_key(request: dict[str, Any]) -> str:
    return f"{request['method'].upper()} {request['url']}"


def catalogue(folder: str | Path) -> list[dict[str, Any]]:
    """Where every cassette in a folder came from: one row per file, sorted by name.

    Each row holds the cassette's `name` (what `make_client(cassette=...)` takes),
    its provenance `source`, `model`, `recorded_at` and `temperature` (the values the
    recorded requests used, "default" when a request set none), and how many model
    calls (`chats`) it holds. A file that is not a valid cassette raises CassetteError.

    Args:
        folder: a folder of cassette files, e.g. `vibe_agent.client.cassette_dir()`.
    """
    rows = []
    for path in sorted(Path(folder).glob("*.json")):
        tape = Cassette.load(path)
        made = tape.provenance
        rows.append({
            "name": path.stem,
            "source": made["source"],
            "model": made.get("model", "?"),
            "recorded_at": made.get("recorded_at", "?"),
            "temperature": list(made.get("temperature", [])),
            "chats": sum(1 for item in tape.interactions if item["kind"] == "chat"),
        })
    return rows


# ---------------------------------------------------------------------------
# Transports: replay from a cassette, or record through to an upstream
# ---------------------------------------------------------------------------


def _chat_body(request: httpx2.Request) -> dict[str, Any]:
    return json.loads(request.content or b"{}")


class ReplayTransport(httpx2.BaseTransport):
    """Serves chat completions from a cassette; never touches the network."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/chat/completions"):
            response = self.cassette.chat_response(_chat_body(request))
            return httpx2.Response(response["status"], json=response["body"])
        return _page_response(self.cassette.http_response(request.method, str(request.url)))


class RecordTransport(httpx2.BaseTransport):
    """Passes requests to an upstream transport and writes what came back."""

    def __init__(self, cassette: Cassette, upstream: httpx2.BaseTransport) -> None:
        self.cassette = cassette
        self.upstream = upstream

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = self.upstream.handle_request(request)
        response.read()
        if request.url.path.endswith("/chat/completions"):
            body = _chat_body(request)
            temperatures = self.cassette.provenance.setdefault("temperature", [])
            if body.get("temperature", "default") not in temperatures:
                temperatures.append(body.get("temperature", "default"))
            self.cassette.add({
                "kind": "chat",
                "request": normalise(body),
                "response": {"status": response.status_code, "body": response.json()},
            })
        else:
            self.cassette.add({"kind": "http",
                               "request": {"method": request.method, "url": str(request.url)},
                               "response": _page_record(response)})
        return httpx2.Response(response.status_code, headers=_safe_headers(response),
                               content=response.content)


def _safe_headers(response: httpx2.Response) -> dict[str, str]:
    """Only the content type survives a recording (never cookies or keys)."""
    kind = response.headers.get("content-type")
    return {"content-type": kind} if kind else {}


def _page_record(response: httpx2.Response) -> dict[str, Any]:
    record: dict[str, Any] = {"status": response.status_code,
                              "content_type": response.headers.get("content-type", "")}
    try:
        record["text"] = response.content.decode("utf-8")
    except UnicodeDecodeError:
        record["base64"] = base64.b64encode(response.content).decode("ascii")
    return record


def _page_response(record: dict[str, Any]) -> httpx2.Response:
    content = (base64.b64decode(record["base64"]) if "base64" in record
               else record.get("text", "").encode("utf-8"))
    headers = {"content-type": record["content_type"]} if record.get("content_type") else {}
    return httpx2.Response(record["status"], headers=headers, content=content)


def replay_world(cassette: Cassette) -> World:
    """Tools' clock and pages, served from the cassette."""
    return World(now=cassette.clock_value,
                 http=httpx2.Client(transport=ReplayTransport(cassette)))


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

    return World(now=now, http=httpx2.Client(transport=RecordTransport(cassette, pages),
                                             follow_redirects=True))
