"""Checkers for lesson 05, the brakes.

    check_is_repeat(fn)          fn(previous_calls, name, arguments, limit) -> bool
    check_tool_error_brake(cls)  cls(limit).record(ok) -> bool, a counter reset by a success
    check_braked_loop(fn)        fn(client, question, registry, model, max_iters, max_repeats,
                                    max_tool_errors) -> (answer | None, stop_reason, messages)

(The exception fallback itself was lesson 03's exercise, `safe_invoke`; here the loop
uses the package's `registry.call`, and the learner writes the brakes around it.)

The loop checker runs the learner's loop against scripted models (programs, not
LLMs; see `vibe_agent.course.scripted`) that misbehave on purpose, and reads three
things: what the models received, which tools really ran (a call stopped by the
repeat brake must not run), and the history the loop returns (every tool_call
answered, even when a brake tripped). It never hangs itself: every model answers at
most `MAX_REQUESTS` requests, and the learner hears "你的循环在 20 次调用后还没停".
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import openai

from ...brakes import call_key, is_repeat
from ...loop import DEFAULT_SYSTEM_PROMPT, run_agent
from ...registry import ToolRegistry
from ...tools import DemoTools
from .. import scripted
from ..scripted import Reply, Responder, ScriptedModel, answer, call, calls, misbehaving
from . import (
    MAX_REQUESTS,
    MODEL,
    Attempt,
    Problem,
    Report,
    attempt,
    checker,
    checker_world,
    fail,
    short,
)

QUESTION = "17 × 23 等于多少？"
STOP_REASONS = ("answered", "max_iters", "repeated_call", "tool_errors", "provider_error")


# ---------------------------------------------------------------------------
# Exercise 1: is this call a repeat?
# ---------------------------------------------------------------------------

CALC = ("calculator", '{"expression": "17 * 23"}')
OTHER = ("calculator", '{"expression": "2 ** 10"}')
FETCH = ("fetch_url", '{"url": "https://example.com", "max_chars": 100}')
FETCH_REORDERED = '{"max_chars":100,"url":"https://example.com"}'
BROKEN = ("calculator", '{"expression": 17 * 23')

CANONICAL_HINT = ("参数是 JSON 文本：同一个调用，键的顺序和空格可能不同。先 json.loads，再 "
                  "json.dumps(..., sort_keys=True) 得到规范形式，用“名字 + 规范参数”比较。")
IN_A_ROW_HINT = ("只数历史末尾“连续”相同的调用：从最后一个往前数，遇到不同的就停。"
                 "中间隔着别的调用，就不算重复。")
COUNT_THIS_HINT = ("“连续 limit 次”把这一次也算进去：历史末尾已有 limit - 1 次相同调用，"
                   "这一次就是第 limit 次，应该返回 True。")

# (case, previous calls, (name, arguments) of this call, limit, expected, hint)
REPEAT_CASES: list[tuple[str, list[tuple[str, str]], tuple[str, str], int, bool, str]] = [
    ("第一次调用", [], CALC, 3, False, "历史为空时，这一次只是第 1 次，不算重复。"),
    ("历史末尾 2 次相同，这是第 3 次（limit=3）", [CALC, CALC], CALC, 3, True, COUNT_THIS_HINT),
    ("历史末尾 1 次相同，这是第 2 次（limit=3）", [CALC], CALC, 3, False,
     "第 2 次还没到 limit=3：只有连同这一次达到 limit 次才返回 True。"),
    ("已经连续 4 次，这是第 5 次（limit=3）", [OTHER, CALC, CALC, CALC, CALC], CALC, 3, True,
     "超过 limit 也要返回 True：用 >= limit 比较，而不是 == limit。"),
    ("参数相同只是键的顺序和空格不同", [FETCH, FETCH], (FETCH[0], FETCH_REORDERED), 3, True,
     CANONICAL_HINT),
    ("参数不同（算的是另一个式子）", [CALC, CALC], OTHER, 3, False,
     "参数不同就是不同的调用：比较“名字 + 参数”，不要只比名字。"),
    ("参数相同但工具名不同", [CALC, CALC], ("calc_v2", CALC[1]), 3, False,
     "工具名也是调用身份的一部分：名字不同，参数再像也不是同一个调用。"),
    ("相同调用中间隔着别的调用", [CALC, CALC, OTHER], CALC, 3, False, IN_A_ROW_HINT),
    ("limit=0 表示关掉这道刹车", [CALC, CALC, CALC, CALC], CALC, 0, False,
     "limit 为 0 时直接返回 False：0 表示这道刹车关掉了（和 run_agent 的 max_repeats=0 一样）。"),
    ("参数不是合法 JSON（模型写坏了）", [BROKEN, BROKEN], BROKEN, 3, True,
     "json.loads 失败时不能抛异常：用 try/except json.JSONDecodeError，"
     "退回去比较去掉首尾空白的原文。"),
]


@checker("练习 5.1：重复调用检测（名字 + 规范化参数，连续 N 次）", call_key, is_repeat, hint=(
        "题目要你自己写出“名字 + 规范化参数”的比较：json.loads 再 "
        "json.dumps(..., sort_keys=True)，坏 JSON 就比较去掉首尾空白的原文。"))
def check_is_repeat(fn: Callable[[list[tuple[str, str]], str, str, int], Any],
                    report: Report) -> None:
    """Exercise 5.1: True when this call makes `limit` identical calls in a row."""
    for name, previous, (tool, arguments), limit, wanted, hint in REPEAT_CASES:
        with report.case(name):
            history = list(previous)
            got = attempt(fn, history, tool, arguments, limit).get(hint)
            if history != previous:
                fail("你的函数改动了传进来的历史列表：检测只该读历史，记录由循环负责。", hint)
            if not isinstance(got, bool):
                fail(f"应该返回 True 或 False，得到 {short(got)}", hint)
            if got != wanted:
                fail(f"期望 {wanted}，得到 {got}（历史 {len(previous)} 条，limit={limit}）", hint)


# ---------------------------------------------------------------------------
# Exercise 2: the tool-error brake
# ---------------------------------------------------------------------------

RESET_HINT = ("成功一次就清零：工具只要成功过，前面的失败就不再“连续”。"
              "record(True) 时把计数设回 0。")
OK, FAILED = True, False

# (case, limit, ok of each tool result in order, expected record() return values, hint)
ERROR_CASES: list[tuple[str, int, list[bool], list[bool], str]] = [
    ("连续失败 3 次（limit=3）", 3, [FAILED] * 3, [False, False, True],
     "每次失败计数加 1，计数达到 limit 时返回 True。"),
    ("一直成功", 3, [OK] * 4, [False] * 4, "只数失败：成功的结果不加计数。"),
    ("失败、失败、成功、失败、失败（limit=3）", 3, [FAILED, FAILED, OK, FAILED, FAILED],
     [False] * 5, RESET_HINT),
    ("已经失败 3 次，又失败 2 次（limit=3）", 3, [FAILED] * 5, [False, False, True, True, True],
     "超过 limit 也要返回 True：用 >= limit 比较，而不是 == limit。"),
    ("limit=1：第一次失败就停", 1, [OK, FAILED], [False, True],
     "limit=1 时第一次失败就返回 True；成功不算。"),
    ("limit=0 表示关掉这道刹车", 0, [FAILED] * 4, [False] * 4,
     "limit 为 0 时永远返回 False：0 表示这道刹车关掉了"
     "（和 run_agent 的 max_tool_errors=0 一样）。"),
]


SHARED_HINT = ("计数放在了类上（类属性或全局变量），所有刹车共用它：上一个刹车记下的失败，"
               "会算到新刹车头上。在 __init__ 里写 self.失败次数 = 0，"
               "record 里也只改 self 上的这个属性；"
               "不要写 ToolErrorBrake.计数 或 type(self).计数，也不要用类里的 [] 列表。")


def _record_all(brake: Any, oks: list[bool]) -> list[Any]:
    return [attempt(brake.record, ok).get("record(ok) 只接收一个 bool，返回 True 或 False。")
            for ok in oks]


def _shares_state(cls: Callable[[int], Any]) -> bool:
    """True when brakes count together: a new brake is tripped by failures of older ones."""
    older = attempt(cls, 2).value
    if older is None or not hasattr(older, "record"):
        return False
    attempt(older.record, FAILED)
    attempt(older.record, FAILED)
    newer = attempt(cls, 2).value
    return newer is not None and attempt(newer.record, FAILED).value is True


@checker("练习 5.2：工具连续失败刹车 ToolErrorBrake", hint=(
        "这道题要你自己写这个类：__init__ 里记下 limit 和计数，record 里数连续失败。"))
def check_tool_error_brake(cls: Callable[[int], Any], report: Report) -> None:
    """Exercise 5.2: a counter of failing tool results in a row, reset by a success."""
    for name, limit, oks, wanted, hint in ERROR_CASES:
        with report.case(name):
            got = _record_all(attempt(cls, limit).get(hint), oks)
            if got == wanted and all(isinstance(value, bool) for value in got):
                continue
            if _shares_state(cls):
                hint = SHARED_HINT
            if not all(isinstance(value, bool) for value in got):
                fail(f"record() 应该返回 True 或 False，得到 {short(got)}", hint)
            shown = ", ".join("成功" if ok else "失败" for ok in oks)
            fail(f"依次记录 [{shown}]：期望 {wanted}，得到 {got}", hint)
    with report.case("两个刹车各数各的"):
        first = attempt(cls, 2).get(SHARED_HINT)
        second = attempt(cls, 2).get(SHARED_HINT)
        _record_all(first, [FAILED])
        got = _record_all(second, [FAILED])[0]
        if got is not False:
            fail(f"第一个刹车记了 1 次失败后，第二个刹车的第 1 次失败就返回了 {got!r}："
                 "两个实例共用了同一个计数", SHARED_HINT)


# ---------------------------------------------------------------------------
# Exercise 3: a loop with all the brakes
# ---------------------------------------------------------------------------

FILES = {"notes/todo.md": "- 写完第 5 课\n- 给循环装刹车\n"}


def read_file(path: str) -> str:
    """Read a text file from the project's notes folder.

    Args:
        path: the file's path, e.g. notes/todo.md.
    """
    if path not in FILES:  # like open(): a wrong path raises
        files = ", ".join(f"'{name}'" for name in FILES)
        raise FileNotFoundError(f"No such file: '{path}' (files here: {files})")
    return FILES[path]


def _counted(tool: Callable[..., Any], runs: list[str]) -> Callable[..., Any]:
    """The same tool (name, schema, behaviour), writing down every time it really runs."""

    @functools.wraps(tool)
    def run(*args: Any, **kwargs: Any) -> Any:
        runs.append(tool.__name__)
        return tool(*args, **kwargs)

    return run


def checker_registry(runs: list[str] | None = None) -> ToolRegistry:
    """The loop checker's tools: a calculator and a read_file that raises; each real run of
    a tool is appended to `runs`."""
    runs = [] if runs is None else runs
    registry = ToolRegistry()
    registry.register(_counted(DemoTools(checker_world()).calculator, runs))
    registry.register(_counted(read_file, runs))
    return registry


def guesses_paths(body: dict[str, Any]) -> Reply:
    """Scripted: a different wrong path every round; it never reads the hint in the error."""
    done = len(scripted.results_this_turn(body))
    return calls(call("read_file", {"path": f"todo_{done + 1}.md"}))


def fixes_its_path(body: dict[str, Any]) -> Reply:
    """Scripted: a wrong path first; after an error that names the files, the right path."""
    results = scripted.results_this_turn(body)
    if not results:
        return calls(call("read_file", {"path": "todo.md"}))
    last = results[-1][1]
    named = re.search(r"files here: '([^']+)'", last)
    if last.startswith("Error") and named:
        return calls(call("read_file", {"path": named.group(1)}))
    return answer(f"待办事项：{' '.join(last.split())}")


def twice_per_reply(body: dict[str, Any]) -> Reply:
    """Scripted: the same calculator call twice in every reply."""
    return calls(call("calculator", {"expression": "17 * 23"}),
                 call("calculator", {"expression": "17 * 23"}))


def _read(path: str) -> Reply:
    return calls(call("read_file", {"path": path}))


# Two failures, a success, two failures, an answer: the error count must reset in between.
RESETS = [_read("a.md"), _read("b.md"), _read("notes/todo.md"), _read("c.md"), _read("d.md"),
          answer("读到了：- 写完第 5 课 - 给循环装刹车")]


def follows(script: Sequence[Reply] | Responder, name: str) -> Callable[[], ScriptedModel]:
    """A fresh capped scripted model following `script`, for every run of a case."""
    return lambda: ScriptedModel(script, name=name, max_requests=MAX_REQUESTS)


def misbehaves(name: str) -> Callable[[], ScriptedModel]:
    """A fresh capped `misbehaving(name)` for every run of a case."""
    return lambda: misbehaving(name, max_requests=MAX_REQUESTS)


@dataclass
class LoopCase:
    """One run of the learner's loop and what it should end with."""

    name: str
    model: Callable[[], ScriptedModel]
    answer: str | None
    reason: str
    requests: int
    max_iters: int = 6
    max_repeats: int = 3
    max_tool_errors: int = 3
    hint: str = ""  # for a wrong stop reason or count that no known mistake explains
    runs: int | None = None  # how many times a tool really ran (None: not checked)

    @property
    def title(self) -> str:
        """The case name plus the settings that differ from the defaults."""
        changed = [f"{key}={value}" for key, value, default in (
            ("max_iters", self.max_iters, 6), ("max_repeats", self.max_repeats, 3),
            ("max_tool_errors", self.max_tool_errors, 3)) if value != default]
        return f"{self.name}［{', '.join(changed)}］" if changed else self.name


