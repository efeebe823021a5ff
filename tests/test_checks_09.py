"""Lesson 09's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from unidiff import PatchSet

from vibe_agent.coding import coding_registry
from vibe_agent.course.checks.lesson_09 import (
    DIFF_CASES,
    FAKE_KEY,
    FRESH_AGAIN,
    JUDGE_CASES,
    check_changed_files,
    check_judge_by_tests,
)
from vibe_agent.sandbox import run_in_sandbox, why_not_isolated

JUDGE_RUNS = len(JUDGE_CASES) + len(FRESH_AGAIN) - (why_not_isolated() is not None)

# --- exercise 9.1: judge_by_tests --------------------------------------------------------------


def judge_right(result, workspace, test_command, timeout=60.0):
    return run_in_sandbox(test_command, Path(workspace), timeout=timeout).exit_code == 0


def judge_through_the_tool(result, workspace, test_command, timeout=60.0):
    """Also right: the agent's own run_command tool runs in the sandbox too."""
    tools = coding_registry(workspace, command_timeout=timeout)
    output = tools.call("run_command", {"command": test_command}).output
    return output.startswith("exit code: 0\n")


def judge_unsolved(result, workspace, test_command, timeout=60.0):
    raise NotImplementedError("练习还没完成")


def judge_trusts_the_answer(result, workspace, test_command, timeout=60.0):
    return "通过" in (result.answer or "") or "已修复" in (result.answer or "")


def judge_trusts_the_stop_reason(result, workspace, test_command, timeout=60.0):
    return result.ok and judge_right(result, workspace, test_command, timeout)


def judge_looks_for_passed(result, workspace, test_command, timeout=60.0):
    return "passed" in run_in_sandbox(test_command, Path(workspace), timeout=timeout).output


def judge_looks_for_failed(result, workspace, test_command, timeout=60.0):
    return "failed" not in run_in_sandbox(test_command, Path(workspace), timeout=timeout).output


def judge_exit_code_not_one(result, workspace, test_command, timeout=60.0):
    return run_in_sandbox(test_command, Path(workspace), timeout=timeout).exit_code != 1


def judge_always_pytest(result, workspace, test_command, timeout=60.0):
    return judge_right(result, workspace, "python -m pytest -q", timeout)


def judge_not_exit_code(result, workspace, test_command, timeout=60.0):
    return not run_in_sandbox(test_command, Path(workspace), timeout=timeout).exit_code


def judge_ignores_timeout(result, workspace, test_command, timeout=60.0):
    return run_in_sandbox(test_command, Path(workspace), timeout=60.0).exit_code == 0


