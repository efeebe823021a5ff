"""Checkers for lesson 04, the agent loop.

    check_my_run_agent(fn)       fn(client, question, registry, model, max_iters) -> str
    check_predict_sent_roles(fn) fn(calls_per_round) -> the roles sent in each model call

The learner's loop runs against scripted models (see `vibe_agent.course.scripted`) through a
genuine `openai.OpenAI` client, and the checker reads what each model RECEIVED
(`ScriptedModel.requests`): that is where a forgotten message, a wrong id or a history
that was not resent shows up. A broken history gets HTTP 400 from the scripted model,
as from a real provider; the checker explains which rule the history broke.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import openai

from ...loop import DEFAULT_SYSTEM_PROMPT, run_agent
from .. import scripted
from ..scripted import ScriptedModel, answer, call, calls, misbehaving
from . import (
    MAX_REQUESTS,
    MODEL,
    Problem,
    Report,
    attempt,
    checker,
    checker_registry,
    fail,
    short,
)


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("role")) for m in messages]


# ---------------------------------------------------------------------------
# Exercise 1: the loop
# ---------------------------------------------------------------------------

QUESTION = "17 × 23 等于多少？"
MAX_ITERS_HINT = ("用 for _ in range(max_iters)：循环最多调用 max_iters 次模型，"
                  "跑满了就停下并返回一句说明。不要用 while True，它只在模型愿意停的时候才停。")
RESEND_HINT = ("模型不保存会话：每一轮都要把同一个、越来越长的 messages 列表完整发出去"
               "（system、user、之前所有 assistant 和 tool 消息），而不是只发新增的消息。")
EXIT_HINT = ("tool_calls 为空就 return message.content：这是循环唯一的出口。")
ID_HINT = ("tool_call_id 原样用 call.id，不要按位置自己编号（call_1、call_2……）："
           "服务商只认它自己发出的 id。")


HTTP_400 = "脚本模型（和真实服务商一样）返回了 HTTP 400："
OFFLINE = ("请求和本课录制文件（cassette）里的不一致时，后面用你的循环的几格在离线模式（offline）下"
           "改由脚本参考模型回退回答（先打印一行说明，回答标着“回退”），严格回放（replay）下报 "
           "ReplayMiss。")
SYSTEM_HINT = ("练习要求 system 用 DEFAULT_SYSTEM_PROMPT，和上面那格一样"
               "（第 9 节会逐条解释它的规则）。"
               "课程章节里的“你是助手。需要时调用工具。”也是一条 system prompt，循环照样能跑，"
               "但它不是这道练习要的请求：" + OFFLINE)
TOOL_CHOICE_HINT = ("循环里每一轮都用 tool_choice=\"auto\"：由模型决定调不调工具。"
                    "\"required\" 和指定函数不许模型直接回答，"
                    "循环唯一的出口（tool_calls 为空）就没了；"
                    "\"none\" 不许调用工具，循环就没有工具可执行（第 8 节）。")
EXTRA_HINT = ("每一轮的请求就用上面那一行：model、messages、tools、tool_choice=\"auto\"、"
              "temperature=0 五个参数，不要增减。" + OFFLINE)
RESULT_HINT = ("工具执行完以后，下一次请求没能发出去：messages 里有不是 JSON 的东西。"
               "registry.call(...) 返回的是 ToolResult，"
               "tool 消息的 content 要放它的 .output（文字）。")
RUNAWAY_HINT = ("用 for _ in range(max_iters)：循环最多调用 max_iters 次模型，"
                "跑满了就停下并返回一句说明。不要用 while True，它只在模型愿意停的时候才停。")


def _source_has(fn: Callable[..., Any], text: str) -> bool:
    """True when the learner's source contains `text` (False if it cannot be read)."""
    try:
        return text in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def _explain_400(body: dict[str, Any]) -> Problem:
    """Which tool_calls rule the last request broke, from the messages it carried."""
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        if m.get("role") != "tool":
            continue
        before = [p for p in messages[:i] if p.get("role") != "tool"]
        previous = before[-1] if before else {}
        if not previous.get("tool_calls"):
            return (f"{HTTP_400}第 {i + 1} 条是 tool 消息，前面却没有带 tool_calls 的 "
                    f"assistant 消息（发送的 roles：{', '.join(roles(messages))}）",
                    "每个工具轮先追加 assistant_message(message)（tool_calls 原样），再追加 tool "
                    "消息。漏掉 assistant 消息，服务商不知道这些结果在回答哪个调用；"
                    "真实模型也看不到自己做过的决定，会重复调用、原地打转。")
        ids = [tc.get("id") for tc in previous["tool_calls"]]
        if m.get("tool_call_id") not in ids:
            return (f"{HTTP_400}tool 消息的 tool_call_id 是 "
                    f"{m.get('tool_call_id')!r}，而模型发出的 id 是 {ids}", ID_HINT)
    return (f"{HTTP_400}有 tool_calls 没有得到回答（发送的 roles："
            f"{', '.join(roles(messages))}）",
            "assistant 消息里的每个调用都要执行，并且各追加一条 tool 消息，"
            "全部回答完才能进入下一轮。")


