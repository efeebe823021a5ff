"""Checkers for lesson 02, the tool_calls protocol by hand.

    check_assistant_message(fn)  fn(message) -> the assistant dict to append, tool_calls verbatim
    check_tool_messages(fn)      fn(tool_calls, run_tool) -> one role "tool" message per call
    check_is_final(fn)           fn(message) -> True only when there are no tool_calls

Every message a learner's function receives is a genuine `ChatCompletionMessage`: the
checker asks a scripted model (see `vibe_agent.course.scripted`) through a real `openai.OpenAI`
client, exactly as the lesson does. Each typical mistake is recognised by what the
function returned and gets its own hint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from openai.types.chat import ChatCompletionMessage
from pydantic import BaseModel

from ...reply import assistant_message
from ..scripted import CREATED, Reply, ScriptedModel, answer, call, calls
from . import Problem, Report, attempt, checker, fail, short

QUESTION = "17 × 23 等于多少？顺便告诉我现在几点。"


def scripted_message(reply: Reply) -> ChatCompletionMessage:
    """The message a scripted model answers with, parsed by the real SDK."""
    model = ScriptedModel([reply], name="scripted-lesson-02")
    response = model.client().chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": QUESTION}])
    return response.choices[0].message


def _empty_tool_calls(content: str) -> Reply:
    """A final answer sent with `"tool_calls": []`, as some compatible servers do."""
    return Reply(raw={
        "id": "chatcmpl-scripted-empty-list", "object": "chat.completion", "created": CREATED,
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": content, "tool_calls": []}}],
    })


# ---------------------------------------------------------------------------
# Exercise 1: the assistant message, tool_calls verbatim
# ---------------------------------------------------------------------------

CALC = call("calculator", {"expression": "17 * 23"}, id="call_calc")
TIME = call("current_time", {"timezone": "Asia/Shanghai"}, id="call_time")

ASSISTANT_CASES: list[tuple[str, Reply]] = [
    ("一个工具调用，content 为 None", calls(CALC)),
    ("两个工具调用（id 不按字母顺序）",
     calls(call("current_time", {"timezone": "Asia/Shanghai"}, id="call_b"),
           call("calculator", {"expression": "17 * 23"}, id="call_a"))),
    ("content 和 tool_calls 同时存在，arguments 没有空格",
     calls(call("calculator", '{"expression":"17*23"}', id="call_x"),
           content="我先用计算器算一下。")),
]

PYDANTIC_HINT = ("返回的是 SDK 的对象，不是 dict。用 message.content、message.tool_calls、"
                 "tc.id、tc.function.name、tc.function.arguments 这些属性，自己拼出一个 dict。")


def expected_assistant(message: ChatCompletionMessage) -> dict[str, Any]:
    """What the exercise asks for (the same shape as `vibe_agent.reply.assistant_message`)."""
    return {
        "role": "assistant",
        "content": message.content,
        "tool_calls": [
            {"id": tc.id, "type": "function",
             "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
            for tc in message.tool_calls or []
        ],
    }


def _tool_call_problem(where: str, got: Any, want: dict[str, Any]) -> Problem:
    if isinstance(got, BaseModel):
        return f"{where} 是 SDK 的 {type(got).__name__} 对象，不是 dict", PYDANTIC_HINT
    if not isinstance(got, dict):
        return (f"{where} 应该是 dict，得到 {type(got).__name__}",
                "每个调用写成 {\"id\": ..., \"type\": \"function\", \"function\": {...}}。")
    if got.get("id") != want["id"]:
        return (f"{where}.id 应该是 {want['id']!r}，得到 {got.get('id')!r}",
                "id 原样照抄、顺序也不要改：后面的 tool 消息就靠这个 id 和调用对上号。")
    if got.get("type") != "function":
        return (f"{where} 缺少 \"type\": \"function\"（得到 {got.get('type')!r}）",
                "每个调用都要带 \"type\": \"function\"：服务商会检查这个字段，少了会报 400。")
    function = got.get("function")
    if not isinstance(function, dict):
        return (f"{where}.function 应该是 dict，得到 {type(function).__name__}",
                "写成 \"function\": {\"name\": tc.function.name, "
                "\"arguments\": tc.function.arguments}。")
    if function.get("name") != want["function"]["name"]:
        return (f"{where}.function.name 应该是 {want['function']['name']!r}，"
                f"得到 {function.get('name')!r}", "工具名原样抄 tc.function.name。")
    arguments, wanted = function.get("arguments"), want["function"]["arguments"]
    if isinstance(arguments, dict):
        return (f"{where}.function.arguments 是 dict {short(arguments)}",
                "arguments 在协议里是一个 JSON 字符串。原样放回 tc.function.arguments，"
                "不要 json.loads；解析是执行工具时的事。")
    if arguments != wanted:
        return (f"{where}.function.arguments 应该原样是 {wanted!r}，得到 {arguments!r}",
                "不要解析后再序列化（json.dumps 会改动空格和转义），直接用 tc.function.arguments。")
    return None


def _assistant_problem(got: Any, want: dict[str, Any]) -> Problem:
    if isinstance(got, BaseModel):
        return f"返回的是 {type(got).__name__} 对象", PYDANTIC_HINT
    if not isinstance(got, dict):
        return (f"应该返回 dict，得到 {type(got).__name__}：{short(got)}",
                "返回 {\"role\": \"assistant\", \"content\": ..., \"tool_calls\": [...]}。")
    if got.get("role") != "assistant":
        return (f"role 应该是 'assistant'，得到 {got.get('role')!r}",
                "这是模型自己说的话（它的决定），role 是 \"assistant\"。")
    if "content" not in got:
        return ("缺少 content 键",
                "content 也要原样带上：有文字就是那段文字，没有就是 None。"
                "漏掉它，模型在调用工具之前说的话就从历史里消失了。")
    if got["content"] != want["content"]:
        return (f"content 应该是 {want['content']!r}，得到 {got['content']!r}",
                "content 原样用 message.content，不要改写，也不要把 None 换成别的值。")
    tool_calls = got.get("tool_calls")
    if not isinstance(tool_calls, list):
        return (f"tool_calls 应该是 list，得到 {short(tool_calls)}",
                "tool_calls 是一个列表，每个调用一项，顺序和 message.tool_calls 相同。")
    if len(tool_calls) != len(want["tool_calls"]):
        return (f"应该有 {len(want['tool_calls'])} 个 tool_calls，得到 {len(tool_calls)} 个",
                "message.tool_calls 里的每一个调用都要抄过来，一个都不能少。")
    for i, (g, w) in enumerate(zip(tool_calls, want["tool_calls"], strict=True)):
        problem = _tool_call_problem(f"tool_calls[{i}]", g, w)
        if problem:
            return problem
    extra = sorted(set(got) - set(want))
    if extra:
        return (f"多出了字段 {', '.join(extra)}",
                "message.model_dump() 会带上 refusal、audio、function_call 这类字段"
                "（多半是 None）：它们是响应里带来的，不是协议要你发回去的，换一个服务不一定认。"
                "只保留 role、content、tool_calls 三个键。")
    if got != want:
        return (f"期望 {short(want)}，得到 {short(got)}",
                "tool_calls 里每一项只要 id、type、function{name, arguments} 这几个键。")
    return None


@checker("练习 2.1：assistant 消息原样追加", assistant_message, hint=(
        "这道题要你自己从 message 的属性拼出这个 dict；包里的 assistant_message "
        "第 04 课才拿来用。"))
def check_assistant_message(fn: Callable[[ChatCompletionMessage], Any], report: Report) -> None:
    """Exercise 2.1: turn the SDK's message into the assistant dict to append."""
    for name, reply in ASSISTANT_CASES:
        message = scripted_message(reply)
        with report.case(name):
            got = attempt(fn, message).get(PYDANTIC_HINT)
            if problem := _assistant_problem(got, expected_assistant(message)):
                fail(*problem)


