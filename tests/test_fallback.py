"""learner_or_package: a demo cell uses the package's version while an exercise is unsolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibe_agent.course import fallback
from vibe_agent.course.checks.lesson_09 import check_changed_files
from vibe_agent.course.fallback import learner_or_package
from vibe_agent.sandbox import Action

NOTICE = ("（练习 9.2 还没完成：这一格先用包里的版本（用 unidiff 库的 PatchSet 读 diff）；"
          "完成练习后再运行这一格，就会用你的。）\n")
DIFF = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def unsolved(diff: str) -> list[str]:
    raise NotImplementedError("练习还没完成：补全这里的代码后，再运行一次。")


def solved(diff: str) -> list[str]:
    return ["mine.py"]


def broken(diff: str) -> list[str]:
    raise ValueError("a bug of the learner's")


@pytest.mark.parametrize(
    ("learner", "calls", "expected", "printed"),
    [
        pytest.param(solved, 2, ["mine.py"], "", id="solved-is-used-silently"),
        pytest.param(unsolved, 1, ["app.py"], NOTICE, id="unsolved-uses-the-package"),
        pytest.param(unsolved, 3, ["app.py"], NOTICE, id="the-notice-is-printed-once"),
    ],
)
def test_learner_or_package(capsys, learner, calls, expected, printed):
    use = learner_or_package(learner, fallback.diff_paths, "练习 9.2")
    assert [use(DIFF) for _ in range(calls)] == [expected] * calls
    assert capsys.readouterr().out == printed


def test_the_learners_own_errors_are_not_hidden():
    with pytest.raises(ValueError, match="a bug of the learner's"):
        learner_or_package(broken, fallback.diff_paths, "练习 9.2")(DIFF)


def test_a_solution_written_later_is_used_without_remaking_the_wrapper(capsys):
    scope: dict = {}
    exec("def changed(diff):\n    raise NotImplementedError\n", scope)
    use = learner_or_package(scope["changed"], fallback.diff_paths, "练习 9.2")
    assert use(DIFF) == ["app.py"]
    exec("def changed(diff):\n    return ['solved later']\n", scope)
    assert use(DIFF) == ["solved later"]


def test_the_name_rebound_to_the_wrapper_does_not_recurse():
    scope: dict = {"learner_or_package": learner_or_package, "package": fallback.diff_paths}
    exec("def changed(diff):\n    raise NotImplementedError\n"
         "changed = learner_or_package(changed, package, '练习 9.2')\n", scope)
    assert scope["changed"](DIFF) == ["app.py"]


def test_a_checker_never_gets_the_package_version(capsys):
    """Handing the wrapper to the checker does not make an unsolved exercise pass."""
    use = learner_or_package(unsolved, fallback.diff_paths, "练习 9.2")
    assert not check_changed_files(use)
    out = capsys.readouterr().out  # refused before it runs (the checkers' borrowing rule)
    assert "还没完成：这一格先用" not in out
    assert "还没完成" in out or "包里现成的" in out


def test_edit_text_follows_edit_file():
    assert fallback.edit_text("a = 1\n", "1", "2") == "a = 2\n"
    assert fallback.edit_text("x\nx\n", "x", "y").startswith("Error:")
    assert fallback.edit_text("x\n", "nope", "y").startswith("Error:")


def test_workspace_path_follows_the_workspace(tmp_path):
    (tmp_path / "a").mkdir()  # the workspace's walk refuses a path through a missing folder
    assert fallback.workspace_path(tmp_path, "a/../b.txt") == tmp_path.resolve() / "b.txt"
    for outside in ("../x", "/etc/passwd", "~/x"):
        assert str(fallback.workspace_path(tmp_path, outside)).startswith("Error:")


@pytest.mark.parametrize(
    ("action", "allowed"),
    [
        pytest.param(Action("command", "python -m pytest -q"), True, id="pytest"),
        pytest.param(Action("command", "ls tests"), True, id="ls"),
        pytest.param(Action("command", "lsblk"), False, id="whole-words"),
        pytest.param(Action("command", "ls; rm -rf ."), False, id="shell-symbol"),
        pytest.param(Action("write", "app.py"), True, id="write"),
    ],
)
def test_allow_list(action, allowed):
    verdict = fallback.allow_list(["python -m pytest", "ls"])(action)
    assert (verdict is True) == allowed and (verdict is True or isinstance(verdict, str))


@pytest.mark.parametrize(
    ("diff", "paths"),
    [
        pytest.param(DIFF, ["app.py"], id="changed"),
        pytest.param("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x\n", ["new.py"], id="added"),
        pytest.param("--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", ["old.py"],
                     id="deleted"),
    ],
)
def test_diff_paths(diff, paths):
    assert fallback.diff_paths(diff) == paths


def test_sample_task_is_a_loadable_task(tmp_path):
    from vibe_agent.course.tasks import load_task

    folder = tmp_path / "mine"
    folder.mkdir()
    fallback.sample_task(folder)
    assert load_task(folder).fix_patch == folder / "fix.patch"


def test_bench_totals_are_bench_summary_under_the_exercise_keys():
    from vibe_agent.course.bench import TaskRecord

    records = [TaskRecord("a", True, "answered", tokens=10),
               TaskRecord("b", False, "answered", tokens=30)]
    assert fallback.bench_totals(records) == {"tasks": 2, "passed": 1, "pass_rate": 0.5,
                                              "tokens": 40, "tokens_per_task": 20.0}
    assert fallback.bench_totals([])["pass_rate"] == 0.0  # bench.summary's choice, said so
    assert "0" in fallback.bench_totals.about


def test_tests_pass_reads_only_the_exit_code(tmp_path):
    Path(tmp_path, "ok.py").write_text("print('failed')\n", encoding="utf-8")
    assert fallback.tests_pass(None, tmp_path, "python ok.py", 30)
    assert not fallback.tests_pass(None, tmp_path, "python -c 'raise SystemExit(1)'", 30)


SKIPPED = "（练习 4.2 还没完成：这一格的演示先跳过；完成练习后再运行这一格。）\n"


def shown_then(error: Exception | None) -> None:
    print("before")
    if error is not None:
        raise error
    print("after")


@pytest.mark.parametrize(
    ("error", "printed"),
    [
        pytest.param(None, "before\nafter\n", id="solved-runs-the-whole-demo"),
        pytest.param(NotImplementedError("练习还没完成"), "before\n" + SKIPPED,
                     id="unsolved-skips-the-rest-in-one-line"),
    ],
)
def test_demo_needs(capsys, error, printed):
    with fallback.demo_needs("练习 4.2"):
        shown_then(error)
    assert capsys.readouterr().out == printed


def test_demo_needs_does_not_hide_the_learners_own_errors():
    with pytest.raises(ValueError, match="a bug of the learner's"), fallback.demo_needs("练习 4.2"):
        broken(DIFF)


@pytest.mark.parametrize(
    ("env", "requested", "mode"),
    [
        pytest.param({}, None, "offline", id="nothing"),
        pytest.param({"OPENAI_API_KEY": "sk-x"}, None, "live", id="key"),
        pytest.param({"OPENAI_API_KEY": ""}, None, "offline", id="empty-key"),
        pytest.param({"OPENAI_API_KEY": "sk-x", "VIBE_AGENT_MODE": " Replay "}, None, "replay",
                     id="variable-over-key"),
        pytest.param({"VIBE_AGENT_MODE": "replay"}, " Local ", "local", id="argument-first"),
    ],
)
def test_pick_mode_is_resolve_mode(env, requested, mode):
    assert fallback.pick_mode(env, requested) == mode


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


@pytest.mark.parametrize(
    ("name", "arguments", "starts"),
    [
        pytest.param("add", '{"a": 17, "b": 23}', "40", id="ok"),
        pytest.param("search_web", "{}", "Error: unknown tool 'search_web'", id="unknown-tool"),
        pytest.param("add", '{"a": 17, "b": ', "Error: the arguments for 'add' are not valid JSON",
                     id="invalid-json"),
        pytest.param("add", '{"a": "17", "b": "23"}', "Error: wrong arguments for 'add'",
                     id="wrong-types-never-run"),
    ],
)
def test_safe_invoke_is_the_registrys_invoke(name, arguments, starts):
    assert fallback.safe_invoke({"add": add}, name, arguments).startswith(starts)


@pytest.mark.parametrize(
    ("number", "answer_has", "honest"),
    [
        pytest.param(2, "391", False, id="task-2-calls-a-tool"),
        pytest.param(4, "2099", True, id="task-4-admits-it-cannot-know"),
    ],
)
def test_run_agent_answer_and_judge_honesty(number, answer_has, honest):
    from vibe_agent.course.reference import reference_model
    from vibe_agent.course.scenarios import DEMO_TASKS
    from vibe_agent.loop import run_agent
    from vibe_agent.tools import demo_registry

    task = DEMO_TASKS[number - 1]
    answer = fallback.run_agent_answer(reference_model().client(), task.question,
                                       demo_registry(), "scripted")
    assert answer_has in answer
    result = run_agent(reference_model().client(), task.question, demo_registry(),
                       model="scripted")
    assert result.answer == answer
    assert fallback.judge_honesty(result) is honest
