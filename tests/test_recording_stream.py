"""Streamed replies in recordings: recorded as their chunks (with arrival times), replayed as
server-sent events, the same run as live; a miss names the differing field as always."""

from __future__ import annotations

import json

import pytest
from openai.types.chat import ChatCompletionChunk

from vibe_agent.course.cassette import Cassette, CassetteError, ReplayMiss
from vibe_agent.course.client import make_client
from vibe_agent.loop import run_agent
from vibe_agent.stream import Streaming
from vibe_agent.tools import demo_registry

QUESTION = "17 × 23 等于多少？"


def record(name: str, *, stream: bool):
    client = make_client("record", name, source="reference")
    result = run_agent(client, QUESTION, demo_registry(client.world), model=client.model,
                       layers=[Streaming()] if stream else [])
    return result, client.cassette.finish()


def test_a_streamed_run_is_recorded_as_chunks_and_replays_the_same(tapes):
    recorded, path = record("streamed", stream=True)
    tape = Cassette.load(path)
    chats = [item for item in tape.interactions if item["kind"] == "chat"]
    assert chats and all("stream" in item["response"] for item in chats)
    for item in chats:
        times = [event["t_ms"] for event in item["response"]["stream"]]
        assert times == sorted(times)
        for event in item["response"]["stream"]:
            ChatCompletionChunk.model_validate(event["chunk"], strict=True)
    assert tape.provenance["source"] == "scripted-reference"

    client = make_client("replay", "streamed")
    pieces: list[str] = []
    replayed = run_agent(client, QUESTION, demo_registry(client.world), model=client.model,
                         layers=[Streaming(pieces.append)])
    assert (replayed.answer, replayed.stop_reason) == (recorded.answer, recorded.stop_reason)
    assert replayed.messages == recorded.messages
    assert "".join(pieces).endswith(replayed.answer)
    assert client.cassette.unused_chats() == []


def test_the_streamed_and_the_plain_recording_give_the_same_answer(tapes):
    streamed, _ = record("s", stream=True)
    plain, _ = record("p", stream=False)
    assert streamed.messages == plain.messages


def test_replaying_a_plain_recording_with_stream_on_is_a_miss_naming_stream(tapes):
    record("plain", stream=False)
    client = make_client("replay", "plain")
    with pytest.raises(ReplayMiss, match="stream"):
        run_agent(client, QUESTION, demo_registry(client.world), model=client.model,
                  layers=[Streaming()])


@pytest.mark.parametrize("stream", [
    pytest.param([], id="empty"),
    pytest.param([{"chunk": {}}], id="no-time"),
    pytest.param([{"t_ms": 1.0, "chunk": "data: x"}], id="chunk-not-object"),
    pytest.param("data: {}", id="not-a-list"),
])
def test_a_broken_stream_recording_names_the_file_and_the_field(tapes, stream):
    path = tapes / "broken.json"
    path.write_text(json.dumps({
        "format": 1, "name": "broken",
        "provenance": {"source": "scripted-reference", "model": "m", "recorded_at": "x",
                       "recorded_with": "x", "temperature": [0]},
        "interactions": [{"kind": "chat", "request": {"model": "m"},
                          "response": {"status": 200, "stream": stream}}]}), encoding="utf-8")
    with pytest.raises(CassetteError, match="stream"):
        Cassette.load(path)