# ---------------------------------------------------------------------------
# Exercise 2: one tool message per call, paired by id
# ---------------------------------------------------------------------------

# What each scripted call's tool returns (distinct, so a mix-up is visible).
RESULTS: dict[tuple[str, str], Any] = {
    ("calculator", '{"expression": "17 * 23"}'): "17 * 23 = 391",
    ("calculator", '{"expression": "2 ** 10"}'): "2 ** 10 = 1024",
    ("current_time", '{"timezone": "Asia/Shanghai"}'):
        "2026-12-01 09:30:00 Asia/Shanghai (UTC+08:00)",
}

TOOL_CASES: list[tuple[str, Reply, dict[tuple[str, str], Any]]] = [
    ("一个调用", calls(CALC), RESULTS),
    ("两个调用：calculator 和 current_time", calls(CALC, TIME), RESULTS),
    ("三个调用，id 不按字母顺序（call_b, call_a, call_c）",
     calls(call("calculator", {"expression": "17 * 23"}, id="call_b"),
           call("calculator", {"expression": "2 ** 10"}, id="call_a"),
           call("current_time", {"timezone": "Asia/Shanghai"}, id="call_c")), RESULTS),
    ("工具返回的是数字 391，不是字符串", calls(CALC),
     {("calculator", '{"expression": "17 * 23"}'): 391}),
]


