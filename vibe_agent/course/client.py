"""One client, several ways to run: `make_client()` returns a genuine `openai.OpenAI`.

    mode        where responses come from                         tools' clock and pages
    offline     a cassette; a request it lacks is answered by     the cassette; what it
                the reference model (or the local model), and     lacks: the course's pages /
                says so (one line, and the response's `model`)    the network, the real clock
    replay      a cassette, strictly: a request it lacks raises   the same cassette
                ReplayMiss (what the tests use)
    record      a live endpoint / local model / the reference     real, written to the cassette
    live        OPENAI_BASE_URL + OPENAI_API_KEY + VIBE_AGENT_MODEL   real
    local       SmolLM2-135M on 127.0.0.1 (llama.cpp)             real
    reference   the scripted reference model (not an LLM)         real

The mode comes from the argument, else VIBE_AGENT_MODE, else "live" when an API
key is configured and "offline" otherwise. Settings are read from the environment
and from a `.env` file if one exists (python-dotenv rules) — only when
`make_client` is called, never at import time. Only the HTTP transport differs
between modes: the code above it (your code, the loop, the tools) is the same.

The client is a `CourseClient`, a subclass of `openai.OpenAI` that adds nothing to
the API but a few read-only attributes: `client.mode`, `client.model`,
`client.world` (the tools' clock and pages), `client.provenance`,
`client.cassette`, `client.fallback` and `client.describe()`.
"""

from __future__ import annotations

import atexit
import io
import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import httpx2
import openai
from dotenv import dotenv_values

from ..world import World, http_client, system_clock
from .cassette import Cassette, CassetteError
from .redact import Redactor, without_credentials
from .reference import REFERENCE_MODEL_NAME, reference_model
from .scripted import SCRIPTED_BASE_URL
from .transports import Fallback, RecordTransport, ReplayTransport, record_world, replay_world

MODES = ("offline", "replay", "record", "live", "local", "reference")
RECORD_SOURCES = ("reference", "local", "live")
FALLBACKS = ("reference", "local")
PAGES = ("bundled", "network")
REPLAY_BASE_URL = "http://replay.invalid/v1"

# Live mode: how long to wait and how often to retry (VIBE_AGENT_TIMEOUT,
# VIBE_AGENT_CONNECT_TIMEOUT, VIBE_AGENT_MAX_RETRIES override these).
LIVE_TIMEOUT = 60.0  # seconds without a byte from the endpoint before a request fails
CONNECT_TIMEOUT = 10.0  # seconds to open the connection
LIVE_RETRIES = 1  # the SDK retries timeouts, 429 and 5xx this many times, with backoff
LOCAL_TIMEOUT = 600.0  # a 135M model on a busy 2-core CPU can need minutes for a long prompt

FALLBACK_LABELS = {
    "reference": "scripted-reference（回退：录制文件里没有这一步）",
    "local": "smollm2-local（回退：录制文件里没有这一步）",
}
SOURCE_WORDS = {
    "scripted-reference": "脚本参考模型（确定性的程序，不是 LLM）",
    "real-model": "真实的小模型",
    "live-provider": "在线模型服务",
}


class ConfigError(ValueError):
    """The run mode cannot be set up as configured (a message for people, in Chinese)."""


# ---------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    """What a CourseClient is connected to (read through the client's attributes)."""

    mode: str
    model: str
    world: World
    provenance: dict[str, Any]
    cassette: Cassette | None = None
    fallback: Fallback | None = None
    timeout: httpx2.Timeout | None = None
    max_retries: int = 0
    redact: Redactor = field(default_factory=Redactor)
    finishes_recording: bool = True  # False under `record LESSON`, which finishes them itself


