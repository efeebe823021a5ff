"""Lesson 02's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

import json

import pytest

from vibe_agent.course.checks.lesson_02 import (
    check_assistant_message,
    check_is_final,
    check_tool_messages,
)
from vibe_agent.reply import assistant_message as package_assistant_message


def unsolved(*args):
    raise NotImplementedError("练习还没完成")


# --- exercise 2.1: assistant_message(message) -> dict ------------------------------


def _call(tc, *, with_type=True, arguments=None):
    entry = {"id": tc.id, "function": {"name": tc.function.name,
                                       "arguments": arguments or tc.function.arguments}}
    if with_type:
        entry["type"] = "function"
    return entry


def assistant_right(message):
    return {"role": "assistant", "content": message.content,
            "tool_calls": [_call(tc) for tc in message.tool_calls]}


def assistant_without_type(message):
    return {"role": "assistant", "content": message.content,
            "tool_calls": [_call(tc, with_type=False) for tc in message.tool_calls]}


def assistant_parsed_arguments(message):
    return {"role": "assistant", "content": message.content,
            "tool_calls": [_call(tc, arguments=json.loads(tc.function.arguments))
                           for tc in message.tool_calls]}


def assistant_reserialised_arguments(message):
    return {"role": "assistant", "content": message.content,
            "tool_calls": [_call(tc, arguments=json.dumps(json.loads(tc.function.arguments)))
                           for tc in message.tool_calls]}


def assistant_without_content(message):
    return {"role": "assistant", "tool_calls": [_call(tc) for tc in message.tool_calls]}


def assistant_sorted_calls(message):
    ordered = sorted(message.tool_calls, key=lambda tc: tc.id)
    return {"role": "assistant", "content": message.content,
            "tool_calls": [_call(tc) for tc in ordered]}


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(assistant_right, "全部 3 项通过", id="right"),
        pytest.param(lambda message: message, "返回的是 SDK 的对象", id="pydantic-object"),
        pytest.param(assistant_without_type, '缺少 "type": "function"', id="no-type"),
        pytest.param(assistant_parsed_arguments, "arguments 在协议里是一个 JSON 字符串",
                     id="arguments-parsed"),
        pytest.param(assistant_reserialised_arguments, "不要解析后再序列化",
                     id="arguments-reserialised"),
        pytest.param(assistant_without_content, "content 也要原样带上", id="no-content"),
        pytest.param(lambda message: message.model_dump(), "只保留 role、content、tool_calls",
                     id="model-dump"),
        pytest.param(assistant_sorted_calls, "id 原样照抄、顺序也不要改", id="calls-reordered"),
        pytest.param(package_assistant_message, "你的函数用了包里现成的 assistant_message",
                     id="hands-in-the-package-function"),
        pytest.param(unsolved, "还没完成", id="unsolved"),
    ],
)
def test_check_assistant_message(fn, expected, capsys):
    check_assistant_message(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert ("全部" in out) is expected.startswith("全部")


# --- exercise 2.2: tool_messages(tool_calls, run_tool) -> list[dict] ---------------


def tools_right(tool_calls, run_tool):
    return [{"role": "tool", "tool_call_id": tc.id,
             "content": str(run_tool(tc.function.name, tc.function.arguments))}
            for tc in tool_calls]


def tools_by_position(tool_calls, run_tool):
    # executed last call first (say it is faster), then paired by position
    results = [str(run_tool(tc.function.name, tc.function.arguments))
               for tc in reversed(tool_calls)]
    return [{"role": "tool", "tool_call_id": tc.id, "content": result}
            for tc, result in zip(tool_calls, results, strict=True)]


def tools_without_id(tool_calls, run_tool):
    return [{"role": "tool", "id": tc.id,
             "content": str(run_tool(tc.function.name, tc.function.arguments))}
            for tc in tool_calls]


def tools_as_user(tool_calls, run_tool):
    return [{"role": "user", "tool_call_id": tc.id,
             "content": str(run_tool(tc.function.name, tc.function.arguments))}
            for tc in tool_calls]


def tools_raw_result(tool_calls, run_tool):
    return [{"role": "tool", "tool_call_id": tc.id,
             "content": run_tool(tc.function.name, tc.function.arguments)}
            for tc in tool_calls]


def tools_own_ids(tool_calls, run_tool):
    return [{"role": "tool", "tool_call_id": f"call_{i}",
             "content": str(run_tool(tc.function.name, tc.function.arguments))}
            for i, tc in enumerate(tool_calls, 1)]


def tools_parsed_arguments(tool_calls, run_tool):
    return [{"role": "tool", "tool_call_id": tc.id,
             "content": str(run_tool(tc.function.name, json.loads(tc.function.arguments)))}
            for tc in tool_calls]


def tools_execution_order(tool_calls, run_tool):
    # ids paired right, but the list is left in execution order
    return [{"role": "tool", "tool_call_id": tc.id,
             "content": str(run_tool(tc.function.name, tc.function.arguments))}
            for tc in reversed(tool_calls)]


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(tools_right, "全部 4 项通过", id="right"),
        pytest.param(tools_by_position, "张冠李戴", id="paired-by-position"),
        pytest.param(tools_without_id, "缺少 tool_call_id", id="no-tool-call-id"),
        pytest.param(tools_as_user, '工具结果的 role 是 "tool"', id="role-user"),
        pytest.param(tools_raw_result, "用 str(...) 转一下", id="content-not-string"),
        pytest.param(tools_own_ids, "不要自己编号", id="invented-ids"),
        pytest.param(tools_parsed_arguments, "原样传给 run_tool", id="arguments-parsed"),
        pytest.param(tools_execution_order, "按 tool_calls 的顺序排好", id="execution-order"),
        pytest.param(unsolved, "还没完成", id="unsolved"),
    ],
)
def test_check_tool_messages(fn, expected, capsys):
    check_tool_messages(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert ("全部" in out) is expected.startswith("全部")


def test_position_hint_names_both_calls(capsys):
    check_tool_messages(tools_by_position)
    out = capsys.readouterr().out
    assert "按位置配对" in out
    assert "写着 id call_calc（calculator），内容却是 call_time（current_time）的结果" in out


# --- exercise 2.3: is_final(message) -> bool ----------------------------------------


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(lambda m: not m.tool_calls, "全部 5 项通过", id="right"),
        pytest.param(lambda m: "完成" in (m.content or "") or not m.tool_calls,
                     "不要看 content 里的字", id="looks-for-words"),
        pytest.param(lambda m: m.tool_calls is None, "也可能是空列表 []", id="is-none-only"),
        pytest.param(lambda m: not m.tool_calls and m.content, "应该返回 True 或 False",
                     id="not-a-bool"),
        pytest.param(unsolved, "还没完成", id="unsolved"),
    ],
)
def test_check_is_final(fn, expected, capsys):
    check_is_final(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert ("全部" in out) is expected.startswith("全部")


def test_checkers_never_show_a_traceback(capsys):
    def broken(*args):
        return {}["missing"]

    for check in (check_assistant_message, check_tool_messages, check_is_final):
        check(broken)
    out = capsys.readouterr().out
    assert out.count("项没通过（通过 0 项）") == 3  # three verdicts, nothing passed
    assert "Traceback" not in out
    assert "你的代码抛出了 KeyError" in out