UNBOUNDED_HINT = ("用 for _ in range(max_iters) 代替 while True：模型不肯停的时候，"
                  "只有轮次上限能保证循环结束。")
PROVIDER_HINT = ("把 client.chat.completions.create(...) 包在 try/except openai.APIError 里，"
                 "出错就 return None, \"provider_error\", messages：HTTP 429/500 不是你代码的错，"
                 "但也不该变成一屏 traceback。")
TOOL_HINT = ("执行工具用 result = registry.call(name, arguments)：未知工具、坏 JSON、"
             "工具里的异常都变成 result.output 里的 \"Error: ...\" 文本，交给模型去读；"
             "result.ok 告诉你这次成没成功。")
ERRORS_HINT = ("每个工具结果都交给 ToolErrorBrake.record(result.ok)（练习 5.2）；"
               "它返回 True 时，刹车就触发了：停止原因 \"tool_errors\"。")
HISTORY_HINT = ("每轮先追加带 tool_calls 的 assistant 消息（assistant_message(message)），"
                "再给每个 tool_call 追加一条 role=\"tool\"、tool_call_id=tc.id 的消息，"
                "一个都不能少。")
REPEAT_HINT = ("执行每个调用之前先问 is_repeat(之前的调用, name, arguments, max_repeats)"
               "（练习 5.1）；True 就是刹车触发了：停止原因 \"repeated_call\"，这次调用不再执行。")
