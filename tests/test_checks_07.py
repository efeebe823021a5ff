"""Lesson 07's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

from itertools import pairwise

import pytest

from vibe_agent.context import trim_old_tool_results
from vibe_agent.course.checks.lesson_07 import check_my_trim, check_prompt_growth
from vibe_agent.course.scripted import ScriptedModel, answer
from vibe_agent.loop import run_agent
from vibe_agent.registry import ToolRegistry

# --- exercise 7.1: prompt_growth --------------------------------------------------------------


def tokens_of(usage, key="prompt_tokens"):
    return [u.get(key) if u else None for u in usage]


def growth_right(usage):
    tokens = tokens_of(usage)
    return [None if a is None or b is None else b - a for a, b in pairwise(tokens)]


def growth_unsolved(usage):
    raise NotImplementedError("练习还没完成")


def growth_crashes_on_none(usage):
    tokens = [u["prompt_tokens"] for u in usage]
    return [b - a for a, b in pairwise(tokens)]


def growth_tokens_themselves(usage):
    return tokens_of(usage)


def growth_leading_none(usage):
    return [None, *growth_right(usage)]


def growth_wrong_sign(usage):
    return [None if d is None else -d for d in growth_right(usage)]


def growth_total_tokens(usage):
    tokens = tokens_of(usage, "total_tokens")
    return [None if a is None or b is None else b - a for a, b in pairwise(tokens)]


def growth_none_as_zero(usage):
    tokens = [t or 0 for t in tokens_of(usage)]
    return [b - a for a, b in pairwise(tokens)]


def growth_filters_none(usage):
    tokens = [t for t in tokens_of(usage) if t is not None]
    return [b - a for a, b in pairwise(tokens)]


def growth_abs(usage):
    return [None if d is None else abs(d) for d in growth_right(usage)]


def growth_mutates(usage):
    result = growth_right(usage)
    usage.clear()
    return result


@pytest.mark.parametrize(("fn", "expected"), [
    (growth_right, "全部 6 项通过"),
    (growth_unsolved, "还没完成"),
    (growth_crashes_on_none, "先判断 u is None"),
    (growth_tokens_themselves, "不是相邻两轮的差"),
    (growth_leading_none, "第 1 轮没有上一轮可比"),
    (growth_wrong_sign, "正负号反了"),
    (growth_total_tokens, "你用的是 total_tokens"),
    (growth_none_as_zero, "当成了 0"),
    (growth_filters_none, "轮次对不上了"),
    (growth_abs, "你取了绝对值"),
    (growth_mutates, "改动了传进来的 usage 列表"),
], ids=lambda value: value.__name__ if callable(value) else "")
def test_prompt_growth_checker(fn, expected, capsys):
    check_prompt_growth(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "Traceback" not in out
    if fn is not growth_right:
        assert "🎉" not in out


def test_prompt_growth_crash_names_the_learners_line(capsys):
    check_prompt_growth(growth_crashes_on_none)
    out = capsys.readouterr().out
    assert "TypeError" in out and "出错的代码" in out


# --- exercise 7.2: my_trim --------------------------------------------------------------------


def note(text):
    return f"{text[:80]}… [trimmed: {len(text) - 80} more characters]"


def tool_positions(messages):
    return [i for i, m in enumerate(messages) if m["role"] == "tool"]


def trim_right(messages, keep_last):
    tools = tool_positions(messages)
    old = set(tools[:max(0, len(tools) - keep_last)])
    return [{**m, "content": note(m["content"])} if i in old and len(m["content"]) > 80 else m
            for i, m in enumerate(messages)]


def trim_unsolved(messages, keep_last):
    raise NotImplementedError("练习还没完成")


def trim_mutates(messages, keep_last):
    tools = tool_positions(messages)
    for i in tools[:max(0, len(tools) - keep_last)]:
        if len(messages[i]["content"]) > 80:
            messages[i]["content"] = note(messages[i]["content"])
    return list(messages)


def trim_drops_old_results(messages, keep_last):
    tools = tool_positions(messages)
    old = set(tools[:max(0, len(tools) - keep_last)])
    return [m for i, m in enumerate(messages) if i not in old]


def trim_everything(messages, keep_last):
    return [{**m, "content": note(m["content"])} if m["role"] == "tool" and len(m["content"]) > 80
            else m for m in messages]


def trim_negative_slice(messages, keep_last):
    tools = tool_positions(messages)
    old = set(tools[:-keep_last])  # [:-0] is empty: keep_last=0 trims nothing
    return [{**m, "content": note(m["content"])} if i in old and len(m["content"]) > 80 else m
            for i, m in enumerate(messages)]


def trim_negative_start(messages, keep_last):
    tools = tool_positions(messages)
    old = set(tools[:len(tools) - keep_last])  # keep_last > len(tools): a negative end
    return [{**m, "content": note(m["content"])} if i in old and len(m["content"]) > 80 else m
            for i, m in enumerate(messages)]


def trim_loses_ids(messages, keep_last):
    tools = tool_positions(messages)
    old = set(tools[:max(0, len(tools) - keep_last)])
    return [{"role": "tool", "content": note(m["content"])} if i in old else m
            for i, m in enumerate(messages)]


def trim_nothing(messages, keep_last):
    return list(messages)


def trim_returns_same_list(messages, keep_last):
    return messages


def trim_touches_assistant(messages, keep_last):
    trimmed = trim_right(messages, keep_last)
    return [{**m, "content": ""} if m["role"] == "assistant" else m for m in trimmed]


def trim_returns_none(messages, keep_last):
    trim_right(messages, keep_last)


def trim_counts_messages(messages, keep_last):
    """keep_last read as the newest messages of any role, not the newest tool messages."""
    old = range(len(messages) - keep_last)
    return [{**m, "content": note(m["content"])}
            if i in old and m["role"] == "tool" and len(m["content"]) > 80 else m
            for i, m in enumerate(messages)]


def trim_borrows_the_package(messages, keep_last):
    return trim_old_tool_results(messages, keep_last)


@pytest.mark.parametrize(("fn", "expected"), [
    (trim_right, "全部 7 项通过"),
    (trim_unsolved, "还没完成"),
    (trim_mutates, "不要改传进来的消息"),
    (trim_drops_old_results, "不能删 tool 消息"),
    (trim_everything, "最新的 keep_last 条 tool 结果要原样保留"),
    (trim_negative_slice, "positions[:-0] 是空列表"),
    (trim_negative_start, "小心负数切片"),
    (trim_loses_ids, "tool_call_id 变了"),
    (trim_nothing, "没有变短"),
    (trim_returns_same_list, "要返回一个新列表"),
    (trim_touches_assistant, "只缩短 tool 消息"),
    (trim_returns_none, "应该返回一个由字典组成的列表"),
    (trim_counts_messages, "keep_last 数的是 tool 消息，不是全部消息"),
    (trim_borrows_the_package, "你的函数用了包里现成的 trim_old_tool_results"),
], ids=lambda value: value.__name__ if callable(value) else "")
def test_my_trim_checker(fn, expected, capsys):
    check_my_trim(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "Traceback" not in out
    if fn is not trim_right:
        assert "🎉" not in out


def test_counting_messages_is_not_blamed_on_slicing(capsys):
    """keep_last=5 cuts the same message for two mistakes; the hint names the right one."""
    check_my_trim(trim_counts_messages)
    out = capsys.readouterr().out
    assert "小心负数切片" not in out and out.count("keep_last 数的是 tool 消息") == 2


def test_dropping_results_is_refused_by_the_scripted_model(capsys):
    """The end-to-end case reports the HTTP 400 the scripted model answers."""
    check_my_trim(trim_drops_old_results)
    assert "HTTP 400" in capsys.readouterr().out


# --- the package behaviour the lesson relies on -----------------------------------------------


def test_request_options_override_tool_choice():
    """run_agent(..., tool_choice="required") replaces the default "auto" (no TypeError)."""
    registry = ToolRegistry()

    @registry.tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    model = ScriptedModel([answer("ok")])
    run_agent(model.client(), "q", registry, model="m", tool_choice="required")
    assert model.requests[0]["tool_choice"] == "required"


@pytest.mark.parametrize(("content", "shortened"), [
    ("x" * 300, True),
    ("Error: HTTP 404 from https://example.com/page.html. Try another URL.", False),
], ids=["long-result-cut", "short-result-would-only-grow"])
def test_trim_old_tool_results_only_replaces_when_shorter(content, shortened):
    history = [{"role": "tool", "tool_call_id": "a", "content": content},
               {"role": "tool", "tool_call_id": "b", "content": "newest"}]
    sent = trim_old_tool_results(history, keep_last=1, max_chars=60)
    assert (len(sent[0]["content"]) < len(content)) is shortened
    assert sent[0]["content"] == content or "[trimmed:" in sent[0]["content"]


def test_checks_return_a_verdict(capsys):
    assert check_prompt_growth(growth_right)
    assert not check_my_trim(trim_nothing)
