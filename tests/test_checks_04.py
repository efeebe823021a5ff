"""Lesson 04's checkers: a correct loop passes, each typical mistake gets its own hint."""

from __future__ import annotations

import json

import pytest

from vibe_agent.course.checks.lesson_04 import check_my_run_agent, check_predict_sent_roles
from vibe_agent.loop import DEFAULT_SYSTEM_PROMPT, run_agent
from vibe_agent.reply import assistant_message

UNSOLVED = "还没完成"


def start(question):
    return [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
            {"role": "user", "content": question}]


def ask(client, model, messages, registry, **options):
    options = {"temperature": 0} | options
    response = client.chat.completions.create(model=model, messages=messages,
                                              tools=registry.to_schemas(), **options)
    return response.choices[0].message


def tool_message(call, registry):
    return {"role": "tool", "tool_call_id": call.id,
            "content": registry.call(call.function.name, call.function.arguments).output}


# ---------------------------------------------------------------------------
# Exercise 4.1: the loop, right and wrong
# ---------------------------------------------------------------------------


def correct_loop(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return f"已达到最大轮次 {max_iters}，停止。"


def tool_result_as_content(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            result = registry.call(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return f"已达到最大轮次 {max_iters}，停止。"


def while_true(client, question, registry, model, max_iters=6):
    messages = start(question)
    while True:
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))


def off_by_one(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters + 2):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return "停止。"


def stops_on_done(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls or "完成" in (message.content or ""):
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return "停止。"


def no_assistant_message(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return "停止。"


def no_tool_messages(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        registry.call(message.tool_calls[0].function.name,
                      message.tool_calls[0].function.arguments)
    return "停止。"


def own_ids(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for i, call in enumerate(message.tool_calls, 1):
            messages.append({"role": "tool", "tool_call_id": f"call_{i}",
                             "content": registry.call(call.function.name,
                                                      call.function.arguments).output})
    return "停止。"


def paired_by_position(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        # executed in id order, then zipped with the calls in their original order
        ordered = sorted(message.tool_calls, key=lambda c: c.id)
        results = [registry.call(c.function.name, c.function.arguments).output for c in ordered]
        for call, result in zip(message.tool_calls, results, strict=True):
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return "停止。"


def only_new_messages(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages = [assistant_message(message),
                    *[tool_message(call, registry) for call in message.tool_calls]]
    return "停止。"


def fresh_history(client, question, registry, model, max_iters=6):
    history = start(question)
    for _ in range(max_iters):
        message = ask(client, model, start(question), registry)
        if not message.tool_calls:
            return message.content or ""
        history.append(assistant_message(message))
        for call in message.tool_calls:
            history.append(tool_message(call, registry))
    return "停止。"


def returns_message_object(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return "停止。"


def returns_none_at_limit(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return None


def no_temperature(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        response = client.chat.completions.create(model=model, messages=messages,
                                                  tools=registry.to_schemas())
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return "停止。"


def never_loops(client, question, registry, model, max_iters=6):
    messages = start(question)
    message = ask(client, model, messages, registry)
    return message.content or ""


def while_true_without_exit(client, question, registry, model, max_iters=6):
    messages = start(question)
    while True:
        message = ask(client, model, messages, registry)
        messages.append(assistant_message(message))
        for call in message.tool_calls or []:
            messages.append(tool_message(call, registry))


def never_returns_early(client, question, registry, model, max_iters=6):
    messages = start(question)
    answer = ""
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        answer = message.content or answer
        messages.append(assistant_message(message))
        for call in message.tool_calls or []:
            messages.append(tool_message(call, registry))
    return answer


SHARED = start("17 × 23 等于多少？")  # a list outside the function, reused by every call


def shared_history(client, question, registry, model, max_iters=6):
    for _ in range(max_iters):
        message = ask(client, model, SHARED, registry)
        if not message.tool_calls:
            return message.content or ""
        SHARED.append(assistant_message(message))
        for call in message.tool_calls:
            SHARED.append(tool_message(call, registry))
    return "停止。"


CHAPTER_SYSTEM = "你是助手。需要时调用工具。"


def chapter_loop(client, question, registry, model, max_iters=6):
    """The course chapter's loop: its own system prompt and tool_choice="auto"."""
    messages = [{"role": "system", "content": CHAPTER_SYSTEM},
                {"role": "user", "content": question}]
    for _ in range(max_iters):
        msg = client.chat.completions.create(
            model=model, messages=messages, tools=registry.to_schemas(), tool_choice="auto",
            temperature=0).choices[0].message
        if not msg.tool_calls:
            return msg.content or ""
        messages.append(assistant_message(msg))
        for tc in msg.tool_calls:
            messages.append({"role": "tool", "tool_call_id": tc.id,
                             "content": registry.call(tc.function.name,
                                                      json.loads(tc.function.arguments)).output})
    return "达到最大轮次仍无最终回答"


def forces_a_tool(client, question, registry, model, max_iters=6):
    return with_options(client, question, registry, model, max_iters, tool_choice="required")


def forbids_tools(client, question, registry, model, max_iters=6):
    return with_options(client, question, registry, model, max_iters, tool_choice="none")


def with_options(client, question, registry, model, max_iters, **options):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry, **options)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return "停止。"


def with_tool_choice_auto(client, question, registry, model, max_iters=6):
    """The lesson's own request: tool_choice="auto" like the chapter and run_agent."""
    return with_options(client, question, registry, model, max_iters, tool_choice="auto")


def chapter_system_prompt(client, question, registry, model, max_iters=6):
    messages = [{"role": "system", "content": CHAPTER_SYSTEM},
                {"role": "user", "content": question}]
    for _ in range(max_iters):
        message = ask(client, model, messages, registry)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return "停止。"


def extra_option(client, question, registry, model, max_iters=6):
    messages = start(question)
    for _ in range(max_iters):
        message = ask(client, model, messages, registry, max_tokens=300)
        if not message.tool_calls:
            return message.content or ""
        messages.append(assistant_message(message))
        for call in message.tool_calls:
            messages.append(tool_message(call, registry))
    return "停止。"


def borrows_run_agent(client, question, registry, model, max_iters=6):
    return run_agent(client, question, registry, model=model, max_iters=max_iters).answer


def unsolved(client, question, registry, model, max_iters=6):
    raise NotImplementedError("练习还没完成：补全这里的代码后，再运行一次。")


LOOP_ROWS = [
    pytest.param(tool_result_as_content, "content 要放它的 .output",
                 id="tool-result-as-content"),
    pytest.param(while_true, "你用的是 while True。", id="while-true"),
    pytest.param(while_true_without_exit, "你用的是 while True。", id="while-true-no-exit"),
    pytest.param(never_returns_early, "这是循环唯一的出口", id="never-returns-early"),
    pytest.param(off_by_one, "不要用 while True", id="range-too-long"),
    pytest.param(stops_on_done, "你在 content 里找“完成”", id="stops-on-done-word"),
    pytest.param(no_assistant_message, "前面却没有带 tool_calls 的 assistant 消息",
                 id="forgets-assistant-message"),
    pytest.param(no_tool_messages, "有 tool_calls 没有得到回答", id="forgets-tool-messages"),
    pytest.param(own_ids, "不要按位置自己编号", id="own-ids-by-position"),
    pytest.param(paired_by_position, "按位置配对，执行顺序一变就张冠李戴",
                 id="results-paired-by-position"),
    pytest.param(only_new_messages, "没有带上完整历史", id="sends-only-new-messages"),
    pytest.param(fresh_history, "没有带上完整历史", id="sends-a-fresh-history"),
    pytest.param(returns_message_object, "不是 message 对象", id="returns-message-object"),
    pytest.param(returns_none_at_limit, "跑满 max_iters 后应该返回一句说明",
                 id="returns-none-at-limit"),
    pytest.param(no_temperature, "temperature=0", id="no-temperature"),
    pytest.param(never_loops, "只调用了 1 次模型", id="no-loop"),
    pytest.param(shared_history, "不要沿用函数外面的列表", id="history-outside-the-function"),
    pytest.param(chapter_loop, "练习要求 system 用 DEFAULT_SYSTEM_PROMPT",
                 id="chapter-loop-system-prompt"),
    pytest.param(chapter_loop, "离线模式（offline）下改由脚本参考模型回退回答",
                 id="chapter-loop-told-what-happens-offline"),
    pytest.param(forces_a_tool, "第 1 次请求的 tool_choice 是 'required'",
                 id="tool-choice-required"),
    pytest.param(forces_a_tool, "循环唯一的出口（tool_calls 为空）就没了",
                 id="tool-choice-required-why"),
    pytest.param(forbids_tools, "第 1 次请求的 tool_choice 是 'none'", id="tool-choice-none"),
    pytest.param(chapter_system_prompt, "system 用 DEFAULT_SYSTEM_PROMPT",
                 id="chapter-system-prompt"),
    pytest.param(extra_option, "多了 max_tokens=300", id="extra-request-option"),
    pytest.param(borrows_run_agent, "你的函数用了包里现成的 run_agent", id="calls-run-agent"),
    pytest.param(unsolved, UNSOLVED, id="unsolved"),
]


@pytest.mark.parametrize("fn", [correct_loop, with_tool_choice_auto],
                         ids=["without-tool-choice", "tool-choice-auto"])
def test_correct_loop_passes(fn, capsys):
    assert check_my_run_agent(fn)
    out = capsys.readouterr().out
    assert "全部 4 项通过" in out and "❌" not in out


@pytest.mark.parametrize(("fn", "expected"), LOOP_ROWS)
def test_loop_mistakes_get_their_hint(fn, expected, capsys):
    assert not check_my_run_agent(fn)
    out = capsys.readouterr().out
    assert expected in out, out
    assert "Traceback" not in out


# ---------------------------------------------------------------------------
# Exercise 4.2: predicting what is sent
# ---------------------------------------------------------------------------


def correct_roles(calls_per_round):
    sent = [["system", "user"]]
    for k in calls_per_round:
        sent.append(sent[-1] + ["assistant"] + ["tool"] * k)
    return sent


def no_final_round(calls_per_round):
    return correct_roles(calls_per_round)[: max(1, len(calls_per_round))]


def one_tool_message_per_round(calls_per_round):
    return correct_roles([1 for _ in calls_per_round])


def not_cumulative(calls_per_round):
    return [["system", "user"]] + [["assistant"] + ["tool"] * k for k in calls_per_round]


def includes_the_reply(calls_per_round):
    sent = correct_roles(calls_per_round)
    return [s + ["assistant"] for s in sent]


def function_role(calls_per_round):
    return [[("function" if r == "tool" else r) for r in s] for s in correct_roles(calls_per_round)]


def flat_list(calls_per_round):
    return [r for s in correct_roles(calls_per_round) for r in s]


def unsolved_roles(calls_per_round):
    raise NotImplementedError("练习还没完成：补全这里的代码后，再运行一次。")


ROLES_ROWS = [
    pytest.param(no_final_round, "N 个工具轮 = N + 1 次模型调用", id="forgets-final-call"),
    pytest.param(one_tool_message_per_round, "每个 tool_call 都有自己的一条 tool 消息",
                 id="one-tool-message-per-round"),
    pytest.param(not_cumulative, "历史只增不减", id="not-cumulative"),
    pytest.param(includes_the_reply, "模型这次的回复要等它回来才追加", id="includes-the-reply"),
    pytest.param(function_role, "role 只有 system、user、assistant、tool", id="function-role"),
    pytest.param(flat_list, "应该返回 list[list[str]]", id="flat-list"),
    pytest.param(unsolved_roles, UNSOLVED, id="unsolved"),
]


def test_correct_roles_pass(capsys):
    assert check_predict_sent_roles(correct_roles)
    assert "全部 5 项通过" in capsys.readouterr().out


@pytest.mark.parametrize(("fn", "expected"), ROLES_ROWS)
def test_roles_mistakes_get_their_hint(fn, expected, capsys):
    assert not check_predict_sent_roles(fn)
    out = capsys.readouterr().out
    assert expected in out, out
