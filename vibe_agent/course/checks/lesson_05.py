"""Checkers for lesson 05, the brakes.

    check_is_repeat(fn)          fn(previous_calls, name, arguments, limit) -> bool
    check_tool_error_brake(cls)  cls(limit).record(ok) -> bool, a counter reset by a success
    check_braked_loop(fn)        fn(client, question, registry, model, max_iters, max_repeats,
                                    max_tool_errors) -> (answer | None, stop_reason)

(The exception fallback itself was lesson 03's exercise, `safe_invoke`; here the loop
uses the package's `registry.call`, and the learner writes the brakes around it.)

The loop checker runs the learner's loop against scripted models (programs, not
LLMs; see `vibe_agent.scripted`) that misbehave on purpose. It must never hang
itself: every model it hands out carries a fuse, so request FUSE + 1 raises
`ScriptExhausted` instead of replying, and the learner hears "你的循环在 20 次调用后还没停".
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import openai

from ...registry import ToolRegistry
from ...tools import DemoTools
from ..scripted import (
    MISBEHAVIOURS,
    Policy,
    Reply,
    ScriptedModel,
    ScriptExhausted,
    answer,
    call,
    calls,
    protocol_error,
    results_this_turn,
)
from . import Problem, Report
from . import fail as _fail
from . import short as _short

MODEL = "scripted"
QUESTION = "17 × 23 等于多少？"
FUSE = 20  # the checker's own emergency stop: no case needs more than 6 model calls
STOP_REASONS = ("answered", "max_iters", "repeated_call", "tool_errors", "provider_error")
# A problem found in what the learner's code did: (what is wrong, hint).


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


def check_is_repeat(fn: Callable[[list[tuple[str, str]], str, str, int], Any]) -> None:
    """Exercise 5.1: True when this call makes `limit` identical calls in a row."""
    report = Report("练习 5.1：重复调用检测（名字 + 规范化参数，连续 N 次）")
    for name, previous, (tool, arguments), limit, wanted, hint in REPEAT_CASES:
        with report.case(name, hint=hint):
            history = list(previous)
            got = fn(history, tool, arguments, limit)
            report.expect(history == previous,
                          "你的函数改动了传进来的历史列表：检测只该读历史，记录由循环负责。")
            report.expect(isinstance(got, bool),
                          f"应该返回 True 或 False，得到 {_short(got)}")
            report.expect(got == wanted,
                          f"期望 {wanted}，得到 {got}（历史 {len(previous)} 条，limit={limit}）")
    report.show()


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


def check_tool_error_brake(cls: Callable[[int], Any]) -> None:
    """Exercise 5.2: a counter of failing tool results in a row, reset by a success."""
    report = Report("练习 5.2：工具连续失败刹车 ToolErrorBrake")
    for name, limit, oks, wanted, hint in ERROR_CASES:
        with report.case(name, hint=hint):
            brake = cls(limit)
            got = [brake.record(ok) for ok in oks]
            report.expect(all(isinstance(value, bool) for value in got),
                          f"record() 应该返回 True 或 False，得到 {_short(got)}")
            shown = ", ".join("成功" if ok else "失败" for ok in oks)
            report.expect(got == wanted,
                          f"依次记录 [{shown}]：期望 {wanted}，得到 {got}")
    with report.case("两个刹车各数各的", hint="计数放在实例上（self.xxx，在 __init__ 里设成 0），"
                                          "不要放在类属性或全局变量里。"):
        first, second = cls(2), cls(2)
        first.record(FAILED)
        got = second.record(FAILED)
        report.expect(got is False, "第一个刹车记了 1 次失败后，第二个刹车的第 1 次失败就返回了 "
                                    f"{got!r}：两个实例共用了同一个计数")
    report.show()


# ---------------------------------------------------------------------------
# Exercise 3: a loop with all the brakes
# ---------------------------------------------------------------------------

FILES = {"notes/todo.md": "- 写完第 5 课\n- 给循环装刹车\n"}


def checker_registry() -> ToolRegistry:
    """The tools the loop checker offers: a calculator and a read_file that raises."""
    registry = ToolRegistry()
    registry.register(DemoTools().calculator)

    def read_file(path: str) -> str:
        """Read a text file from the project's notes folder.

        Args:
            path: the file's path, e.g. notes/todo.md.
        """
        if path not in FILES:  # like open(): a wrong path raises
            files = ", ".join(f"'{name}'" for name in FILES)
            raise FileNotFoundError(f"No such file: '{path}' (files here: {files})")
        return FILES[path]

    registry.register(read_file)
    return registry


def guesses_paths(body: dict[str, Any]) -> Reply:
    """Scripted: a different wrong path every round; it never reads the hint in the error."""
    return calls(call("read_file", {"path": f"todo_{len(results_this_turn(body)) + 1}.md"}))


def fixes_its_path(body: dict[str, Any]) -> Reply:
    """Scripted: a wrong path first; after an error that names the files, the right path."""
    results = results_this_turn(body)
    if not results:
        return calls(call("read_file", {"path": "todo.md"}))
    last = results[-1][1]
    named = re.search(r"files here: '([^']+)'", last)
    if last.startswith("Error") and named:
        return calls(call("read_file", {"path": named.group(1)}))
    return answer(f"待办事项：{' '.join(last.split())}")


def _read(path: str) -> Reply:
    return calls(call("read_file", {"path": path}))


# Two failures, a success, two failures, an answer: the error count must reset in between.
RESETS = [_read("a.md"), _read("b.md"), _read("notes/todo.md"), _read("c.md"), _read("d.md"),
          answer("读到了：- 写完第 5 课 - 给循环装刹车")]


def fused(script: Sequence[Reply] | Policy, name: str, fuse: int = FUSE) -> ScriptedModel:
    """A scripted model whose request number fuse + 1 raises `ScriptExhausted`."""
    if not callable(script):
        return ScriptedModel(script, name=name)  # a list of replies runs out by itself
    model: ScriptedModel

    def policy(body: dict[str, Any]) -> Reply:
        if len(model.requests) > fuse:
            raise ScriptExhausted(f"scripted model {name!r}: fuse blown after {fuse} requests")
        return script(body)

    model = ScriptedModel(policy, name=name)
    return model


def misbehaving_with_fuse(name: str, fuse: int = FUSE) -> ScriptedModel:
    """`misbehaving(name)` with a fuse: it raises instead of replying after `fuse` requests."""
    return fused(MISBEHAVIOURS[name](), f"scripted-{name}", fuse)


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
                 "出错就 return None, \"provider_error\"：HTTP 429/500 不是你代码的错，"
                 "但也不该变成一屏 traceback。")
TOOL_HINT = ("执行工具用 result = registry.call(name, arguments)：未知工具、坏 JSON、"
             "工具里的异常都变成 result.output 里的 \"Error: ...\" 文本，交给模型去读；"
             "result.ok 告诉你这次成没成功。")
ERRORS_HINT = ("每个工具结果都交给 ToolErrorBrake.record(result.ok)（练习 5.2）；"
               "它返回 True 时 return None, \"tool_errors\"。")
HISTORY_HINT = ("每轮先追加带 tool_calls 的 assistant 消息（assistant_message(message)），"
                "再给每个 tool_call 追加一条 role=\"tool\"、tool_call_id=tc.id 的消息，"
                "一个都不能少。")
REPEAT_HINT = ("执行每个调用之前先问 is_repeat(之前的调用, name, arguments, max_repeats)"
               "（练习 5.1）；True 就 return None, \"repeated_call\"，这次调用不再执行。")


def _provider(name: str, label: str) -> LoopCase:
    return LoopCase(f"{name}：{label}", lambda: misbehaving_with_fuse(name), None,
                    "provider_error", 1, hint=PROVIDER_HINT)


LOOP_CASES: list[LoopCase] = [
    LoopCase("正常问答：一轮工具，然后回答",
             lambda: fused([calls(call("calculator", {"expression": "17 * 23"})),
                            answer("17 × 23 = 391。")], "scripted-ideal"),
             "17 × 23 = 391。", "answered", 2,
             hint="tool_calls 为空时 return message.content, \"answered\"。"),
    LoopCase("says_done_while_calling：嘴上说“完成！”，手上还在调用工具",
             lambda: misbehaving_with_fuse("says_done_while_calling"),
             "工具结果已收到，这是最终回答。", "answered", 2,
             hint="不要在 content 里找“完成”：只有 tool_calls 为空才是最终回答。"),
    LoopCase("parallel_calls：一次返回三个工具调用（其中一个工具不存在）",
             lambda: misbehaving_with_fuse("parallel_calls"),
             "17 * 23 = 391；2 ** 10 = 1024；Error: unknown tool 'current_time'. "
             "Available tools: calculator, read_file. Call one of these, or answer without a tool.",
             "answered", 2, hint="遍历 message.tool_calls 里的每一个调用，每个都执行、都追加。"),
    LoopCase("repeat_forever", lambda: misbehaving_with_fuse("repeat_forever"),
             None, "repeated_call", 3, hint=REPEAT_HINT),
    LoopCase("repeat_forever，关掉重复检测",
             lambda: misbehaving_with_fuse("repeat_forever"), None, "max_iters", 4,
             max_iters=4, max_repeats=0,
             hint="max_repeats=0 表示关掉重复检测，这时只有轮次上限能停下它。"),
    LoopCase("invalid_json：参数不是合法 JSON", lambda: misbehaving_with_fuse("invalid_json"),
             None, "tool_errors", 3, max_repeats=0, hint=ERRORS_HINT),
    LoopCase("unknown_tool：调用不存在的 search_web", lambda: misbehaving_with_fuse("unknown_tool"),
             None, "tool_errors", 3, max_repeats=0, hint=ERRORS_HINT),
    LoopCase("wrong_types：参数类型不对，只开轮次上限",
             lambda: misbehaving_with_fuse("wrong_types"), None, "max_iters", 3,
             max_iters=3, max_repeats=0, max_tool_errors=0,
             hint="max_tool_errors=0 表示关掉错误计数，这时只有轮次上限能停下它。"),
    LoopCase("工具一直抛异常（每轮换一个错路径）",
             lambda: fused(guesses_paths, "scripted-guesses-paths"), None, "tool_errors", 3,
             hint=ERRORS_HINT),
    LoopCase("工具一直抛异常，关掉错误计数",
             lambda: fused(guesses_paths, "scripted-guesses-paths"), None, "max_iters", 4,
             max_iters=4, max_tool_errors=0,
             hint="max_tool_errors=0 表示关掉错误计数，这时只有轮次上限能停下它。"),
    LoopCase("读到报错后改对路径（兜底让模型能补救）",
             lambda: fused(fixes_its_path, "scripted-fixes-its-path"),
             "待办事项：- 写完第 5 课 - 给循环装刹车", "answered", 3, hint=TOOL_HINT),
    LoopCase("失败 2 次、成功 1 次、再失败 2 次（计数要清零）",
             lambda: fused(RESETS, "scripted-resets"), "读到了：- 写完第 5 课 - 给循环装刹车",
             "answered", 6,
             hint="成功一次，连续失败的计数就清零：几次失败中间隔着一次成功，就不算连续。"),
    _provider("http_429", "限流"),
    _provider("http_500", "服务端出错"),
    LoopCase("no_choices：响应里 choices 是空列表", lambda: misbehaving_with_fuse("no_choices"),
             None, "provider_error", 1,
             hint="拿 choices[0] 之前先检查："
                  "if not response.choices: return None, \"provider_error\"。"),
]


@dataclass
class Outcome:
    """What one run of the learner's loop did."""

    result: Any = None
    error: BaseException | None = None
    requests: int = 0


