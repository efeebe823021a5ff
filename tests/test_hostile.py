"""A hostile provider and careless tools: the loop never crashes, hangs or breaks its history.

Two parts:
- a fault matrix: one row per hostile shape (a 200 that is not a chat completion,
  HTTP errors, a dropped connection, duplicate ids, arguments that crash a parser,
  tools that hang or return bytes, a 10 MB result ...), each with the stop reason and
  the line of explanation it must end with;
- a property fuzz (hypothesis): scripts of malformed and valid replies, checked
  against the loop's contract.

Responses are raw bytes served by an `httpx2.MockTransport` under a genuine
`openai.OpenAI` client, so the SDK parses (or fails to parse) them exactly as it
would from a real provider.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from vibe_agent.loop import StopReason, run_agent
from vibe_agent.registry import ToolRegistry

MODEL = "hostile-test"
CJK = re.compile(r"[\u4e00-\u9fff]")

# ---------------------------------------------------------------------------
# A provider that answers with whatever bytes the test gives it
# ---------------------------------------------------------------------------

Served = httpx2.Response | Exception | Callable[[dict[str, Any]], httpx2.Response]


@dataclass
class HostileProvider:
    """Serves one scripted response per request; records every request body."""

    script: list[Served]
    requests: list[dict[str, Any]] = field(default_factory=list)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        served = self.script[min(len(self.requests), len(self.script)) - 1]
        if isinstance(served, Exception):
            raise type(served)(str(served))  # a fresh one: scripts are reused by the fuzz
        if callable(served):
            return served(body)
        return httpx2.Response(served.status_code, headers=served.headers,
                               content=served.content)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(api_key="hostile-no-key", base_url="http://hostile.invalid/v1",
                             http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
                             max_retries=0)


def completion(message: Any = None, **fields: Any) -> dict[str, Any]:
    """A chat completion body whose first choice carries `message` (fields override)."""
    return {"id": "chatcmpl-hostile", "object": "chat.completion", "created": 1,
            "model": MODEL, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "stop"}]} | fields


def tool_call(name: Any = "ping", arguments: Any = "{}", id: Any = "c1",
              type: Any = "function") -> dict[str, Any]:
    return {"id": id, "type": type, "function": {"name": name, "arguments": arguments}}


def asks(*calls: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, json=completion({"role": "assistant", "content": None,
                                                 "tool_calls": list(calls)}))


def says(text: str = "done") -> httpx2.Response:
    return httpx2.Response(200, json=completion({"role": "assistant", "content": text}))


def raw(body: str | bytes, status: int = 200, content_type: str = "application/json"
        ) -> httpx2.Response:
    return httpx2.Response(status, content=body.encode() if isinstance(body, str) else body,
                           headers={"content-type": content_type})


def error(status: int, message: str = "hostile failure") -> httpx2.Response:
    return httpx2.Response(status, json={"error": {"message": message, "type": "x",
                                                   "param": None, "code": None}})


# ---------------------------------------------------------------------------
# Tools a careless author might write
# ---------------------------------------------------------------------------


class Opaque:
    """An object that is neither text nor JSON data."""


def make_registry(hang_seconds: float = 5.0) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def ping(text: str = "") -> str:
        """Answer pong.

        Args:
            text: anything.
        """
        return f"pong {text}".strip()

    @registry.tool
    def raw_bytes() -> bytes:
        """Return bytes."""
        return "字节".encode()

    @registry.tool
    def a_set() -> set[int]:
        """Return a set."""
        return {3, 1, 2}

    @registry.tool
    def an_object() -> Opaque:
        """Return an arbitrary object."""
        return Opaque()

    @registry.tool
    def huge() -> str:
        """Return 10 MB of text."""
        return "x" * 10_000_000

    @registry.tool
    def not_utf8_name() -> str:
        """Echo a file name that is not UTF-8, the way Python decodes it (a lone surrogate)."""
        return os.fsdecode(b"data\xff.csv")

    @registry.tool(timeout=0.2)
    def hangs(n: int = 0) -> str:
        """Block far longer than the time limit.

        Args:
            n: anything.
        """
        time.sleep(hang_seconds)
        return "too late"

    return registry


# ---------------------------------------------------------------------------
# The fault matrix
# ---------------------------------------------------------------------------


@dataclass
class Fault:
    """One hostile situation and how the run must end."""

    id: str
    script: list[Served]
    reason: StopReason
    says: str = ""  # a fragment of the stop message (provider errors) or the tool text
    options: dict[str, Any] = field(default_factory=dict)


def then_answer(*served: Served) -> list[Served]:
    return [*served, says("done")]


FAULTS = [
    # 1. a 200 that is not a chat completion
    Fault("html-page", [raw("<!DOCTYPE html><html><body>Open WebUI</body></html>",
                            content_type="text/html")], StopReason.PROVIDER_ERROR, "/v1"),
    Fault("html-labelled-json", [raw("<html><body>login</body></html>")],
          StopReason.PROVIDER_ERROR, "/v1"),
    Fault("invalid-json", [raw('{"choices": [')], StopReason.PROVIDER_ERROR, "不是合法的 JSON"),
    Fault("empty-body", [raw("")], StopReason.PROVIDER_ERROR, "不是合法的 JSON"),
    Fault("not-utf8", [raw(b'{"x": "\xff\xfe\xfa"}')], StopReason.PROVIDER_ERROR, "UTF-8"),
    Fault("json-list", [raw("[1, 2, 3]")], StopReason.PROVIDER_ERROR, "不是 chat completion"),
    Fault("json-string", [raw('"hello"')], StopReason.PROVIDER_ERROR, "不是 chat completion"),
    Fault("plain-text", [raw("upstream says hi", content_type="text/plain")],
          StopReason.PROVIDER_ERROR, "不是 chat completion"),
    Fault("message-null", [httpx2.Response(200, json=completion(None))],
          StopReason.PROVIDER_ERROR, "没有 message"),
    Fault("choices-null", [httpx2.Response(200, json=completion(choices=None))],
          StopReason.PROVIDER_ERROR, "没有 choices"),
    Fault("choices-empty", [httpx2.Response(200, json=completion(choices=[]))],
          StopReason.PROVIDER_ERROR, "没有 choices"),
    Fault("choices-object", [httpx2.Response(200, json=completion(choices={"0": {}}))],
          StopReason.PROVIDER_ERROR, "没有 choices"),
    Fault("choice-is-string", [httpx2.Response(200, json=completion(choices=["hi"]))],
          StopReason.PROVIDER_ERROR, "没有 message"),
    Fault("content-not-text", [httpx2.Response(200, json=completion(
        {"role": "assistant", "content": {"text": "hi"}}))], StopReason.PROVIDER_ERROR, "content"),
    Fault("custom-tool-call", [asks({"id": "c1", "type": "custom",
                                     "custom": {"name": "ping", "input": "x"}})],
          StopReason.PROVIDER_ERROR, "'custom'"),
    Fault("arguments-object", [asks(tool_call(arguments={"text": "hi"}))],
          StopReason.PROVIDER_ERROR, "必须是字符串"),
    Fault("name-not-string", [asks(tool_call(name=7))], StopReason.PROVIDER_ERROR,
          "必须是字符串"),
    Fault("no-function", [asks({"id": "c1", "type": "function"})], StopReason.PROVIDER_ERROR,
          "没有 function"),
    Fault("tool-calls-string", [httpx2.Response(200, json=completion(
        {"role": "assistant", "content": None, "tool_calls": "ping"}))],
          StopReason.PROVIDER_ERROR, "不是列表"),
    # 5. ids: a result is matched to its call by id
    Fault("duplicate-ids", [asks(tool_call(id="same"), tool_call(id="same"))],
          StopReason.PROVIDER_ERROR, "'same'"),
    Fault("null-id", [asks(tool_call(id=None))], StopReason.PROVIDER_ERROR, "没有 id"),
    Fault("empty-id", [asks(tool_call(id=""))], StopReason.PROVIDER_ERROR, "没有 id"),
    Fault("null-name", then_answer(asks(tool_call(name=None))), StopReason.ANSWERED,
          "has no tool name"),
    Fault("empty-name", then_answer(asks(tool_call(name=""))), StopReason.ANSWERED,
          "has no tool name"),
    Fault("name-with-a-dot", then_answer(asks(tool_call(name="functions.ping"))),
          StopReason.ANSWERED, "unknown tool 'functions.ping'"),
    Fault("chinese-name", then_answer(asks(tool_call(name="计算器"))), StopReason.ANSWERED,
          "unknown tool '计算器'"),
    # text a provider cannot take back: lone surrogates from a tool or from the provider
    Fault("surrogate-in-result", then_answer(asks(tool_call("not_utf8_name"))),
          StopReason.ANSWERED, "data\ufffd.csv"),
    Fault("surrogate-in-content", then_answer(raw(json.dumps(completion(  # "\\udcff" in JSON
        {"role": "assistant", "content": "look at \udcff", "tool_calls": [tool_call()]})))),
          StopReason.ANSWERED, "pong"),
    Fault("surrogate-in-arguments", then_answer(asks(tool_call(
        arguments='{"text": "\\udcff"}'))), StopReason.ANSWERED, "pong \ufffd"),
    Fault("null-arguments", then_answer(asks(tool_call(arguments=None))), StopReason.ANSWERED,
          "pong"),
    Fault("empty-arguments", then_answer(asks(tool_call(arguments=""))), StopReason.ANSWERED,
          "pong"),
    Fault("missing-type", then_answer(asks({"id": "c1", "function": {
        "name": "ping", "arguments": "{}"}})), StopReason.ANSWERED, "pong"),
    # HTTP errors and a connection that fails
    Fault("http-400", [error(400, "bad request")], StopReason.PROVIDER_ERROR, "HTTP 400"),
    Fault("http-401", [error(401, "invalid key")], StopReason.PROVIDER_ERROR, "HTTP 401"),
    Fault("http-404-html", [raw("<html>not found</html>", 404, "text/html")],
          StopReason.PROVIDER_ERROR, "HTTP 404 和一个 HTML 网页，不是 API 的回答：OPENAI_BASE_URL"),
    Fault("http-502-html", [raw("<html>bad gateway</html>", 502, "text/html")],
          StopReason.PROVIDER_ERROR, "HTTP 502 和一个 HTML 网页，不是 API 的回答。"),
    Fault("multi-line-name", [lambda body: asks(tool_call(
        "no\nsuch", json.dumps({"n": len(body["messages"])})))], StopReason.TOOL_ERRORS,
          "最后一次是 no such"),
    Fault("http-429", [error(429, "slow down")], StopReason.PROVIDER_ERROR, "HTTP 429"),
    Fault("http-500", [error(500)], StopReason.PROVIDER_ERROR, "HTTP 500"),
    Fault("http-503-empty", [raw("", 503)], StopReason.PROVIDER_ERROR, "HTTP 503"),
    Fault("connection-reset", [httpx2.ReadError("connection reset by peer")],
          StopReason.PROVIDER_ERROR, "连不上模型服务"),
    Fault("connect-refused", [httpx2.ConnectError("connection refused")],
          StopReason.PROVIDER_ERROR, "连不上模型服务"),
    Fault("read-timeout", [httpx2.ReadTimeout("timed out")], StopReason.PROVIDER_ERROR, "超时"),
    Fault("error-in-round-2", [asks(tool_call()), error(502, "bad gateway")],
          StopReason.PROVIDER_ERROR, "HTTP 502"),
    # 2. argument text that crashes a parser
    Fault("deep-nesting", then_answer(asks(tool_call(arguments="[" * 100_000))),
          StopReason.ANSWERED, "nested too deeply"),
    Fault("huge-int", then_answer(asks(tool_call(arguments='{"text": ' + "9" * 5000 + "}"))),
          StopReason.ANSWERED, "too large"),
    Fault("invalid-json-arguments", then_answer(asks(tool_call(arguments='{"text": '))),
          StopReason.ANSWERED, "not valid JSON"),
    Fault("deep-nesting-repeated", [asks(tool_call(arguments="[" * 100_000))],
          StopReason.REPEATED_CALL, "not run again"),
    Fault("huge-int-repeated", [asks(tool_call(arguments="9" * 5000))],
          StopReason.REPEATED_CALL, "not run again"),
    # 3. tools that return something other than text
    Fault("returns-bytes", then_answer(asks(tool_call("raw_bytes"))), StopReason.ANSWERED,
          "字节"),
    Fault("returns-set", then_answer(asks(tool_call("a_set"))), StopReason.ANSWERED,
          "[1, 2, 3]"),
    Fault("returns-object", then_answer(asks(tool_call("an_object"))), StopReason.ANSWERED,
          "cannot be turned into text"),
    # 4. a tool that hangs
    Fault("hanging-tool", then_answer(asks(tool_call("hangs"))), StopReason.ANSWERED,
          "did not finish within 0.2 seconds"),
    Fault("hanging-tool-every-round", [asks(tool_call("hangs", id="h"))],
          StopReason.REPEATED_CALL, "not run again"),
    Fault("hanging-tool-brake", [lambda body: asks(tool_call(
        "hangs", json.dumps({"n": len(body["messages"])}), id="h"))], StopReason.TOOL_ERRORS,
          "工具连续失败 2 次", {"max_tool_errors": 2}),
    # 7. a 10 MB result
    Fault("ten-megabytes", then_answer(asks(tool_call("huge"))), StopReason.ANSWERED,
          "[truncated by the agent loop"),
    # spinning
    Fault("ping-pong", [lambda body: asks(tool_call(
        "ping" if len(body["messages"]) % 4 == 2 else "a_set", id="p"))], StopReason.CYCLE,
          "来回打转"),
]


VALID_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # what OpenAI accepts as a function name


def check_history(messages: list[dict[str, Any]]) -> None:
    """Every tool_call id is answered exactly once, right after its assistant message;
    every name is one a provider accepts, and the whole history encodes as UTF-8."""
    for i, message in enumerate(messages):
        ids = [call["id"] for call in message.get("tool_calls") or []]
        names = [call["function"]["name"] for call in message.get("tool_calls") or []]
        assert all(VALID_NAME.fullmatch(name) for name in names), f"messages[{i}]: {names}"
        answered = [m.get("tool_call_id") for m in messages[i + 1: i + 1 + len(ids)]]
        assert answered == ids, f"messages[{i}]: calls {ids} answered by {answered}"
        assert all(isinstance(call_id, str) and call_id for call_id in ids)
    requested = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == requested
    json.dumps(messages, ensure_ascii=False).encode("utf-8")  # plain JSON, sendable as UTF-8


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.id for fault in FAULTS])
def test_fault_matrix(fault: Fault):
    provider = HostileProvider(fault.script)
    started = time.perf_counter()
    result = run_agent(provider.client(), "hostile?", make_registry(), model=MODEL,
                       **fault.options)
    assert time.perf_counter() - started < 10  # nothing hangs
    assert result.stop_reason is fault.reason, result.message
    # one line of explanation, in Chinese, for every stop
    assert "\n" not in result.message and CJK.search(result.message)
    tool_texts = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert fault.says in " ".join([result.message, *tool_texts])
    # the trace agrees with what happened
    assert result.model_calls == len(provider.requests)
    assert [s.kind for s in result.trace].count("stop") == 1 and result.trace[-1].kind == "stop"
    check_history(result.messages)
    assert all(len(text) <= 20_200 for text in tool_texts)  # the history cap holds


def test_a_hanging_tool_is_abandoned_and_the_run_goes_on():
    provider = HostileProvider(then_answer(asks(tool_call("hangs"))))
    result = run_agent(provider.client(), "hang?", make_registry(), model=MODEL)
    step = next(s for s in result.trace if s.kind == "tool")
    assert (step.outcome, step.error_type) == ("timeout", "ToolTimeout")
    assert 150 < step.elapsed_ms < 2000
    assert result.messages[-2]["content"].startswith("Error:")
    assert result.ok


def test_a_ten_megabyte_result_is_cut_in_the_history_and_whole_in_the_trace():
    provider = HostileProvider(then_answer(asks(tool_call("huge"))))
    result = run_agent(provider.client(), "big?", make_registry(), model=MODEL)
    sent = provider.requests[1]["messages"][-1]["content"]
    assert len(sent) <= 20_000 and sent.endswith("10000000 characters, 9980093 cut]")
    assert len(next(s for s in result.trace if s.kind == "tool").result) == 10_000_000


@pytest.mark.parametrize(("tool", "result_type", "outcome"), [
    ("raw_bytes", "bytes", "ok"), ("a_set", "set", "ok"), ("an_object", "Opaque", "bad_result"),
    ("ping", None, "ok"),
], ids=["bytes", "set", "object", "str"])
def test_the_trace_keeps_the_type_a_tool_returned(tool, result_type, outcome):
    provider = HostileProvider(then_answer(asks(tool_call(tool))))
    result = run_agent(provider.client(), "types?", make_registry(), model=MODEL)
    step = next(s for s in result.trace if s.kind == "tool")
    assert (step.result_type, step.outcome) == (result_type, outcome)


def test_a_bad_id_is_named_and_never_sent_back():
    provider = HostileProvider([asks(tool_call(id="dup"), tool_call("a_set", id="dup"))])
    result = run_agent(provider.client(), "ids?", make_registry(), model=MODEL)
    assert "'dup'" in result.message
    assert [m["role"] for m in result.messages] == ["system", "user"]  # not echoed
    assert [(s.kind, s.decision, s.stop_reason) for s in result.trace] == [
        ("model", "error", None), ("stop", None, StopReason.PROVIDER_ERROR)]


# ---------------------------------------------------------------------------
# The fuzz: scripts of hostile replies, checked against the loop's contract
# ---------------------------------------------------------------------------

names = st.sampled_from(["ping", "a_set", "raw_bytes", "an_object", "missing", "", None])
arguments = st.one_of(
    st.sampled_from(['{"text": "a"}', '{"text": "b"}', "{}", "", None, '{"text": 1}',
                     '{"text": ', "[" * 5000, '{"text": ' + "9" * 5000 + "}", "null", "[]"]),
    st.text(max_size=12),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),  # an object, not a string
)
ids = st.one_of(st.sampled_from(["c1", "c2", "c3"]), st.just(None), st.just(""))
calls = st.builds(tool_call, name=names, arguments=arguments, id=ids,
                  type=st.sampled_from(["function", "function", "function", None, "custom"]))
valid_calls = st.lists(st.builds(tool_call, name=st.sampled_from(["ping", "a_set", "missing"]),
                                 arguments=st.sampled_from(['{"text": "a"}', "{}", "[1]"]),
                                 id=st.just("")), min_size=1, max_size=3)


def numbered(calls_: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Valid, unique ids, as a well-behaved provider sends them."""
    return [call | {"id": f"call_{i}"} for i, call in enumerate(calls_)]