class CourseClient(openai.OpenAI):
    """A genuine `openai.OpenAI` that also knows where its answers come from.

    Everything of the SDK works unchanged (`client.chat.completions.create`,
    `client.with_options(timeout=5)`, `client.copy()`); a copy keeps the connection.
    """

    def __init__(self, *, connection: Connection | None = None, **options: Any) -> None:
        super().__init__(**options)
        self._connection = connection

    @property
    def connection(self) -> Connection:
        if self._connection is None:
            raise ConfigError("这个 client 不是 make_client() 创建的，没有运行模式信息。")
        return self._connection

    @property
    def mode(self) -> str:
        """offline, replay, record, live, local or reference."""
        return self.connection.mode

    @property
    def model(self) -> str:
        """The model name to send with requests on this client."""
        return self.connection.model

    @property
    def world(self) -> World:
        """The clock and HTTP client the tools should use next to this client."""
        return self.connection.world

    @property
    def provenance(self) -> dict[str, Any]:
        """Where the answers come from (the cassette's provenance when there is one)."""
        return self.connection.provenance

    @property
    def cassette(self) -> Cassette | None:
        """The cassette replayed or recorded; None in live, local and reference mode."""
        return self.connection.cassette

    @property
    def fallback(self) -> Fallback | None:
        """Offline mode: what answers requests the cassette lacks (`.answered` counts them)."""
        return self.connection.fallback

    def finish_recording(self) -> Path | None:
        """Record mode: check the recording and, when it is good, replace the cassette file
        with it (see `Cassette.finish`); None when nothing new was recorded.

        `close()`, the end of a `with make_client("record", ...) as client:` block and the
        end of the program call it too.

        Raises:
            RecordingFailed: the recording is not good; the cassette file is unchanged and
                what was recorded stays in NAME.json.partial.
        """
        tape = self.cassette
        if self.mode != "record" or tape is None or not tape.unfinished:
            return None
        if not self.connection.finishes_recording:  # `record LESSON` finishes it itself
            return None
        return tape.finish()

    def close(self) -> None:
        """Close the connection; in record mode, finish the recording first."""
        try:
            self.finish_recording()
        finally:
            super().close()

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:  # a run that raised is not a recording to keep: NAME.json.partial stays
            super().close()

    def copy(self, **options: Any) -> Self:  # the SDK builds the copy with self.__class__
        twin = super().copy(**options)
        twin._connection = self._connection
        return twin

    with_options = copy

    def _make_status_error(self, err_msg: str, *, body: object,
                           response: httpx2.Response) -> openai.APIStatusError:
        # A provider may echo the key in an error: keep it out of messages and `exc.body`,
        # the configured key and the one this client sends (it may come from with_options).
        known = self._connection.redact if self._connection else Redactor()
        redact = known.adding(self.api_key if isinstance(self.api_key, str) else None)
        return super()._make_status_error(redact(err_msg), body=_redact_json(body, redact),
                                          response=response)

    def describe(self) -> str:
        """A few lines in Chinese: mode, model and where the answers come from."""
        c = self.connection
        source = c.provenance.get("source", "?")
        lines = [f"运行模式：{c.mode}", f"模型：{c.model}（{SOURCE_WORDS.get(source, source)}）"]
        if c.cassette is not None:
            lines.append(f"录制文件：{c.cassette.where}")
            when = c.provenance.get("recorded_at", "?")
            how = c.provenance.get("recorded_with", "?")
            lines.append(f"录制时间：{when}；录制方式：{how}")
        if c.provenance.get("endpoint"):
            lines.append(f"接口：{endpoint_words(c.provenance['endpoint'])}")
        if c.mode == "live" and c.timeout is not None:
            lines.append(f"等待：连接 {c.timeout.connect:g} s，响应 {c.timeout.read:g} s；"
                         f"失败后重试 {c.max_retries} 次")
        if c.mode == "record" and c.cassette is not None:
            lines.append(f"录制中：先写进 {c.cassette.partial_path.name}；client.close()、"
                         "with 块结束或程序退出时检查，无误才替换正式的录制文件")
        if c.fallback is not None:
            lines.append(f"回退：录制文件里没有的请求由{c.fallback.about}回答，"
                         f"回答的 model 字段标为 “{c.fallback.label}”"
                         f"（已回退 {c.fallback.answered} 次）")
        return "\n".join(lines)