def run_loop(fn: Callable[..., Any], case: LoopCase) -> tuple[Outcome, ScriptedModel]:
    """Run the learner's loop once; its exceptions are kept, not raised."""
    model = case.model()
    outcome = Outcome()
    try:
        outcome.result = fn(model.client(), QUESTION, checker_registry(), model=MODEL,
                            max_iters=case.max_iters, max_repeats=case.max_repeats,
                            max_tool_errors=case.max_tool_errors)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - the learner's loop raised: diagnose it below
        outcome.error = exc
    outcome.requests = len(model.requests)
    return outcome, model


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


def _reason_problem(got_answer: Any, reason: str, outcome: Outcome, model: ScriptedModel,
                    case: LoopCase) -> Problem:
    """The learner's loop stopped for another reason than expected: say which brake failed."""
    calls_made = f"（{outcome.requests} 次模型调用）"
    if reason == "provider_error":
        rejected = next((problem for body in model.requests
                         if (problem := protocol_error(body))), None)
        if rejected:
            return (f"你的循环报告 provider_error{calls_made}：模型服务拒绝了你发的历史"
                    f"（HTTP 400：{_short(rejected, 160)}）", HISTORY_HINT)
        return f"期望 {case.reason!r}，你的循环报告 provider_error{calls_made}", case.hint
    if reason == "answered":
        return (f"模型还在调用工具，你的循环却当成了最终回答，返回 {_short(got_answer)}",
                "只有 message.tool_calls 为空才是最终回答；跑满 max_iters 轮还没回答，"
                "就 return None, \"max_iters\"。")
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


