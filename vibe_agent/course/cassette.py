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
recorded either raises `ReplayMiss` (strict replay), naming the nearest recording
and every differing field, or goes to a `Fallback` that answers it and says so
(the offline mode).

Recording writes `NAME.json.partial` after every interaction (atomically: a crash
leaves the last complete state) and `finish()` replaces `NAME.json` only when the
recording is good: at least one model call, none that failed to connect, none
refused for the key or the address. Nothing secret is written: no headers except
a page's content type and redirect target, and the configured key, its masked
forms and URL credentials are redacted.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import tempfile
import threading
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import httpx2

from ..web import FETCH_DEADLINE_S, MAX_BYTES
from ..world import World, http_client
from .redact import Redactor
from .sse import event_stream, parse_events

FORMAT = 1
SOURCES = ("scripted-reference", "real-model", "live-provider")
ABSENT = "<没有>"
PARTIAL = ".partial"  # suffix of the file a recording writes as it goes
RECORD_COMMAND = "python -m vibe_agent record 课名或场景名"


class _ShortInJupyter:
    """Jupyter shows only the explanation: the SDK's frames between the cell and the
    cassette say nothing a learner can act on (IPython's `_render_traceback_` hook)."""

    def _render_traceback_(self) -> list[str]:
        return f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}".splitlines()


class ReplayMiss(_ShortInJupyter, LookupError):
    """A request that the cassette does not hold (the cell changed, or the world did)."""


class CassetteError(_ShortInJupyter, ValueError):
    """A cassette file that cannot be used: names the file, what is wrong and what to do.

    Args:
        path: the file.
        problem: what is wrong, in Chinese.
        remedy: what to do, in Chinese.
    """

    template = "录制文件 {path} 用不了：{problem}。怎么办：{remedy}"

    def __init__(self, path: Path | str, problem: str, remedy: str) -> None:
        self.path, self.problem, self.remedy = Path(path), problem, remedy
        super().__init__(self.template.format(path=path, problem=problem, remedy=remedy))