def _run(fn: Callable[..., Any], model: ScriptedModel, max_iters: int = 6) -> Any:
    """Run the learner's loop; what went wrong ends the case with its explanation."""
    outcome = attempt(fn, model.client(), QUESTION, checker_registry(), MODEL, max_iters)
    error = outcome.error
    if isinstance(error, openai.APIStatusError) and error.status_code == 400 and model.requests:
        fail(*_explain_400(model.requests[-1]))
    if isinstance(error, scripted.RequestCapReached):  # the scripted model refused to go on
        why = "你用的是 while True。" if _source_has(fn, "while True") else ""
        fail(f"max_iters={max_iters}，模型却被调用了 {len(model.requests) - 1} 次，循环还在继续",
             why + RUNAWAY_HINT)
    if isinstance(error, scripted.ScriptExhausted):
        fail("模型已经给出最终回答（没有 tool_calls），你的循环却又调用了一次模型", EXIT_HINT)
    if isinstance(error, TypeError) and model.requests:  # the next request could not be sent
        fail(outcome.raised(), RESULT_HINT)
    return outcome.get()


def _fields_problem(n: int, body: dict[str, Any]) -> Problem:
    """Request n carries exactly model, messages, tools, temperature 0 and tool_choice "auto"
    (or none: the same meaning; the lesson's cells then fall back offline)."""
    if not body.get("tools"):
        return (f"第 {n} 次请求没有带 tools", "请求里要带上 tools=registry.to_schemas()，"
                "否则模型不知道有哪些工具，只能自己编答案。")
    if "temperature" not in body:
        return (f"第 {n} 次请求没有设置 temperature",
                "调试循环时用 temperature=0：同一个问题每次都走同一条路，结果才能复现、比较。")
    if body["temperature"] != 0:
        return (f"第 {n} 次请求的 temperature 是 {body['temperature']}",
                "调试循环时用 temperature=0：同一个问题每次都走同一条路，结果才能复现、比较。")
    if body.get("tool_choice", "auto") != "auto":  # absent means "auto" when tools are sent
        return f"第 {n} 次请求的 tool_choice 是 {body['tool_choice']!r}", TOOL_CHOICE_HINT
    extra = sorted(set(body) - {"model", "messages", "tools", "tool_choice", "temperature"})
    if extra:
        shown = "，".join(f"{key}={short(body[key], 40)}" for key in extra)
        return f"第 {n} 次请求多了 {shown}", EXTRA_HINT
    return None