def _loop_problem(outcome: Outcome, model: ScriptedModel, case: LoopCase) -> Problem:
    if isinstance(outcome.error, ScriptExhausted) or outcome.requests > FUSE:
        return (f"你的循环在 {FUSE} 次调用后还没停（本该在第 {case.requests} 次停下）",
                UNBOUNDED_HINT)
    if outcome.error is not None:
        return _exception_problem(outcome.error, case)
    got = outcome.result
    if not isinstance(got, tuple) or len(got) != 2:
        return (f"应该返回 (answer, stop_reason) 两个元素的元组，得到 {_short(got)}",
                "每个出口都写成 return 回答或 None, \"停止原因\"，"
                "例如 return None, \"max_iters\"。")
    got_answer, reason = got
    if reason not in STOP_REASONS:
        return (f"停止原因应该是 {', '.join(STOP_REASONS)} 之一，得到 {reason!r}",
                "用这几个固定的字符串，调用你循环的代码才能按原因处理。")
    if reason != case.reason:
        return _reason_problem(got_answer, reason, outcome, model, case)
    if case.reason == "answered" and got_answer != case.answer:
        return f"期望回答 {case.answer!r}，得到 {_short(got_answer)}", case.hint
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
    if case.answer is None and got_answer is not None:
        return (f"被刹车停下时不该有回答，得到 {_short(got_answer)}",
                "刹车停下的运行没有最终回答：return None, \"停止原因\"。")
    return None


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


def check_braked_loop(fn: Callable[..., Any]) -> None:
    """Exercise 5.3: the loop with every brake, against each misbehaving scripted model."""
    report = Report("练习 5.3：装好刹车的循环（对手是一组故意捣乱的脚本模型，不是 LLM）")
    problem = _signature_problem(fn)
    if problem is not None:
        with report.case("函数签名"):
            _fail(report, problem)
        report.show()
        return
    for case in LOOP_CASES:
        with report.case(case.title):
            outcome, model = run_loop(fn, case)
            _fail(report, _loop_problem(outcome, model, case))
    report.show()
