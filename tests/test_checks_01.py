"""Lesson 01's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

import json
import re

import pytest

from vibe_agent.course.checks.lesson_01 import check_fabricated_observations, check_parse_action
from vibe_agent.naive import parse_regex


def unsolved(*args):
    raise NotImplementedError("练习还没完成")


# --- exercise 1.1: parse_action(text) -> dict, or ValueError ------------------------


def to_action(data):
    """The shape the exercise asks for, from one parsed JSON object."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if isinstance(data.get("answer"), str):
        return {"answer": data["answer"]}
    if isinstance(data.get("tool"), str):
        return {"tool": data["tool"].strip("*"), "arguments": data.get("arguments") or {}}
    raise ValueError("neither 'tool' nor 'answer'")


def json_objects(text):
    """Every JSON object in the text, read with raw_decode from each '{'."""
    decoder = json.JSONDecoder()
    found, i = [], text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        found.append(obj)
        i = text.find("{", end)
    return found


def parse_right(text):
    found = json_objects(text)
    if len(found) != 1:
        raise ValueError(f"expected one JSON object, found {len(found)}")
    return to_action(found[0])


def parse_whole_text(text):
    return to_action(json.loads(text))


def parse_lazy_regex(text):
    match = re.search(r"\{.*?\}", text, re.DOTALL)
    if not match:
        raise ValueError("no JSON")
    return to_action(json.loads(match.group(0)))


def parse_greedy_regex(text):
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        raise ValueError("no JSON")
    return to_action(json.loads(match.group(0)))


def parse_first_object(text):
    found = json_objects(text)
    if not found:
        raise ValueError("no JSON")
    return to_action(found[0])


def parse_keeps_bold(text):
    action = parse_right(text)
    if "tool" in action:
        action["tool"] = json_objects(text)[0]["tool"]
    return action


def parse_prose_is_answer(text):
    found = json_objects(text)
    if not found:
        return {"answer": text}
    return parse_right(text)


def parse_none_on_failure(text):
    try:
        return parse_right(text)
    except ValueError:
        return None


def parse_key_error(text):
    found = json_objects(text)
    if len(found) != 1:
        raise ValueError("expected one JSON object")
    data = found[0]
    if "answer" in data:
        return {"answer": data["answer"]}
    return {"tool": data["tool"].strip("*"), "arguments": data.get("arguments") or {}}


def parse_no_default_arguments(text):
    found = json_objects(text)
    if len(found) != 1:
        raise ValueError("expected one JSON object")
    data = found[0]
    if "answer" in data:
        return {"answer": data["answer"]}
    if "tool" not in data:
        raise ValueError("no action")
    return {"tool": data["tool"].strip("*"), "arguments": data["arguments"]}


def parse_line_by_line(text):
    """Each line through json.loads: passes code fences, misses JSON over several lines."""
    found = []
    for line in text.splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    if len(found) != 1:
        raise ValueError(f"expected one JSON line, found {len(found)}")
    return to_action(found[0])


def parse_brace_counter(text):
    """Counts braces by hand, blind to braces inside strings."""
    found, depth, start = [], 0, None
    for i, ch in enumerate(text):
        if ch == "{":
            depth, start = depth + 1, i if depth == 0 else start
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                try:
                    found.append(json.loads(text[start:i + 1]))
                except json.JSONDecodeError:
                    pass
    if len(found) != 1:
        raise ValueError(f"expected one JSON object, found {len(found)}")
    return to_action(found[0])