replies = st.one_of(
    st.builds(says, st.text(max_size=10)),
    st.builds(lambda cs: asks(*numbered(cs)), valid_calls),  # well formed
    st.sampled_from([asks(tool_call("ping", '{"text": "a"}')),  # one of two calls: repeats
                     asks(tool_call("a_set", "{}"))]),  # and ping-pong come up often
    st.builds(lambda cs: asks(*cs), st.lists(calls, min_size=1, max_size=3)),  # anything goes
    st.sampled_from([
        raw("<html>x</html>", content_type="text/html"), raw("<html>x</html>"), raw("{"),
        raw("[]"), raw("null"), raw('"x"'), raw(b"\xff\xfe"),
        httpx2.Response(200, json=completion(None)),
        httpx2.Response(200, json=completion(choices=None)),
        httpx2.Response(200, json=completion(choices=[])),
        httpx2.Response(200, json=completion(choices=[None])),
        httpx2.Response(200, json=completion({"role": "assistant", "content": 5})),
        httpx2.Response(200, json=completion({"role": "assistant", "tool_calls": {"a": 1}})),
        httpx2.Response(200, json=completion({"role": "assistant", "tool_calls": []})),
        httpx2.Response(200, json=completion({"role": "assistant", "content": "x"},
                                             usage="lots", model=None)),
        error(400), error(429), error(500), raw("", 503),
    ]),
    st.sampled_from([httpx2.ReadError("reset"), httpx2.ConnectError("refused"),
                     httpx2.ReadTimeout("slow")]),
)