def endpoint_words(endpoint: str) -> str:
    """A provenance's `endpoint` (English, as cassettes store it) for a Chinese reader."""
    if endpoint.startswith("scripted transport"):
        return "程序里的脚本参考模型，不经过网络"
    if endpoint.startswith("llama.cpp server"):
        return "本机 127.0.0.1 上的 llama.cpp 服务"
    return endpoint  # a host name or URL reads the same in any language


def pages_words(note: str) -> str:
    """A provenance's `pages` note (English, as cassettes store it) for a Chinese reader."""
    from .pages import BUNDLED_PAGES, BUNDLED_PAGES_NOTE, OTHER_PAGES_NOTE

    if not note.startswith(BUNDLED_PAGES_NOTE):
        return note
    files = "，".join(f"vibe_agent/data/{file} 充当 {url}" for url, file in BUNDLED_PAGES.items())
    others = "；其他网址走网络" if note.endswith(OTHER_PAGES_NOTE) else ""
    return f"课程自带的替身页面（{files}；为课程写的，不是下载的）{others}"


def _redact_json(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_json(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v, redact) for v in value]
    return value


# ---------------------------------------------------------------------------
# Settings: environment first, then an optional .env file
# ---------------------------------------------------------------------------


def find_dotenv() -> Path | None:
    """`.env` in the current folder, else in its parent (notebooks run in notebooks/)."""
    for folder in (Path.cwd(), Path.cwd().parent):
        if (folder / ".env").is_file():
            return folder / ".env"
    return None


def read_dotenv(path: Path) -> dict[str, str]:
    """The KEY=VALUE settings of a .env file, by python-dotenv's rules (inline `# comments`,
    quotes, `export`); a UTF-8 BOM is fine, a file that is not UTF-8 is a ConfigError."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path} 不是 UTF-8 编码的文本（第 {line} 行有字节 "
                          f"0x{raw[exc.start]:02x}）。用编辑器把它另存为 UTF-8 再试。") from None
    values = dotenv_values(stream=io.StringIO(text))
    return {key: value for key, value in values.items() if value is not None}


def settings() -> dict[str, str]:
    """Environment variables, completed by `.env` in the current folder or its parent."""
    path = find_dotenv()
    found = read_dotenv(path) if path else {}
    return found | dict(os.environ)


def resolve_mode(mode: str | None, env: dict[str, str]) -> str:
    """The run mode: the argument, else VIBE_AGENT_MODE, else live with a key, else offline."""
    chosen = (mode or env.get("VIBE_AGENT_MODE") or "").strip().lower()
    if not chosen:
        chosen = "live" if env.get("OPENAI_API_KEY") else "offline"
    if chosen not in MODES:
        raise ConfigError(f"未知的运行模式 {chosen!r}，可选：{', '.join(MODES)}。")
    return chosen


def _number(env: dict[str, str], name: str, default: float, *, whole: bool = False) -> float:
    text = (env.get(name) or "").strip()
    if not text:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = -1
    if value < 0 or (not whole and value == 0):
        kind = "不小于 0 的整数" if whole else "大于 0 的秒数"
        raise ConfigError(f"{name}={text!r} 不对：应该是{kind}，例如 {name}={default:g}。")
    return value


def live_limits(env: dict[str, str]) -> tuple[httpx2.Timeout, int]:
    """Live mode's timeouts and retries, from VIBE_AGENT_TIMEOUT (seconds without an
    answer), VIBE_AGENT_CONNECT_TIMEOUT and VIBE_AGENT_MAX_RETRIES."""
    read = _number(env, "VIBE_AGENT_TIMEOUT", LIVE_TIMEOUT)
    connect = _number(env, "VIBE_AGENT_CONNECT_TIMEOUT", CONNECT_TIMEOUT)
    retries = int(_number(env, "VIBE_AGENT_MAX_RETRIES", LIVE_RETRIES, whole=True))
    return httpx2.Timeout(read, connect=connect), retries


def secrets_of(env: dict[str, str]) -> Redactor:
    """What must never be written or printed: the key, and a password in the base URL."""
    password = httpx2.URL(env.get("OPENAI_BASE_URL") or "http://x").password
    return Redactor([env.get("OPENAI_API_KEY"), password])


def cassette_dir(env: dict[str, str] | None = None) -> Path:
    """Where cassettes live: VIBE_AGENT_CASSETTES, else the repo's notebooks/cassettes."""
    env = os.environ if env is None else env
    if env.get("VIBE_AGENT_CASSETTES"):
        return Path(env["VIBE_AGENT_CASSETTES"])
    return Path(__file__).resolve().parents[2] / "notebooks" / "cassettes"


