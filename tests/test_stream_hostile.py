"""A hostile provider, streamed or not: chunks with fields of the wrong type, replies that
never end or never stop growing, ids reused across rounds, and replies cut off by
max_tokens. Each ends in a named stop or in text the model can act on, within a bound:
never an exception out of `run_agent`, never a hang, never a history a provider rejects.

Responses are bytes served by an `httpx2.MockTransport` under a genuine `openai.OpenAI`
client (server-sent events for `stream=True`), as in tests/test_hostile.py.
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import httpx2
import openai
import pytest
from rich.console import Console
from test_hostile import CJK, check_history

from vibe_agent.course.scripted import ScriptedModel, answer, error_body, protocol_error
from vibe_agent.course.sse import call_delta, chunk_body, chunks_of, event_stream
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.plan import FinishCheck
from vibe_agent.registry import ToolRegistry
from vibe_agent.stream import (
    ReplyLimits,
    ReplyTooLong,
    StreamError,
    Streaming,
    accumulate,
    assemble,
)
from vibe_agent.terminal import Session

MODEL = "hostile-stream"


def registry_counting(ran: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. "17 * 23".
        """
        ran.append(expression)
        return "391" if expression.replace(" ", "") == "17*23" else "?"

    return registry


def completion(content: str | None = None, calls: list[dict[str, Any]] | None = None,
               finish: str = "stop") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-hostile", "object": "chat.completion", "created": 1,
            "model": MODEL, "choices": [{"index": 0, "message": message,
                                         "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def tool_call(arguments: str, id: str = "call_1", name: str = "calculator") -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


class Provider:
    """Serves one completion body per request, as JSON or (stream=True) as events; records
    every request body. Like OpenAI, it answers HTTP 400 to a history with a call left
    unanswered; like llama.cpp, HTTP 500 to a history that holds arguments that are not
    JSON."""

    def __init__(self, *bodies: dict[str, Any]) -> None:
        self.bodies, self.requests = list(bodies), []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if problem := protocol_error(body):
            return httpx2.Response(400, json=error_body(400, problem, param="messages"))
        for message in body["messages"]:
            for call in message.get("tool_calls") or []:
                try:
                    json.loads(call["function"]["arguments"])
                except ValueError:
                    return httpx2.Response(500, json={"error": {
                        "code": 500, "type": "server_error",
                        "message": "Failed to parse tool call arguments as JSON"}})
        served = self.bodies[min(len(self.requests), len(self.bodies)) - 1]
        if body.get("stream"):
            return sse(chunks_of(served, include_usage=True))
        return httpx2.Response(200, json=served)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(api_key="k", base_url="http://hostile.invalid/v1", max_retries=0,
                             http_client=httpx2.Client(transport=httpx2.MockTransport(
                                 self.handle)))


def sse(chunks: list[dict[str, Any]] | bytes) -> httpx2.Response:
    body = chunks if isinstance(chunks, bytes) else event_stream(chunks)
    return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})


def streaming(serve: Any, timeout: float = 5.0) -> openai.OpenAI:
    """A client whose every request gets `serve()` (a response, or a byte stream)."""
    def handle(request: httpx2.Request) -> httpx2.Response:
        served = serve()
        if isinstance(served, httpx2.Response):
            return served
        return httpx2.Response(200, stream=served, headers={"content-type": "text/event-stream"})
    return openai.OpenAI(api_key="k", base_url="http://hostile.invalid/v1", max_retries=0,
                         timeout=timeout, http_client=httpx2.Client(
                             timeout=timeout, transport=httpx2.MockTransport(handle)))


def run(client: openai.OpenAI, ran: list[str] | None = None, *, stream: bool = False,
        finish_check: Any = None, **options: Any):
    started = time.perf_counter()
    layers = [Streaming()] if stream else []
    layers += [FinishCheck(finish_check)] if finish_check else []
    result = run_agent(client, "17 × 23?", registry_counting([] if ran is None else ran),
                       model=MODEL, layers=layers, **options)
    assert time.perf_counter() - started < 10  # nothing hangs
    assert "\n" not in result.message and CJK.search(result.message)
    assert sum(step.kind == "stop" for step in result.trace) == 1
    check_history(result.messages)
    return result


