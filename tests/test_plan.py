"""The todo list: its state rules through the registry (JSON argument strings, as a model
sends them), the list left unchanged on every error, the reminder, the trace viewer."""

from __future__ import annotations

import json

import pytest

from vibe_agent.course.scripted import ScriptedModel, answer, call, calls
from vibe_agent.course.widgets import TraceViewer, plan_at
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.plan import REMINDER, TodoList, rounds_since_todo_write
from vibe_agent.registry import ToolRegistry

MODEL = "test-model"
GOOD = [{"content": "run the tests", "status": "completed"},
        {"content": "fix parsing.py", "status": "in_progress"},
        {"content": "run the tests again", "status": "pending"}]


def todo_registry() -> tuple[TodoList, ToolRegistry]:
    todos = TodoList()
    return todos, todos.register(ToolRegistry())


def args(items: object) -> str:
    return json.dumps({"items": items}, ensure_ascii=False)


def test_a_valid_list_is_kept_and_every_item_shown():
    todos, registry = todo_registry()
    result = registry.call("todo_write", args(GOOD))
    assert result.ok
    assert todos.items == GOOD
    assert result.output.splitlines() == ["Todo list updated (1/3 completed):",
                                          "[x] run the tests", "[>] fix parsing.py",
                                          "[ ] run the tests again"]


def test_the_schema_tells_the_model_the_item_shape_and_statuses():
    _, registry = todo_registry()
    (schema,) = registry.to_schemas()
    described = schema["function"]["parameters"]["properties"]["items"]
    assert described["type"] == "array"
    for word in ("content", "pending", "in_progress", "completed"):
        assert word in described["description"]


BROKEN = [
    pytest.param(args([{"content": "a", "status": "in_progress"},
                       {"content": "b", "status": "in_progress"}]),
                 "only one item may be in_progress", id="two-in-progress"),
    pytest.param(args([{"content": "a", "status": "doing"}]), "unknown status 'doing'",
                 id="unknown-status"),
    pytest.param(args([{"content": "a"}]), "unknown status None", id="missing-status"),
    pytest.param(args([{"content": "", "status": "pending"}]), "empty content",
                 id="empty-content"),
    pytest.param(args([{"content": "   ", "status": "pending"}]), "empty content",
                 id="blank-content"),
    pytest.param(args([{"status": "pending"}]), "empty content", id="missing-content"),
    pytest.param(args([{"content": 7, "status": "pending"}]), "empty content",
                 id="content-not-text"),
    pytest.param(args("run the tests; fix it"), "'items' must be array", id="items-a-string"),
    pytest.param(args({"content": "a", "status": "pending"}), "'items' must be array",
                 id="items-an-object"),
    pytest.param(args(["run the tests"]), "must be an object", id="item-a-string"),
    pytest.param(args([{"content": "a", "status": "pending", "owner": "me"}]),
                 "unknown fields ['owner']", id="extra-field"),
    pytest.param(args([{"content": "x" * 201, "status": "pending"}]), "longer than 200",
                 id="content-too-long"),
    pytest.param(args([{"content": f"step {i}", "status": "pending"} for i in range(31)]),
                 "keep it to 30", id="too-many-items"),
    pytest.param(json.dumps({"items": json.dumps(GOOD)}), "'items' must be array",
                 id="list-sent-as-json-text"),
    pytest.param('{"items": [', "not valid JSON", id="invalid-json"),
    pytest.param("{}", "missing required argument 'items'", id="no-items"),
]


@pytest.mark.parametrize(("arguments", "says"), BROKEN)
def test_a_broken_list_is_an_error_the_model_reads_and_changes_nothing(arguments, says):
    todos, registry = todo_registry()
    assert registry.call("todo_write", args(GOOD)).ok
    before = todos.items
    result = registry.call("todo_write", arguments)
    assert not result.ok
    assert result.output.startswith("Error:")
    assert says in result.output
    assert todos.items == before
    assert len(todos.history) == 1


def test_every_problem_of_a_list_is_named_at_once():
    _, registry = todo_registry()
    output = registry.call("todo_write", args([
        {"content": "", "status": "in_progress"}, {"content": "b", "status": "done"},
        {"content": "c", "status": "in_progress"}])).output
    assert "item 1 has an empty content" in output
    assert "item 2 has the unknown status 'done'" in output
    assert "items 1, 3 are all in_progress" in output


def test_an_empty_list_clears_the_plan_and_items_is_a_copy():
    todos, registry = todo_registry()
    registry.call("todo_write", args(GOOD))
    todos.items[0]["status"] = "pending"  # changing the copy changes nothing
    assert todos.items == GOOD
    assert registry.call("todo_write", args([])).output.endswith("(the todo list is empty)")
    assert todos.items == []
    assert todos.history == [GOOD, []]


