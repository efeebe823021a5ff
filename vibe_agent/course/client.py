"""One client, several ways to run: `make_client()` always returns a genuine `openai.OpenAI`.

    mode        where responses come from                      tools' clock and pages
    replay      a cassette (no network, no key)                the same cassette
    record      a live endpoint / local model / the reference  real, written to the cassette
    live        OPENAI_BASE_URL + OPENAI_API_KEY + VIBE_AGENT_MODEL   real
    local       SmolLM2-135M on 127.0.0.1 (llama.cpp)          real
    reference   the scripted reference model (not an LLM)      real

The mode comes from the argument, else VIBE_AGENT_MODE, else "live" when an API
key is configured and "replay" otherwise. Settings are read from the environment
and from a `.env` file if one exists — only when `make_client` is called, never
at import time. Only the HTTP transport differs between modes: the code above it
(your code, the loop, the tools) is the same in all of them.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai

from ..world import World, real_world, system_clock
from .cassette import Cassette, RecordTransport, ReplayTransport, record_world, replay_world
from .reference import REFERENCE_MODEL_NAME, reference_model

MODES = ("replay", "record", "live", "local", "reference")
RECORD_SOURCES = ("reference", "local", "live")
LIVE_TIMEOUT = 60.0  # seconds for one model request
LOCAL_TIMEOUT = 600.0  # a 135M model on a busy 2-core CPU can need minutes for a long prompt


class ConfigError(ValueError):
    """The run mode cannot be set up as configured (a message for people, in Chinese)."""


@dataclass
class ClientInfo:
    """What a client made by `make_client` is connected to."""

    mode: str
    model: str
    world: World
    provenance: dict[str, Any]
    cassette: Cassette | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """A few lines in Chinese for the set-up self-check."""
        source = {
            "scripted-reference": "脚本参考模型（确定性的程序，不是 LLM）",
            "real-model": "真实的小模型",
            "live-provider": "在线模型服务",
        }.get(self.provenance.get("source", ""), self.provenance.get("source", "?"))
        lines = [f"运行模式：{self.mode}", f"模型：{self.model}（{source}）"]
        if self.cassette is not None:
            lines.append(f"录音文件：{self.cassette.path or self.cassette.name}")
            when = self.provenance.get("recorded_at", "?")
            how = self.provenance.get("recorded_with", "?")
            lines.append(f"录制时间：{when}；录制方式：{how}")
        if self.provenance.get("endpoint"):
            lines.append(f"接口：{self.provenance['endpoint']}")
        return "\n".join(lines)


_INFO: weakref.WeakKeyDictionary[openai.OpenAI, ClientInfo] = weakref.WeakKeyDictionary()
_RECORDING: dict[Path, Cassette] = {}  # cassettes being recorded in this process


def client_info(client: openai.OpenAI) -> ClientInfo:
    """The mode, model, world and provenance behind a client from `make_client`."""
    try:
        return _INFO[client]
    except KeyError:
        raise ConfigError("这个 client 不是 make_client() 创建的，没有运行模式信息。") from None


def model_name(client: openai.OpenAI) -> str:
    """The model name to send with requests on this client."""
    return client_info(client).model


def world_of(client: openai.OpenAI | None) -> World:
    """The clock and HTTP client the tools should use next to this client."""
    if client is None or client not in _INFO:
        return real_world()
    return _INFO[client].world


# ---------------------------------------------------------------------------
# Settings: environment first, then an optional .env file
# ---------------------------------------------------------------------------


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a .env file (comments and blank lines skipped)."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        values[key.strip()] = value.strip().strip("'\"")
    return values


def settings() -> dict[str, str]:
    """Environment variables, completed by `.env` in the current folder or its parent."""
    found: dict[str, str] = {}
    for folder in (Path.cwd(), Path.cwd().parent):
        if (folder / ".env").is_file():
            found = read_dotenv(folder / ".env")
            break
    return found | dict(os.environ)


def resolve_mode(mode: str | None, env: dict[str, str]) -> str:
    chosen = (mode or env.get("VIBE_AGENT_MODE") or "").strip().lower()
    if not chosen:
        chosen = "live" if env.get("OPENAI_API_KEY") else "replay"
    if chosen not in MODES:
        raise ConfigError(f"未知的运行模式 {chosen!r}，可选：{', '.join(MODES)}。")
    return chosen


def cassette_dir(env: dict[str, str] | None = None) -> Path:
    """Where cassettes live: VIBE_AGENT_CASSETTES, else the repo's notebooks/cassettes."""
    env = os.environ if env is None else env
    if env.get("VIBE_AGENT_CASSETTES"):
        return Path(env["VIBE_AGENT_CASSETTES"])
    return Path(__file__).resolve().parents[2] / "notebooks" / "cassettes"


def cassette_path(name: str, env: dict[str, str] | None = None) -> Path:
    """A cassette name ("demo_reference") or a path to a .json file."""
    if name.endswith(".json") or os.sep in name:
        return Path(name)
    return cassette_dir(env) / f"{name}.json"


# ---------------------------------------------------------------------------
# Making the client
# ---------------------------------------------------------------------------


def _openai_client(transport: httpx2.BaseTransport | None, *, base_url: str, api_key: str,
                   max_retries: int, timeout: float = LIVE_TIMEOUT) -> openai.OpenAI:
    http_client = httpx2.Client(transport=transport, timeout=timeout) if transport else None
    return openai.OpenAI(api_key=api_key, base_url=base_url, http_client=http_client,
                         max_retries=max_retries, timeout=timeout)


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