def _request_problem(model: ScriptedModel) -> Problem:
    """Every request as the lesson sends it, and the whole history resent each round."""
    for n, body in enumerate(model.requests, 1):
        if problem := _fields_problem(n, body):
            return problem
    first = model.requests[0]["messages"]
    if roles(first) != ["system", "user"] or first[1].get("content") != QUESTION:
        return (f"第 1 次请求应该是 [system, user（问题 {QUESTION!r}）]，得到 "
                f"{', '.join(roles(first))}",
                "每次调用 my_run_agent 都在函数里新建 messages = [system, user]，user 的内容是 "
                "参数 question；不要沿用函数外面的列表。")
    if first[0].get("content") != DEFAULT_SYSTEM_PROMPT:
        return f"system 消息是 {short(first[0].get('content'), 60)}", SYSTEM_HINT
    for n in range(1, len(model.requests)):
        before, now = model.requests[n - 1]["messages"], model.requests[n]["messages"]
        if now[: len(before)] != before or len(now) <= len(before):
            return (f"第 {n + 1} 次请求没有带上完整历史：第 {n} 次发送了 "
                    f"{', '.join(roles(before))}，第 {n + 1} 次却是 {', '.join(roles(now))}",
                    RESEND_HINT)
    return None


def _answered_by_id(model: ScriptedModel, n: int) -> Problem:
    """Request n (from 1) answers every call of the assistant message before it, by id."""
    messages = model.requests[n - 1]["messages"]
    assistant = max((i for i, m in enumerate(messages) if m.get("tool_calls")), default=None)
    if assistant is None:
        return (f"第 {n} 次请求里没有带 tool_calls 的 assistant 消息"
                f"（roles：{', '.join(roles(messages))}）",
                "每个工具轮都先追加 assistant_message(message)，再追加 tool 消息。")
    tool_calls = messages[assistant]["tool_calls"]
    answers = messages[assistant + 1:]
    expected = {tc["id"]: checker_registry().call(tc["function"]["name"],
                                                  tc["function"]["arguments"]).output
                for tc in tool_calls}
    names = {tc["id"]: tc["function"]["name"] for tc in tool_calls}
    if [m.get("role") for m in answers] != ["tool"] * len(tool_calls):
        return (f"模型一次要了 {len(tool_calls)} 个调用，下一次请求里跟着的却是 "
                f"{', '.join(roles(answers)) or '（什么也没有）'}",
                "同一轮的每个调用都执行、各追加一条 tool 消息，全部追加完再调用模型。")
    for m in answers:
        mine = m.get("tool_call_id")
        if m.get("content") != expected[mine]:
            owner = next((k for k, text in expected.items() if text == m.get("content")), None)
            what = f"{owner}（{names[owner]}）的结果" if owner else "别的内容"
            return (f"id {mine}（{names[mine]}）的 tool 消息里装的是 {what}："
                    f"{short(m.get('content'))}",
                    "按位置配对，执行顺序一变就张冠李戴。在同一次循环里执行 call、"
                    "用 call.id 写它的 tool 消息，让结果和它自己的 id 一起走。")
    return None


def _ideal_path(fn: Callable[..., Any]) -> None:
    model = ScriptedModel([calls(call("calculator", {"expression": "17 * 23"}, id="call_1")),
                           answer("17 × 23 = 391。")], name="scripted-ideal")
    got = _run(fn, model)
    n = len(model.requests)
    if n < 2:
        fail(f"只调用了 {n} 次模型就返回了 {short(got)}",
             "模型第一次回答里有 tool_calls：执行工具、追加结果，再调用一次模型。"
             "只有 tool_calls 为空时才 return。")
    if problem := _request_problem(model):
        fail(*problem)
    if problem := _answered_by_id(model, 2):
        fail(*problem)
    if got != "17 × 23 = 391。":
        fail(f"应该返回最终回答 '17 × 23 = 391。'，得到 {short(got)}",
             "返回 message.content（字符串），不是 message 对象，也不是 messages 列表。")


