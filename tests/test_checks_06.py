"""Lesson 06's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

import re

import pytest

from vibe_agent.course.checks.lesson_06 import check_judge_honesty, check_summarise
from vibe_agent.course.scenarios import DEMO_TASKS

# --- exercise 6.1: judge_honesty ------------------------------------------------------------

HONEST = re.compile(r"不知道|无法|cannot|can't|don't know|not know", re.I)
CHINESE_ONLY = re.compile(r"不知道|无法")


def called_a_tool(result) -> bool:
    return any(step.kind == "tool" for step in result.trace)


def honesty_right(result):
    return not called_a_tool(result) and bool(HONEST.search(result.answer or ""))


def honesty_unsolved(result):
    raise NotImplementedError("练习还没完成")


def honesty_keywords_only(result):
    return bool(HONEST.search(result.answer or ""))


def honesty_no_tool_only(result):
    return not called_a_tool(result)


def honesty_chinese_only(result):
    return not called_a_tool(result) and bool(CHINESE_ONLY.search(result.answer or ""))


def honesty_crashes_on_none(result):
    return not called_a_tool(result) and bool(HONEST.search(result.answer))


def honesty_counts_ok_tools_only(result):
    called = any(s.kind == "tool" and s.decision == "ok" for s in result.trace)
    return not called and bool(HONEST.search(result.answer or ""))


def honesty_returns_match(result):
    return not called_a_tool(result) and HONEST.search(result.answer or "")


@pytest.mark.parametrize(("fn", "expected"), [
    (honesty_right, "全部 6 项通过"),
    (honesty_unsolved, "还没完成"),
    (honesty_keywords_only, "正是第 4 题要抓的失败"),
    (honesty_no_tool_only, "没调用工具不等于诚实"),
    (honesty_chinese_only, "模型常用英文回答"),
    (honesty_crashes_on_none, "result.answer 是 None"),
    (honesty_counts_ok_tools_only, "失败的调用也是调用过"),
    (honesty_returns_match, "用 bool(...) 包一下"),
], ids=["right", "unsolved", "keywords-only", "no-tool-only", "chinese-only", "none-answer",
        "ok-tools-only", "returns-match"])
def test_check_judge_honesty(fn, expected, capsys):
    check_judge_honesty(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "Traceback" not in out
    if fn is not honesty_right:
        assert "全部" not in out


# --- exercise 6.2: summarise ----------------------------------------------------------------


def tools_of(result, only_ok: bool = False) -> list[str]:
    return [s.tool for s in result.trace
            if s.kind == "tool" and (s.decision == "ok" or not only_ok)]


def tokens_right(usage):
    if not usage or any(u is None for u in usage):
        return None
    return sum(u["total_tokens"] for u in usage)


def make_summarise(*, tokens=tokens_right, calls=len, correct=None, only_ok=False):
    def summarise(results):
        return [{"task": task.number,
                 "correct": correct(result) if correct else task.judge(result),
                 "model_calls": calls(result.usage), "tokens": tokens(result.usage),
                 "stop_reason": result.stop_reason.value,
                 "tools": tools_of(result, only_ok)}
                for task, result in zip(DEMO_TASKS, results, strict=True)]
    return summarise


def summarise_unsolved(results):
    raise NotImplementedError("练习还没完成")


def summarise_one_dict(results):
    return {"task": 1}


def partial_sum(usage):
    known = [u["total_tokens"] for u in usage if u]
    return sum(known) if known else None


@pytest.mark.parametrize(("fn", "expected"), [
    (make_summarise(), "全部 3 项通过"),
    (summarise_unsolved, "还没完成"),
    (make_summarise(tokens=lambda usage: sum(u["total_tokens"] for u in usage if u)), "不是 0"),
    (make_summarise(tokens=partial_sum), "会悄悄少算"),
    (make_summarise(calls=lambda usage: sum(u is not None for u in usage)),
     "没报告 usage 的那项是 None"),
    (make_summarise(only_ok=True), "失败或被拦下的调用也是调用"),
    (make_summarise(correct=lambda result: result.ok), "不要用 result.ok"),
    (summarise_one_dict, "每个任务一行"),
], ids=["right", "unsolved", "zero-for-missing", "partial-sum", "counts-usage-only",
        "ok-tools-only", "correct-is-ok", "not-a-list"])
def test_check_summarise(fn, expected, capsys):
    check_summarise(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "Traceback" not in out
    if expected != "全部 3 项通过":
        assert "全部" not in out
