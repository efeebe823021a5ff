"""Checkers for lesson 07, trace and context growth.

    check_prompt_growth(fn)  fn(usage) -> list[int | None]: how many prompt tokens each
                             round added to the one before (None where usage is missing)
    check_my_trim(fn)        fn(messages, keep_last) -> list[dict]: a copy of the history
                             whose older tool results are shorter, protocol intact

Both run the learner's function on fixed inputs first (usage lists, a small tool_calls
history), then `check_my_trim` hands the function to `run_agent(..., prepare=...)` with
a scripted model (a program, not an LLM) that answers HTTP 400 to a broken history, as
providers do. Each typical mistake gets its own hint.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from ...context import trim_old_tool_results
from ...loop import run_agent
from ...registry import ToolRegistry
from .. import scripted
from ..scripted import ScriptedModel, answer, call, calls, usage_of
from . import MAX_REQUESTS, MODEL, Problem, Report, attempt, checker, fail, short

Usage = list[dict[str, Any] | None]
Message = dict[str, Any]


# ---------------------------------------------------------------------------
# Exercise 1: how much did the prompt grow each round?
# ---------------------------------------------------------------------------


def usage(prompt: int, completion: int = 20) -> dict[str, int]:
    """A usage block as the API reports it (20 completion tokens unless told)."""
    return usage_of(prompt, completion)


def _prompt(u: dict[str, Any] | None, key: str = "prompt_tokens") -> int | None:
    return u.get(key) if u else None


def _diffs(values: list[int | None]) -> list[int | None]:
    return [None if a is None or b is None else b - a for a, b in pairwise(values)]


NONE_HINT = ("usage 里可能有 None（那一轮接口没报 usage），也可能缺 prompt_tokens 字段："
             "先判断 u is None，再用 u.get(\"prompt_tokens\")；"
             "缺了哪一轮，和它相关的差值就写 None，不要猜，也不要当成 0。")

# (case, usage, expected, hint)
GROWTH_CASES: list[tuple[str, Usage, list[int | None], str]] = [
    ("三轮都有 usage", [usage(600), usage(750, 31), usage(905, 8)], [150, 155],
     "第 i 项是第 i+2 轮减第 i+1 轮的 prompt_tokens：usage[i + 1] - usage[i]。"),
    ("只有一轮", [usage(998)], [], "只有一轮就没有“相邻两轮”：返回空列表。"),
    ("一轮都没有", [], [], "空的 usage 返回空列表，不要报错。"),
    ("中间一轮没有 usage（None）", [usage(600), None, usage(905), usage(1000)], [None, None, 95],
     NONE_HINT),
    ("有一轮的 usage 缺 prompt_tokens", [usage(600), {"completion_tokens": 5}, usage(700)],
     [None, None], NONE_HINT),
    ("裁剪历史后 prompt 变少了", [usage(900), usage(700), usage(760)], [-200, 60],
     "差值可以是负数（裁剪历史后发出去的变少了）：直接相减，不要取绝对值，也不要截到 0。"),
]


def _growth_problem(got: Any, case_usage: Usage, wanted: list[int | None]) -> Problem:
    """Compare with the answer, then with each typical mistake computed the same way."""
    if got == wanted and isinstance(got, list):
        return None
    if not isinstance(got, list):
        return (f"应该返回列表，得到 {short(got)}",
                "返回一个 list：第 2 轮起每一轮比前一轮多（或少）的 prompt tokens。")
    tokens = [_prompt(u) for u in case_usage]
    filtered = [t for t in tokens if t is not None]
    mistakes: list[tuple[Any, str, str]] = [
        (tokens, "你返回的是每一轮的 prompt_tokens 本身，不是相邻两轮的差",
         "差值 = 这一轮的 prompt_tokens - 上一轮的 prompt_tokens。"),
        ([None, *wanted], "结果多了一项：第 1 轮没有上一轮可比",
         "n 轮只有 n - 1 个差值：从第 2 轮开始算，不要在开头补 None 或 0。"),
        ([0, *wanted], "结果多了一项：第 1 轮没有上一轮可比",
         "n 轮只有 n - 1 个差值：从第 2 轮开始算，不要在开头补 None 或 0。"),
        ([tokens[0], *wanted] if tokens else None, "结果多了一项：第 1 轮没有上一轮可比",
         "n 轮只有 n - 1 个差值：从第 2 轮开始算。"),
        ([None if d is None else -d for d in wanted], "正负号反了",
         "用后一轮减前一轮：usage[i + 1] - usage[i]，历史变长时差值是正的。"),
        (_diffs([_prompt(u, "total_tokens") for u in case_usage]),
         "你用的是 total_tokens（还含着模型回答的 completion tokens）",
         "只比较 prompt_tokens：它才是每轮发出去的 messages 有多长。"),
        (_diffs([t or 0 for t in tokens]), "你把缺失的 usage 当成了 0，算出了假的差值",
         NONE_HINT),
        (_diffs(filtered), "你先把缺失的轮次去掉再相减，轮次对不上了",
         "不要先过滤 None：结果的第 i 项必须对应第 i+1、i+2 轮。缺了的写 None。"),
        ([None if d is None else abs(d) for d in wanted], "你取了绝对值",
         "差值可以是负数（裁剪历史后发出去的变少了）：直接相减，不要取绝对值。"),
        ([None if d is None else max(d, 0) for d in wanted], "你把负的差值截成了 0",
         "差值可以是负数（裁剪历史后发出去的变少了）：直接相减，不要截到 0。"),
    ]
    for mistaken, message, hint in mistakes:
        if mistaken is not None and got == mistaken:
            return f"{message}：期望 {wanted}，得到 {short(got)}", hint
    return f"期望 {wanted}，得到 {short(got)}", ""


@checker("练习 7.1：prompt_growth —— 每一轮比上一轮多发了多少 prompt tokens")
def check_prompt_growth(fn: Callable[[Usage], Any], report: Report) -> None:
    """Exercise 7.1: the prompt-token difference between consecutive rounds, None-safe."""
    for name, case_usage, wanted, hint in GROWTH_CASES:
        with report.case(name):
            given = copy.deepcopy(case_usage)
            got = attempt(fn, given).get(hint)
            if given != case_usage:
                fail("你的函数改动了传进来的 usage 列表：只读它，结果放进一个新列表。", hint)
            if problem := _growth_problem(got, case_usage, wanted):
                fail(problem[0], problem[1] or hint)


# ---------------------------------------------------------------------------
# Exercise 2: a trimming strategy that keeps the protocol intact
# ---------------------------------------------------------------------------

LONG_LIMIT = 200  # an older tool result longer than this must come back shorter
PAGE = ("<!doctype html><html><head><title>Example Domain</title></head><body><div>"
        "<h1>Example Domain</h1><p>This domain is for use in documentation examples without "
        "needing permission. Avoid use in operations.</p><p><a href=\"https://iana.org/domains/"
        "example\">Learn more</a></p></div></body></html>")
NOTES = ("Meeting notes, week 48. " + "The loop resends every message each round; " * 8).strip()


def _assistant(*tool_calls: tuple[str, str, dict[str, Any]]) -> Message:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(args)}}
        for call_id, name, args in tool_calls]}


def _tool(call_id: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def history() -> list[Message]:
    """Three tool rounds; the last one has two calls (two results at the end)."""
    return [
        {"role": "system", "content": "You are a helpful assistant that uses tools."},
        {"role": "user", "content": "Fetch https://example.com/, count its characters, "
                                    "divide by 7, and read the notes."},
        _assistant(("call_a", "fetch_url", {"url": "https://example.com/"})),
        _tool("call_a", PAGE),
        _assistant(("call_b", "page_length", {"url": "https://example.com/"})),
        _tool("call_b", "The page https://example.com/ has 335 characters."),
        _assistant(("call_c", "calculator", {"expression": "335 / 7"}),
                   ("call_d", "read_notes", {"week": 48})),
        _tool("call_c", "335 / 7 = 47.8571428571"),
        _tool("call_d", NOTES),
    ]


NO_TOOLS = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "2099 年世界杯冠军是谁？"}]


def answered_then_asked() -> list[Message]:
    """The three tool rounds, the model's answer, and a new question from the user."""
    return [*history(), {"role": "assistant", "content": "网页有 335 个字符，除以 7 约是 47.86。"},
            {"role": "user", "content": "笔记里最重要的一条是什么？"}]