NOT_RUN_HINT = ("先问 is_repeat，再执行：is_repeat 为 True 的那次调用不能执行——"
                "重复的调用结果不会变，"
                "再跑一次只是白花时间（如果它写文件、发请求，还会重复产生副作用）。"
                "它只得到一条写明“没有执行”的 tool 消息。")
ANSWER_ALL_HINT = ("刹车触发时也要先给这一轮的每个调用都回一条 tool 消息（没执行的写明没有执行，"
                   "例如 \"Error: not run, the loop stopped (repeated_call).\"），再返回："
                   "每个 tool_call 都有回应，返回的 messages 才是一份完整、还能接着用的历史。")


def _provider(name: str, label: str) -> LoopCase:
    return LoopCase(f"{name}：{label}", misbehaves(name), None, "provider_error", 1,
                    hint=PROVIDER_HINT)


LOOP_CASES: list[LoopCase] = [
    LoopCase("正常问答：一轮工具，然后回答",
             follows([calls(call("calculator", {"expression": "17 * 23"})),
                       answer("17 × 23 = 391。")], "scripted-ideal"),
             "17 × 23 = 391。", "answered", 2,
             hint="tool_calls 为空时 return message.content, \"answered\", messages。"),
    LoopCase("says_done_while_calling：嘴上说“完成！”，手上还在调用工具",
             misbehaves("says_done_while_calling"), "工具结果已收到，这是最终回答。", "answered", 2,
             hint="不要在 content 里找“完成”：只有 tool_calls 为空才是最终回答。"),
    LoopCase("parallel_calls：一次返回三个工具调用（其中一个工具不存在）",
             misbehaves("parallel_calls"),
             "17 * 23 = 391；2 ** 10 = 1024；Error: unknown tool 'current_time'. "
             "Available tools: calculator, read_file. Call one of these, or answer without a tool.",
             "answered", 2, hint="遍历 message.tool_calls 里的每一个调用，每个都执行、都追加。"),
    LoopCase("repeat_forever", misbehaves("repeat_forever"), None, "repeated_call", 3,
             hint=REPEAT_HINT, runs=2),
    LoopCase("一次回复里两个相同的调用：刹车在一轮中间触发", follows(twice_per_reply,
             "scripted-twice-per-reply"), None, "repeated_call", 2, hint=REPEAT_HINT, runs=2),
    LoopCase("repeat_forever，关掉重复检测", misbehaves("repeat_forever"), None, "max_iters", 4,
             max_iters=4, max_repeats=0,
             hint="max_repeats=0 表示关掉重复检测，这时只有轮次上限能停下它。"),
    LoopCase("invalid_json：参数不是合法 JSON", misbehaves("invalid_json"),
             None, "tool_errors", 3, max_repeats=0, hint=ERRORS_HINT),
    LoopCase("unknown_tool：调用不存在的 search_web", misbehaves("unknown_tool"),
             None, "tool_errors", 3, max_repeats=0, hint=ERRORS_HINT),
    LoopCase("wrong_types：参数类型不对，只开轮次上限", misbehaves("wrong_types"),
             None, "max_iters", 3, max_iters=3, max_repeats=0, max_tool_errors=0,
             hint="max_tool_errors=0 表示关掉错误计数，这时只有轮次上限能停下它。"),
    LoopCase("工具一直抛异常（每轮换一个错路径）",
             follows(guesses_paths, "scripted-guesses-paths"), None, "tool_errors", 3,
             hint=ERRORS_HINT),
    LoopCase("工具一直抛异常，关掉错误计数",
             follows(guesses_paths, "scripted-guesses-paths"), None, "max_iters", 4,
             max_iters=4, max_tool_errors=0,
             hint="max_tool_errors=0 表示关掉错误计数，这时只有轮次上限能停下它。"),
    LoopCase("读到报错后改对路径（兜底让模型能补救）",
             follows(fixes_its_path, "scripted-fixes-its-path"),
             "待办事项：- 写完第 5 课 - 给循环装刹车", "answered", 3, hint=TOOL_HINT),
    LoopCase("失败 2 次、成功 1 次、再失败 2 次（计数要清零）",
             follows(RESETS, "scripted-resets"), "读到了：- 写完第 5 课 - 给循环装刹车",
             "answered", 6,
             hint="成功一次，连续失败的计数就清零：几次失败中间隔着一次成功，就不算连续。"),
    _provider("http_429", "限流"),
    _provider("http_500", "服务端出错"),
    LoopCase("no_choices：响应里 choices 是空列表", misbehaves("no_choices"),
             None, "provider_error", 1,
             hint="拿 choices[0] 之前先检查："
                  "if not response.choices: return None, \"provider_error\", messages。"),
]


