"""The trace viewer shows a sub-agent's steps nested under the delegate step that ran them."""

from __future__ import annotations

import pytest

from vibe_agent.course.widgets import TraceViewer, children_html, step_html
from vibe_agent.stops import StopReason
from vibe_agent.trace import TraceStep


def tool(name: str, result: str, children: list[TraceStep] | None = None) -> TraceStep:
    return TraceStep(round=1, kind="tool", outcome="ok", tool=name, arguments="{}",
                     result=result, children=children or [])


GRANDCHILD = [tool("read_file", "<b>deepest</b>")]
CHILD = [TraceStep(round=1, kind="model", decision="tool_calls"),
         tool("delegate", "inner answer", GRANDCHILD),
         TraceStep(round=2, kind="stop", stop_reason=StopReason.ANSWERED, content="done")]


@pytest.mark.parametrize(("step", "wanted", "absent"), [
    pytest.param(tool("read_file", "x"), [], ["vibe-trace-children"], id="no-children-no-list"),
    pytest.param(tool("delegate", "answer", CHILD),
                 ["子 agent 的 3 步", "[1] model → tool_calls", "[2] stop  answered: done",
                  "delegate({})"], [], id="one-level"),
    pytest.param(tool("delegate", "answer", CHILD),
                 ["子 agent 的 1 步", "&lt;b&gt;deepest&lt;/b&gt;"], ["<b>deepest"],
                 id="grandchildren-nested-and-escaped"),
])
def test_children_html(step, wanted, absent):
    shown = children_html(step)
    for text in wanted:
        assert text in shown
    for text in absent:
        assert text not in shown


def test_nesting_depth_follows_the_tree():
    shown = children_html(tool("delegate", "answer", CHILD))
    inner = shown.index("子 agent 的 1 步")
    assert shown.count("<ol") == 2
    assert shown.index("[1] model") < inner < shown.index("deepest")


def test_the_viewer_panel_holds_the_nested_steps():
    trace = [TraceStep(round=1, kind="model", decision="tool_calls"),
             tool("delegate", "answer", CHILD)]
    viewer = TraceViewer(trace)
    assert "vibe-trace-children" not in viewer.panel.value
    viewer.next.click()
    assert viewer.panel.value == step_html(trace[1], 1, 2)
    assert "子 agent 的 3 步" in viewer.panel.value