class RecordingFailed(CassetteError):
    """A recording whose model calls failed; the cassette file was left as it was."""

    template = "录制 {path} 失败：{problem}。这个文件保持原样，没有被这次录制替换。怎么办：{remedy}"


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
    if value == ABSENT:
        return ABSENT
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _differing(recorded: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    old, new = flatten(normalise(recorded)), flatten(normalise(now))
    return [(path, old.get(path, ABSENT), new.get(path, ABSENT))
            for path in sorted(old.keys() | new.keys())
            if not _same(old.get(path, ABSENT), new.get(path, ABSENT))]


def _same(old: Any, new: Any) -> bool:
    """Equal values; texts that differ only in volatile parts count as equal."""
    if isinstance(old, str) and isinstance(new, str):
        return without_volatile(old) == without_volatile(new)
    return old == new


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Every field that differs, as `path：录制文件里 '…' | 现在 '…'`."""
    return [f"{path}：录制文件里 {_short(old)} | 现在 {_short(new)}"
            for path, old, new in _differing(recorded, now)]


def distance(recorded: dict[str, Any], now: dict[str, Any]) -> float:
    """How far apart two requests are: each differing field counts 0..1 by how much differs."""
    return sum(1 - SequenceMatcher(None, str(old), str(new)).ratio()
               for _, old, new in _differing(recorded, now))


# ---------------------------------------------------------------------------
# Checking a cassette file: every problem named, in words a learner can act on
# ---------------------------------------------------------------------------


def _kind(value: Any) -> str:
    names = {dict: "一个对象", list: "一个列表", str: "一个字符串", bool: "一个布尔值",
             int: "一个数字", float: "一个数字", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _status_problem(response: Any) -> str | None:
    status = response.get("status")
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        return f".response.status 应该是 HTTP 状态码（100–599），这里是 {status!r}"
    return None


def _chat_problem(item: dict[str, Any]) -> str | None:
    if not isinstance(item.get("request"), dict):
        return f".request 应该是请求体对象，这里是{_kind(item.get('request'))}"
    response = item.get("response")
    if not isinstance(response, dict):
        return f".response 应该是一个对象，这里是{_kind(response)}"
    if "stream" in response:
        return _status_problem(response) or _stream_problem(response["stream"])
    if "body" not in response:
        return ".response 缺少 \"body\"（响应的 JSON）或 \"stream\"（流式响应的数据块）"
    return _status_problem(response)


def _stream_problem(stream: Any) -> str | None:
    if not isinstance(stream, list) or not stream:
        return ".response.stream 应该是非空的数组（流式响应的每个数据块）"
    for i, event in enumerate(stream):
        if not isinstance(event, dict) or not isinstance(event.get("chunk"), dict) or not (
                isinstance(event.get("t_ms"), int | float)
                and not isinstance(event.get("t_ms"), bool)):
            return (f".response.stream[{i}] 应该是 {{\"t_ms\": 毫秒数, \"chunk\": {{…}}}}，"
                    f"这里是{_kind(event)}")
    return None


def _http_problem(item: dict[str, Any]) -> str | None:
    request, response = item.get("request"), item.get("response")
    if not isinstance(request, dict) or not all(
            isinstance(request.get(k), str) for k in ("method", "url")):
        return ".request 应该是带 \"method\" 和 \"url\" 两个字符串的对象"
    if not isinstance(response, dict):
        return f".response 应该是一个对象，这里是{_kind(response)}"
    if "error" in response:
        return None if isinstance(response["error"], str) else ".response.error 应该是字符串"
    for key in ("text", "base64", "content_type", "location"):
        if key in response and not isinstance(response[key], str):
            return f".response.{key} 应该是字符串，这里是{_kind(response[key])}"
    if "base64" in response:
        try:
            base64.b64decode(response["base64"], validate=True)
        except ValueError:
            return ".response.base64 不是有效的 base64"
    return _status_problem(response)


def _clock_problem(item: dict[str, Any]) -> str | None:
    value = item.get("value")
    try:
        datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return f".value 应该是 ISO 格式的时间（如 2026-11-30T13:00:00+00:00），这里是 {value!r}"
    return None


_ITEM_CHECKS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "chat": _chat_problem, "http": _http_problem, "clock": _clock_problem}


def shape_problem(data: Any) -> str | None:
    """What is wrong with a parsed cassette, naming the JSON path; None when it is usable."""
    if not isinstance(data, dict):
        return f"最外层应该是一个 JSON 对象 {{…}}，这里是{_kind(data)}"
    if data.get("format") != FORMAT:
        return f"\"format\" 应该是 {FORMAT}，这里是 {data.get('format', ABSENT)!r}"
    if "name" in data and not isinstance(data["name"], str):
        return f"\"name\" 应该是字符串，这里是{_kind(data['name'])}"
    provenance = data.get("provenance")
    if not isinstance(provenance, dict):
        return "缺少 \"provenance\" 对象（这份录制文件从哪来）"
    if provenance.get("source") not in SOURCES:
        return (f"provenance.source 应该是 {' / '.join(SOURCES)} 之一，"
                f"这里是 {provenance.get('source', ABSENT)!r}")
    interactions = data.get("interactions")
    if not isinstance(interactions, list):
        return f"\"interactions\" 应该是一个列表，这里是{_kind(interactions)}"
    for i, item in enumerate(interactions):
        if not isinstance(item, dict):
            return f"interactions[{i}] 应该是一个对象，这里是{_kind(item)}"
        check = _ITEM_CHECKS.get(item.get("kind"))
        if check is None:
            return (f"interactions[{i}].kind 应该是 chat、http 或 clock，"
                    f"这里是 {item.get('kind', ABSENT)!r}")
        problem = check(item)
        if problem:
            return f"interactions[{i}]{problem}"
    failures = data.get("failures", [])
    if not isinstance(failures, list) or not all(isinstance(f, str) for f in failures):
        return "\"failures\" 应该是字符串列表"
    return None


def _json_problem(text: str, error: json.JSONDecodeError) -> str:
    where = f"第 {error.lineno} 行第 {error.colno} 列"
    if error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated string"):
        return f"JSON 在中途就结束了（{where}），像是没写完就被打断了"
    if error.msg.startswith("Extra data"):
        return f"JSON 结束之后还有多余的内容（{where}）"
    return f"不是有效的 JSON：{where}有语法错误（{error.msg}）"


def _remedy_for_damage(path: Path, recorded_with: str | None = None) -> str:
    return (f"录制文件不要手改：用 git checkout -- {path} 恢复仓库里的版本，"
            f"或者重新录制（{recorded_with or RECORD_COMMAND}）")


def _remedy_for_partial(partial: Path) -> str:
    return (f"这是一次没有收尾的录制。在代码里录制时，录完调用 client.close()，或者用 "
            f"with make_client(\"record\", ...) as client: 录制，程序正常退出时也会收尾："
            f"那时检查无误才换成正式的录制文件。这一份可以这样检查并保存："
            f"from vibe_agent.course.cassette import promote_partial; "
            f"promote_partial(\"{partial}\")（录制失败时会说明原因，原文件保持不变）")


def _remedy_for_missing(path: Path) -> str:
    others = sorted(p.stem for p in path.parent.glob("*.json")) if path.parent.is_dir() else []
    known = (f"{path.parent} 里现有：{', '.join(others)}" if others
             else f"{path.parent} 里没有录制文件")
    return (f"检查录制文件名（{known}）；或者用 {RECORD_COMMAND} 录一份；"
            "或者不用录制文件：VIBE_AGENT_MODE=offline / live / local")


def read_cassette_file(path: Path) -> dict[str, Any]:
    """The parsed JSON of a cassette file, checked; every problem is a CassetteError."""
    if path.is_dir():
        raise CassetteError(path, "这是一个文件夹，不是录制文件", _remedy_for_missing(path))
    if not path.exists():
        partial = path.with_name(path.name + PARTIAL)
        if partial.is_file():
            raise CassetteError(path, f"文件不存在，但旁边有一份没收尾的录制 {partial.name}",
                                _remedy_for_partial(partial))
        raise CassetteError(path, "文件不存在", _remedy_for_missing(path))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CassetteError(path, f"读不出来（{exc.strerror}）", "检查文件权限") from None
    try:
        text = raw.decode("utf-8-sig")  # a BOM some editors add is harmless
    except UnicodeDecodeError as exc:
        problem = f"不是 UTF-8 编码的文本（第 {exc.start} 个字节是 0x{raw[exc.start]:02x}）"
        raise CassetteError(path, problem, _remedy_for_damage(path)) from None
    if not text.strip():
        raise CassetteError(path, "文件是空的", _remedy_for_damage(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CassetteError(path, _json_problem(text, exc), _remedy_for_damage(path)) from None
    except RecursionError:
        raise CassetteError(path, "JSON 嵌套得太深", _remedy_for_damage(path)) from None
    problem = shape_problem(data)
    if problem:
        recorded_with = (data.get("provenance") or {}).get("recorded_with") \
            if isinstance(data, dict) and isinstance(data.get("provenance"), dict) else None
        raise CassetteError(path, problem, _remedy_for_damage(path, recorded_with))
    return data


def _write_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`:
    readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------------------
# The cassette
# ---------------------------------------------------------------------------


@dataclass
class Cassette:
    """Interactions plus provenance; replays chat responses, pages and clock readings."""

    name: str
    provenance: dict[str, Any]
    interactions: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None
    autosave: bool = False  # record mode: write NAME.json.partial after every interaction
    redact: Redactor = field(default_factory=Redactor, repr=False)
    failures: list[str] = field(default_factory=list)  # model calls that got no usable answer

    def __post_init__(self) -> None:
        # One lock per cassette: concurrent tasks (the bench) record into one cassette,
        # and a replay lookup counts what it served (read-modify-write).
        self._lock = threading.RLock()
        self._finished: tuple[int, int] | None = None  # (interactions, failures) at finish()
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

    @property
    def where(self) -> str:
        """The file (or the name, for a cassette that has none), for messages."""
        return str(self.path or self.name)

    # -- files ---------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Cassette:
        """Read a cassette file; any problem raises CassetteError naming the file."""
        path = Path(path)
        data = read_cassette_file(path)
        name = data.get("name") or path.name.removesuffix(PARTIAL).removesuffix(".json")
        return cls(name, data["provenance"], data["interactions"], path,
                   failures=list(data.get("failures", [])))

    def to_json(self) -> str:
        data: dict[str, Any] = {"format": FORMAT, "name": self.name,
                                "provenance": self.provenance, "interactions": self.interactions}
        if self.failures:
            data["failures"] = self.failures
        return self.redact(json.dumps(data, ensure_ascii=False, indent=1)) + "\n"

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the cassette (atomically) and return where it went."""
        with self._lock:
            target = Path(path or self.path or f"{self.name}.json")
            _write_atomic(target, self.to_json())
            self.path = target
            return target

    @property
    def partial_path(self) -> Path:
        target = self.path or Path(f"{self.name}.json")
        return target.with_name(target.name + PARTIAL)

    # -- recording -----------------------------------------------------------

    def add(self, item: dict[str, Any]) -> None:
        with self._lock:
            self.interactions.append(item)
            self._index_one(len(self.interactions) - 1, item)
            if self.autosave:  # a run that crashes half-way still leaves what it recorded
                _write_atomic(self.partial_path, self.to_json())

    def fail(self, reason: str) -> None:
        """Note a model call that got no usable answer (the recording will be refused)."""
        with self._lock:
            self.failures.append(self.redact(reason))
            if self.autosave:
                _write_atomic(self.partial_path, self.to_json())

    def recording_problems(self) -> list[str]:
        """Why this recording must not replace a cassette (empty when it is good)."""
        chats = [item for item in self.interactions if item["kind"] == "chat"]
        problems = list(self.failures)
        if not chats and not problems:
            problems.append("一次模型调用也没有录到")
        for number, item in enumerate(chats, 1):
            status = item["response"]["status"]
            if status in (401, 403, 404, 407):
                problems.append(self.redact(f"第 {number} 次模型调用被拒绝：HTTP {status}"
                                            f"{_error_detail(item['response']['body'])}"))
        if chats and all(item["response"]["status"] >= 400 for item in chats):
            problems.append(f"全部 {len(chats)} 次模型调用都返回了错误")
        return list(dict.fromkeys(problems))

    def finish(self) -> Path:
        """End a recording: replace the cassette only when the recording is good.

        Raises:
            RecordingFailed: no model call was recorded, or one failed to connect or was
                refused (wrong key, wrong address); the previous cassette is kept and
                what was recorded stays in NAME.json.partial.
        """
        self._finished = (len(self.interactions), len(self.failures))
        problems = self.recording_problems()
        if problems:
            if self.interactions or self.failures:
                _write_atomic(self.partial_path, self.to_json())
            raise RecordingFailed(self.path or self.name, "；".join(problems[:3]),
                                  _recording_remedy(self.partial_path))
        target = self.save()
        self.partial_path.unlink(missing_ok=True)
        return target

    @property
    def unfinished(self) -> bool:
        """Whether something was recorded (or failed) since the last `finish()`."""
        return self._finished != (len(self.interactions), len(self.failures)) and bool(
            self.interactions or self.failures)

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

    def has_chat(self, body: dict[str, Any]) -> bool:
        return request_key(body) in self._chat

    def chat_response(self, body: dict[str, Any]) -> dict[str, Any]:
        key = request_key(body)
        if key not in self._chat:
            raise ReplayMiss(self.miss_report(body))
        return self._take(key, self._chat[key])["response"]

    def has_page(self, method: str, url: str) -> bool:
        return _http_key({"method": method, "url": url}) in self._http

    def http_response(self, method: str, url: str) -> dict[str, Any]:
        key = _http_key({"method": method, "url": url})
        if key not in self._http:
            recorded = sorted({i["request"]["url"] for i in self.interactions
                               if i["kind"] == "http"})
            raise ReplayMiss(
                f"录制文件 {self.where} 里没有 {method} {url} 这个网页。"
                f"录到的网页：{', '.join(recorded) or '（没有）'}。"
                f"怎么办：抓取录到的网页；或者换成离线回退模式（VIBE_AGENT_MODE=offline）"
                f"或在线模式（VIBE_AGENT_MODE=live），网页就会真的去抓。"
            )
        return self._take(key, self._http[key])["response"]

    def has_clock(self) -> bool:
        return bool(self._clock)

    def clock_value(self) -> datetime:
        if not self._clock:
            raise ReplayMiss(f"录制文件 {self.where} 里没有时钟读数。怎么办：重新录制它，或者换成"
                             "离线回退模式（VIBE_AGENT_MODE=offline）或在线模式，读真实的时钟。")
        return datetime.fromisoformat(self._take("clock", self._clock)["value"])

    def nearest(self, body: dict[str, Any]) -> tuple[int, int, list[str]] | None:
        """The recorded chat closest to `body`: (its number from 1, how many chats,
        the differing fields); None when the cassette holds no chat."""
        chats = [i for i in self.interactions if i["kind"] == "chat"]
        if not chats:
            return None
        n = min(range(len(chats)), key=lambda k: distance(chats[k]["request"], body))
        return n + 1, len(chats), differences(chats[n]["request"], body)

    def miss_report(self, body: dict[str, Any]) -> str:
        """Why a chat request missed: the nearest recording, each differing field, remedies."""
        head = f"录制文件 {self.where} 里没有这个请求（严格回放模式 replay）。"
        command = self.provenance.get("recorded_with") or RECORD_COMMAND
        remedy = (
            "怎么办（任选其一）：\n"
            f"  1. 换成离线回退模式：make_client(\"offline\", ...) 或 VIBE_AGENT_MODE=offline，"
            "录制文件里没有的请求改由脚本参考模型回答（会标明不是录制的）；也可以接真实模型："
            "VIBE_AGENT_MODE=live（配置 key）或 VIBE_AGENT_MODE=local。\n"
            f"  2. 重新录制，让录制文件跟上改动：{command}\n"
            "  3. 撤销你的改动，让请求和录制时一模一样。")
        if self.path is not None and self.partial_path.is_file():
            remedy += (f"\n  另外：旁边还有一份没收尾的录制 {self.partial_path.name}，"
                       f"{_remedy_for_partial(self.partial_path)}")
        found = self.nearest(body)
        if found is None:
            return f"{head}\n这份录制文件里一次模型调用也没有。\n{remedy}"
        number, total, diff = found
        shown = "\n".join(f"  {line}" for line in diff[:12])
        more = f"\n  ……还有 {len(diff) - 12} 处" if len(diff) > 12 else ""
        return (f"{head}\n最接近的录制文件：第 {number} 次模型调用（共 {total} 次），"
                f"有 {len(diff)} 处不同：\n{shown}{more}\n{remedy}")


def _error_detail(body: Any) -> str:
    error = body.get("error", body) if isinstance(body, dict) else body
    message = error.get("message") if isinstance(error, dict) else error
    text = " ".join(str(message or "").split())[:160]
    return f"（{text}）" if text else ""


def _recording_remedy(partial: Path) -> str:
    return (f"检查 OPENAI_BASE_URL、OPENAI_API_KEY、VIBE_AGENT_MODEL（python -m vibe_agent info），"
            f"或者换一个录制来源（--source reference / local）再录；这次录到的内容在 {partial}")


def promote_partial(partial: Path) -> Path:
    """Finish a recording another process wrote (a notebook kernel): check NAME.json.partial
    and, when it is good, replace NAME.json with it.

    Raises:
        RecordingFailed: see `Cassette.finish`.
    """
    tape = Cassette.load(partial)
    tape.path = partial.with_name(partial.name.removesuffix(PARTIAL))
    return tape.finish()


def _http_key(request: dict[str, Any]) -> str:
    return f"{request['method'].upper()} {request['url']}"


def catalogue(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Where every cassette in a folder came from: one row per file, sorted by name.

    Each row holds the cassette's `name` (what `make_client(cassette=...)` takes),
    its provenance `source`, `model`, `recorded_at` and `temperature` (the values the
    recorded requests used, "default" when a request set none), and how many model
    calls (`chats`) it holds. A file that is not a valid cassette raises CassetteError.

    Args:
        folder: a folder of cassette files, e.g. `vibe_agent.course.client.cassette_dir()`.
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


def _decoder(encoding: str) -> Any:
    """A decompressor whose output can be capped (`decompress(data, max_length)`)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise httpx2.DecodingError(f"unsupported content-encoding {encoding!r}")


def _read_body(response: httpx2.Response, max_bytes: int) -> tuple[bytes, bool]:
    """At most `max_bytes` decoded bytes of a response, and whether there was more."""
    decoder = _decoder(response.headers.get("content-encoding", ""))
    body = bytearray()
    raw_budget = 4 * max_bytes  # compressed data that decodes to nothing is not read forever
    for chunk in response.stream:
        raw_budget -= len(chunk)
        try:
            body += decoder.decompress(chunk, max_bytes + 1 - len(body)) if decoder else chunk
        except zlib.error as exc:
            raise httpx2.DecodingError(f"could not decompress the page ({exc})") from None
        if len(body) > max_bytes or raw_budget < 0:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _read_page_capped(upstream: httpx2.BaseTransport, request: httpx2.Request,
                      max_bytes: int, deadline: float) -> dict[str, Any]:
    """GET a page through `upstream` with fetch_url's caps; the record to store.

    The download runs in a helper thread so that one deadline covers everything,
    even a server that trickles its headers a byte at a time.
    """
    request.headers["accept-encoding"] = "gzip, deflate"  # only what we can cap
    outcome: dict[str, Any] = {}

    def download() -> None:
        try:
            response = upstream.handle_request(request)
            outcome["response"] = response
            outcome["body"] = _read_body(response, max_bytes)
            response.close()
        except Exception as exc:  # noqa: BLE001 - handed to the waiting thread below
            outcome["error"] = exc

    worker = threading.Thread(target=download, daemon=True, name="record-page")
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        if "response" in outcome:
            _close_quietly(outcome["response"])
        raise httpx2.ReadTimeout(f"the page took longer than {deadline:g} s", request=request)
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, httpx2.TransportError):
            raise error
        raise httpx2.ReadError(f"{type(error).__name__}: {error}", request=request)
    response, (content, capped) = outcome["response"], outcome["body"]
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