@dataclass
class Outcome:
    """What one run of the learner's loop did."""

    run: Attempt
    model: ScriptedModel
    runs: list[str] = field(default_factory=list)  # the tools that really ran, in order

    @property
    def requests(self) -> int:
        return len(self.model.requests)


def run_loop(fn: Callable[..., Any], case: LoopCase) -> Outcome:
    """Run the learner's loop once; its exceptions are kept for the diagnosis."""
    model, runs = case.model(), []
    run = attempt(fn, model.client(), QUESTION, checker_registry(runs), model=MODEL,
                  max_iters=case.max_iters, max_repeats=case.max_repeats,
                  max_tool_errors=case.max_tool_errors)
    return Outcome(run, model, runs)


def _exception_problem(exc: BaseException, case: LoopCase) -> Problem:
    kind = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
    if isinstance(exc, openai.BadRequestError):
        return f"模型服务拒绝了你发的历史（HTTP 400）：{kind}", HISTORY_HINT
    if isinstance(exc, openai.APIError):
        return f"模型服务出错时你的循环抛出了 {kind}", PROVIDER_HINT
    if isinstance(exc, IndexError) and case.reason == "provider_error":
        return f"你的循环抛出了 {kind}", case.hint
    if isinstance(exc, json.JSONDecodeError | KeyError | FileNotFoundError | TypeError
                  | AttributeError):
        return f"工具出错时你的循环抛出了 {kind}", TOOL_HINT
    return f"你的循环抛出了 {kind}", case.hint


