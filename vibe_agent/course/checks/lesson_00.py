"""Checkers for lesson 00 (setup): a first request, and the rule that picks the run mode.

    check_first_answer(first_answer)   first_answer(client, model, question) -> str
    check_pick_mode(pick_mode)         pick_mode(env, requested) -> str

`first_answer` is run against scripted models (`vibe_agent.course.scripted`): each case looks
at what the learner's function sent (the request body the scripted model received)
and what it returned. `pick_mode` is compared with `vibe_agent.course.client.resolve_mode`,
the rule `make_client` itself uses, over a table of environments.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any
from unittest.mock import patch

from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice

from ..client import make_client, resolve_mode
from ..scripted import ScriptedModel, answer
from . import Report, attempt, checker, fail, fail_unless_a, short

# ---------------------------------------------------------------------------
# Exercise 0.1: first_answer(client, model, question) -> str
# ---------------------------------------------------------------------------


def _check_return(got: Any, reply: str) -> None:
    """The value must be the answer's text itself, not an object that holds it."""
    if isinstance(got, ChatCompletion):
        fail("返回的是整个 response 对象（ChatCompletion），不是文字。",
             "回答的文字在 response.choices[0].message.content。")
    if isinstance(got, list) and got and isinstance(got[0], Choice):
        fail("返回的是 response.choices 这个列表。",
             "取第一个选项的文字：response.choices[0].message.content。")
    if isinstance(got, Choice):
        fail("返回的是 response.choices[0]（一个 Choice 对象）。", "还差两步：.message.content。")
    if isinstance(got, ChatCompletionMessage):
        fail("返回的是 message 对象（ChatCompletionMessage），不是文字。",
             "文字在它的 .content 属性里：response.choices[0].message.content。")
    fail_unless_a(str, got, "返回 response.choices[0].message.content。")
    if got != reply:
        fail(f"期望返回模型的回答 {reply!r}，得到 {short(got)}",
             "原样返回 message.content：不要改写、拼接，也不要写死一个答案。")


EXTRA_HINT = ("这道题只传 model 和 messages 两个参数。多一个字段，请求就和录制时不一样了："
              "下面那个单元格在严格回放里会报 ReplayMiss，在离线模式里会回退给脚本参考模型，"
              "你看到的就不再是录制文件里的回答。temperature 等参数第 04 课再加。")


def _check_request(requests: list[dict[str, Any]], model: str, question: str) -> None:
    """Exactly one request, with the given model and one user message holding the question."""
    if not requests:
        fail("函数没有向模型发出任何请求。",
             "要真的调用 client.chat.completions.create(...)，答案只能从模型那里来。")
    if len(requests) > 1:
        fail(f"函数向模型发了 {len(requests)} 次请求，只需要 1 次。",
             "调用一次 client.chat.completions.create，就从这一个 response 里取文字。")
    body = requests[0]
    if body.get("model") != model:
        fail(f"请求里的 model 是 {body.get('model')!r}，但传进来的参数是 {model!r}。",
             "不要写死模型名，用参数 model：回放、在线、本地模式下的模型名各不相同。")
    messages = body.get("messages") or []
    wanted = [{"role": "user", "content": question}]
    if messages != wanted:
        if any(m.get("role") == "system" and m.get("content") == question for m in messages):
            fail("问题被放进了 role=\"system\" 的消息里。",
                 "用户的问题用 role=\"user\" 发送；system 消息是给模型的行为说明，这一课用不到。")
        fail(f"messages 应该正好是 {wanted!r}，实际发送的是 {short(messages, 200)}",
             "只发一条消息：{\"role\": \"user\", \"content\": question}，"
             "question 用参数，不要写死。")
    extra = sorted(set(body) - {"model", "messages"})
    if extra:
        shown = "，".join(f"{key}={body[key]!r}" for key in extra)
        fail(f"请求里多了 {shown}。", EXTRA_HINT)


FIRST_ANSWER_CASES = [
    # (case name, model, question, the scripted reply)
    ("model=\"checker-a\"，问 17 × 23", "checker-a", "17 × 23 等于多少？", "17 × 23 = 391。"),
    ("model=\"checker-b\"，问现在几点", "checker-b", "现在几点？",
     "我没有时钟，不知道现在几点。"),
    ("model=\"checker-c\"，问 2099 年世界杯", "checker-c", "2099 年世界杯冠军是谁？",
     "我无法知道未来比赛的结果。"),
]


