"""Lesson 12's course projects and scripted models: each project red as shipped and green
with its fix; the planner, the early claimer and the session model, run through the loop."""

from __future__ import annotations

import pytest

from vibe_agent.coding import CODING_SYSTEM_PROMPT, coding_registry
from vibe_agent.course.planning import (
    EXTRA_TASKS,
    claims_early,
    extra_task,
    fresh_copy,
    never_fixes,
    planner_model,
    pristine_verdict,
    session_model,
)
from vibe_agent.course.tasks import apply_fix
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.memory import MemoryFile, coding_system_prompt
from vibe_agent.plan import FinishCheck, TodoList, tests_gate
from vibe_agent.sandbox import run_in_sandbox

NAMES = sorted(path.name for path in EXTRA_TASKS.iterdir() if path.is_dir())


def test_the_projects_are_there():
    assert NAMES == ["invoice_cents", "invoice_refund_sign"]


@pytest.mark.parametrize("name", NAMES)
def test_red_as_shipped_green_with_the_fix(name):
    task = extra_task(name)
    workspace = fresh_copy(task)
    assert run_in_sandbox(task.test_command, workspace, timeout=60).exit_code == 1
    assert not pristine_verdict(task, workspace)
    apply_fix(task, workspace)
    assert run_in_sandbox(task.test_command, workspace, timeout=60).exit_code == 0
    assert pristine_verdict(task, workspace)


def test_the_two_file_fix_touches_two_files():
    task = extra_task("invoice_cents")
    from vibe_agent.course.tasks import fix_edits

    assert sorted({edit.path for edit in fix_edits(task)}) == ["shop/invoice.py",
                                                                "shop/money.py"]


def test_the_pristine_verdict_ignores_edited_tests():
    task = extra_task("invoice_cents")
    workspace = fresh_copy(task)
    for test in (workspace / "tests").glob("test_*.py"):
        test.write_text("def test_ok():\n    assert True\n", encoding="utf-8")
    assert run_in_sandbox(task.test_command, workspace, timeout=60).exit_code == 0
    assert not pristine_verdict(task, workspace)


def test_an_added_conftest_cannot_pass_the_pristine_verdict():
    task = extra_task("invoice_cents")
    workspace = fresh_copy(task)
    (workspace / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n", encoding="utf-8")
    assert run_in_sandbox(task.test_command, workspace, timeout=60).exit_code == 0
    assert not pristine_verdict(task, workspace)


def test_a_task_without_a_tests_folder_is_judged_too(tmp_path):
    from vibe_agent.course.tasks import load_suite

    task = next(t for t in load_suite()[0] if not (t.repo / "tests").is_dir())
    workspace = fresh_copy(task)
    assert not pristine_verdict(task, workspace)
    apply_fix(task, workspace)
    assert pristine_verdict(task, workspace)


def run(model, task, workspace, registry=None, **options):
    return run_agent(model.client(), task.prompt, registry or coding_registry(workspace),
                     model=model.name, system_prompt=options.pop("system_prompt",
                                                                 CODING_SYSTEM_PROMPT),
                     max_iters=12, **options)


def test_the_planner_keeps_its_list_and_fixes_the_bug():
    task = extra_task("invoice_cents")
    workspace, todos = fresh_copy(task), TodoList()
    result = run(planner_model(task), task, workspace, todos.register(coding_registry(workspace)))
    assert result.ok and pristine_verdict(task, workspace)
    first = next(s for s in result.trace if s.tool == "todo_write")
    assert first.outcome == "tool_error" and "only one item" in first.result
    assert todos.items and all(item["status"] == "completed" for item in todos.items)
    assert len(todos.history) == result.model_calls - 2  # every round but the first and last


def test_the_early_claimer_without_and_with_the_gate():
    task = extra_task("invoice_cents")
    alone = fresh_copy(task)
    result = run(claims_early(task), task, alone)
    assert result.ok and result.model_calls == 1 and not pristine_verdict(task, alone)
    gated = fresh_copy(task)
    result = run(claims_early(task), task, gated,
                 layers=[FinishCheck(lambda _: tests_gate(gated))])
    assert result.ok and pristine_verdict(task, gated)
    assert [s.kind for s in result.trace].count("check") == 1


def test_a_model_that_never_fixes_meets_the_refusal_limit():
    task = extra_task("invoice_cents")
    workspace = fresh_copy(task)
    result = run(never_fixes(), task, workspace,
                 layers=[FinishCheck(lambda _: tests_gate(workspace))], max_refusals=2)
    assert result.stop_reason is StopReason.FINISH_REFUSED and result.model_calls == 3


def test_a_session_with_notes_skips_looking_around(tmp_path):
    notes = MemoryFile(tmp_path / "memory" / "notes.md")
    first = extra_task("invoice_cents")
    ws1 = fresh_copy(first)
    session1 = run(session_model(first), first, ws1, notes.register(coding_registry(ws1)),
                   system_prompt=coding_system_prompt(ws1, notes))
    assert session1.ok and pristine_verdict(first, ws1)
    assert len(notes.notes()) == 2 and "python -m pytest -q" in notes.notes()[0]
    second = extra_task("invoice_refund_sign")
    rounds = {}
    for label, memory in (("without", None), ("with", notes)):
        ws2 = fresh_copy(second)
        spare = MemoryFile(tmp_path / label / "notes.md")
        result = run(session_model(second), second, ws2, spare.register(coding_registry(ws2)),
                     system_prompt=coding_system_prompt(ws2, memory))
        assert result.ok and pristine_verdict(second, ws2)
        rounds[label] = result.model_calls
    assert rounds == {"without": rounds["with"] + 3, "with": 6}