def cassette_path(name: str | os.PathLike[str], env: dict[str, str] | None = None) -> Path:
    """A cassette name ("demo_reference") or a path (str or os.PathLike) to a .json file."""
    if not isinstance(name, str):
        return Path(name)
    if name.endswith(".json") or "/" in name or os.sep in name:
        return Path(name)
    return cassette_dir(env) / f"{name}.json"


# ---------------------------------------------------------------------------
# Making the client
# ---------------------------------------------------------------------------


def _client(connection: Connection, transport: httpx2.BaseTransport | None, *, base_url: str,
            api_key: str, max_retries: int = 0, timeout: float | httpx2.Timeout = LIVE_TIMEOUT,
            auth: httpx2.BasicAuth | None = None) -> CourseClient:
    http = (openai.DefaultHttpxClient(transport=transport, auth=auth)
            if transport is not None or auth is not None else None)
    return CourseClient(connection=connection, api_key=api_key, base_url=base_url,
                        http_client=http, max_retries=max_retries, timeout=timeout)


def _live_settings(env: dict[str, str]) -> tuple[str, str, str]:
    key = env.get("OPENAI_API_KEY", "")
    base_url = env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    model = env.get("VIBE_AGENT_MODEL", "")
    if not key:
        raise ConfigError("在线模式需要 OPENAI_API_KEY（本地服务如 Ollama 可以随便填一个值）。")
    if not model:
        raise ConfigError("在线模式需要 VIBE_AGENT_MODEL，例如 gpt-4o-mini、deepseek-chat、"
                          "qwen-plus。README 里有各家服务的配置示例。")
    return key, base_url, model


def _pages(pages: str | httpx2.BaseTransport | None) -> tuple[httpx2.BaseTransport | None,
                                                              str | None]:
    """The transport for the tools' pages and the provenance note it carries."""
    if pages is None or pages == "network":
        return None, None
    if pages == "bundled":
        from .pages import BundledPages

        bundled = BundledPages(other=httpx2.HTTPTransport())
        return bundled, bundled.provenance_note
    if isinstance(pages, httpx2.BaseTransport):
        return pages, getattr(pages, "provenance_note", None)
    raise ConfigError(f"pages= 只能是 {' / '.join(map(repr, PAGES))} 或一个 httpx2 传输层，"
                      f"收到的是 {pages!r}。")


def _real_world(pages: httpx2.BaseTransport | None) -> World:
    return World(http=http_client(pages)) if pages is not None else World()


def _local_server() -> Any:
    from .local import shared_server

    return shared_server()