@checker("练习 0.1：first_answer —— 发一个问题，返回回答的文字")
def check_first_answer(fn: Callable[..., Any], report: Report) -> None:
    """Check `first_answer(client, model, question) -> str` against scripted models.

    Args:
        fn: the learner's function.
    """
    for name, model, question, reply in FIRST_ANSWER_CASES:
        with report.case(name):
            scripted = ScriptedModel([answer(reply), answer("（第二次请求的回答）")],
                                     name="checker-00")
            got = attempt(fn, scripted.client(), model, question).get(
                "返回 response.choices[0].message.content。")
            _check_request(scripted.requests, model, question)
            _check_return(got, reply)


# ---------------------------------------------------------------------------
# Exercise 0.2: pick_mode(env, requested) -> str
# ---------------------------------------------------------------------------

KEY = "sk-checker-not-a-real-key"

PICK_MODE_CASES: list[tuple[str, dict[str, str], str | None, str]] = [
    # (case name, env, requested, hint when the answer is wrong)
    ("什么都没配置", {}, None,
     "没有参数、没有 VIBE_AGENT_MODE、也没有 key 时，默认是离线模式 \"offline\"。"),
    ("只配置了 key", {"OPENAI_API_KEY": KEY}, None,
     "有 OPENAI_API_KEY（且不为空）而没有指定模式时，默认是 \"live\"。"),
    ("key 是空字符串", {"OPENAI_API_KEY": ""}, None,
     "空字符串不算配置了 key（.env 里常见 OPENAI_API_KEY= 这样的空行）："
     "判断 key 的值是否为真，而不是 \"OPENAI_API_KEY\" in env。"),
    ("VIBE_AGENT_MODE 优先于 key", {"OPENAI_API_KEY": KEY, "VIBE_AGENT_MODE": "replay"}, None,
     "明确写出的 VIBE_AGENT_MODE 比“有没有 key”更优先。"),
    ("VIBE_AGENT_MODE=record", {"VIBE_AGENT_MODE": "record"}, None,
     "参数是 None 时，用环境变量 VIBE_AGENT_MODE 的值。"),
    ("参数优先于一切", {"OPENAI_API_KEY": KEY, "VIBE_AGENT_MODE": "live"}, "local",
     "函数参数 requested 最优先：调用者明确要求的模式，环境变量不能覆盖。"),
    ("参数有大小写和空格", {}, " Replay ",
     "先 .strip() 去掉空格，再 .lower() 转成小写。"),
    ("环境变量有大小写和空格", {"VIBE_AGENT_MODE": "  LIVE\t", "OPENAI_API_KEY": KEY}, None,
     "环境变量里的值也要 .strip().lower()。"),
    ("VIBE_AGENT_MODE 是空字符串", {"VIBE_AGENT_MODE": "", "OPENAI_API_KEY": KEY}, None,
     "VIBE_AGENT_MODE 为空时当作没设置，继续看有没有 key。"
     "注意 env.get(\"VIBE_AGENT_MODE\", 默认值) 对空字符串不会用默认值，可以用 or。"),
]


OS_ENVIRON_HINT = ("看起来你读的是 os.environ（这台机器的环境变量），而不是参数 env。"
                   "只用传进来的 env。")


def _reads_os_environ(fn: Callable[[dict[str, str], str | None], str]) -> bool:
    """True when the learner's function reads this machine's os.environ instead of `env`."""
    with patch.dict(os.environ, {"VIBE_AGENT_MODE": "record"}):
        return attempt(fn, {}, None).value == "record"


@checker("练习 0.2：pick_mode —— 选出运行模式", resolve_mode, make_client, hint=(
        "这道题要你亲手写出这条规则：只用参数 env 和 requested，按题目的三条顺序判断。"))
def check_pick_mode(fn: Callable[[dict[str, str], str | None], str], report: Report) -> None:
    """Compare `pick_mode(env, requested)` with `resolve_mode` over a table of environments.

    Args:
        fn: the learner's function.
    """
    for name, env, requested, hint in PICK_MODE_CASES:
        with report.case(name):
            wanted = resolve_mode(requested, env)
            got = attempt(fn, dict(env), requested).get(hint)  # a copy: the table stays intact
            if got != wanted:
                fail(f"env={env!r}, requested={requested!r}：期望 {wanted!r}，得到 {got!r}",
                     OS_ENVIRON_HINT if _reads_os_environ(fn) else hint)