COPY_HINT = ("不要改传进来的消息：m[\"content\"] = ... 会改掉 run_agent 保存的完整历史。"
             "为要缩短的消息建一个新字典：{**m, \"content\": 新内容}，其他消息原样放进新列表。")
DROP_HINT = ("不能删 tool 消息：每个 tool_call 的 id 都必须有一条 tool 消息回应，"
             "少一条，服务商（以及本课的脚本模型）就回 HTTP 400。要缩短，就只改 content，"
             "保留 role 和 tool_call_id。")
NEWEST_HINT = ("最新的 keep_last 条 tool 结果要原样保留：模型下一步最需要的就是它们。"
               "先找出所有 tool 消息的位置，只缩短最后 keep_last 条之前的那些。")
ZERO_HINT = ("keep_last=0 时所有 tool 结果都该缩短。小心 Python 切片："
             "positions[:-0] 是空列表！可以写 positions[:max(0, len(positions) - keep_last)]。")
NEGATIVE_HINT = ("keep_last 比 tool 消息还多时一条都不缩。小心负数切片："
                 "4 条 tool 消息、keep_last=5 时，positions[:4 - 5] 就是 positions[:-1]，"
                 "会缩掉不该缩的。"
                 "可以写 positions[:max(0, len(positions) - keep_last)]。")