DOCUMENTED_STOPS = {"answered", "max_iters", "repeated_call", "cycle", "tool_errors",
                    "provider_error"}
FUZZ_REGISTRY = make_registry()


@settings(max_examples=1000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(script=st.lists(replies, min_size=1, max_size=8), max_iters=st.integers(1, 8),
       max_repeats=st.sampled_from([0, 2, 3]), max_cycle=st.sampled_from([0, 2, 3]),
       max_tool_errors=st.integers(0, 3))
def test_hostile_fuzz_keeps_the_contract(script, max_iters, max_repeats, max_cycle,
                                         max_tool_errors):
    provider = HostileProvider(script)
    result = run_agent(provider.client(), "fuzz", FUZZ_REGISTRY, model=MODEL,
                       max_iters=max_iters, max_repeats=max_repeats, max_cycle=max_cycle,
                       max_tool_errors=max_tool_errors)  # never raises
    event(result.stop_reason.value)
    assert len(provider.requests) <= max_iters
    assert result.stop_reason.value in DOCUMENTED_STOPS
    assert result.model_calls == len(provider.requests) == len(result.usage)
    assert sum(s.kind == "stop" for s in result.trace) == 1
    assert (result.answer is not None) == result.ok
    check_history(result.messages)
    for request in provider.requests:  # nothing the loop sent breaks the protocol
        check_history(request["messages"])


def test_a_file_name_that_is_not_utf8_does_not_break_the_loop(tmp_path):
    """A command can make such a name; list_files echoes it as a lone surrogate."""
    from vibe_agent.coding import coding_registry

    (tmp_path / os.fsdecode(b"data\xff.csv")).write_text("x")
    provider = HostileProvider(then_answer(asks(tool_call("list_files", "{}"))))
    result = run_agent(provider.client(), "ls?", coding_registry(tmp_path), model=MODEL)
    assert result.ok
    assert provider.requests[1]["messages"][-1]["content"] == "data\ufffd.csv"
    check_history(result.messages)
