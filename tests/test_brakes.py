"""The brake settings (`Brakes`): each setting that is a harness bug raises, the rest pass;
the cap of one tool result (`capped`), its note included."""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vibe_agent.brakes import Brakes, capped
from vibe_agent.loop import run_agent


@pytest.mark.parametrize(("settings", "match"), [
    ({"max_iters": 0}, "max_iters must be at least 1: the round brake cannot be switched off"),
    ({"max_iters": -3}, "cannot be switched off"),
    ({"max_repeats": 1}, "max_repeats=1: .* 1 would refuse every call"),
    ({"max_repeats": -1}, "max_repeats=-1: .*use 0 \\(off\\) or 2 or more"),
    ({"max_cycle": 1}, "max_cycle=1: a cycle has 2 or more calls"),
    ({"max_cycle": -2}, "max_cycle=-2: .*use 0 \\(off\\) or 2 or more"),
    ({"max_tool_errors": -1}, "max_tool_errors and max_result_chars must be 0 \\(off\\) or more"),
    ({"max_result_chars": -5}, "max_tool_errors and max_result_chars must be 0 \\(off\\) or more"),
    ({"max_refusals": -1}, "max_refusals must be 0 or more"),
    ({"max_calls_per_reply": -1}, "max_calls_per_reply=-1: use 0 \\(no limit\\) or more"),
], ids=["iters-0", "iters-negative", "repeats-1", "repeats-negative", "cycle-1",
        "cycle-negative", "tool-errors-negative", "result-chars-negative", "refusals-negative",
        "calls-per-reply-negative"])
def test_settings_that_are_harness_bugs_raise(settings, match):
    with pytest.raises(ValueError, match=match):
        Brakes(**settings)


@pytest.mark.parametrize("settings", [
    {},
    {"max_iters": 1},
    {"max_repeats": 0, "max_cycle": 0, "max_tool_errors": 0, "max_result_chars": 0,
     "max_refusals": 0, "max_calls_per_reply": 0},
    {"max_repeats": 2, "max_cycle": 2, "max_tool_errors": 1, "max_result_chars": 1,
     "max_calls_per_reply": 1},
], ids=["defaults", "one-round", "every-brake-that-can-be-off-off", "smallest-limits"])
def test_settings_that_make_sense_are_kept_as_given(settings):
    brakes = Brakes(**settings)
    assert {name: getattr(brakes, name) for name in settings} == settings


def test_settings_cannot_change_once_made():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Brakes().max_iters = 0  # type: ignore[misc]


def test_run_agents_keywords_have_the_same_defaults():
    """run_agent takes each limit as a keyword and builds one Brakes from them."""
    parameters = inspect.signature(run_agent).parameters
    for field in dataclasses.fields(Brakes):
        assert parameters[field.name].default == field.default, field.name


NOTE = re.compile(r"\n\n\[truncated by the agent loop: showing the first (\d+) of (\d+) "
                  r"characters, (\d+) cut\]\Z")


@given(st.integers(0, 2_000_000), st.integers(0, 5_000))
def test_a_capped_result_is_never_longer_than_the_cap_note_included(total, limit):
    """Lesson 13: max_result_chars is the most characters one tool result puts into the
    history; the note of what was cut counts too (it used to come on top)."""
    text = "x" * total
    got = capped(text, limit)
    if not limit or total <= limit:
        assert got == text
        return
    assert len(got) <= limit
    note = NOTE.search(got)
    if note is None:  # a cap too small for the note: the first characters only
        assert got == text[:limit] and limit < 100
        return
    kept, whole, cut = map(int, note.groups())
    assert (whole, kept + cut) == (total, total) and got[:note.start()] == text[:kept]
    assert limit - len(got) <= 2  # the note's numbers may be a digit or two shorter


def test_the_cap_of_lesson_13():
    got = capped("a" * 14_869, 400)
    assert len(got) == 400 and got.endswith("showing the first 315 of 14869 characters, "
                                            "14554 cut]")