SHORTER_HINT = (f"比 keep_last 更早、又超过 {LONG_LIMIT} 个字符的 tool 结果要变短："
                "比如只留前 80 个字符，再注明删掉了多少。")
MESSAGES_HINT = ("keep_last 数的是 tool 消息，不是全部消息：先找出 tool 消息的位置 "
                 "positions = [i for i, m in enumerate(messages) if m[\"role\"] == \"tool\"]，"
                 "保留最后 keep_last 个位置上的。历史末尾不一定是 tool 消息"
                 "（模型答完、用户又问了一句时，末尾是 assistant 和 user）。")


def _trimmed_by_mistake(original: list[Message], keep_last: int) -> dict[str, set[int]]:
    """Which tool messages two typical mistakes would shorten (long ones only)."""
    tools = [i for i, m in enumerate(original) if m["role"] == "tool"]
    long = {i for i in tools if len(original[i]["content"]) > LONG_LIMIT}
    return {
        NEGATIVE_HINT: long & set(tools[: len(tools) - keep_last]),  # a negative slice end
        MESSAGES_HINT: long & {i for i in tools if i < len(original) - keep_last},
    }


def _counts_messages(fn: Callable[[list[Message], int], Any]) -> bool:
    """True when the learner keeps the newest messages of any role, not tool messages."""
    original = answered_then_asked()
    got = attempt(fn, copy.deepcopy(original), 1).value
    newest_tool = max(i for i, m in enumerate(original) if m["role"] == "tool")
    return (isinstance(got, list) and len(got) == len(original)
            and got[newest_tool] != original[newest_tool])


def _newest_hint(original: list[Message], got: list[Message], keep_last: int) -> str:
    """The hint for a newest tool result that was shortened: which mistake did that?"""
    tools = [i for i, m in enumerate(original) if m["role"] == "tool"]
    changed = {i for i in tools if got[i] != original[i]}
    for hint, shortened in _trimmed_by_mistake(original, keep_last).items():
        if changed == shortened:
            return hint
    return NEGATIVE_HINT if keep_last > len(tools) else NEWEST_HINT


def _trim_problem(original: list[Message], got: Any, keep_last: int) -> Problem:
    """What is wrong with `got` as a trimmed copy of `original` (None: nothing)."""
    if not isinstance(got, list) or not all(isinstance(m, dict) for m in got):
        return (f"应该返回一个由字典组成的列表，得到 {short(got)}",
                "返回新的消息列表：每条消息还是 {\"role\": ..., ...} 这样的字典。")
    roles = [m.get("role") for m in original]
    got_roles = [m.get("role") for m in got]
    if len(got) < len(original):
        if got_roles.count("tool") < roles.count("tool"):
            return (f"少了 {roles.count('tool') - got_roles.count('tool')} 条 tool 消息"
                    f"（原来 {len(original)} 条消息，你返回 {len(got)} 条）", DROP_HINT)
        return (f"原来 {len(original)} 条消息，你返回 {len(got)} 条",
                "这个策略只缩短内容，不删消息：条数、顺序都不变。")
    if got_roles != roles:
        return (f"消息的 role 或顺序变了：期望 {roles}，得到 {got_roles}",
                "条数、顺序、每条的 role 都不变：只改旧 tool 结果的 content。")
    for i, (before, after) in enumerate(zip(original, got, strict=True)):
        if before["role"] == "tool" and after.get("tool_call_id") != before["tool_call_id"]:
            return (f"messages[{i}] 的 tool_call_id 变了：期望 {before['tool_call_id']!r}，"
                    f"得到 {after.get('tool_call_id')!r}",
                    "新字典要带上原来的 tool_call_id：写成 {**m, \"content\": 新内容}，"
                    "不要只写 {\"role\": \"tool\", \"content\": ...}。id 对不上，"
                    "服务商（以及本课的脚本模型）就回 HTTP 400。")
        if before["role"] != "tool" and after != before:
            return (f"messages[{i}]（{before['role']}）被改动了",
                    "只缩短 tool 消息：system、user 和 assistant（连同它的 tool_calls）原样保留，"
                    "模型要靠它们知道问题和自己做过的决定。")
    tools = [i for i, m in enumerate(original) if m["role"] == "tool"]
    first_kept = max(0, len(tools) - keep_last)  # keep_last may exceed the tool messages
    newest = tools[first_kept:]
    for i in newest:
        if got[i] != original[i]:
            return (f"最新的 tool 结果 messages[{i}] 被改动了（keep_last={keep_last}）",
                    _newest_hint(original, got, keep_last))
    for i in tools[:first_kept]:
        content = got[i].get("content")
        if not isinstance(content, str):
            return (f"messages[{i}] 的 content 应该是字符串，得到 {short(content)}",
                    "缩短后的内容还是一段文字（str），模型要能读。")
        long = len(original[i]["content"]) > LONG_LIMIT
        if long and len(content) >= len(original[i]["content"]):
            if keep_last == 0 and all(got[j] == original[j] for j in tools):
                return "keep_last=0，可是一条 tool 结果都没变短", ZERO_HINT
            return (f"messages[{i}] 是较早的 tool 结果（{len(original[i]['content'])} 个字符），"
                    f"没有变短", SHORTER_HINT)
    return None