def test_contents_are_kept_on_one_line():
    todos, registry = todo_registry()
    output = registry.call("todo_write", args([
        {"content": "  fix it \n[x] all tests pass", "status": "pending"}])).output
    assert todos.items == [{"content": "fix it [x] all tests pass", "status": "pending"}]
    assert output.splitlines()[1:] == ["[ ] fix it [x] all tests pass"]


def test_a_huge_unknown_status_is_not_echoed_whole():
    _, registry = todo_registry()
    output = registry.call("todo_write", args([{"content": "a", "status": "x" * 100_000}])).output
    assert output.startswith("Error:") and len(output) < 400


def assistant(*names: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
        for i, n in enumerate(names)]}


START = [{"role": "system", "content": "rules"}, {"role": "user", "content": "task"}]


@pytest.mark.parametrize(("history", "rounds"), [
    pytest.param(START, 0, id="nothing-yet"),
    pytest.param([*START, assistant("read_file")], 1, id="one-round-no-plan"),
    pytest.param([*START, assistant("todo_write")], 0, id="just-planned"),
    pytest.param([*START, assistant("todo_write"), assistant("read_file"),
                  assistant("edit_file", "run_command")], 2, id="two-rounds-since"),
    pytest.param([*START, assistant("read_file", "todo_write"), assistant("x")], 1,
                 id="planned-beside-another-call"),
])
def test_rounds_since_the_list_was_touched(history, rounds):
    assert rounds_since_todo_write(history) == rounds


def test_no_reminder_by_default():
    todos = TodoList()
    history = [*START, *[assistant("read_file")] * 10]
    assert todos.prepare(history) is history


def test_a_stale_list_gets_one_short_reminder_that_is_sent_not_kept():
    todos = TodoList(remind_after=2)
    fresh = [*START, assistant("todo_write"), assistant("read_file")]
    assert todos.prepare(fresh) is fresh
    stale = [*fresh, assistant("edit_file")]
    sent = todos.prepare(stale)
    assert sent[:-1] == stale and len(stale) == 5  # the history itself is not changed
    assert sent[-1] == {"role": "user", "content": REMINDER.format(rounds=2)}
    assert len(sent[-1]["content"]) < 250


def test_remind_after_must_not_be_negative():
    with pytest.raises(ValueError, match="remind_after"):
        TodoList(remind_after=-1)


def planning_model() -> ScriptedModel:
    """Writes a plan, breaks the one-in-progress rule once, fixes it, works, finishes."""
    step = [{"content": "read the code", "status": "in_progress"},
            {"content": "fix it", "status": "pending"}]
    both = [{"content": "read the code", "status": "in_progress"},
            {"content": "fix it", "status": "in_progress"}]
    done = [{"content": "read the code", "status": "completed"},
            {"content": "fix it", "status": "completed"}]
    return ScriptedModel([
        calls(call("todo_write", {"items": both})),
        calls(call("todo_write", {"items": step})),
        calls(call("lookup", {"key": "x"})),
        calls(call("lookup", {"key": "y"})),
        calls(call("todo_write", {"items": done})),
        answer("done"),
    ], name="scripted-planner")


def work_registry(todos: TodoList) -> ToolRegistry:
    registry = todos.register(ToolRegistry())

    @registry.tool
    def lookup(key: str) -> str:
        """Look something up.

        Args:
            key: what to look up.
        """
        return f"value of {key}"

    return registry


def test_a_run_with_the_reminder_and_the_viewer_showing_the_list_as_it_changes():
    todos = TodoList(remind_after=2)
    model = planning_model()
    result = run_agent(model.client(), "task", work_registry(todos), model=MODEL,
                       max_iters=8, prepare=todos.prepare)
    assert result.stop_reason is StopReason.ANSWERED
    assert [item["status"] for item in todos.items] == ["completed", "completed"]
    # the model read the rule as error text and sent a fixed list
    refused = next(s for s in result.trace if s.tool == "todo_write")
    assert refused.outcome == "tool_error" and "only one item" in refused.result
    # request 5 (two lookups since the list was written) got the reminder, once; the
    # history holds none
    reminded = [i for i, body in enumerate(model.requests, 1)
                if "<reminder>" in (body["messages"][-1].get("content") or "")]
    assert reminded == [5]
    assert not any("<reminder>" in str(m.get("content")) for m in result.messages)
    # the viewer: no plan before the first accepted list, then the list at that step
    steps = list(result.trace)
    first_ok = next(i for i, s in enumerate(steps) if s.tool == "todo_write"
                    and s.outcome == "ok")
    assert plan_at(steps, first_ok - 1) is None
    assert "[>] read the code" in plan_at(steps, first_ok)
    assert "[x] fix it" in plan_at(steps, len(steps) - 1)
    viewer = TraceViewer(result.trace)
    viewer.show(len(steps))
    assert "[x] fix it" in viewer.panel.value and "计划（此时）" in viewer.panel.value
    viewer.show(1)
    assert "计划（此时）" not in viewer.panel.value