def _parallel(fn: Callable[..., Any]) -> None:
    model = misbehaving("parallel_calls", max_requests=MAX_REQUESTS)
    got = _run(fn, model)
    n = len(model.requests)
    if n < 2:
        fail(f"应该调用 2 次模型（一个工具轮 + 最终回答），实际只调用了 {n} 次",
             "三个调用都执行完、都追加了 tool 消息之后，再调用一次模型。")
    if problem := _request_problem(model):
        fail(*problem)
    if problem := _answered_by_id(model, 2):
        fail(*problem)
    if n > 2:
        fail(f"模型第 2 次已经给出最终回答，循环却又调用了 {n - 2} 次", EXIT_HINT)
    if not isinstance(got, str) or "391" not in got or "1024" not in got:
        fail(f"应该返回模型的最终回答，得到 {short(got)}", "最后返回 message.content。")


def _says_done(fn: Callable[..., Any]) -> None:
    model = misbehaving("says_done_while_calling", max_requests=MAX_REQUESTS)
    got = _run(fn, model)
    if len(model.requests) == 1:
        looked = _source_has(fn, "完成")
        fail(f"模型回答“完成！”的同时还带着 tool_calls，你的循环却就此返回了 {short(got)}",
             ("你在 content 里找“完成”：" if looked else "")
             + "退出只看 tool_calls 是否为空。措辞什么也不保证，"
             "协议字段才是约定：有 tool_calls 就执行，哪怕 content 写着“完成”。")
    if problem := _request_problem(model):
        fail(*problem)
    if got != "工具结果已收到，这是最终回答。":
        fail(f"应该返回第二次的最终回答，得到 {short(got)}",
             "tool_calls 为空时 return message.content。")


ENDLESS_LIMIT = 5  # the endless model gives up and answers after this many requests


def _endless_model() -> ScriptedModel:
    """Asks for the calculator every time. After ENDLESS_LIMIT requests it answers, so
    that a `while True` loop which exits on an answer still ends and can be counted."""

    def respond(body: dict[str, Any]) -> Any:
        if len(model.requests) > ENDLESS_LIMIT:
            return answer("（脚本模型）好吧，我不再调用工具了。")
        return calls(call("calculator", {"expression": "17 * 23"}))

    model = ScriptedModel(respond, name="scripted-never-stops", max_requests=MAX_REQUESTS)
    return model


def _never_stops(fn: Callable[..., Any]) -> None:
    model = _endless_model()
    got = _run(fn, model, max_iters=3)
    n = len(model.requests)
    if n > 3:
        why = "你用的是 while True。" if _source_has(fn, "while True") else ""
        fail(f"max_iters=3，模型却被调用了 {n} 次", why + MAX_ITERS_HINT)
    if n < 3:
        fail(f"max_iters=3，模型一直要调用工具，循环却在第 {n} 次后就停了",
             "只有 tool_calls 为空才提前返回；否则要用满 max_iters 轮。")
    if problem := _request_problem(model):
        fail(*problem)
    if not isinstance(got, str) or not got:
        fail(f"跑满 max_iters 后应该返回一句说明（字符串），得到 {short(got)}",
             "for 循环结束后 return 一句话，例如“已达到最大轮次，停止”，"
             "让调用的人知道为什么没有答案。")


LOOP_CASES: list[tuple[str, Callable[[Callable[..., Any]], None]]] = [
    ("理想路径：一轮工具，再回答", _ideal_path),
    ("一次回复里三个 tool_calls（id 乱序：call_b, call_a, call_c）", _parallel),
    ("content 写着“完成！”，同时还有 tool_calls", _says_done),
    ("永远在调用工具的模型，max_iters=3", _never_stops),
]


@checker("练习 4.1：亲手写 Agent 循环（对手是四个脚本模型，不是 LLM）", run_agent, hint=(
        "这道题要你亲手写出这五步：调模型、读 tool_calls、执行、追加结果、下一轮。"
        "run_agent 是同一个循环的完整版，第 5 节再用它。"))
def check_my_run_agent(fn: Callable[..., Any], report: Report) -> None:
    """Exercise 4.1: the loop, against four scripted models (none of them an LLM)."""
    for name, run_case in LOOP_CASES:
        with report.case(name):
            run_case(fn)