# (case, messages, keep_last, hint for a failure no typical mistake explains)
TRIM_CASES: list[tuple[str, list[Message], int, str]] = [
    ("三轮工具，keep_last=1", history(), 1, SHORTER_HINT),
    ("最后一轮有两个结果，keep_last=2", history(), 2, NEWEST_HINT),
    ("keep_last=0：所有 tool 结果都缩短", history(), 0, ZERO_HINT),
    ("keep_last 比 tool 消息还多：什么都不缩", history(), 5, NEGATIVE_HINT),
    ("还没有 tool 消息（只有 system 和 user）", NO_TOOLS, 1,
     "没有 tool 消息时原样返回一个新列表，不要报错。"),
    ("模型答完、用户又问了一句（末尾不是 tool 消息），keep_last=1", answered_then_asked(), 1,
     MESSAGES_HINT),
]


def notes_registry() -> ToolRegistry:
    """One tool with a long result, for the end-to-end case."""
    registry = ToolRegistry()

    def read_notes(week: int) -> str:
        """Read the team's meeting notes of one week.

        Args:
            week: the week number, e.g. 48.
        """
        return f"Week {week}: " + NOTES

    registry.register(read_notes)
    return registry


def notes_model() -> ScriptedModel:
    """Scripted (not an LLM): reads three weeks of notes, then answers."""
    return ScriptedModel([calls(call("read_notes", {"week": 46})),
                          calls(call("read_notes", {"week": 47})),
                          calls(call("read_notes", {"week": 48})),
                          answer("三周的笔记都读完了。")], name="scripted-notes",
                         max_requests=MAX_REQUESTS)


def _run_problem(fn: Callable[..., Any]) -> Problem:
    """Run the loop with the learner's strategy as `prepare`; check what was sent and kept."""
    model = notes_model()
    result = run_agent(model.client(), "读一读第 46 到 48 周的会议笔记。", notes_registry(),
                       model=MODEL, prepare=lambda messages: fn(messages, 1))
    rejected = next((problem for body in model.requests
                     if (problem := scripted.protocol_error(body))), None)
    if rejected:
        return (f"脚本模型拒绝了你发出的历史（HTTP 400）：{short(rejected, 160)}", DROP_HINT)
    if not result.ok:
        return f"run_agent 没有正常结束：{result.stop_reason.value}，{result.message}", ""
    kept = [m["content"] for m in result.messages if m["role"] == "tool"]
    if any(len(text) < len(NOTES) for text in kept):
        return ("run_agent 保存的完整历史也被缩短了：你的函数改动了传进来的消息", COPY_HINT)
    sent = [m for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    if len(sent[-1]["content"]) < len(NOTES):
        return "最后一次请求里，最新的 tool 结果被缩短了", NEWEST_HINT
    if not all(len(m["content"]) < len(NOTES) for m in sent[:-1]):
        return "最后一次请求里，较早的 tool 结果没有变短", SHORTER_HINT
    return None


@checker("练习 7.2：my_trim —— 缩短旧的 tool 结果，协议保持完整", trim_old_tool_results, hint=(
        "这道题要你自己写一个裁剪策略：找出 tool 消息的位置，"
        "把最新 keep_last 条之前、又太长的那些换成缩短后的新字典。"))
def check_my_trim(fn: Callable[[list[Message], int], Any], report: Report) -> None:
    """Exercise 7.2: shorten older tool results; ids, roles, order and the input intact."""
    for name, messages, keep_last, hint in TRIM_CASES:
        with report.case(name):
            given = copy.deepcopy(messages)
            got = attempt(fn, given, keep_last).get(hint)
            if given != messages:
                fail("传进来的 messages 被改动了", COPY_HINT)
            if got is given:
                fail("你返回的就是传进来的那个列表：要返回一个新列表", COPY_HINT)
            if problem := _trim_problem(messages, got, keep_last):
                message, found = problem
                if found == NEGATIVE_HINT and _counts_messages(fn):  # the same cut, two causes
                    found = MESSAGES_HINT
                fail(message, found or hint)
    with report.case("交给 run_agent(prepare=...) 跑一个脚本模型（不是 LLM）"):
        if problem := attempt(_run_problem, fn).get(SHORTER_HINT):
            fail(*problem)