# ---------------------------------------------------------------------------
# Fields of the wrong type: a provider error naming the field, never an exception
# ---------------------------------------------------------------------------

def chunk(**fields: Any) -> dict[str, Any]:
    return chunk_body({"content": "hi"}) | fields


def delta(piece: dict[str, Any], finish: Any = None) -> dict[str, Any]:
    return chunk_body(piece, finish)


def one_call(**fields: Any) -> dict[str, Any]:
    return delta({"tool_calls": [{"index": 0, "id": "c", "function": {
        "name": "calculator", "arguments": "{}"}} | fields]})


WRONG_TYPES = [
    pytest.param([chunk(choices=5)], "choices 是 int", id="choices-a-number"),
    pytest.param([chunk(choices="abc")], "choices 是 str", id="choices-a-string"),
    pytest.param([chunk(choices=[5])], "choices[0] 是 int", id="choice-a-number"),
    pytest.param([chunk(choices=[{"index": 0, "delta": "hi"}])], "delta 是 str",
                 id="delta-a-string"),
    pytest.param([delta({"content": 5})], "content 是 int", id="content-a-number"),
    pytest.param([delta({"content": ["a"]})], "content 是 list", id="content-a-list"),
    pytest.param([delta({"tool_calls": 5})], "tool_calls 是 int", id="tool-calls-a-number"),
    pytest.param([delta({"tool_calls": "calculator"})], "tool_calls 是 str",
                 id="tool-calls-a-string"),
    pytest.param([delta({"tool_calls": [5]})], "tool_calls 里有一项是 int",
                 id="tool-call-a-number"),
    pytest.param([one_call(index=0.5)], "index 是 float", id="index-a-float"),
    pytest.param([one_call(id=7)], "id 是 int", id="id-a-number"),
    pytest.param([one_call(function=5)], "function 是 int", id="function-a-number"),
    pytest.param([one_call(function={"name": 5, "arguments": "{}"})], "name 是 int",
                 id="name-a-number"),
    pytest.param([one_call(function={"name": "calculator", "arguments": {"a": 1}})],
                 "arguments 是 dict", id="arguments-an-object"),
    pytest.param([delta({"content": "x"}), chunk_body(None, usage=5)], "usage 是 int",
                 id="usage-a-number"),
    pytest.param([delta({"content": "x"}), chunk_body(None, usage="lots")], "usage 是 str",
                 id="usage-a-string"),
    pytest.param([delta({"content": "x"}), chunk_body(None, usage={
        "prompt_tokens": "many", "completion_tokens": 1, "total_tokens": 2})],
                 "usage.prompt_tokens", id="usage-count-a-string"),
    pytest.param([chunk(model=5)], "model 是 int", id="model-a-number"),
    pytest.param([chunk(id={"a": 1})], "id 是 dict", id="chunk-id-an-object"),
    pytest.param([delta({"content": "x"}, 5)], "finish_reason 是 int", id="finish-a-number"),
    pytest.param([delta({"content": "x"}, ["stop"])], "finish_reason 是 list",
                 id="finish-a-list"),
    pytest.param([delta({"reasoning_content": 5})], "reasoning_content 是 int",
                 id="reasoning-a-number"),
    pytest.param([5], "数据块是 int", id="chunk-a-number"),
    pytest.param([None], "数据块是 NoneType", id="chunk-null"),
]


@pytest.mark.parametrize(("chunks", "says"), WRONG_TYPES)
def test_a_field_of_the_wrong_type_is_a_provider_error(chunks, says):
    result = run(streaming(lambda: sse(chunks)), stream=True)
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert "流式响应不能用" in result.message and says in result.message, result.message
    assert result.messages[-1]["role"] == "user"  # nothing of the broken reply went in


@pytest.mark.parametrize(("chunks", "says"), WRONG_TYPES)
def test_assemble_names_the_wrong_field_on_plain_dicts(chunks, says):
    with pytest.raises(StreamError) as raised:
        assemble(chunks)
    assert says in str(raised.value)


# ---------------------------------------------------------------------------
# The bounds of one reply: time, bytes, one call's arguments
# ---------------------------------------------------------------------------

EMPTY_DELTA = b"data: " + json.dumps(chunk_body({"content": ""})).encode() + b"\n\n"


