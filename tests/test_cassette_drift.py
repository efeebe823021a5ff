"""Scripted-reference recordings cannot go stale: each equals a fresh re-recording.

The scripted reference model is a program, so re-recording a cassette it made must give
the same bytes back, timestamps aside. Re-running every lesson in record mode would take
minutes; the same check is fast at the transport: every recorded request is sent to a
fresh reference model, and its response must equal the recorded one exactly (raw JSON,
`refusal: null` and all); the provenance must be what a recording would write today.
Requests themselves are checked by nbval, which replays every notebook strictly.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from vibe_agent.course.cassette import Cassette
from vibe_agent.course.client import cassette_dir, make_client
from vibe_agent.course.reference import reference_model
from vibe_agent.course.scripted import SCRIPTED_BASE_URL
from vibe_agent.course.sse import parse_events

REFERENCE_CASSETTES = sorted(path for path in cassette_dir({}).glob("*.json")
                             if Cassette.load(path).provenance["source"] == "scripted-reference")
# What differs between two recordings of the same thing: when, and with which versions.
WHEN = ("recorded_at", "vibe_agent", "openai_sdk")
# Recorded before the scripted wire format gained `refusal: null`; their owners re-record
# them with their own commands. Strict: a re-recorded one fails here until removed.
STALE: dict[str, str] = {}


def fresh_response(model: httpx2.BaseTransport, request: dict) -> tuple[int, dict | list]:
    """The status and body a fresh model sends (a streamed reply: its chunks)."""
    sent = httpx2.Request("POST", f"{SCRIPTED_BASE_URL}/chat/completions", json=request)
    response = model.handle_request(sent)
    if "event-stream" in response.headers.get("content-type", ""):
        return response.status_code, parse_events(response.read())
    return response.status_code, json.loads(response.read())


def stale_rows() -> list:
    return [pytest.param(path, id=path.stem, marks=[pytest.mark.xfail(
                strict=True, reason=f"stale: re-record with {STALE[path.name]}")]
            if path.name in STALE else []) for path in REFERENCE_CASSETTES]


@pytest.mark.parametrize("path", stale_rows())
def test_every_reference_response_equals_a_fresh_one(path):
    tape = Cassette.load(path)
    chats = [item for item in tape.interactions if item["kind"] == "chat"]
    assert chats, f"{path.name}: no model call recorded"
    model = reference_model()  # one model for the whole cassette, as a recording has
    for number, item in enumerate(chats, 1):
        status, body = fresh_response(model, item["request"])
        recorded = item["response"]
        kept = ([event["chunk"] for event in recorded["stream"]] if "stream" in recorded
                else recorded["body"])
        assert (status, body) == (recorded["status"], kept), (
            f"{path.name}: model call {number} differs from a fresh re-recording")


@pytest.mark.parametrize("path", REFERENCE_CASSETTES, ids=[p.stem for p in REFERENCE_CASSETTES])
def test_provenance_is_what_a_recording_writes_today(path, tapes):
    today = make_client("record", "probe", source="reference").provenance
    recorded = Cassette.load(path).provenance
    same = {key for key in today if key not in (*WHEN, "recorded_with")}
    assert {k: recorded.get(k) for k in same} == {k: today[k] for k in same}
    assert recorded["recorded_with"].startswith("python -m vibe_agent record ")


def test_the_check_catches_a_stale_body():
    """The drift test itself: a body without `refusal: null` is not a fresh one."""
    request = {"model": "vibe-reference", "messages": [{"role": "user", "content": "hi"}]}
    status, body = fresh_response(reference_model(), request)
    stale = json.loads(json.dumps(body))
    del stale["choices"][0]["message"]["refusal"]
    assert status == 200 and stale != body


def test_every_scripted_reference_cassette_is_checked():
    assert {p.name for p in REFERENCE_CASSETTES} >= {
        "00_setup_reference.json", "03_registry_reference.json",
        "06_demo_tasks_reference.json", "demo_reference.json"}
    assert set(STALE) <= {p.name for p in REFERENCE_CASSETTES}
    assert all(Path(cassette_dir({}), name).exists() for name in STALE)