class RecordingTool:
    """The `run_tool` a checker hands the learner: fixed results, every call written down."""

    def __init__(self, results: dict[tuple[str, str], Any]) -> None:
        self.results = results
        self.seen: list[tuple[Any, Any]] = []

    def __call__(self, name: str, arguments: str) -> Any:
        self.seen.append((name, arguments))
        if not isinstance(name, str) or not isinstance(arguments, str):
            return "Error: run_tool takes the tool name and the arguments JSON string."
        return self.results.get((name, arguments), f"Error: unknown call {name}({arguments})")


def _tool_messages_problem(got: Any, tool_calls: list[Any], tool: RecordingTool) -> Problem:
    wanted_calls = [(tc.function.name, tc.function.arguments) for tc in tool_calls]
    if any(not isinstance(arguments, str) for _, arguments in tool.seen):
        return ("run_tool 收到的 arguments 不是字符串",
                "把 tc.function.arguments（JSON 字符串）原样传给 run_tool(name, arguments)，"
                "由 run_tool 负责解析。")
    if any(not isinstance(name, str) for name, _ in tool.seen):
        return ("run_tool 收到的工具名不是字符串",
                "第一个参数是工具名 tc.function.name（一个字符串）。")
    if sorted(tool.seen) != sorted(wanted_calls):
        return (f"run_tool 被调用了 {len(tool.seen)} 次：{short(tool.seen)}；"
                f"应该对每个调用各执行一次：{short(wanted_calls)}",
                "遍历 tool_calls，每个调用执行一次 "
                "run_tool(tc.function.name, tc.function.arguments)。")
    if not isinstance(got, list):
        return (f"应该返回 list，得到 {type(got).__name__}",
                "返回一个列表，每个调用对应一条 tool 消息。")
    if len(got) != len(tool_calls):
        return (f"应该有 {len(tool_calls)} 条 tool 消息，得到 {len(got)} 条",
                "每个 tool_call 都要有一条自己的 tool 消息，少一条服务商就会报 400。")
    ids = [tc.id for tc in tool_calls]
    by_id = {tc.id: str(tool.results[(tc.function.name, tc.function.arguments)])
             for tc in tool_calls}
    names = {tc.id: tc.function.name for tc in tool_calls}
    for i, m in enumerate(got):
        if not isinstance(m, dict):
            return (f"第 {i + 1} 条应该是 dict，得到 {type(m).__name__}",
                    "每条写成 {\"role\": \"tool\", \"tool_call_id\": ..., \"content\": ...}。")
        if m.get("role") != "tool":
            return (f"第 {i + 1} 条的 role 应该是 'tool'，得到 {m.get('role')!r}",
                    "工具结果的 role 是 \"tool\"：不是 \"user\"（那样模型会以为是用户说的），"
                    "也不是旧接口的 \"function\"。")
        if "tool_call_id" not in m:
            return (f"第 {i + 1} 条缺少 tool_call_id（有的键：{', '.join(sorted(m))}）",
                    "每条 tool 消息都要写 \"tool_call_id\": tc.id，"
                    "模型和服务商靠它把结果对回调用。")
        if not isinstance(m.get("content"), str):
            return (f"第 {i + 1} 条的 content 是 {type(m.get('content')).__name__}："
                    f"{short(m.get('content'))}",
                    "content 必须是字符串：工具返回的不是字符串时，用 str(...) 转一下。")
    got_ids = [m["tool_call_id"] for m in got]
    if sorted(got_ids) != sorted(ids):
        return (f"tool_call_id 应该是 {ids}，得到 {got_ids}",
                "id 原样用 tc.id，不要自己编号（call_1、call_2……），服务商只认它发出的 id。")
    for i, m in enumerate(got):
        mine = m["tool_call_id"]
        if m["content"] != by_id[mine]:
            owner = next((k for k, text in by_id.items() if text == m["content"]), None)
            if owner is not None:
                return (f"第 {i + 1} 条写着 id {mine}（{names[mine]}），内容却是 "
                        f"{owner}（{names[owner]}）的结果 {m['content']!r}：张冠李戴",
                        "按位置配对，执行顺序一变就错位。让每个结果和它自己的 tc.id 一起走："
                        "在同一次循环里执行 tc、用 tc.id 写消息。")
            return (f"第 {i + 1} 条（{mine}）的 content 应该是 {by_id[mine]!r}，"
                    f"得到 {m['content']!r}",
                    "content 就是 run_tool 的返回值（转成字符串），不要再加工，也不要 json.dumps。")
    if got_ids != ids:
        return (f"tool 消息的顺序应该和调用顺序一致：{ids}，得到 {got_ids}",
                "执行顺序可以不同，但返回前按 tool_calls 的顺序排好，"
                "历史才和调用一一对应、好读好查。")
    return None


