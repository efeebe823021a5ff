"""Lesson 05's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from vibe_agent.brakes import call_key
from vibe_agent.course.checks import MAX_REQUESTS
from vibe_agent.course.checks.lesson_05 import (
    check_braked_loop,
    check_is_repeat,
    check_tool_error_brake,
)
from vibe_agent.loop import DEFAULT_SYSTEM_PROMPT, run_agent
from vibe_agent.reply import assistant_message

# --- exercise 5.1: is_repeat ----------------------------------------------------------------


def canonical(name: str, arguments: str) -> str:
    try:
        return name + json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except json.JSONDecodeError:
        return name + arguments.strip()


def repeat_right(previous, name, arguments, limit):
    if limit <= 0:
        return False
    run = 1
    for tool, args in reversed(previous):
        if canonical(tool, args) != canonical(name, arguments):
            break
        run += 1
    return run >= limit


def repeat_unsolved(previous, name, arguments, limit):
    raise NotImplementedError("练习还没完成")


def repeat_raw_text(previous, name, arguments, limit):
    run = 1
    for call in reversed(previous):
        if call != (name, arguments):
            break
        run += 1
    return limit > 0 and run >= limit


def repeat_anywhere(previous, name, arguments, limit):
    same = sum(canonical(*call) == canonical(name, arguments) for call in previous)
    return limit > 0 and same + 1 >= limit


def repeat_without_this_call(previous, name, arguments, limit):
    run = 0
    for tool, args in reversed(previous):
        if canonical(tool, args) != canonical(name, arguments):
            break
        run += 1
    return limit > 0 and run >= limit


def repeat_equals_limit(previous, name, arguments, limit):
    return limit > 0 and repeat_right(previous, name, arguments, limit) and (
        repeat_right(previous, name, arguments, limit + 1) is False)


def repeat_ignores_name(previous, name, arguments, limit):
    return repeat_right([("tool", args) for _, args in previous], "tool", arguments, limit)


def repeat_limit_zero_on(previous, name, arguments, limit):
    run = 1
    for tool, args in reversed(previous):
        if canonical(tool, args) != canonical(name, arguments):
            break
        run += 1
    return run >= limit


def repeat_json_raises(previous, name, arguments, limit):
    def key(tool, args):
        return tool + json.dumps(json.loads(args), sort_keys=True)
    run = 1
    for tool, args in reversed(previous):
        if key(tool, args) != key(name, arguments):
            break
        run += 1
    return limit > 0 and run >= limit


def repeat_mutates_history(previous, name, arguments, limit):
    previous.append((name, arguments))
    return repeat_right(previous[:-1], name, arguments, limit)


def repeat_returns_count(previous, name, arguments, limit):
    return sum(canonical(*call) == canonical(name, arguments) for call in previous) + 1


def repeat_borrows_call_key(previous, name, arguments, limit):
    run = 1
    for tool, args in reversed(previous):
        if call_key(tool, args) != call_key(name, arguments):
            break
        run += 1
    return limit > 0 and run >= limit


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(repeat_right, "全部 10 项通过", id="right"),
        pytest.param(repeat_unsolved, "还没完成", id="unsolved"),
        pytest.param(repeat_raw_text, "sort_keys=True", id="raw-text-compare"),
        pytest.param(repeat_anywhere, "中间隔着别的调用，就不算重复", id="not-in-a-row"),
        pytest.param(repeat_without_this_call, "把这一次也算进去", id="this-call-not-counted"),
        pytest.param(repeat_equals_limit, "用 >= limit 比较", id="equals-limit"),
        pytest.param(repeat_ignores_name, "工具名也是调用身份的一部分", id="ignores-name"),
        pytest.param(repeat_limit_zero_on, "0 表示这道刹车关掉了", id="limit-zero-not-off"),
        pytest.param(repeat_json_raises, "json.JSONDecodeError", id="invalid-json-raises"),
        pytest.param(repeat_mutates_history, "改动了传进来的历史列表", id="mutates-history"),
        pytest.param(repeat_returns_count, "应该返回 True 或 False", id="returns-count"),
        pytest.param(repeat_borrows_call_key, "你的函数用了包里现成的 call_key",
                     id="calls-the-package-call-key"),
    ],
)
def test_check_is_repeat(fn, expected, capsys):
    check_is_repeat(fn)
    assert expected in capsys.readouterr().out


# --- exercise 5.2: ToolErrorBrake -----------------------------------------------------------


class BrakeRight:
    def __init__(self, limit):
        self.limit, self.count = limit, 0

    def record(self, ok):
        self.count = 0 if ok else self.count + 1
        return self.limit > 0 and self.count >= self.limit


class BrakeUnsolved:
    def __init__(self, limit):
        raise NotImplementedError("练习还没完成")


class BrakeNoReset(BrakeRight):
    def record(self, ok):
        self.count += 0 if ok else 1
        return self.limit > 0 and self.count >= self.limit


class BrakeEqualsLimit(BrakeRight):
    def record(self, ok):
        self.count = 0 if ok else self.count + 1
        return self.limit > 0 and self.count == self.limit


class BrakeLimitZeroOn(BrakeRight):
    def record(self, ok):
        self.count = 0 if ok else self.count + 1
        return self.count >= self.limit


class BrakeCountsEverything(BrakeRight):
    def record(self, ok):
        self.count += 1
        return self.limit > 0 and self.count >= self.limit


SHARED = {"count": 0}


class BrakeSharedCounter:
    def __init__(self, limit):
        self.limit = limit

    def record(self, ok):
        SHARED["count"] = 0 if ok else SHARED["count"] + 1
        return self.limit > 0 and SHARED["count"] >= self.limit


class BrakeClassAttribute:
    """The count lives on the class: every brake adds to the same number."""

    failures = 0

    def __init__(self, limit):
        self.limit = limit

    def record(self, ok):
        BrakeClassAttribute.failures = 0 if ok else BrakeClassAttribute.failures + 1
        return self.limit > 0 and BrakeClassAttribute.failures >= self.limit


class BrakeClassList:
    """A list as a class attribute: `self.results.append` changes the one shared list."""

    results: list[bool] = []

    def __init__(self, limit):
        self.limit = limit

    def record(self, ok):
        self.results.append(ok)
        in_a_row = 0
        for result in reversed(self.results):
            if result:
                break
            in_a_row += 1
        return self.limit > 0 and in_a_row >= self.limit


class BrakeReturnsCount(BrakeRight):
    def record(self, ok):
        self.count = 0 if ok else self.count + 1
        return self.count


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        pytest.param(BrakeRight, "全部 7 项通过", id="right"),
        pytest.param(BrakeUnsolved, "还没完成", id="unsolved"),
        pytest.param(BrakeNoReset, "成功一次就清零", id="no-reset"),
        pytest.param(BrakeEqualsLimit, "用 >= limit 比较", id="equals-limit"),
        pytest.param(BrakeLimitZeroOn, "0 表示这道刹车关掉了", id="limit-zero-not-off"),
        pytest.param(BrakeCountsEverything, "只数失败", id="counts-successes"),
        pytest.param(BrakeSharedCounter, "两个实例共用了同一个计数", id="shared-counter"),
        pytest.param(BrakeClassAttribute, "计数放在了类上", id="class-attribute-counter"),
        pytest.param(BrakeClassList, "也不要用类里的 [] 列表", id="class-attribute-list"),
        pytest.param(BrakeReturnsCount, "应该返回 True 或 False", id="returns-count"),
    ],
)
def test_check_tool_error_brake(cls, expected, capsys):
    SHARED["count"] = 0
    BrakeClassAttribute.failures = 0
    BrakeClassList.results.clear()
    check_tool_error_brake(cls)
    assert expected in capsys.readouterr().out


# --- exercise 5.3: braked_loop --------------------------------------------------------------


def make_loop(*, bounded: bool = True, rounds: int | None = None, catch_provider: bool = True,
              check_choices: bool = True, safe_tools: bool = True, repeat: bool = True,
              repeat_zero_off: bool = True, errors: bool = True, error_reset: bool = True,
              done_word: bool = False, append_assistant: bool = True, all_calls: bool = True,
              returns: str = "triple", answer_on_brake: bool = False,
              run_then_check: bool = False, answer_all: bool = True,
              reasons: dict[str, str] | None = None, system: str | None = DEFAULT_SYSTEM_PROMPT,
              options: dict[str, Any] | None = None):
    """The right loop, or one with a typical mistake switched on."""
    names = {r: r for r in ("answered", "max_iters", "repeated_call", "tool_errors",
                            "provider_error")} | (reasons or {})

    def loop(client, question, registry, model, max_iters=6, max_repeats=3, max_tool_errors=3):
        messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
        request = {"temperature": 0, "tool_choice": "auto"} | (options or {})
        request = {k: v for k, v in request.items() if v is not None}

        def stop(answer: Any, reason: str) -> Any:
            if answer_on_brake and answer is None:
                answer = f"stopped: {reason}"
            return {"answer": answer, "pair": (answer, names[reason]),
                    "triple": (answer, names[reason], messages)}[returns]

        made: list[str] = []
        failures = 0
        n = 0
        while not bounded or n < (rounds if rounds is not None else max_iters):
            n += 1
            try:
                response = client.chat.completions.create(
                    model=model, messages=messages, tools=registry.to_schemas(), **request)
            except openai.APIError:
                if not catch_provider:
                    raise
                return stop(None, "provider_error")
            if check_choices and not response.choices:
                return stop(None, "provider_error")
            message = response.choices[0].message
            if not message.tool_calls or (done_word and "完成" in (message.content or "")):
                return stop(message.content, "answered")
            if append_assistant:
                messages.append(assistant_message(message))
            tripped = None
            for tc in message.tool_calls if all_calls else message.tool_calls[:1]:
                name, arguments = tc.function.name, tc.function.arguments
                if tripped:
                    messages.append({"role": "tool", "tool_call_id": tc.id,
                                     "content": "Error: not run."})
                    continue
                key = canonical(name, arguments)
                run = 1 + next((i for i, k in enumerate(reversed(made)) if k != key), len(made))
                limit_on = max_repeats > 0 or not repeat_zero_off
                repeated = repeat and limit_on and run >= max_repeats
                if repeated and not run_then_check:
                    if not answer_all:
                        return stop(None, "repeated_call")
                    tripped = "repeated_call"
                    messages.append({"role": "tool", "tool_call_id": tc.id,
                                     "content": "Error: not run again."})
                    continue
                made.append(key)
                if safe_tools:
                    result = registry.call(name, arguments)
                    output, ok = result.output, result.ok
                else:
                    output, ok = str(registry[name].fn(**json.loads(arguments))), True
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": output})
                if repeated:  # checked only after the call already ran
                    tripped = "repeated_call"
                    continue
                failures = (0 if error_reset else failures) if ok else failures + 1
                if errors and max_tool_errors and failures >= max_tool_errors:
                    tripped = "tool_errors"
            if tripped:
                return stop(None, tripped)
        return stop(None, "max_iters")

    return loop


def loop_unsolved(client, question, registry, model, max_iters=6, max_repeats=3,
                  max_tool_errors=3):
    raise NotImplementedError("练习还没完成")


def loop_swallows_everything(client, question, registry, model, max_iters=6, max_repeats=3,
                             max_tool_errors=3):
    """No round limit, and every exception (the request cap's too) taken for a provider error."""
    messages = [{"role": "user", "content": question}]
    while True:
        try:
            response = client.chat.completions.create(
                model=model, messages=messages, tools=registry.to_schemas())
        except Exception:  # noqa: BLE001 - the mistake under test
            return None, "provider_error", messages
        message = response.choices[0].message if response.choices else None
        if message is None:
            return None, "provider_error", messages
        if not message.tool_calls:
            return message.content, "answered", messages
        messages.append(assistant_message(message))
        for tc in message.tool_calls:
            result = registry.call(tc.function.name, tc.function.arguments)
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result.output})


