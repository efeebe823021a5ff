"""The trace's JSON keeps everything its text rendering needs."""

from __future__ import annotations

import json

import pytest

from vibe_agent.trace import ANSWERED_BY, Trace, TraceStep

FALLBACK = "scripted-reference（回退：录制文件里没有这一步）"


def trace(model: str | None) -> Trace:
    steps = Trace([TraceStep(1, "model", "answer", content="391", model=FALLBACK),
                   TraceStep(1, "stop", "answered", content="done")])
    steps.model = model
    return steps


@pytest.mark.parametrize("model", ["vibe-reference", None], ids=["model-asked-for", "none"])
def test_json_round_trip_keeps_the_model_asked_for(model):
    original = trace(model)
    back = Trace.from_json(original.to_json())
    assert back == original and back.model == model
    assert back.render() == original.render()


def test_a_fallback_answer_is_still_named_after_a_round_trip():
    back = Trace.from_json(trace("vibe-reference").to_json())
    assert ANSWERED_BY.format(model=FALLBACK) in back.render()


def test_only_model_steps_carry_the_model_asked_for():
    """Other steps read as before (lesson 07 prints a tool step's JSON)."""
    steps = json.loads(trace("m").to_json())
    assert [step.get("asked_for") for step in steps] == ["m", None]
    assert "asked_for" not in steps[1]