@checker("练习 2.2：每个调用一条 tool 消息，按 id 配对")
def check_tool_messages(fn: Callable[[list[Any], Callable[[str, str], Any]], Any],
                        report: Report) -> None:
    """Exercise 2.2: execute each call and answer it with a `role: "tool"` message."""
    for name, reply, results in TOOL_CASES:
        tool_calls = list(scripted_message(reply).tool_calls or [])
        tool = RecordingTool(results)
        with report.case(name):
            got = attempt(fn, tool_calls, tool).get(
                "每个调用用 tc.id、tc.function.name、tc.function.arguments 这几个属性。")
            if problem := _tool_messages_problem(got, tool_calls, tool):
                fail(*problem)


# ---------------------------------------------------------------------------
# Exercise 3: the only exit signal
# ---------------------------------------------------------------------------

WORDS_HINT = ("不要看 content 里的字：模型可以一边说“完成”一边还要调用工具。"
              "只看 tool_calls 是否为空：return not message.tool_calls")
FINAL_CASES: list[tuple[str, Reply, bool, str]] = [
    ("最终回答，没有 tool_calls", answer("17 × 23 = 391。"), True, WORDS_HINT),
    ("只有工具调用，content 为 None", calls(CALC), False,
     "有 tool_calls 就还没结束：先执行工具、追加结果，再问一轮。"),
    ("content 写着“完成！”，同时还有 tool_calls", calls(CALC, content="完成！"), False,
     WORDS_HINT),
    ("最终回答的 content 是空字符串", answer(""), True,
     "content 为空也可能是最终回答：判断依据只有 tool_calls。"),
    ("tool_calls 是空列表 []（有的兼容服务这样返回）", _empty_tool_calls("391"), True,
     "tool_calls 可能是 None，也可能是空列表 []。用 not message.tool_calls，两种都算“没有”。"),
]


@checker("练习 2.3：唯一的退出信号")
def check_is_final(fn: Callable[[ChatCompletionMessage], Any], report: Report) -> None:
    """Exercise 2.3: True only when the message carries no tool_calls."""
    for name, reply, wanted, hint in FINAL_CASES:
        message = scripted_message(reply)
        with report.case(name):
            got = attempt(fn, message).get(hint)
            if not isinstance(got, bool):
                fail(f"应该返回 True 或 False，得到 {short(got)}",
                     "用 not message.tool_calls，结果就是一个 bool。")
            if got != wanted:
                shown = json.dumps({"content": message.content,
                                    "tool_calls": [tc.function.name
                                                   for tc in message.tool_calls or []]
                                    if message.tool_calls is not None else None},
                                   ensure_ascii=False)
                fail(f"期望 {wanted}，得到 {got}（消息：{shown}）", hint)