class Endless(httpx2.SyncByteStream):
    """Empty deltas as fast as they go, for `seconds` (the test's own bound), then [DONE]."""

    def __init__(self, piece: bytes = EMPTY_DELTA, seconds: float = 8.0,
                 pause: float = 0.0) -> None:
        self.piece, self.seconds, self.pause, self.sent = piece, seconds, pause, 0

    def __iter__(self):
        started = time.monotonic()
        while time.monotonic() - started < self.seconds:
            self.sent += 1
            time.sleep(self.pause)
            yield self.piece
        yield b"data: [DONE]\n\n"


def test_an_endless_stream_of_empty_deltas_stops_at_max_seconds():
    endless = Endless()
    started = time.perf_counter()
    result = run(streaming(lambda: endless, timeout=2.0), stream=True,
                 reply_limits=ReplyLimits(max_seconds=1.0))
    elapsed = time.perf_counter() - started
    assert result.stop_reason is StopReason.REPLY_TOO_LONG
    assert "1 秒" in result.message and "max_seconds" in result.message
    assert elapsed < 3 and endless.sent > 100


def test_a_server_sending_one_byte_at_a_time_stops_at_max_seconds():
    """No event is ever complete, so no chunk reaches the loop: the body's bytes are timed."""
    dribble = Endless(piece=b"x", pause=0.01)  # each byte well within the read timeout
    result = run(streaming(lambda: dribble, timeout=2.0), stream=True,
                 reply_limits=ReplyLimits(max_seconds=0.5))
    assert result.stop_reason is StopReason.REPLY_TOO_LONG and "max_seconds" in result.message


def test_one_huge_event_stops_at_max_bytes_before_it_is_read_whole():
    class Huge(httpx2.SyncByteStream):
        sent = 0

        def __iter__(self):
            yield b'data: {"choices": [{"index": 0, "delta": {"content": "'
            for _ in range(10_000):  # up to 640 MB, never sent whole
                Huge.sent += 1
                yield b"x" * 65536

    result = run(streaming(Huge), stream=True, reply_limits=ReplyLimits(max_bytes=1_000_000))
    assert result.stop_reason is StopReason.REPLY_TOO_LONG and "max_bytes" in result.message
    assert Huge.sent < 20


def long_arguments(size: int) -> dict[str, Any]:
    return completion(calls=[tool_call(json.dumps({"expression": "1" * size}))],
                      finish="tool_calls")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
def test_one_calls_arguments_are_capped(stream):
    ran: list[str] = []
    provider = Provider(long_arguments(50_000), completion("done"))
    result = run(provider.client(), ran, stream=stream,
                 reply_limits=ReplyLimits(max_argument_chars=10_000))
    assert result.stop_reason is StopReason.REPLY_TOO_LONG, result.message
    assert "max_argument_chars" in result.message and ran == []
    within = run(Provider(long_arguments(5_000), completion("done")).client(), ran,
                 stream=stream, reply_limits=ReplyLimits(max_argument_chars=10_000))
    assert within.ok and len(ran) == 1


def test_the_default_limits_are_documented_and_checked():
    limits = ReplyLimits()
    assert (limits.max_seconds, limits.max_bytes, limits.max_argument_chars) == (
        600.0, 32_000_000, 2_000_000)
    with pytest.raises(ValueError):
        ReplyLimits(max_seconds=0)
    with pytest.raises(ReplyTooLong, match="max_argument_chars"):
        accumulate([delta(call_delta(0, "c", "f", "x" * 2_000_001))])


class Piece(str):
    """An argument piece that refuses to be joined with `+` (a quadratic join)."""

    def __radd__(self, other: str) -> str:
        raise AssertionError("pieces joined one by one with +")


def test_pieces_are_joined_once_not_one_by_one():
    chunks = [delta({"content": Piece("a")}), delta({"content": Piece("b")}),
              delta({"reasoning_content": Piece("r")}), delta({"reasoning_content": Piece("s")}),
              delta(call_delta(0, "c", "calculator", Piece('{"expression": '))),
              delta(call_delta(0, arguments=Piece('"17*23"}')))]
    message = accumulate(chunks)
    assert (message["content"], message["reasoning_content"]) == ("ab", "rs")
    assert message["tool_calls"][0]["function"]["arguments"] == '{"expression": "17*23"}'


