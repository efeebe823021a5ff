"""The trace's JSON keeps everything its text rendering needs."""

from __future__ import annotations

import json

import pytest

from vibe_agent.stops import StopReason
from vibe_agent.trace import ANSWERED_BY, FAILED, Trace, TraceStep

FALLBACK = "scripted-reference（回退：录制文件里没有这一步）"


def trace(model: str | None) -> Trace:
    steps = Trace([TraceStep(1, "model", "answer", content="391", model=FALLBACK),
                   TraceStep(1, "stop", stop_reason=StopReason.ANSWERED, content="done")])
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


# One step of each kind, with the one field that says how it went, and its rendering.
EVERY_KIND = [
    (TraceStep(1, "model", decision="tool_calls"), "→ tool_calls"),
    (TraceStep(1, "tool", outcome="ok", tool="clock", arguments="{}", result="12:00"),
     "clock({}) ok → 12:00"),
    (TraceStep(1, "tool", outcome="refused", tool="clock", arguments="{}", result="Error: …"),
     f"clock({{}}) {FAILED} refused → Error: …"),
    (TraceStep(2, "check", outcome="refused", content="tests fail"), "check refused: tests fail"),
    (TraceStep(2, "compact", trigger="budget", content="9000 → 800"), "compact budget: 9000"),
    (TraceStep(3, "stop", stop_reason=StopReason.CYCLE, content="round and round"),
     "stop  cycle: round and round"),
    (TraceStep(3, "stop", content="ZeroDivisionError: x", error_type="ZeroDivisionError"),
     "stop  exception: ZeroDivisionError: x"),
]


@pytest.mark.parametrize(("step", "shown"), EVERY_KIND,
                         ids=["model", "tool-ok", "tool-refused", "check", "compact", "stop",
                              "stop-by-an-exception"])
def test_each_kind_of_step_says_how_it_went_in_its_own_field(step, shown):
    back = Trace.from_json(Trace([step]).to_json())
    assert back == [step] and back.render() == Trace([step]).render()
    assert shown in back.render()
    assert type(back[0].stop_reason) is type(step.stop_reason)  # a StopReason again, or None
