"""Lesson 10's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

import difflib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from vibe_agent.course.bench import summary
from vibe_agent.course.checks.lesson_10 import (
    SUMMARY_CASES,
    check_my_task,
    check_summarise,
    leaked_lines,
)
from vibe_agent.course.tasks import SUITE_DIR

# --- exercise 10.1: a task of your own ----------------------------------------------------------


def make_patch(path: str, before: str, after: str) -> str:
    """The notebook's helper: a `git diff`-style patch of one file."""
    lines = difflib.unified_diff(before.splitlines(keepends=True),
                                 after.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


SHIPPING = '''\
"""Shipping fee of an order."""

FREE_FROM = 99  # yuan: orders of 99 or more ship free


def shipping_fee(total: float) -> int:
    """The fee in yuan: free from FREE_FROM on, else 10."""
    if total > FREE_FROM:
        return 0
    return 10
'''
SHIPPING_FIXED = SHIPPING.replace("total > FREE_FROM", "total >= FREE_FROM")
TESTS = '''\
from shipping import shipping_fee


def test_exactly_the_threshold_ships_free():
    assert shipping_fee(99) == 0


def test_below_and_above():
    assert shipping_fee(98.5) == 10
    assert shipping_fee(120) == 0
'''
PROMPT = ("满 99 元包邮，可我的订单正好 99 元，结算页还是收了 10 元运费。"
          "98.5 元收运费是对的，120 元也正常包邮。")
TASK_JSON = {"prompt": PROMPT, "test_command": "python -m pytest -q", "timeout_s": 30}
FILES = {"pytest.ini": "[pytest]\n", "shipping.py": SHIPPING, "tests/test_shipping.py": TESTS}
PATCH = make_patch("shipping.py", SHIPPING, SHIPPING_FIXED)


def task_writer(*, fields: dict | None = None, files: dict | None = None, patch: str = PATCH,
                task_json: str | None = None, drop: tuple[str, ...] = ()) -> Callable:
    """A learner's write_my_task: the right task, changed as given."""

    def write_my_task(folder: Path) -> None:
        text = task_json or json.dumps({**TASK_JSON, **(fields or {})}, ensure_ascii=False)
        (folder / "task.json").write_text(text, encoding="utf-8")
        for name, content in ({**FILES, **(files or {})}).items():
            if name in drop:
                continue
            target = folder / "repo" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        if patch:
            (folder / "fix.patch").write_text(patch, encoding="utf-8")

    return write_my_task


def unsolved(folder: Path) -> None:
    raise NotImplementedError("练习还没完成")


def writes_outside(folder: Path) -> None:
    (folder / "my_task" / "task.json").write_text("{}", encoding="utf-8")  # no such folder


ALTERNATING = '''\
from pathlib import Path

from shipping import shipping_fee


def test_threshold():
    marker = Path("already_ran")
    first = not marker.exists()
    marker.write_text("yes")
    assert first and shipping_fee(99) == 0
'''
ROUNDED = SHIPPING_FIXED.replace('"""The fee', '"""The fee, rounded')
DESELECTS = ("[pytest]\n"
             "addopts = --deselect tests/test_shipping.py::test_exactly_the_threshold_ships_free\n")
CONFTEST = "# fixtures shared by the tests\n"
FORCES_PASSES = CONFTEST + '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''


def copies_a_bundled_task(folder: Path) -> None:
    """The package's own task, copied: it works, but it is not the learner's."""
    shutil.copytree(SUITE_DIR / "progress_percent", folder, dirs_exist_ok=True)


@pytest.mark.slow
@pytest.mark.parametrize(("fn", "expected"), [
    pytest.param(task_writer(), "全部 11 项通过", id="right"),
    pytest.param(task_writer(fields={"test_command": "python -m pytest -q tests"}),
                 "全部 11 项通过", id="right-other-command"),
    pytest.param(task_writer(fields={"prompt": PROMPT + "判断条件应该是 total >= FREE_FROM。"}),
                 "哪怕不是整行", id="prompt-leaks-part-of-the-fix"),
    pytest.param(task_writer(patch=make_patch("pytest.ini", "[pytest]\n", DESELECTS)),
                 "在 pytest.ini 里 --deselect 掉失败的测试", id="fix-deselects-the-test"),
    pytest.param(task_writer(files={"conftest.py": CONFTEST},
                             patch=make_patch("conftest.py", CONFTEST, FORCES_PASSES)),
                 "在 conftest.py 里把结果改成通过", id="fix-forces-passes-in-conftest"),
    pytest.param(copies_a_bundled_task, "包里自带的任务 progress_percent",
                 id="copies-a-bundled-task"),
    pytest.param(unsolved, "还没完成", id="unsolved"),
    pytest.param(writes_outside, "write_my_task(folder) 要把任务写进参数 folder", id="raises"),
    pytest.param(task_writer(task_json='{"prompt": "满 99 元包邮", "timeout_s": 30,}'),
                 "不是合法的 JSON", id="malformed-json"),
    pytest.param(task_writer(task_json=json.dumps({"prompt": PROMPT, "timeout_s": 30})),
                 '缺少字段 "test_command"', id="missing-test-command"),
    pytest.param(task_writer(fields={"test_command": "true"}), "true 不运行任何测试",
                 id="command-true"),
    pytest.param(task_writer(fields={"test_command": "exit 0"}), "exit 不运行任何测试",
                 id="command-exit-0"),
    pytest.param(task_writer(fields={"test_command": "python -m pytest -q || true"}),
                 "|| true 把失败也变成了成功", id="command-or-true"),
    pytest.param(task_writer(files={"shipping.py": SHIPPING_FIXED},
                             patch=make_patch("shipping.py", SHIPPING_FIXED, ROUNDED)),
                 "不打补丁，测试就已经通过了", id="passes-as-shipped"),
    pytest.param(task_writer(patch=make_patch("shipping.py", SHIPPING,
                                              SHIPPING.replace("10\n", "12\n"))),
                 "补丁要修的就是测试测到的那个 bug", id="fix-does-not-pass"),
    pytest.param(task_writer(fields={"prompt": PROMPT + "把 if total > FREE_FROM: 改成 "
                                                        "if total >= FREE_FROM: 就好。"}),
                 "补丁新加的代码行出现在 prompt 里", id="prompt-leaks-the-fix"),
    pytest.param(task_writer(drop=("tests/test_shipping.py",)), "repo/ 里没有 test_*.py",
                 id="no-test-at-all"),
    pytest.param(task_writer(patch=make_patch("shipping.py", SHIPPING.replace("10\n", "8\n"),
                                              SHIPPING_FIXED.replace("10\n", "8\n"))),
                 "before 必须和你写进 repo/ 的文本一字不差", id="patch-for-another-version"),
    pytest.param(task_writer(patch=make_patch("tests/test_shipping.py", TESTS,
                                              TESTS.replace("(99) == 0", "(99) == 10"))),
                 "已知修复只能改被测的代码", id="fix-edits-the-test"),
    pytest.param(task_writer(files={"tests/test_shipping.py": TESTS.replace(
        "from shipping", "from shiping")}), "收集测试时出错", id="test-cannot-import"),
    pytest.param(task_writer(files={"tests/test_shipping.py": ALTERNATING}),
                 "这是不稳定（flaky）的测试", id="second-run-differs"),
])
def test_my_task_checker(fn, expected, capsys):
    check_my_task(fn)
    out = capsys.readouterr().out
    assert expected in out, out


def test_the_leak_finder_reads_added_lines_only():
    assert leaked_lines("改成 if total >= FREE_FROM: 就好", PATCH) == ["if total >= FREE_FROM:"]
    assert leaked_lines("if total > FREE_FROM: 有问题", PATCH) == []  # a removed line is fine


# --- exercise 10.2: summarise -------------------------------------------------------------------


def summarise_right(records):
    passed = sum(r.passed for r in records)
    tokens = [r.tokens for r in records]
    total = sum(tokens) if records and None not in tokens else None
    return {"tasks": len(records), "passed": passed,
            "pass_rate": passed / len(records) if records else None,
            "tokens": total, "tokens_per_task": total / len(records) if total is not None
            else None}


def summarise_counts_answered(records):
    return summarise_right(records) | {
        "passed": sum(r.stop_reason == "answered" for r in records)}


def summarise_drops_changed_tests(records):
    passed = sum(r.passed and not r.tests_changed for r in records)
    return summarise_right(records) | {"passed": passed,
                                       "pass_rate": passed / len(records) if records else None}


def summarise_none_as_zero(records):
    total = sum(r.tokens or 0 for r in records)
    return summarise_right(records) | {"tokens": total,
                                       "tokens_per_task": total / len(records) if records
                                       else None}


def summarise_skips_none(records):
    known = [r.tokens for r in records if r.tokens is not None]
    return summarise_right(records) | {"tokens_per_task": sum(known) / len(known) if known
                                       else None}


def summarise_averages_with_none(records):
    tokens = [r.tokens for r in records]
    return summarise_right(records) | {"tokens_per_task": sum(tokens) / len(tokens)}


def summarise_fail_to_pass_only(records):
    passed = sum(bool(r.fail_to_pass) and all(r.fail_to_pass.values()) for r in records)
    return summarise_right(records) | {"passed": passed,
                                       "pass_rate": passed / len(records) if records else None}


def summarise_divides_by_zero(records):
    passed = sum(r.passed for r in records)
    return summarise_right(records) | {"pass_rate": passed / len(records)}


def summarise_zero_rate_when_empty(records):
    return summarise_right(records) | ({} if records else {"pass_rate": 0.0})


def summarise_percent(records):
    right = summarise_right(records)
    return right | {"pass_rate": None if right["pass_rate"] is None
                    else 100 * right["pass_rate"]}


def summarise_drops_errors(records):
    return summarise_right([r for r in records if r.stop_reason != "error"])


def summarise_missing_key(records):
    right = summarise_right(records)
    del right["tokens_per_task"]
    return right


def summarise_mutates(records):
    for record in records:
        record.passed = record.passed and not record.tests_changed
    return summarise_right(records)


def summarise_floor_division(records):
    right = summarise_right(records)
    if right["tokens"] is not None:
        right["tokens_per_task"] = right["tokens"] // len(records)
    return right


def summarise_with_the_checkers_answer(records):
    from vibe_agent.course.checks.lesson_10 import _wanted

    return _wanted(records)


def summarise_borrows(records):
    return summary(records, 0.0)


def summarise_unsolved(records):
    raise NotImplementedError("练习还没完成")


@pytest.mark.parametrize(("fn", "expected"), [
    (summarise_right, f"全部 {len(SUMMARY_CASES)} 项通过"),
    (summarise_unsolved, "还没完成"),
    (summarise_counts_answered, "只数 record.passed 为 True"),
    (summarise_drops_changed_tests, "你把改过测试、源码也修好了的任务剔掉了"),
    (summarise_fail_to_pass_only, "你只看了 fail_to_pass"),
    (summarise_none_as_zero, "tokens 是 None 表示接口没报告，不是 0"),
    (summarise_skips_none, "你只对报告了 tokens 的任务求了平均"),
    (summarise_averages_with_none, "你的代码抛出了 TypeError"),
    (summarise_divides_by_zero, "你的代码抛出了 ZeroDivisionError"),
    (summarise_zero_rate_when_empty, "0 个任务没有通过率，不是 0%"),
    (summarise_percent, "不是百分数 66.7"),
    (summarise_drops_errors, "出错的任务（stop_reason == \"error\"）也是任务"),
    (summarise_missing_key, "正好这五个键"),
    (summarise_mutates, "你的函数改动了传进来的记录"),
    (summarise_borrows, "你的函数用了包里现成的 summary"),
    (summarise_floor_division, "你用了整除 //"),
    (summarise_with_the_checkers_answer, "你的函数用了检查器自己的 _wanted"),
], ids=lambda value: value.__name__ if callable(value) else "")
def test_summarise_checker(fn, expected, capsys):
    check_summarise(fn)
    out = capsys.readouterr().out
    assert expected in out, out