# ---------------------------------------------------------------------------
# The events themselves: parsed once, in time linear in their size
# ---------------------------------------------------------------------------


class Pieces(httpx2.SyncByteStream):
    """A body served in pieces of `size` bytes."""

    def __init__(self, body: bytes, size: int) -> None:
        self.body, self.size = body, size

    def __iter__(self):
        for start in range(0, len(self.body), self.size):
            yield self.body[start:start + self.size]


def test_a_streamed_reply_is_read_without_the_sdks_chunk_objects(monkeypatch):
    # the SDK would build a pydantic ChatCompletionChunk for every event: most of the cost
    def refuse(self):
        raise AssertionError("the SDK's Stream was iterated")

    monkeypatch.setattr(openai.Stream, "__iter__", refuse)
    ran: list[str] = []
    provider = Provider(completion(calls=[tool_call('{"expression": "17*23"}')],
                                   finish="tool_calls"), completion("391"))
    result = run(provider.client(), ran, stream=True)
    assert result.ok and result.answer == "391" and ran == ["17*23"]
    assert [step.total_tokens for step in result.trace if step.kind == "model"] == [15, 15]


def test_one_event_in_tiny_pieces_is_read_in_linear_time():
    text = "字" * 700_000  # 2.1 MB of UTF-8, each character cut across two pieces
    body = event_stream([delta({"content": text}), delta({}, "stop")])  # one event, 2.1 MB
    started = time.perf_counter()
    result = run(streaming(lambda: Pieces(body, 32)), stream=True)
    assert result.ok and result.answer == text
    assert time.perf_counter() - started < 4  # joined once: about 0.5 s; by += : minutes


@pytest.mark.parametrize("body, says", [
    (b'data: {"error": {"message": "overloaded, try later"}}\n\n', "overloaded, try later"),
    (b'data: {"choices": [{"index": 0, "delta": {"content": "\xff"}}]}\n\n', "UTF-8"),
    (b'data: {"choices": [\n\n', "JSON"),
], ids=["error-event", "not-utf-8", "not-json"])
def test_a_broken_event_is_a_provider_error(body, says):
    result = run(streaming(lambda: sse(body)), stream=True)
    assert result.stop_reason is StopReason.PROVIDER_ERROR and says in result.message


def test_event_lines_may_end_in_crlf_and_carry_other_fields():
    events = b"".join(b": a comment\r\nevent: message\r\nid: 1\r\ndata: " + json.dumps(c).encode()
                      + b"\r\n\r\n" for c in chunks_of(completion("你好"), include_usage=True))
    result = run(streaming(lambda: sse(events + b"data: [DONE]\r\n\r\n")), stream=True)
    assert result.ok and result.answer == "你好"


# ---------------------------------------------------------------------------
# stream_options: the caller may leave it out
# ---------------------------------------------------------------------------

def test_stream_options_none_is_not_sent():
    model = ScriptedModel([answer("a"), answer("b")])
    run_agent(model.client(), "q", ToolRegistry(), model=MODEL, layers=[Streaming()],
              stream_options=None)
    run_agent(model.client(), "q", ToolRegistry(), model=MODEL, layers=[Streaming()])
    assert "stream_options" not in model.requests[0]
    assert model.requests[1]["stream_options"] == {"include_usage": True}


# ---------------------------------------------------------------------------
# Cut off by max_tokens (finish_reason "length")
# ---------------------------------------------------------------------------

MODES = pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
HALF = '{"expression": "17 *'