def parse_returns_raw_json(text):
    found = json_objects(text)
    if len(found) != 1:
        raise ValueError("expected one JSON object")
    if "tool" not in found[0] and "answer" not in found[0]:
        raise ValueError("no action")
    return found[0]


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(parse_right, "全部 16 项通过", id="right"),
        pytest.param(parse_whole_text, "不能对整段文字 json.loads", id="json-loads-whole-text"),
        pytest.param(parse_whole_text, "围栏不是 JSON 的一部分", id="fence-not-stripped"),
        pytest.param(parse_lazy_regex, "非贪婪的", id="lazy-regex-nested-braces"),
        pytest.param(parse_greedy_regex, "贪婪的 \\{.*\\} 从第一个 { 一直吞到最后一个 }",
                     id="greedy-regex"),
        pytest.param(parse_first_object, "第二个就被悄悄丢掉了", id="first-of-several"),
        pytest.param(parse_first_object, "编出来的“工具结果”不能采信", id="fabrication-accepted"),
        pytest.param(parse_keeps_bold, "Markdown 加粗", id="bold-kept"),
        pytest.param(parse_prose_is_answer, "不能把整段文字当成答案", id="prose-as-answer"),
        pytest.param(parse_none_on_failure, "失败时不要返回 None", id="none-on-failure"),
        pytest.param(parse_key_error, "却抛出了 KeyError", id="key-error"),
        pytest.param(parse_no_default_arguments, "当作没有参数", id="arguments-required"),
        pytest.param(parse_returns_raw_json, "调用要带上 \"arguments\"", id="raw-json"),
        pytest.param(parse_regex, "你的函数用了包里现成的 parse_regex", id="package-action"),
        pytest.param(parse_line_by_line, "逐行 json.loads 每一行都读不出来",
                     id="line-by-line-multi-line-json"),
        pytest.param(parse_line_by_line, "对这一行 json.loads 也会失败",
                     id="line-by-line-prose-on-the-same-line"),
        pytest.param(parse_brace_counter, "字符串里的 { 和 } 不算括号", id="brace-counter"),
        pytest.param(unsolved, "还没完成", id="unsolved"),
    ],
)
def test_check_parse_action(fn, expected, capsys):
    check_parse_action(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert ("全部" in out) is expected.startswith("全部")


# --- exercise 1.2: fabricated_observations(messages) -> list[str] -------------------

PREFIXES = ("Observation:", "观察：")


def observations_right(messages):
    found = []
    for m in messages:
        if m["role"] != "assistant":
            continue
        for line in m["content"].splitlines():
            if line.strip().startswith(PREFIXES):
                found.append(line.strip())
    return found


def observations_every_role(messages):
    return [line.strip() for m in messages for line in m["content"].splitlines()
            if line.strip().startswith(PREFIXES)]


def observations_whole_message(messages):
    return [m["content"] for m in messages
            if m["role"] == "assistant" and any(p in m["content"] for p in PREFIXES)]


def observations_start_only(messages):
    return [m["content"] for m in messages
            if m["role"] == "assistant" and m["content"].startswith(PREFIXES)]


def observations_english_only(messages):
    return [line.strip() for m in messages if m["role"] == "assistant"
            for line in m["content"].splitlines() if line.strip().startswith("Observation:")]


def observations_sorted(messages):
    return sorted(set(observations_right(messages)))


def observations_first_per_reply(messages):
    found = []
    for m in messages:
        if m["role"] == "assistant":
            lines = [line.strip() for line in m["content"].splitlines()
                     if line.strip().startswith(PREFIXES)]
            found += lines[:1]
    return found


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(observations_right, "全部 5 项通过", id="right"),
        pytest.param(observations_every_role, "是我们的程序追加的真实工具结果", id="every-role"),
        pytest.param(observations_whole_message, "不是整条消息", id="whole-message"),
        pytest.param(observations_start_only, "常常夹在回复中间", id="start-of-reply-only"),
        pytest.param(observations_english_only, "中文的“观察：”", id="english-only"),
        pytest.param(observations_sorted, "不要用 set 去重或排序", id="sorted-set"),
        pytest.param(observations_first_per_reply, "不要找到一行就停", id="first-per-reply"),
        pytest.param(lambda messages: None, "应该返回 list", id="returns-none"),
        pytest.param(unsolved, "还没完成", id="unsolved"),
    ],
)
def test_check_fabricated_observations(fn, expected, capsys):
    check_fabricated_observations(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert ("全部" in out) is expected.startswith("全部")