def make_client(mode: str | None = None, cassette: str | os.PathLike[str] | None = None, *,
                source: str | None = None,
                pages: str | httpx2.BaseTransport | None = None) -> CourseClient:
    """A genuine `openai.OpenAI` (a CourseClient) for the chosen mode (see the module docstring).

    Args:
        mode: offline, replay, record, live, local or reference; None reads VIBE_AGENT_MODE.
        cassette: the cassette name, e.g. "demo_reference", or a path (str or os.PathLike).
            Needed by replay and record; offline without one answers everything by the
            fallback model.
        source: what record mode records from: reference, local or live. The variable
            VIBE_AGENT_RECORD_SOURCE overrides it; without either, live when a key is set,
            else reference.
        pages: where the tools' pages come from when they are not replayed: "network"
            (the default), "bundled" (the course's own pages, vibe_agent/data/, for their
            addresses; others from the network) or an httpx2 transport. Replay serves the
            recorded pages in every case.
    """
    env = settings()
    chosen = resolve_mode(mode, env)
    if chosen in ("replay", "record") and not cassette:
        raise ConfigError(f"{chosen} 模式需要指定录制文件：make_client(cassette=\"名字\")。")
    page_transport, pages_note = _pages(pages)
    if chosen == "replay":
        return _replay(cassette_path(cassette, env))
    if chosen == "offline":
        path = cassette_path(cassette, env) if cassette else None
        return _offline(path, env, pages, page_transport)
    if chosen == "record":
        return _record(cassette_path(cassette, env), env, source, page_transport, pages_note,
                       recorded_from_code(cassette, mode, source, env))
    provenance = {"pages": pages_note} if pages_note else {}
    world = _real_world(page_transport)
    if chosen == "live":
        return _live(env, world, provenance)
    if chosen == "local":
        return _local(world, provenance)
    return _reference(world, provenance)


def _replay(path: Path) -> CourseClient:
    tape = Cassette.load(path)
    model = tape.provenance.get("request_model") or tape.provenance["model"]
    connection = Connection("replay", model, replay_world(tape), tape.provenance, tape)
    return _client(connection, ReplayTransport(tape), base_url=REPLAY_BASE_URL,
                   api_key="replay-no-key")


def _fallback(env: dict[str, str], pages: str | httpx2.BaseTransport | None,
              page_transport: httpx2.BaseTransport | None) -> Fallback:
    kind = (env.get("VIBE_AGENT_FALLBACK") or "reference").strip().lower()
    if kind not in FALLBACKS:
        raise ConfigError(f"VIBE_AGENT_FALLBACK={kind!r} 不对，可选：{', '.join(FALLBACKS)}。")
    if page_transport is None and pages is None:  # offline: the course's pages, then the network
        page_transport, _ = _pages("bundled")
        pages = "bundled"
    pages_about = "课程自带的页面（vibe_agent/data/，其他网址走网络）" if pages == "bundled" \
        else "网络" if page_transport is None else "指定的页面来源"
    common = {"label": FALLBACK_LABELS[kind], "clock": system_clock, "pages_about": pages_about,
              "pages": page_transport or httpx2.HTTPTransport()}
    if kind == "local":  # the server starts on the first request the cassette lacks
        return Fallback(lambda: (httpx2.HTTPTransport(), _local_server().base_url),
                        about="本机的真实小模型 SmolLM2-135M", **common)
    return Fallback(lambda: (reference_model(), None), about="脚本参考模型（程序，不是 LLM）",
                    **common)


def _offline(path: Path | None, env: dict[str, str], pages: str | httpx2.BaseTransport | None,
             page_transport: httpx2.BaseTransport | None) -> CourseClient:
    fallback = _fallback(env, pages, page_transport)
    tape = Cassette.load(path) if path is not None else None
    if tape is None:
        model = REFERENCE_MODEL_NAME if fallback.label == FALLBACK_LABELS["reference"] \
            else _local_model_name()
        provenance: dict[str, Any] = {"source": "scripted-reference" if model ==
                                      REFERENCE_MODEL_NAME else "real-model", "model": model}
        world = World(now=system_clock, http=http_client(fallback.pages))
    else:
        model = tape.provenance.get("request_model") or tape.provenance["model"]
        provenance = dict(tape.provenance)
        world = replay_world(tape, fallback)
    provenance["fallback"] = f"{fallback.label}: {fallback.about}"
    connection = Connection("offline", model, world, provenance, tape, fallback)
    return _client(connection, ReplayTransport(tape, fallback), base_url=REPLAY_BASE_URL,
                   api_key="offline-no-key", timeout=LOCAL_TIMEOUT)