def loop_old_signature(client, question, registry, model, max_iters=6):
    return make_loop()(client, question, registry, model, max_iters)


def loop_borrows_run_agent(client, question, registry, model, max_iters=6, max_repeats=3,
                           max_tool_errors=3):
    result = run_agent(client, question, registry, model=model, max_iters=max_iters,
                       max_repeats=max_repeats, max_tool_errors=max_tool_errors)
    return result.answer, result.stop_reason.value, result.messages


LOOP_ROWS = [
    ("right", make_loop(), "全部 16 项通过"),
    ("unsolved", loop_unsolved, "还没完成"),
    ("while-true", make_loop(bounded=False), f"你的循环在 {MAX_REQUESTS} 次调用后还没停"),
    ("swallows-the-request-cap", loop_swallows_everything,
     f"你的循环在 {MAX_REQUESTS} 次调用后还没停"),
    ("hard-coded-six-rounds", make_loop(rounds=6), "不要写死 6"),
    ("no-provider-catch", make_loop(catch_provider=False), "try/except openai.APIError"),
    ("no-choices-check", make_loop(check_choices=False), "if not response.choices"),
    ("unguarded-tools", make_loop(safe_tools=False), "registry.call(name, arguments)"),
    ("no-repeat-brake", make_loop(repeat=False), "重复检测没有生效"),
    ("repeat-zero-not-off", make_loop(repeat_zero_off=False), "max_repeats=0 时不该报"),
    ("no-error-brake", make_loop(errors=False), "工具错误计数没有生效"),
    ("error-count-not-reset", make_loop(error_reset=False), "计数就清零"),
    ("stops-on-done-word", make_loop(done_word=True), "不要在 content 里找“完成”"),
    ("drops-assistant-message", make_loop(append_assistant=False), "拒绝了你发的历史"),
    ("first-call-only", make_loop(all_calls=False), "一个都不能少"),
    ("returns-answer-only", make_loop(returns="answer"), "三个元素的元组"),
    ("returns-the-old-pair", make_loop(returns="pair"), "三个元素的元组"),
    ("repeat-checked-after-running", make_loop(run_then_check=True),
     "被判定为重复的调用还是执行了"),
    ("repeat-checked-after-running-why", make_loop(run_then_check=True),
     "is_repeat 为 True 的那次调用不能执行"),
    ("brake-leaves-calls-unanswered", make_loop(answer_all=False),
     "返回的 messages 里有 tool_call 没有回应"),
    ("brake-leaves-calls-unanswered-why", make_loop(answer_all=False),
     "刹车触发时也要先给这一轮的每个调用都回一条 tool 消息"),
    ("calls-run-agent", loop_borrows_run_agent, "你的函数用了包里现成的 run_agent"),
    ("answer-on-brake", make_loop(answer_on_brake=True), "被刹车停下时不该有回答"),
    ("own-reason-names", make_loop(reasons={"max_iters": "max_rounds"}), "停止原因应该是"),
    ("old-signature", loop_old_signature, "函数签名要和题目一致"),
    ("drops-the-system-prompt", make_loop(system=None), "第 1 次请求没有 system 消息"),
    ("drops-the-system-prompt-why", make_loop(system=None), "装了刹车也不能丢"),
    ("own-system-prompt", make_loop(system="你是助手。需要时调用工具。"),
     "system 用 DEFAULT_SYSTEM_PROMPT，和练习 4.1 一样"),
    ("drops-temperature", make_loop(options={"temperature": None}),
     "第 1 次请求的 temperature 是 （没有设置）"),
    ("temperature-not-zero", make_loop(options={"temperature": 0.7}),
     "才分得清是哪道刹车起了作用"),
    ("tool-choice-required", make_loop(options={"tool_choice": "required"}),
     "循环唯一的正常出口就没了"),
    ("no-tool-choice-is-fine", make_loop(options={"tool_choice": None}), "全部 16 项通过"),
]


@pytest.mark.parametrize(("fn", "expected"), [pytest.param(fn, text, id=name)
                                              for name, fn, text in LOOP_ROWS])
def test_check_braked_loop(fn, expected, capsys):
    check_braked_loop(fn)
    assert expected in capsys.readouterr().out


def test_a_right_loop_passes_without_a_failure_line(capsys):
    check_braked_loop(make_loop())
    assert "❌" not in capsys.readouterr().out