def judge_plain_subprocess(result, workspace, test_command, timeout=60.0):
    env = os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # just faster
    try:
        done = subprocess.run(test_command, shell=True, cwd=workspace, env=env,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


FIRST_WORKSPACE: list[Path] = []


def judge_ignores_the_workspace(result, workspace, test_command, timeout=60.0):
    """Runs in whichever folder it saw first (like a global left over in the notebook)."""
    FIRST_WORKSPACE.append(Path(workspace))
    return judge_right(result, FIRST_WORKSPACE[0], test_command, timeout)


def judge_passed_and_not_failed(result, workspace, test_command, timeout=60.0):
    output = run_in_sandbox(test_command, Path(workspace), timeout=timeout).output
    return "passed" in output and "failed" not in output


def judge_subprocess_without_the_key(result, workspace, test_command, timeout=60.0):
    """Takes the secrets out of the environment, but runs on the host all the same."""
    env = {name: value for name, value in os.environ.items()
           if "KEY" not in name and "TOKEN" not in name}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # just faster (nbval's imports: 4 s a run)
    try:
        done = subprocess.run(test_command, shell=True, cwd=workspace, env=env,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def judge_reuses_the_tool_result(result, workspace, test_command, timeout=60.0):
    """The model already ran the tests: read its last run_command result instead."""
    for message in reversed(result.messages):
        if message["role"] == "tool" and message["content"].startswith("exit code: "):
            return message["content"].startswith("exit code: 0\n")
    return judge_right(result, workspace, test_command, timeout)


VERDICTS = {f"project-{number}": case.expected for number, case in enumerate(JUDGE_CASES, 1)}


def judge_hard_coded_by_folder(result, workspace, test_command, timeout=60.0):
    return VERDICTS.get(Path(workspace).name, True)


def judge_returns_the_code(result, workspace, test_command, timeout=60.0):
    return run_in_sandbox(test_command, Path(workspace), timeout=timeout).exit_code


def judge_always_true(result, workspace, test_command, timeout=60.0):
    return True


@pytest.mark.slow
@pytest.mark.parametrize(("fn", "expected"), [
    (judge_right, f"全部 {JUDGE_RUNS} 项通过"),
    (judge_through_the_tool, f"全部 {JUDGE_RUNS} 项通过"),
    (judge_unsolved, "还没完成"),
    (judge_trusts_the_answer, "模型说“已修复”不算数"),
    (judge_trusts_the_stop_reason, "也不看停止原因"),
    (judge_looks_for_passed, "输出里出现 passed 不代表通过"),
    (judge_looks_for_failed, "不要写 exit_code != 1，也不要找 “failed” 这个词"),
    (judge_exit_code_not_one, "pytest 没收集到测试时退出码是 5"),
    (judge_always_pytest, "不要写死 python -m pytest"),
    (judge_not_exit_code, "`not exit_code` 会把它当成通过"),
    (judge_ignores_timeout, "超过了 timeout=1 秒"),
    (judge_plain_subprocess, "测试看到了 OPENAI_API_KEY"),
    (judge_ignores_the_workspace, "用参数 workspace 指定的文件夹运行测试"),
    (judge_returns_the_code, "应该返回 True 或 False，得到 0"),
    (judge_always_true, "模型说“已修复”不算数"),
    (judge_passed_and_not_failed, "fixture 出错的测试算 error"),
    (judge_subprocess_without_the_key, "测试看到了工作区外面的文件"),
    (judge_reuses_the_tool_result, "不要从 result.messages 里找模型自己跑测试的结果"),
    (judge_hard_coded_by_folder, "换了一个随机的文件夹名"),
], ids=lambda value: value.__name__ if callable(value) else "")
def test_judge_by_tests_checker(fn, expected, capsys):
    FIRST_WORKSPACE.clear()
    check_judge_by_tests(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "Traceback" not in out
    if fn not in (judge_right, judge_through_the_tool):
        assert "🎉" not in out


def test_the_fake_key_is_removed_after_the_check(capsys):
    check_judge_by_tests(judge_always_true)
    assert os.environ.get("OPENAI_API_KEY") != FAKE_KEY


def test_a_learner_exception_is_explained(capsys):
    def judge_typo(result, workspace, test_command, timeout=60.0):
        return run_in_sandbox(test_command, workspace).exit_code == 0  # no timeout=

    check_judge_by_tests(judge_typo)
    out = capsys.readouterr().out
    assert "TypeError" in out and "出错的代码" in out and "🎉" not in out


# --- exercise 9.2: changed_files ---------------------------------------------------------------


def headers(diff):
    lines = diff.splitlines()
    return [(lines[i], lines[i + 1]) for i in range(len(lines) - 1)
            if lines[i].startswith("--- ") and lines[i + 1].startswith("+++ ")]


def changed_right(diff):
    return [patched.path for patched in PatchSet(diff)]


def changed_by_hand(diff):
    """Also right: header pairs outside hunks, counting each hunk's lines."""
    lines, paths, i = diff.splitlines(), [], 0
    while i < len(lines):
        if lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = lines[i][4:], lines[i + 1][4:]
            paths.append(new[2:] if new != "/dev/null" else old[2:])
            i += 2
        elif lines[i].startswith("@@"):
            counts = lines[i].split()[1:3]
            old_n, new_n = (int((c.split(",") + ["1"])[1]) for c in counts)
            i += 1
            while old_n > 0 or new_n > 0:
                mark = lines[i][:1]
                old_n -= mark in " -"
                new_n -= mark in " +"
                i += 1
        else:
            i += 1
    return paths


def changed_unsolved(diff):
    raise NotImplementedError("练习还没完成")


def changed_plus_lines_only(diff):
    return [line[6:] for line in diff.splitlines() if line.startswith("+++ b/")]


def changed_keeps_prefix(diff):
    return [new[4:] for _, new in headers(diff)]


def changed_both_header_lines(diff):
    return [line[6:] for line in diff.splitlines() if line.startswith(("--- a/", "+++ b/"))]


def changed_with_dev_null(diff):
    return [new[4:].removeprefix("b/") for _, new in headers(diff)]


def changed_split(diff):
    paths = []
    for line in diff.splitlines():
        if line.startswith("--- ") or line.startswith("+++ "):
            word = line.split()[1]
            if word != "/dev/null" and word[2:] not in paths:
                paths.append(word[2:])
    return paths


def changed_minus_lines(diff):
    """Every "--- " line is a header: a removed "-- comment" line looks like one."""
    paths = []
    lines = diff.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("--- "):
            old = line[4:]
            new = lines[i + 1][4:] if i + 1 < len(lines) else ""
            paths.append(old[2:] if old != "/dev/null" else new[2:])
    return paths


def changed_from_a_lines(diff):
    """Every "--- a/" line names a file; a new file's name is on the "+++ b/" line."""
    paths, lines = [], diff.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("--- a/"):
            paths.append(line[6:])
        elif line == "--- /dev/null":
            paths.append(lines[i + 1][6:])
    return paths


def changed_as_set(diff):
    return set(changed_right(diff))


def changed_forgets_return(diff):
    [patched.path for patched in PatchSet(diff)]  # the mistake: no return


def changed_first_line(diff):
    """Reads the first header only, and fails on the empty diff."""
    return [diff.splitlines()[0].removeprefix("--- a/")]


@pytest.mark.parametrize(("fn", "expected"), [
    (changed_right, f"全部 {len(DIFF_CASES)} 项通过"),
    (changed_by_hand, f"全部 {len(DIFF_CASES)} 项通过"),
    (changed_unsolved, "还没完成"),
    (changed_plus_lines_only, "只看 +++ 行会漏掉被删的文件"),
    (changed_keeps_prefix, "去掉 a/ 或 b/"),
    (changed_both_header_lines, "每个文件只算一次"),
    (changed_with_dev_null, "/dev/null 不是文件名"),
    (changed_split, "不要用 split() 切"),
    (changed_minus_lines, "以 --- 开头的不一定是文件头"),
    (changed_from_a_lines, "不是每一行 “--- a/” 都是文件头"),
    (changed_as_set, "set 没有顺序"),
    (changed_forgets_return, "应该返回列表，得到 None"),
    (changed_first_line, "你的代码抛出了 IndexError"),
], ids=lambda value: value.__name__ if callable(value) else "")
def test_changed_files_checker(fn, expected, capsys):
    check_changed_files(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "Traceback" not in out
    if fn not in (changed_right, changed_by_hand):
        assert "🎉" not in out