def _local_model_name() -> str:
    from .local import LOCAL_MODEL_NAME

    return LOCAL_MODEL_NAME


def _upstream(source: str, env: dict[str, str]) -> tuple[httpx2.BaseTransport, str, str,
                                                         dict[str, Any]]:
    """Transport, base URL, model name and provenance for a record source."""
    if source == "reference":
        return (reference_model(), SCRIPTED_BASE_URL, REFERENCE_MODEL_NAME,
                {"source": "scripted-reference", "model": REFERENCE_MODEL_NAME,
                 "endpoint": "scripted transport (vibe_agent.scripted.reference_model)"})
    if source == "local":
        from .local import LOCAL_MODEL_INFO, LOCAL_MODEL_NAME

        server = _local_server()
        return (httpx2.HTTPTransport(), server.base_url, LOCAL_MODEL_NAME,
                {"source": "real-model", "model": LOCAL_MODEL_NAME, **LOCAL_MODEL_INFO,
                 "endpoint": "llama.cpp server on 127.0.0.1"})
    _, base_url, model = _live_settings(env)
    return (httpx2.HTTPTransport(), base_url, model,
            {"source": "live-provider", "model": model, "endpoint": urlsplit(base_url).hostname})


def package_version() -> str:
    """vibe-agent's version: installed metadata, else pyproject.toml (a source checkout)."""
    try:
        return version("vibe-agent")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


_RECORDING: dict[Path, Cassette] = {}  # cassettes being recorded in this process


_FINISH_AT_EXIT: dict[Path, Cassette] = {}  # recordings made from code (not by the CLI)


@atexit.register
def _finish_recordings() -> None:
    """At the end of the program, finish every recording made from code that nobody
    finished (a script or a notebook kernel that never called close()); a failed one
    says why, on stderr. A script that died of an exception keeps NAME.json.partial."""
    crashed = hasattr(sys, "last_value") and "ipykernel" not in sys.modules
    for tape in list(_FINISH_AT_EXIT.values()):
        if not tape.unfinished:
            continue
        if crashed:
            print(f"程序因为异常结束：{tape.partial_path} 没有换成正式的录制文件"
                  f"（{_remedy_hint(tape)}）", file=sys.stderr)
            continue
        try:
            path = tape.finish()
        except CassetteError as exc:
            print(exc, file=sys.stderr)
        else:
            print(f"已保存录制文件 {path}", file=sys.stderr)


def _remedy_hint(tape: Cassette) -> str:
    return (f"确认没问题的话：from vibe_agent.course.cassette import promote_partial; "
            f"promote_partial(\"{tape.partial_path}\")")


def recorded_from_code(cassette: str | os.PathLike[str], mode: str | None,
                       source: str | None, env: dict[str, str]) -> str:
    """How a recording made from code was made: the make_client call that ran, and the
    notebook or script when known. Never a command nobody ran."""
    args = [f"mode={mode!r}"] if mode else []
    args.append(f"cassette={os.fspath(cassette)!r}")
    if source:
        args.append(f"source={source!r}")
    text = f"从代码录制：make_client({', '.join(args)})"
    for name in ("VIBE_AGENT_MODE", "VIBE_AGENT_RECORD_SOURCE"):
        if env.get(name) and (name != "VIBE_AGENT_MODE" or not mode):
            text += f"，{name}={env[name]}"
    where = env.get("JPY_SESSION_NAME") or _script()  # Jupyter names the notebook there
    return text + (f"，在 {where} 里" if where else "")