def _provenance(source: str, model: str, **more: Any) -> dict[str, Any]:
    return {"source": source, "model": model, **more}


def _upstream(source: str, env: dict[str, str]) -> tuple[httpx2.BaseTransport, str, str,
                                                         dict[str, Any]]:
    """Transport, base URL, model name and provenance for a record source."""
    if source == "reference":
        return (reference_model(), "http://scripted.invalid/v1", REFERENCE_MODEL_NAME,
                _provenance("scripted-reference", REFERENCE_MODEL_NAME,
                            endpoint="scripted transport (vibe_agent.scripted.reference_model)"))
    if source == "local":
        from .local import LOCAL_MODEL_INFO, LOCAL_MODEL_NAME, shared_server

        server = shared_server()
        return (httpx2.HTTPTransport(), server.base_url, LOCAL_MODEL_NAME,
                _provenance("real-model", LOCAL_MODEL_NAME, **LOCAL_MODEL_INFO,
                            endpoint="llama.cpp server on 127.0.0.1"))
    _, base_url, model = _live_settings(env)
    return (httpx2.HTTPTransport(), base_url, model,
            _provenance("live-provider", model, endpoint=urlsplit(base_url).hostname))


def make_client(mode: str | None = None, cassette: str | None = None, *,
                source: str | None = None,
                pages: httpx2.BaseTransport | None = None) -> openai.OpenAI:
    """A genuine `openai.OpenAI` for the chosen mode (see the module docstring).

    Args:
        mode: replay, record, live, local or reference; None reads VIBE_AGENT_MODE.
        cassette: the cassette name (replay and record), e.g. "demo_reference".
        source: what record mode records from: reference, local or live. The variable
            VIBE_AGENT_RECORD_SOURCE overrides it; without either, live when a key is set,
            else reference.
        pages: record mode only: the transport that fetches pages (default: the network).
    """
    env = settings()
    chosen = resolve_mode(mode, env)
    if chosen in ("replay", "record") and not cassette:
        raise ConfigError(f"{chosen} 模式需要指定录音：make_client(cassette=\"名字\")。")
    if chosen == "replay":
        client, info = _replay(cassette or "", env)
    elif chosen == "record":
        client, info = _record(cassette or "", env, source, pages)
    elif chosen == "live":
        client, info = _live(env)
    elif chosen == "local":
        client, info = _local()
    else:
        client, info = _reference()
    _INFO[client] = info
    return client


def _replay(cassette: str, env: dict[str, str]) -> tuple[openai.OpenAI, ClientInfo]:
    tape = Cassette.load(cassette_path(cassette, env))
    client = _openai_client(ReplayTransport(tape), base_url="http://replay.invalid/v1",
                            api_key="replay-no-key", max_retries=0)
    model = tape.provenance.get("request_model") or tape.provenance["model"]
    return client, ClientInfo("replay", model, replay_world(tape), tape.provenance, tape)


def _record(cassette: str, env: dict[str, str], source: str | None,
            pages: httpx2.BaseTransport | None) -> tuple[openai.OpenAI, ClientInfo]:
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
        # `record LESSON` runs a notebook: it names the command that re-records it
        "recorded_with": env.get("VIBE_AGENT_RECORDED_WITH")
        or f"python -m vibe_agent record {cassette} --source {source}",
        "vibe_agent": version("vibe-agent"),
        "openai_sdk": openai.__version__,
    }
    if getattr(pages, "provenance_note", None):  # e.g. the course's stand-in pages
        provenance["pages"] = pages.provenance_note
    path = cassette_path(cassette, env)
    tape = _RECORDING.get(path)  # a second client on the same cassette appends to it
    if tape is None or tape.provenance.get("request_model") != model:
        tape = _RECORDING[path] = Cassette(path.stem, provenance, [], path, autosave=True)
    client = _openai_client(RecordTransport(tape, upstream), base_url=base_url,
                            api_key=env.get("OPENAI_API_KEY") or "record-no-key", max_retries=0,
                            timeout=LOCAL_TIMEOUT if source == "local" else LIVE_TIMEOUT)
    world = record_world(tape, system_clock, pages or httpx2.HTTPTransport())
    return client, ClientInfo("record", model, world, tape.provenance, tape)


def _live(env: dict[str, str]) -> tuple[openai.OpenAI, ClientInfo]:
    key, base_url, model = _live_settings(env)
    client = openai.OpenAI(api_key=key, base_url=base_url, timeout=LIVE_TIMEOUT)
    provenance = _provenance("live-provider", model, endpoint=urlsplit(base_url).hostname)
    return client, ClientInfo("live", model, real_world(), provenance)


def _local() -> tuple[openai.OpenAI, ClientInfo]:
    from .local import LOCAL_MODEL_INFO, LOCAL_MODEL_NAME, shared_server

    server = shared_server()
    client = openai.OpenAI(api_key="local-no-key", base_url=server.base_url, max_retries=0,
                           timeout=LOCAL_TIMEOUT)
    provenance = _provenance("real-model", LOCAL_MODEL_NAME, **LOCAL_MODEL_INFO,
                             endpoint=server.base_url)
    return client, ClientInfo("local", LOCAL_MODEL_NAME, real_world(), provenance)


def _reference() -> tuple[openai.OpenAI, ClientInfo]:
    model = reference_model()
    provenance = _provenance("scripted-reference", REFERENCE_MODEL_NAME,
                             endpoint="scripted transport")
    return model.client(), ClientInfo("reference", REFERENCE_MODEL_NAME, real_world(),
                                      provenance, extras={"model": model})
