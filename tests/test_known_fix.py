"""The known-fix model on coding tasks: it replays the known fix through the real tools,
and the tests (not its words) say whether the bug is fixed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vibe_agent.coding import coding_registry, snapshot, workspace_diff
from vibe_agent.course.known_fix import (
    KNOWN_FIX_MODEL_NAME,
    known_fix_model,
    known_fix_plan,
    search_name,
)
from vibe_agent.course.tasks import apply_fix, copy_repo, fix_edits, load_suite
from vibe_agent.layers import Conversation
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.sandbox import run_in_sandbox
from vibe_agent.tools import demo_registry

TASKS, _ = load_suite()
BY_NAME = {task.name: task for task in TASKS}


def run(task_name: str, workspace: Path, question: str | None = None):
    task = BY_NAME[task_name]
    model = known_fix_model(TASKS)
    return run_agent(model.client(), question or task.prompt, coding_registry(workspace),
                     model=KNOWN_FIX_MODEL_NAME, max_iters=12), model


@pytest.mark.parametrize("name", ["weather_fahrenheit", "login_username_case"])
def test_fails_before_passes_after_with_a_diff(name: str, tmp_path: Path) -> None:
    task = BY_NAME[name]
    workspace = copy_repo(task, tmp_path / "ws")
    before = snapshot(workspace)
    assert run_in_sandbox(task.test_command, workspace, timeout=task.timeout_s).exit_code != 0

    result, model = run(name, workspace)

    assert result.stop_reason is StopReason.ANSWERED
    assert run_in_sandbox(task.test_command, workspace, timeout=task.timeout_s).exit_code == 0
    diff = workspace_diff(before, workspace)
    assert diff.startswith("--- a/") and "+++ b/" in diff
    used = [step.tool for step in result.trace if step.kind == "tool"]
    assert used[0] == "run_command" and used[-1] == "run_command"
    assert used[1:3] == ["search_code", "read_file"]  # search, then read, before editing
    assert used.count("edit_file") == len(fix_edits(task))
    assert all(step.outcome == "ok" for step in result.trace if step.kind == "tool")
    assert len(model.requests) == len(known_fix_plan(task))


# (task, what the known-fix model searches for, and why that name)
SEARCHES = [
    ("sales_report_total", "parse_cents", "the hunk header names the function"),
    ("progress_percent", "progress_text", "a def inside the hunk wins over the header's"),
    ("note_tags_shared", "Note", "__init__ is skipped: the class is searched"),
    ("config_defaults_leak", "copy", "no def above: the longest name on the removed line"),
    ("empty_class_scores", None, "the fix only adds lines: no search"),
]


@pytest.mark.parametrize(("name", "expected", "why"), SEARCHES, ids=[row[0] for row in SEARCHES])
def test_search_name(name: str, expected: str | None, why: str) -> None:
    assert search_name(BY_NAME[name]) == expected, why


@pytest.mark.parametrize("task", [t for t in TASKS if search_name(t)], ids=lambda t: t.name)
def test_the_search_finds_a_file_the_fix_edits(task, tmp_path: Path) -> None:
    workspace = copy_repo(task, tmp_path / "ws")
    found = coding_registry(workspace).call("search_code", json.dumps(
        {"pattern": search_name(task)})).output
    assert any(f"{edit.path}:" in found for edit in fix_edits(task)), found


def test_a_question_that_is_not_a_task_gets_an_honest_answer(tmp_path: Path) -> None:
    workspace = copy_repo(BY_NAME["weather_fahrenheit"], tmp_path / "ws")
    result, _ = run("weather_fahrenheit", workspace, question="帮我写一个贪吃蛇游戏")
    assert result.ok and "不知道" in result.answer and result.model_calls == 1


def test_tests_that_already_pass_are_left_alone(tmp_path: Path) -> None:
    task = BY_NAME["weather_fahrenheit"]
    workspace = copy_repo(task, tmp_path / "ws")
    before = snapshot(workspace)
    apply_fix(task, workspace)
    fixed = snapshot(workspace)
    result, _ = run(task.name, workspace)
    assert result.ok and "本来就全部通过" in result.answer
    assert snapshot(workspace) == fixed != before


def test_without_coding_tools_it_says_what_is_missing() -> None:
    model = known_fix_model(TASKS)
    result = run_agent(model.client(), TASKS[0].prompt, demo_registry(), model="m")
    assert result.ok and "edit_file" in result.answer


# --- what the final words may claim, and where the task is found (issue 26, item 4) ----


def said_no_to_writes(action):
    return action.kind != "write" or "the user said no."


def test_the_final_words_of_a_fixed_task_are_the_plan_s_own(tmp_path: Path) -> None:
    task = BY_NAME["weather_fahrenheit"]
    result, _ = run(task.name, copy_repo(task, tmp_path / "ws"))
    assert result.answer == known_fix_plan(task)[-1].content  # what lessons 09-12 show


@pytest.mark.parametrize(("policy", "said", "not_said"), [
    pytest.param(said_no_to_writes, ["对 units.py 的修改没有得到批准，没有改动",
                                     "重新运行了测试（退出码 1）"],
                 ["我按任务自带的已知修复改了"], id="edit-refused"),
    pytest.param(lambda action: "the user said no.", ["没有得到批准", "测试没有运行"],
                 ["改了 units.py", "重新运行了测试"], id="everything-refused"),
])
def test_refused_edits_are_reported_as_refused(policy, said, not_said, tmp_path: Path) -> None:
    task = BY_NAME["weather_fahrenheit"]
    workspace = copy_repo(task, tmp_path / "ws")
    before = snapshot(workspace)
    result = run_agent(known_fix_model(TASKS).client(), task.prompt,
                       coding_registry(workspace, policy=policy), model=KNOWN_FIX_MODEL_NAME,
                       max_iters=12)
    assert result.ok and snapshot(workspace) == before
    assert all(text in result.answer for text in said), result.answer
    assert not any(text in result.answer for text in not_said), result.answer


def test_an_edit_that_fails_is_reported_with_its_reason(tmp_path: Path) -> None:
    task = BY_NAME["weather_fahrenheit"]
    workspace = copy_repo(task, tmp_path / "ws")
    registry = coding_registry(workspace, policy="allow-all")
    original = registry.call

    def meddling(name, arguments):  # someone edits units.py just before the edit lands
        if name == "edit_file":
            (workspace / "units.py").write_text("# rewritten meanwhile\n")
        return original(name, arguments)

    registry.call = meddling  # type: ignore[method-assign]
    result = run_agent(known_fix_model(TASKS).client(), task.prompt, registry,
                       model=KNOWN_FIX_MODEL_NAME, max_iters=12)
    assert "修改 units.py 失败了（the text in 'old' does not occur" in result.answer
    assert "我按任务自带的已知修复改了" not in result.answer


def conversation(workspace: Path, lines: list[str]):
    """A terminal-like conversation: each line is one run_agent on the same messages."""
    model = known_fix_model(TASKS)
    messages: list[dict] = []
    results = [run_agent(model.client(), line, coding_registry(workspace, policy="allow-all"),
                         model=KNOWN_FIX_MODEL_NAME, max_iters=12,
                         layers=[Conversation(messages)])
               for line in lines]
    return results, messages


def test_the_task_is_recognised_after_other_messages(tmp_path: Path) -> None:
    task = BY_NAME["weather_fahrenheit"]
    workspace = copy_repo(task, tmp_path / "ws")
    (hello, fixed), _ = conversation(workspace, ["你好", task.prompt])
    assert "不知道" in hello.answer
    assert fixed.answer == known_fix_plan(task)[-1].content
    assert run_in_sandbox(task.test_command, workspace, timeout=task.timeout_s).exit_code == 0


def test_sent_again_the_task_starts_over_and_a_question_after_it_claims_nothing(
        tmp_path: Path) -> None:
    task = BY_NAME["weather_fahrenheit"]
    workspace = copy_repo(task, tmp_path / "ws")
    (first, again, thanks), messages = conversation(
        workspace, [task.prompt, task.prompt, "谢谢"])
    calls_per_turn = [sum(step.kind == "tool" for step in result.trace) for result in
                      (first, again, thanks)]
    # the second time the tests already pass; the third turn calls nothing
    assert calls_per_turn == [len(known_fix_plan(task)) - 1, 1, 0]
    assert "本来就全部通过" in again.answer
    assert "这一轮我没有调用任何工具，也没有改动任何文件" in thanks.answer