def _script() -> str:
    """The script this program runs, if it is one (not a Jupyter kernel or pytest)."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if not main or "site-packages" in main or not Path(main).is_file():
        return ""
    return main


def _record(path: Path, env: dict[str, str], source: str | None,
            pages: httpx2.BaseTransport | None, pages_note: str | None,
            called_with: str) -> CourseClient:
    # VIBE_AGENT_RECORD_SOURCE overrides a notebook's own choice: one command
    # re-records every cassette from the same source (e.g. your live model).
    source = env.get("VIBE_AGENT_RECORD_SOURCE") or source or (
        "live" if env.get("OPENAI_API_KEY") else "reference")
    if source not in RECORD_SOURCES:
        raise ConfigError(f"未知的录制来源 {source!r}，可选：{', '.join(RECORD_SOURCES)}。")
    upstream, base_url, model, provenance = _upstream(source, env)
    provenance |= {
        "request_model": model,
        "recorded_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        # `record NAME` names its own command; from code, the call that ran
        "recorded_with": env.get("VIBE_AGENT_RECORDED_WITH") or called_with,
        "vibe_agent": package_version(),
        "openai_sdk": openai.__version__,
    }
    if pages_note:  # e.g. the course's stand-in pages
        provenance["pages"] = pages_note
    redact = secrets_of(env)
    tape = _RECORDING.get(path)  # a second client on the same cassette appends to it
    if tape is None or tape.provenance.get("request_model") != model:
        tape = _RECORDING[path] = Cassette(path.stem, provenance, [], path, autosave=True,
                                           redact=redact)
    base_url, auth = without_credentials(base_url)
    timeout, _ = live_limits(env)
    world = record_world(tape, system_clock, pages or httpx2.HTTPTransport())
    by_command = bool(env.get("VIBE_AGENT_RECORDED_WITH"))
    if not by_command:
        _FINISH_AT_EXIT[path] = tape
    connection = Connection("record", model, world, tape.provenance, tape, redact=redact,
                            finishes_recording=not by_command)
    return _client(connection, RecordTransport(tape, upstream), base_url=base_url,
                   api_key=env.get("OPENAI_API_KEY") or "record-no-key", auth=auth,
                   timeout=LOCAL_TIMEOUT if source == "local" else timeout)


def _live(env: dict[str, str], world: World, provenance: dict[str, Any]) -> CourseClient:
    key, base_url, model = _live_settings(env)
    timeout, retries = live_limits(env)
    base_url, auth = without_credentials(base_url)
    provenance = {"source": "live-provider", "model": model,
                  "endpoint": urlsplit(base_url).hostname, **provenance}
    connection = Connection("live", model, world, provenance, timeout=timeout,
                            max_retries=retries, redact=secrets_of(env))
    return _client(connection, None, base_url=base_url, api_key=key, auth=auth,
                   max_retries=retries, timeout=timeout)


def _local(world: World, provenance: dict[str, Any]) -> CourseClient:
    from .local import LOCAL_MODEL_INFO, LOCAL_MODEL_NAME

    server = _local_server()
    provenance = {"source": "real-model", "model": LOCAL_MODEL_NAME, **LOCAL_MODEL_INFO,
                  "endpoint": server.base_url, **provenance}
    connection = Connection("local", LOCAL_MODEL_NAME, world, provenance)
    return _client(connection, None, base_url=server.base_url, api_key="local-no-key",
                   timeout=LOCAL_TIMEOUT)


def _reference(world: World, provenance: dict[str, Any]) -> CourseClient:
    provenance = {"source": "scripted-reference", "model": REFERENCE_MODEL_NAME,
                  "endpoint": "scripted transport", **provenance}
    connection = Connection("reference", REFERENCE_MODEL_NAME, world, provenance)
    return _client(connection, reference_model(), base_url=SCRIPTED_BASE_URL,
                   api_key="scripted-no-key")