def _reason_problem(got_answer: Any, reason: str, outcome: Outcome, case: LoopCase) -> Problem:
    """The learner's loop stopped for another reason than expected: say which brake failed."""
    calls_made = f"（{outcome.requests} 次模型调用）"
    if reason == "provider_error":
        rejected = next((problem for body in outcome.model.requests
                         if (problem := scripted.protocol_error(body))), None)
        if rejected:
            return (f"你的循环报告 provider_error{calls_made}：模型服务拒绝了你发的历史"
                    f"（HTTP 400：{short(rejected, 160)}）", HISTORY_HINT)
        return f"期望 {case.reason!r}，你的循环报告 provider_error{calls_made}", case.hint
    if reason == "answered":
        return (f"模型还在调用工具，你的循环却当成了最终回答，返回 {short(got_answer)}",
                "只有 message.tool_calls 为空才是最终回答；跑满 max_iters 轮还没回答，"
                "停止原因就是 \"max_iters\"。")
    if reason == "repeated_call" and case.max_repeats == 0:
        return f"max_repeats=0 时不该报 repeated_call{calls_made}", (
            "max_repeats=0 表示关掉重复检测：is_repeat(..., limit=0) 要返回 False。")
    if reason == "tool_errors" and case.max_tool_errors == 0:
        return f"max_tool_errors=0 时不该报 tool_errors{calls_made}", (
            "max_tool_errors=0 表示关掉错误计数：ToolErrorBrake(0).record(...) 要返回 False。")
    if reason == "tool_errors" and case.reason == "answered":
        return f"期望 'answered'，你的循环报告 tool_errors{calls_made}", case.hint
    if case.reason in ("repeated_call", "tool_errors") and reason == "max_iters":
        which = "重复检测" if case.reason == "repeated_call" else "工具错误计数"
        return f"期望 {case.reason!r}，得到 'max_iters'{calls_made}：{which}没有生效", case.hint
    return f"期望停止原因 {case.reason!r}，得到 {reason!r}{calls_made}", case.hint