@MODES
def test_a_call_cut_in_half_is_not_run_and_not_sent_back(stream):
    ran: list[str] = []
    provider = Provider(completion(calls=[tool_call(HALF)], finish="length"),
                        completion("391。"))
    result = run(provider.client(), ran, stream=stream, max_tokens=12)
    assert result.ok and result.answer == "391。", result.message  # llama.cpp took round 2
    assert ran == []  # never run
    step = next(s for s in result.trace if s.kind == "tool")
    assert (step.outcome, step.arguments) == ("cut_off", HALF)  # the trace keeps what came
    sent = provider.requests[1]["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "cut off at max_tokens" in sent[-1]["content"]
    assert "not run" in sent[-1]["content"] and repr(HALF) in sent[-1]["content"]
    assert HALF not in json.dumps(sent, ensure_ascii=False)


@MODES
def test_whole_calls_of_a_cut_reply_still_run(stream):
    ran: list[str] = []
    provider = Provider(completion(calls=[tool_call('{"expression": "17 * 23"}'),
                                          tool_call('{"expr', id="call_2")], finish="length"),
                        completion("391。"))
    result = run(provider.client(), ran, stream=stream)
    assert result.ok and ran == ["17 * 23"]
    outcomes = [s.outcome for s in result.trace if s.kind == "tool"]
    assert outcomes == ["ok", "cut_off"]


@MODES
@pytest.mark.parametrize(("options", "says"), [
    ({"max_tokens": 30}, "max_tokens=30"),
    ({"max_completion_tokens": 40}, "max_tokens=40"),
    ({}, "没有设 max_tokens"),
])
def test_an_answer_cut_off_is_reported_as_cut_off(stream, options, says):
    provider = Provider(completion("An agent loop is a programming concept that", finish="length"))
    result = run(provider.client(), stream=stream, **options)
    assert result.stop_reason is StopReason.CUT_OFF and not result.ok
    assert result.answer == "An agent loop is a programming concept that"  # the text so far
    assert "截断" in result.message and says in result.message, result.message
    assert result.messages[-1] == {"role": "assistant",
                                   "content": "An agent loop is a programming concept that"}
    model_step = next(s for s in result.trace if s.kind == "model")
    assert model_step.finish_reason == "length"


@MODES
def test_a_cut_off_answer_is_never_judged_by_the_finish_check(stream):
    judged: list[str] = []
    provider = Provider(completion("half an answ", finish="length"))
    result = run(provider.client(), stream=stream, finish_check=judged.append)
    assert result.stop_reason is StopReason.CUT_OFF and judged == []


# ---------------------------------------------------------------------------
# The terminal: a cut-off answer shown as cut off; Ctrl-C after a reused id
# ---------------------------------------------------------------------------

@MODES
def test_the_terminal_shows_a_cut_off_answer_as_cut_off(tmp_path, stream):
    provider = Provider(completion("An agent loop is a programming", finish="length"))
    console = Console(record=True, width=200, file=io.StringIO(), color_system=None)
    session = Session(provider.client(), MODEL, tmp_path, console, approve="yolo",
                      stream=stream, delegate=False, timings=False)
    session.run(lines=["explain", "/exit"])
    screen = console.export_text()
    assert "An agent loop is a programming" in screen  # the text that came, streamed or not
    assert "回答被截断了" in screen and "max_tokens" in screen
    assert "模型给出了最终回答" not in screen


def test_ctrl_c_after_an_id_reused_across_rounds_leaves_every_call_answered(tmp_path):
    """Round 1 asks call_0 and it is answered; round 2 asks call_0 again and the person
    presses Ctrl-C while it runs: the second call_0 must be answered too."""
    pressed = []
    registry = ToolRegistry()

    @registry.tool(timeout=None)
    def slow(n: int) -> str:
        """A tool the person interrupts the second time.

        Args:
            n: which time.
        """
        if n == 2:
            pressed.append(n)
            raise KeyboardInterrupt
        return "first done"

    provider = Provider(completion(calls=[tool_call('{"n": 1}', id="call_0", name="slow")],
                                   finish="tool_calls"),
                        completion(calls=[tool_call('{"n": 2}', id="call_0", name="slow")],
                                   finish="tool_calls"),
                        completion("ok"))
    console = Console(record=True, width=200, file=io.StringIO(), color_system=None)
    session = Session(provider.client(), MODEL, tmp_path, console, approve="yolo",
                      tools=registry, delegate=False, timings=False)
    session.run(lines=["go", "again", "/exit"])
    assert pressed == [2] and "已中断" in console.export_text()
    check_history(session.messages)  # every call answered exactly once, in place
    assert len(provider.requests) == 3  # the turn after Ctrl-C went out...
    assert session.messages[-1] == {"role": "assistant", "content": "ok"}  # ...and was answered