# ---------------------------------------------------------------------------
# Exercise 2: what is sent each round
# ---------------------------------------------------------------------------

ROLES_CASES: list[tuple[str, list[int]]] = [
    ("模型直接回答，没有工具轮", []),
    ("一个工具轮，一个调用", [1]),
    ("一个工具轮，三个并行调用", [3]),
    ("两个工具轮，各一个调用（演示任务 3 的路径）", [1, 1]),
    ("三个工具轮：2、1、3 个调用", [2, 1, 3]),
]


def sent_roles(calls_per_round: list[int]) -> list[list[str]]:
    """Run the package's loop against a scripted model with this call pattern; read what it got."""
    script = [calls(*[call("calculator", {"expression": f"{r} + {i}"})
                      for i in range(1, k + 1)]) for r, k in enumerate(calls_per_round, 1)]
    model = ScriptedModel([*script, answer("done")], name="scripted-history")
    run_agent(model.client(), QUESTION, checker_registry(), model=MODEL,
              max_iters=len(script) + 1, max_repeats=0)
    model.assert_consumed()
    return [roles(body["messages"]) for body in model.requests]


def _roles_problem(got: Any, want: list[list[str]], calls_per_round: list[int]) -> Problem:
    if not isinstance(got, list) or not all(isinstance(r, list) for r in got):
        return (f"应该返回 list[list[str]]（每次模型调用一个列表），得到 {short(got)}",
                "外层列表每一项对应一次模型调用，里面是那次发送的 messages 的 role。")
    if len(got) != len(want):
        return (f"{len(calls_per_round)} 个工具轮应该有 {len(want)} 次模型调用，"
                f"你预测了 {len(got)} 次",
                "别忘了最后一次：模型拿到工具结果后给出回答的那次调用，也要发送完整历史。"
                "N 个工具轮 = N + 1 次模型调用。")
    for n, (g, w) in enumerate(zip(got, want, strict=True), 1):
        if g == w:
            continue
        unknown = sorted({str(r) for r in g} - {"system", "user", "assistant", "tool"})
        if unknown:
            return (f"第 {n} 次调用里出现了 {unknown}",
                    "role 只有 system、user、assistant、tool 四种；工具结果是 \"tool\"。")
        if g[: len(w)] == w and len(g) > len(w):
            return (f"第 {n} 次调用：你的预测多了 {g[len(w):]}",
                    "第 n 次发送的是这次调用之前积累的消息；模型这次的回复要等它回来才追加，"
                    "下一次才会被发送。")
        if g.count("tool") < w.count("tool") and g.count("assistant") == w.count("assistant"):
            return (f"第 {n} 次调用应该有 {w.count('tool')} 条 tool 消息，你预测了 "
                    f"{g.count('tool')} 条",
                    "每个 tool_call 都有自己的一条 tool 消息：一轮 3 个调用就是 3 条。")
        if n > 1 and g[:2] != ["system", "user"]:
            return (f"第 {n} 次调用应该从 system, user 开始，你预测的是 {', '.join(g)}",
                    "历史只增不减：每次都重发 system、user 和之前所有的消息。")
        return (f"第 {n} 次调用应该发送 {', '.join(w)}，你预测的是 {', '.join(g)}",
                "第 k 次调用 = [system, user] + 前面每个工具轮的 "
                "[assistant, tool × 该轮调用数]。")
    return None


@checker("练习 4.2：预测每一次请求发出的 messages")
def check_predict_sent_roles(fn: Callable[[list[int]], Any], report: Report) -> None:
    """Exercise 4.2: predict the roles sent in each model call, checked against real runs."""
    for name, calls_per_round in ROLES_CASES:
        with report.case(f"{name}：{json.dumps(calls_per_round)}"):
            got = attempt(fn, list(calls_per_round)).get(
                "第 k 次调用 = [system, user] + 前面每个工具轮的 [assistant, tool × 该轮调用数]。")
            if problem := _roles_problem(got, sent_roles(calls_per_round), calls_per_round):
                fail(*problem)
