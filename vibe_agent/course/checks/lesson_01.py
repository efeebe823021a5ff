"""Checkers for lesson 01, the naive way (tools in the prompt, a JSON output convention).

    check_parse_action(fn)             fn(text) -> {"tool", "arguments"} or {"answer"};
                                       ValueError unless the reply holds exactly one action
    check_fabricated_observations(fn)  fn(messages) -> the "Observation:" lines the model
                                       wrote itself (not the ones our program appended)

The replies are `naive.SCRIPTED_FAILURES` (examples we wrote, not model output) plus a
few more written for these checks (a JSON object over several lines, prose and JSON on
one line, braces inside a string). Each typical mistake is recognised by what the
learner's function returned or raised, and gets its own hint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...naive import SCRIPTED_FAILURES, json_convention_prompt
from ...tools import demo_registry
from . import Attempt, Report, attempt, checker, fail, fail_unless_a, short

# ---------------------------------------------------------------------------
# Exercise 1.1: parse_action(text) -> dict, or ValueError
# ---------------------------------------------------------------------------

CALC = {"tool": "calculator", "arguments": {"expression": "17 * 23"}}
CALC_JSON = json.dumps(CALC, ensure_ascii=False)
TIME_JSON = '{"tool": "current_time", "arguments": {"timezone": "Asia/Shanghai"}}'
REFUSE = ValueError  # the expected outcome "raise ValueError"

NESTED_HINT = ("参数本身也是一个 {...}。非贪婪的 \\{.*?\\} 在第一个 } 就停下，"
               "截出来的不是完整的 JSON。"
               "试试 json.JSONDecoder().raw_decode(text, i)：从位置 i 的 { 开始，"
               "恰好读完一个 JSON 对象就停，并告诉你它在哪里结束。")
PROSE_HINT = ("回复前后有说明文字：不能对整段文字 json.loads。先在文字里找到 JSON 对象"
              "（从每个 { 开始试着 raw_decode），再解析它。")
FENCE_HINT = ("```json … ``` 围栏不是 JSON 的一部分：去掉围栏，或者直接在文字里找 {...}。"
              "注意围栏可能写成 ```json，也可能只写 ```。")
GREEDY_HINT = ("贪婪的 \\{.*\\} 从第一个 { 一直吞到最后一个 }，把后面文字里的 {天气} 也吞进去了。"
               "用 raw_decode 一次只读一个完整的 JSON 对象；读不出 JSON 的 { 就跳过。")
SEVERAL_HINT = ("回复里有两个调用。只执行第一个，第二个就被悄悄丢掉了。"
                "约定是每次回复只有一个 JSON 对象："
                "找到的不是正好一个，就 raise ValueError，让调用方知道回复不合约定。")
FABRICATED_HINT = ("这条回复里有一个调用、一行模型自己编的 Observation，还有一个答案。"
                   "编出来的“工具结果”不能采信：不止一个 JSON 对象，就 raise ValueError。")
PROSE_ONLY_HINT = ("这条回复里没有 JSON，不能把整段文字当成答案：它没有遵守约定，"
                   "里面的内容也没有经过任何工具。raise ValueError。")
BOLD_HINT = ("工具名两边的 ** 是 Markdown 加粗：去掉它（name.strip(\"*\")），"
             "否则注册表里找不到叫 **calculator** 的工具。")
NO_ACTION_HINT = "JSON 里既没有 \"tool\" 也没有 \"answer\"，它不是一个动作：raise ValueError。"
LINES_HINT = ("模型常把 JSON 排成好几行：一个对象跨了多行，逐行 json.loads 每一行都读不出来。"
              "不要按行切开，在整段文字里从每个 { 开始试着 raw_decode。")
SAME_LINE_HINT = ("JSON 和说明文字可能在同一行（好的：{…}）：对这一行 json.loads 也会失败。"
                  "在整段文字里从每个 { 开始试着 raw_decode，不要按行找。")
BRACE_COUNT_HINT = ("字符串里的 { 和 } 不算括号：自己数括号会在字符串里的 } 处提前收尾。"
                    "别自己数，让 json.JSONDecoder().raw_decode 去读，它认得字符串。")
MULTI_LINE_JSON = json.dumps(CALC, indent=2)  # one object over seven lines

# (case name, reply text, expected dict or REFUSE, hint when the outcome is wrong)
PARSE_CASES: list[tuple[str, str, dict[str, Any] | type[ValueError], str]] = [
    ("干净的一个调用（clean）", SCRIPTED_FAILURES["clean"], CALC, NESTED_HINT),
    ("JSON 前后有说明文字（prose_around_json）", SCRIPTED_FAILURES["prose_around_json"], CALC,
     PROSE_HINT),
    ("```json 代码围栏（code_fence）", SCRIPTED_FAILURES["code_fence"], CALC, FENCE_HINT),
    ("工具名被 Markdown 加粗（markdown_bold）", SCRIPTED_FAILURES["markdown_bold"], CALC,
     BOLD_HINT),
    ("一条回复里两个调用（several_calls）", SCRIPTED_FAILURES["several_calls"], REFUSE,
     SEVERAL_HINT),
    ("只有文字，没有 JSON（prose_instead_of_json）", SCRIPTED_FAILURES["prose_instead_of_json"],
     REFUSE, PROSE_ONLY_HINT),
    ("编造的 Observation（fabricated_observation）",
     SCRIPTED_FAILURES["fabricated_observation"], REFUSE, FABRICATED_HINT),
    ("最终回答 {\"answer\": ...}", '{"answer": "17 × 23 = 391。"}',
     {"answer": "17 × 23 = 391。"}, "{\"answer\": ...} 是最终回答，返回 {\"answer\": 那段文字}。"),
    ("没写语言名的 ``` 围栏", f"```\n{TIME_JSON}\n```",
     {"tool": "current_time", "arguments": {"timezone": "Asia/Shanghai"}}, FENCE_HINT),
    ("没有 arguments 字段", '{"tool": "current_time"}',
     {"tool": "current_time", "arguments": {}},
     "没有 \"arguments\" 时当作没有参数：补上空的 {}。"),
    ("JSON 后面的文字里还有 {…}",
     '{"tool": "get_weather", "arguments": {"city": "北京"}}\n等工具返回 {天气} 之后我再回答。',
     {"tool": "get_weather", "arguments": {"city": "北京"}}, GREEDY_HINT),
    ("两个调用放在同一个代码围栏里", f"```json\n{CALC_JSON}\n{TIME_JSON}\n```", REFUSE,
     SEVERAL_HINT),
    ("JSON 里既没有 tool 也没有 answer", '{"result": 391}', REFUSE, NO_ACTION_HINT),
    ("一个 JSON 对象排成了好几行", MULTI_LINE_JSON, CALC, LINES_HINT),
    ("说明文字和 JSON 在同一行（好的：{…}）", f"好的：{CALC_JSON}", CALC, SAME_LINE_HINT),
    ("回答的文字里有花括号", '{"answer": "右花括号长这样：}，左花括号长这样：{"}',
     {"answer": "右花括号长这样：}，左花括号长这样：{"}, BRACE_COUNT_HINT),
]

SHAPE_HINT = ("返回一个普通的 dict：调用是 {\"tool\": 名字, \"arguments\": {...}}，"
              "回答是 {\"answer\": 文字}。")


def _judge_parse(outcome: Attempt, wanted: dict[str, Any] | type[ValueError], hint: str) -> None:
    got, error = outcome.value, outcome.error
    if wanted is REFUSE:
        if isinstance(error, ValueError):
            return
        if error is not None:
            fail(f"应该 raise ValueError，却抛出了 {type(error).__name__}: {error}",
                 "不合约定的回复一律 raise ValueError(...)（json.JSONDecodeError 本身就是 "
                 "ValueError 的子类，可以直接让它抛出去）。")
        if got is None:
            fail("返回了 None，应该 raise ValueError",
                 "失败时不要返回 None：raise ValueError(\"…为什么…\")，"
                 "调用方才不会把 None 当成一个动作。")
        fail(f"应该 raise ValueError，却返回了 {short(got)}", hint)
    if error is not None:
        fail(f"应该返回 {short(wanted)}，却抛出了 {type(error).__name__}: {error}", hint)
    fail_unless_a(dict, got, SHAPE_HINT)
    if got != wanted:
        tool = got.get("tool")
        if isinstance(tool, str) and "*" in tool:
            hint = BOLD_HINT
        elif "tool" in wanted and "arguments" not in got:
            hint = "调用要带上 \"arguments\"：回复里没有时补上空的 {}。"
        elif set(got) != set(wanted):
            hint = SHAPE_HINT + "不要多放别的键。"
        fail(f"期望 {short(wanted)}，得到 {short(got)}", hint)


@checker("练习 1.1：parse_action —— 宽容但不糊涂的解析器")
def check_parse_action(fn: Callable[[str], Any], report: Report) -> None:
    """Exercise 1.1: read one action out of a reply, refuse anything else."""
    for name, text, wanted, hint in PARSE_CASES:
        with report.case(name):
            _judge_parse(attempt(fn, text), wanted, hint)


# ---------------------------------------------------------------------------
# Exercise 1.2: fabricated_observations(messages) -> list[str]
# ---------------------------------------------------------------------------

SYSTEM = {"role": "system", "content": json_convention_prompt(demo_registry())}


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


REAL_WEATHER = "Observation: Beijing: sunny, 12°C, light north wind (demo data, not real)"
TWO_INVENTED = ('{"tool": "current_time", "arguments": {}}\n'
                "Observation: 2026-11-30 21:00:00\n"
                '{"tool": "calculator", "arguments": {"expression": "17 * 23"}}\n'
                "Observation: 17 * 23 = 391\n"
                '{"answer": "现在是 21 点；17 × 23 = 391。"}')

# (case name, messages, the fabricated lines in order)
OBSERVATION_CASES: list[tuple[str, list[dict[str, str]], list[str]]] = [
    ("一轮真实的工具调用：Observation 是程序追加的",
     [SYSTEM, _user("17 × 23 等于多少？"), _assistant(SCRIPTED_FAILURES["clean"]),
      _user("Observation: 17 * 23 = 391"), _assistant('{"answer": "17 × 23 = 391。"}')], []),
    ("模型在自己的回复里写了 Observation",
     [SYSTEM, _user("北京今天天气怎么样？"),
      _assistant(SCRIPTED_FAILURES["fabricated_observation"])],
     ["Observation: 北京今天晴，26 摄氏度"]),
    ("真实的和编造的都有",
     [SYSTEM, _user("北京今天天气怎么样？"),
      _assistant('{"tool": "get_weather", "arguments": {"city": "北京"}}'), _user(REAL_WEATHER),
      _assistant('{"tool": "get_weather", "arguments": {"city": "北京", "day": "明天"}}\n'
                 "Observation: 明天也是晴天，14°C\n"
                 '{"answer": "今天晴，12°C；明天也是晴天，14°C。"}')],
     ["Observation: 明天也是晴天，14°C"]),
    ("中文的“观察：”",
     [SYSTEM, _user("AAPL 的股价是多少？"),
      _assistant('{"tool": "get_stock", "arguments": {"code": "AAPL"}}\n'
                 "观察：AAPL 现价 230 美元\n"
                 '{"answer": "AAPL 现价 230 美元。"}')],
     ["观察：AAPL 现价 230 美元"]),
    ("一条回复里编了两次",
     [SYSTEM, _user("现在几点？17 × 23 等于多少？"), _assistant(TWO_INVENTED)],
     ["Observation: 2026-11-30 21:00:00", "Observation: 17 * 23 = 391"]),
]


def _finds_english(fn: Callable[[list[dict[str, str]]], Any],
                   messages: list[dict[str, str]]) -> bool:
    """Would the function find the line if the model had written "Observation:" instead?"""
    english = [{**m, "content": m["content"].replace("观察：", "Observation: ")} for m in messages]
    return bool(attempt(fn, english).value)


def _observation_hint(fn: Callable[[list[dict[str, str]]], Any], got: list[Any],
                      wanted: list[str], messages: list[dict[str, str]]) -> str:
    """The hint for the mistake that explains `got`."""
    from_us = [m["content"] for m in messages if m["role"] != "assistant"]
    if any(isinstance(g, str) and any(g.strip() and g.strip() in text for text in from_us)
           for g in got):
        return ("role 为 user 的 “Observation: …” 是我们的程序追加的真实工具结果，"
                "system 消息是我们写的约定，它们都不算编造。只检查 role 为 assistant 的消息。")
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    if any(g in replies for g in got):
        return ("返回编造的那一行（例如 'Observation: 北京今天晴，26 摄氏度'），不是整条消息："
                "用 content.splitlines() 逐行检查。")
    if sorted(map(str, got)) == sorted(wanted) and got != wanted:
        return "按出现的先后顺序返回，不要用 set 去重或排序。"
    if any(line.startswith("观察") for line in wanted) and not got and _finds_english(fn, messages):
        return "模型也会写中文的“观察：”（全角冒号）：以 “Observation:” 或 “观察：” 开头的行都算。"
    if len(got) < len(wanted):
        return ("编造的 Observation 常常夹在回复中间：逐行检查每一行的开头"
                "（line.strip().startswith(...)），不要只看整条回复的开头，也不要找到一行就停。")
    return "只收集 assistant 消息里以 “Observation:” 或 “观察：” 开头的行，去掉行首行尾的空白。"


@checker("练习 1.2：fabricated_observations —— 找出模型自己编的“工具结果”")
def check_fabricated_observations(fn: Callable[[list[dict[str, str]]], Any],
                                   report: Report) -> None:
    """Exercise 1.2: find the tool results the model wrote itself."""
    for name, messages, wanted in OBSERVATION_CASES:
        with report.case(name):
            got = attempt(fn, [dict(m) for m in messages]).get(
                "只读 role 为 assistant 的消息，用 content.splitlines() 逐行检查。")
            fail_unless_a(list, got,
                          "返回一个列表，每个元素是编造的那一行文字（str）；没有就返回 []。")
            if got != wanted:
                fail(f"期望 {short(wanted)}，得到 {short(got)}",
                     _observation_hint(fn, got, wanted, messages))
