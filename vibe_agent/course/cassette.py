"""Cassettes: recorded model responses, pages and clock readings, as files.

A cassette is a readable JSON file:

    {"format": 1, "name": "demo_reference",
     "provenance": {"source": "scripted-reference", "model": "vibe-reference", ...},
     "interactions": [
        {"kind": "chat",  "request": {...normalised body...},
                          "response": {"status": 200, "body": {...ChatCompletion...}}},
        {"kind": "http",  "request": {"method": "GET", "url": "https://example.com/"},
                          "response": {"status": 200, "content_type": "text/html", "text": "..."}},
        {"kind": "clock", "value": "2026-11-30T13:00:00+00:00"}]}

This file holds the format: reading a cassette file (every problem a `CassetteError`
that names the file, what is wrong and what to do), writing one, and `Cassette`,
which serves the recorded interactions in order. How a request finds its recording
is in `matching.py`; the transports that replay and record under a genuine
`openai.OpenAI` client, and the offline fallback, are in `transports.py`.

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
import tempfile
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .matching import ABSENT, differences, distance, page_key, request_key
from .redact import Redactor

FORMAT = 1
PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the repository this package belongs to
SOURCES = ("scripted-reference", "real-model", "live-provider")
PARTIAL = ".partial"  # suffix of the file a recording writes as it goes
RECORD_COMMAND = "python -m vibe_agent record 课名或场景名"


def shown_path(path: str | os.PathLike[str]) -> str:
    """A file as a message for a person names it: relative to the project when it is in it
    (notebooks/cassettes/demo_reference.json, the same on every machine), else as given."""
    try:
        return Path(path).resolve().relative_to(PROJECT_ROOT).as_posix()
    except (ValueError, OSError, RuntimeError):  # outside the project, or unresolvable
        return str(path)


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
            self._http[page_key(item["request"])].append(i)
        elif item["kind"] == "clock":
            self._clock.append(i)

    @property
    def where(self) -> str:
        """The file (relative to the project when it is in it) or, for a cassette that has
        none, the name: how messages for a person name the cassette."""
        return shown_path(self.path) if self.path is not None else self.name

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
        return page_key({"method": method, "url": url}) in self._http

    def http_response(self, method: str, url: str) -> dict[str, Any]:
        key = page_key({"method": method, "url": url})
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

