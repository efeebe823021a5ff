"""stream.accumulate: a streamed reply joined back into one message, on the chunk shapes
real servers send. The chunks come through the genuine SDK: server-sent events served by
an httpx2 transport to `openai.OpenAI(...).chat.completions.create(stream=True)`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vibe_agent.course.sse import call_delta as call
from vibe_agent.course.sse import chunk_body as chunk
from vibe_agent.course.sse import sdk_chunks
from vibe_agent.stream import accumulate, assemble


def stream_of(chunks: list[dict[str, Any]]):
    """The SDK's own stream of ChatCompletionChunk objects for these chunk bodies."""
    return sdk_chunks(chunks)


USAGE = {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37}

TWO_CALLS_INTERLEAVED = [
    chunk({"role": "assistant", "content": None}),
    chunk(call(0, "call_a", "calculator", "")),
    chunk(call(0, arguments='{"expr')),
    chunk(call(1, "call_b", "get_time", "{}")),
    chunk(call(0, arguments='ession": "17*23"}')),
    chunk({}, "tool_calls"),
    chunk(None, usage=USAGE),
]
WANT_TWO = [
    {"id": "call_a", "type": "function",
     "function": {"name": "calculator", "arguments": '{"expression": "17*23"}'}},
    {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
]

CASES = [
    pytest.param(
        [chunk({"role": "assistant", "content": ""}), chunk({"content": "17 × 23 "}),
         chunk({"content": "= 391"}), chunk({}, "stop")],
        {"role": "assistant", "content": "17 × 23 = 391"}, id="text-only"),
    pytest.param(
        TWO_CALLS_INTERLEAVED,
        {"role": "assistant", "content": None, "tool_calls": WANT_TWO, "usage": USAGE},
        id="two-calls-interleaved-usage-chunk"),
    pytest.param(
        [chunk(call(1, "call_b", "get_time", "{}")),
         chunk(call(0, "call_a", "calculator", '{"expression": "17*23"}')),
         chunk({}, "tool_calls")],
        {"role": "assistant", "content": None, "tool_calls": WANT_TWO},
        id="calls-in-index-order-not-arrival"),
    pytest.param(
        [chunk(call(None, "call_a", "calculator", '{"expre')),
         chunk(call(None, arguments='ssion": "17*23"}')), chunk({}, "stop")],
        {"role": "assistant", "content": None, "tool_calls": WANT_TWO[:1]},
        id="no-index-single-call"),
    pytest.param(
        [chunk(call(0, "call_a", "calculator", '{"expression": "17*23"}')),
         chunk(call(0, "call_b", "get_time", "{}")), chunk({}, "tool_calls")],
        {"role": "assistant", "content": None, "tool_calls": WANT_TWO},
        id="one-index-reused-for-two-ids"),
    pytest.param(  # the id and the name come again: kept once, never joined
        [chunk(call(0, "call_a", "calculator", "")),
         chunk(call(0, "", "calculator", '{"expression": ')),
         chunk(call(0, "call_a", "", '"17*23"}')), chunk({}, "tool_calls")],
        {"role": "assistant", "content": None, "tool_calls": WANT_TWO[:1]},
        id="name-and-id-repeated-or-empty"),
    pytest.param(  # two calls in one chunk's delta.tool_calls
        [chunk({"tool_calls": [call(0, "call_a", "calculator", '{"expression": "17*23"}')[
            "tool_calls"][0], call(1, "call_b", "get_time", "{}")["tool_calls"][0]]}),
         chunk({}, "tool_calls")],
        {"role": "assistant", "content": None, "tool_calls": WANT_TWO},
        id="two-calls-in-one-chunk"),
    pytest.param(
        [chunk({"content": "好的"}), chunk(call(0, "c1", "search", '{"q": "\\u4e')),
         chunk(call(0, arguments='2d\\u6587"}')), chunk({}, "tool_calls")],
        {"role": "assistant", "content": "好的", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "search", "arguments": '{"q": "\\u4e2d\\u6587"}'}}]},
        id="arguments-split-inside-json-escape"),
    pytest.param(
        [chunk({"reasoning_content": "先算"}), chunk({"reasoning_content": "一下"}),
         chunk({"content": "391"}), chunk({}, "stop")],
        {"role": "assistant", "content": "391", "reasoning_content": "先算一下"},
        id="reasoning-content-kept"),
]


@pytest.mark.parametrize(("chunks", "want"), CASES)
def test_accumulate_through_the_sdk(chunks, want):
    assert accumulate(stream_of(chunks)) == want


@pytest.mark.parametrize(("chunks", "want"), CASES)
def test_accumulate_on_plain_dicts_gives_the_same(chunks, want):
    assert accumulate(chunks) == want


def test_escaped_arguments_parse_after_joining():
    escaped = next(case for case in CASES if case.id == "arguments-split-inside-json-escape")
    message = accumulate(stream_of(escaped.values[0]))
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"q": "中文"}


def test_joining_by_arrival_mixes_the_calls():
    """What the lesson shows going wrong: pieces glued onto the last call that arrived."""
    by_arrival: list[list[str]] = []
    for piece in TWO_CALLS_INTERLEAVED:
        for choice in piece["choices"]:
            for delta in choice["delta"].get("tool_calls", []):
                if delta.get("id"):
                    by_arrival.append([delta["function"].get("arguments", "")])
                else:
                    by_arrival[-1].append(delta["function"].get("arguments", ""))
    assert ["".join(parts) for parts in by_arrival] == ['{"expr', '{}ession": "17*23"}']
    joined = [c["function"]["arguments"] for c in accumulate(TWO_CALLS_INTERLEAVED)["tool_calls"]]
    assert joined == ['{"expression": "17*23"}', "{}"]


def test_assemble_reports_text_pieces_and_extras():
    pieces: list[str] = []
    chunks = [chunk({"content": "a"}), chunk({"content": ""}), chunk({"content": "b"}),
              chunk({}, "stop"), chunk(None, usage=USAGE)]
    assembled = assemble(stream_of(chunks), on_text=pieces.append)
    assert pieces == ["a", "b"]
    assert (assembled.finish_reason, assembled.usage, assembled.model) == ("stop", USAGE, "m")
    assert "usage" not in assembled.message()  # the history gets the message only


def test_an_empty_stream_is_an_empty_message():
    assert accumulate([]) == {"role": "assistant", "content": None}