def _plain(messages: list[Any]) -> list[Any]:
    """The messages as the request JSON carries them (SDK objects dumped, None dropped)."""
    def dump(value: Any) -> Any:
        return value.model_dump(exclude_none=True) if hasattr(value, "model_dump") else str(value)

    def drop_none(m: Any) -> Any:
        return {k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m

    return [drop_none(m) for m in json.loads(json.dumps(messages, default=dump))]


def _history_problem(history: Any, outcome: Outcome, case: LoopCase) -> Problem:
    """The returned messages: the whole history, every tool_call answered."""
    if not isinstance(history, list):
        return (f"第三个元素应该是 messages 列表，得到 {short(history)}",
                "返回你的循环一路追加的那个 messages 列表：return 回答, 停止原因, messages。")
    plain = _plain(history)
    sent = _plain(outcome.model.requests[-1]["messages"]) if outcome.requests else []
    if plain[: len(sent)] != sent:
        return ("返回的 messages 和最后一次发给模型的历史对不上",
                "返回的就是循环里那一个 messages 列表（只增不减），不要另建一个、也不要裁剪。")
    if case.reason in ("repeated_call", "tool_errors", "max_iters") and not any(
            m.get("tool_calls") for m in plain[len(sent):] if isinstance(m, dict)):
        return ("刹车停下时，返回的 messages 里缺了最后那条带 tool_calls 的 assistant 消息",
                ANSWER_ALL_HINT)
    if unanswered := scripted.protocol_error({"messages": plain}):
        return f"返回的 messages 里有 tool_call 没有回应：{short(unanswered, 160)}", ANSWER_ALL_HINT
    return None


SYSTEM_HINT = ("messages 从 [system, user] 开始，system 用 DEFAULT_SYSTEM_PROMPT，和练习 4.1 一样。"
               "刹车管的是循环停不停；模型该怎样用工具、没有合适的工具时怎么办，"
               "仍然靠 system prompt 划定，装了刹车也不能丢。")
TEMPERATURE_HINT = ("每次请求照练习 4.1 带上 temperature=0：调试刹车时，同一个问题每次走同一条路，"
                    "才分得清是哪道刹车起了作用，而不是抽样的运气。")
TOOL_CHOICE_HINT = ("tool_choice 用 \"auto\"（或者不写，意思一样）："
                    "\"required\" 和指定函数不许模型直接回答，"
                    "循环唯一的正常出口就没了；\"none\" 让模型用不了工具（第 04 课第 8 节）。")


def _request_problem(model: ScriptedModel) -> Problem:
    """Every request as lesson 04 sends it: the system prompt first, temperature 0, "auto"."""
    for n, body in enumerate(model.requests, 1):
        messages = body.get("messages") or [{}]
        if messages[0].get("role") != "system":
            roles = ", ".join(str(m.get("role")) for m in messages[:3])
            return f"第 {n} 次请求没有 system 消息（开头是 {roles}）", SYSTEM_HINT
        if messages[0].get("content") != DEFAULT_SYSTEM_PROMPT:
            return (f"第 {n} 次请求的 system 是 {short(messages[0].get('content'), 40)}",
                    SYSTEM_HINT)
        if body.get("temperature") != 0:
            shown = body["temperature"] if "temperature" in body else "（没有设置）"
            return f"第 {n} 次请求的 temperature 是 {shown}", TEMPERATURE_HINT
        if body.get("tool_choice", "auto") != "auto":
            return f"第 {n} 次请求的 tool_choice 是 {body['tool_choice']!r}", TOOL_CHOICE_HINT
    return None


def _loop_problem(outcome: Outcome, case: LoopCase) -> Problem:
    error = outcome.run.error
    if isinstance(error, scripted.ScriptExhausted) or outcome.requests > MAX_REQUESTS:
        return (f"你的循环在 {MAX_REQUESTS} 次调用后还没停（本该在第 {case.requests} 次停下）",
                UNBOUNDED_HINT)
    if error is not None:
        return _exception_problem(error, case)
    if problem := _request_problem(outcome.model):
        return problem
    got = outcome.run.value
    if not isinstance(got, tuple) or len(got) != 3:
        return (f"应该返回 (answer, stop_reason, messages) 三个元素的元组，得到 {short(got)}",
                "每个出口都写成 return 回答或 None, \"停止原因\", messages，"
                "例如 return None, \"max_iters\", messages。")
    got_answer, reason, history = got
    if reason not in STOP_REASONS:
        return (f"停止原因应该是 {', '.join(STOP_REASONS)} 之一，得到 {reason!r}",
                "用这几个固定的字符串，调用你循环的代码才能按原因处理。")
    if reason != case.reason:
        return _reason_problem(got_answer, reason, outcome, case)
    if case.reason == "answered" and got_answer != case.answer:
        return f"期望回答 {case.answer!r}，得到 {short(got_answer)}", case.hint
    if outcome.requests != case.requests:
        if case.reason == "max_iters":
            return (f"max_iters={case.max_iters} 应该正好调用模型 {case.max_iters} 次，"
                    f"你的循环调用了 {outcome.requests} 次",
                    "用传进来的 max_iters：for _ in range(max_iters)，不要写死 6，"
                    "也不要多一轮或少一轮。")
        return (f"应该在第 {case.requests} 次模型调用后停下，你的循环调用了 "
                f"{outcome.requests} 次",
                "连同这一次数：第 N 次相同调用、第 N 次连续失败就停，"
                "直接用练习 5.1 的 is_repeat 和练习 5.2 的 ToolErrorBrake。")
    if case.runs is not None and len(outcome.runs) > case.runs:
        return (f"被判定为重复的调用还是执行了：工具一共执行了 {len(outcome.runs)} 次，"
                f"应该只有 {case.runs} 次", NOT_RUN_HINT)
    if case.answer is None and got_answer is not None:
        return (f"被刹车停下时不该有回答，得到 {short(got_answer)}",
                "刹车停下的运行没有最终回答：return None, \"停止原因\", messages。")
    return _history_problem(history, outcome, case)


SIGNATURE = ("braked_loop(client, question, registry, model, max_iters=6, max_repeats=3, "
             "max_tool_errors=3)")


def _signature_problem(fn: Callable[..., Any]) -> Problem:
    """Can the checker call `fn` the way the exercise says? (Checked before any run.)"""
    try:
        inspect.signature(fn).bind(None, QUESTION, None, model=MODEL, max_iters=6,
                                   max_repeats=3, max_tool_errors=3)
    except TypeError as exc:
        return f"没法按题目的方式调用你的函数：{exc}", f"函数签名要和题目一致：{SIGNATURE}。"
    except ValueError:  # no signature to read (e.g. a builtin): just try it
        pass
    return None


@checker("练习 5.3：装好刹车的循环（对手是一组故意捣乱的脚本模型，不是 LLM）", run_agent, hint=(
        "这道题要你亲手把刹车装进练习 4.1 的循环：is_repeat、ToolErrorBrake、"
        "openai.APIError 和轮次上限，都写在你自己的 for 循环里。"))
def check_braked_loop(fn: Callable[..., Any], report: Report) -> None:
    """Exercise 5.3: the loop with every brake, against each misbehaving scripted model."""
    if problem := _signature_problem(fn):
        with report.case("函数签名"):
            fail(*problem)
        return
    for case in LOOP_CASES:
        with report.case(case.title):
            if problem := _loop_problem(run_loop(fn, case), case):
                fail(*problem)
