"""run_agent(layers=[Streaming()]): the same run as without streaming, text passed on as it arrives,
and a broken stream is a provider error (never an exception out of the loop)."""

from __future__ import annotations

import dataclasses

import httpx2
import openai
import pytest
from test_loop import MODEL, make_registry

from vibe_agent.course.scripted import ScriptedModel, answer, call, calls, usage_of
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.stream import Streaming

SCRIPTS = {
    "answer-only": [answer("17 × 23 = 391。", usage_of(30, 8))],
    "one-call": [calls(call("calculator", {"expression": "17 * 23"}), usage=usage_of(40, 9)),
                 answer("结果是 391。", usage_of(60, 6))],
    "parallel-calls-with-text": [
        calls(call("calculator", {"expression": "2 + 3"}), call("current_time", {}),
              content="我同时查两样东西。", usage=usage_of(40, 20)),
        answer("5，现在是 21 点。", usage_of(80, 9))],
    "repeat-brake": [calls(call("calculator", {"expression": "1 + 1"}))] * 3,
    "invalid-json-then-answer": [calls(call("calculator", '{"expression": "1 +')),
                                 answer("参数写错了。")],
    "no-usage": [answer("没有 usage。")],
}


def run(script, *, stream: bool, interleave: bool = False, **options):
    model = ScriptedModel(script, name="stream-test", interleave_calls=interleave)
    layers = [Streaming(options.pop("on_text", None))] if stream else []
    result = run_agent(model.client(), "问题", make_registry(), model=MODEL, layers=layers,
                       **options)
    model.assert_consumed()
    return result, model


def steps(result):
    return [dataclasses.replace(step, elapsed_ms=None) for step in result.trace]


@pytest.mark.parametrize("interleave", [False, True], ids=["calls-in-turn", "interleaved"])
@pytest.mark.parametrize("name", SCRIPTS)
def test_streamed_run_equals_the_plain_run(name, interleave):
    plain, _ = run(SCRIPTS[name], stream=False)
    streamed, model = run(SCRIPTS[name], stream=True, interleave=interleave)
    assert (streamed.answer, streamed.stop_reason, streamed.message) == (
        plain.answer, plain.stop_reason, plain.message)
    assert streamed.messages == plain.messages
    assert steps(streamed) == steps(plain)
    assert streamed.usage == plain.usage
    assert all(r["stream"] is True and r["stream_options"] == {"include_usage": True}
               for r in model.requests)


def test_on_text_gets_the_pieces_as_they_arrive():
    pieces: list[str] = []
    result, _ = run(SCRIPTS["parallel-calls-with-text"], stream=True, on_text=pieces.append)
    assert len(pieces) > 2  # served in small pieces, passed on one by one
    assert "".join(pieces) == "我同时查两样东西。" + result.answer


def test_callers_stream_options_win():
    _, model = run(SCRIPTS["answer-only"], stream=True, stream_options={"include_usage": False})
    assert model.requests[0]["stream_options"] == {"include_usage": False}


def client_answering(handler) -> openai.OpenAI:
    return openai.OpenAI(api_key="k", base_url="http://model.test/v1", max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


class BreaksOff(httpx2.SyncByteStream):
    def __iter__(self):
        yield b'data: {"id": "c", "object": "chat.completion.chunk", "created": 1, '
        yield b'"model": "m", "choices": [{"index": 0, "delta": {"content": "hal"}}]}\n\n'
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete body")


@pytest.mark.parametrize(("response", "says"), [
    pytest.param(lambda: httpx2.Response(200, text="<html><body>login</body></html>",
                                         headers={"content-type": "text/html"}),
                 "一个数据块也没有", id="200-html-page"),
    pytest.param(lambda: httpx2.Response(200, stream=BreaksOff(),
                                         headers={"content-type": "text/event-stream"}),
                 "流式响应中途断开", id="broken-off-mid-stream"),
    pytest.param(lambda: httpx2.Response(200, text="data: {not json\n\n",
                                         headers={"content-type": "text/event-stream"}),
                 "不是合法的 JSON", id="event-not-json"),
])
def test_a_broken_stream_is_a_provider_error(response, says):
    client = client_answering(lambda request: response())
    result = run_agent(client, "问题", make_registry(), model=MODEL, layers=[Streaming()])
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert says in result.message
