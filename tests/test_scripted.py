"""Scripted models: the request cap, the wire format, the misbehaviours, and the reference
model reading every way the course (and the course chapter's own code) asks a question."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletion
from openai.types.shared import ErrorObject

from vibe_agent.course.reference import (
    PLANNERS,
    REFERENCE_MODEL_NAME,
    plan,
    question_in_prompt,
    reference_model,
)
from vibe_agent.course.scripted import (
    MISBEHAVIOURS,
    RequestCapReached,
    ScriptedModel,
    ScriptExhausted,
    answer,
    call,
    calls,
    first_user_message,
    http_error,
    misbehaving,
    offered_tools,
    system_prompt,
    tool_rounds,
)
from vibe_agent.naive import NextStep, tools_in_prompt
from vibe_agent.tools import demo_registry

QUESTION = [{"role": "user", "content": "17 × 23 等于多少？"}]


def ask(model: ScriptedModel, **options: Any) -> Any:
    return model.client().chat.completions.create(model="m", messages=QUESTION, **options)


def raw(model: ScriptedModel, body: dict[str, Any] | None = None,
        path: str = "/v1/chat/completions") -> httpx2.Response:
    """One request straight to the transport: the JSON a provider would send back."""
    request = httpx2.Request("POST", f"http://scripted.invalid{path}",
                             json=body or {"model": "m", "messages": QUESTION})
    return model.handle_request(request)


# --- the request cap --------------------------------------------------------------------------


@pytest.mark.parametrize("script", [
    pytest.param(lambda body: answer("again"), id="responder"),
    pytest.param([answer("again")] * 5, id="list-longer-than-the-cap"),
])
def test_request_cap_answers_that_many_then_names_the_cap(script):
    model = ScriptedModel(script, name="capped", max_requests=3)
    for _ in range(3):
        ask(model)
    with pytest.raises(RequestCapReached, match=r"'capped'.*max_requests=3.*request #4"):
        ask(model)
    assert len(model.requests) == 4  # the refused request is recorded too


def test_request_cap_is_a_script_exhausted_and_off_by_default():
    assert issubclass(RequestCapReached, ScriptExhausted)
    model = misbehaving("repeat_forever")
    for _ in range(60):
        ask(model)
    assert model.max_requests is None and len(model.requests) == 60


def test_a_list_still_runs_out_before_its_cap():
    model = ScriptedModel([answer("one")], max_requests=10)
    ask(model)
    with pytest.raises(ScriptExhausted) as raised:
        ask(model)
    assert not isinstance(raised.value, RequestCapReached)


@pytest.mark.parametrize("factory", [
    pytest.param(lambda: misbehaving("repeat_forever", max_requests=2), id="misbehaving"),
    pytest.param(lambda: reference_model(max_requests=2), id="reference"),
])
def test_every_way_to_build_a_scripted_model_takes_the_cap(factory):
    model = factory()
    ask(model)
    ask(model)
    with pytest.raises(RequestCapReached):
        ask(model)


# --- the wire format: OpenAI's published shapes ----------------------------------------------


@pytest.mark.parametrize("reply", [
    pytest.param(answer("391"), id="answer"),
    pytest.param(calls(call("calculator", {"expression": "17 * 23"})), id="tool-call"),
    pytest.param(calls(call("calculator", "{broken"), content="先算一下"), id="content-and-call"),
])
def test_responses_carry_every_always_present_field(reply):
    body = raw(ScriptedModel([reply])).json()
    ChatCompletion.model_validate(body, strict=True)
    choice = body["choices"][0]
    assert set(choice) == {"index", "message", "logprobs", "finish_reason"}
    assert {"role", "content", "refusal"} <= set(choice["message"])
    assert choice["message"]["refusal"] is None


@pytest.mark.parametrize(("response", "status", "kind", "code"), [
    pytest.param(lambda: raw(ScriptedModel([http_error(429, "slow down")])), 429, "requests",
                 "rate_limit_exceeded", id="429"),
    pytest.param(lambda: raw(ScriptedModel([http_error(500, "boom")])), 500, "server_error", None,
                 id="500"),
    pytest.param(lambda: raw(ScriptedModel([answer("x")]), {"model": "m", "messages": [
        {"role": "tool", "tool_call_id": "nope", "content": "x"}]}), 400,
        "invalid_request_error", None, id="400-broken-history"),
    pytest.param(lambda: raw(ScriptedModel([answer("x")]), path="/v1/embeddings"), 404,
                 "invalid_request_error", None, id="404-other-endpoint"),
])
def test_error_bodies_have_openais_four_fields(response, status, kind, code):
    got = response()
    assert got.status_code == status
    error = got.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    ErrorObject.model_validate(error, strict=True)
    assert (error["type"], error["code"]) == (kind, code)


def test_the_sdk_reads_the_scripted_error_fields():
    with pytest.raises(openai.BadRequestError) as raised:
        model = ScriptedModel([answer("x")])
        model.client().chat.completions.create(model="m", messages=[
            {"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert raised.value.param == "messages" and raised.value.type == "invalid_request_error"


BROKEN_HISTORY = [QUESTION[0], {"role": "tool", "tool_call_id": "call_1_1", "content": "391"}]


@pytest.mark.parametrize(("check_history", "status"), [
    pytest.param(True, 400, id="checked-by-default"),
    pytest.param(False, 200, id="accepted-when-unchecked"),
])
def test_a_broken_history_is_refused_unless_checking_is_off(check_history, status):
    model = ScriptedModel([answer("x")], check_history=check_history)
    got = raw(model, {"model": "m", "messages": BROKEN_HISTORY})
    assert got.status_code == status
    assert model.requests[0]["messages"] == BROKEN_HISTORY


# --- misbehaviours ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MISBEHAVIOURS))
def test_misbehaviours_are_named_functions(name):
    responder = MISBEHAVIOURS[name]
    assert responder.__name__ == name and responder.__doc__
    assert misbehaving(name).name == f"scripted-{name}"


def test_unknown_misbehaviour_lists_the_names():
    with pytest.raises(KeyError, match="repeat_forever"):
        misbehaving("sulks")


# --- reading a request body (the scripted models' shared readers) -----------------------------

TOOL_CALL = {"id": "c1", "type": "function",
             "function": {"name": "calculator", "arguments": "{}"}}
BODIES = {  # (first user message, system prompt, offered tools, tool rounds)
    "empty": ({}, ("", "", [], 0)),
    "null-fields": ({"messages": None, "tools": None}, ("", "", [], 0)),
    "question-only": ({"messages": QUESTION}, ("17 × 23 等于多少？", "", [], 0)),
    "system-user-tools": ({"messages": [{"role": "system", "content": "规则"}, *QUESTION],
                           "tools": [{"type": "function", "function": {"name": "calculator"}},
                                     {"type": "function", "function": {"name": "get_weather"}}]},
                          ("17 × 23 等于多少？", "规则", ["calculator", "get_weather"], 0)),
    "two-users-the-first-counts": ({"messages": [{"role": "user", "content": "第一个"},
                                                 {"role": "user", "content": "第二个"}]},
                                   ("第一个", "", [], 0)),
    "null-content": ({"messages": [{"role": "user", "content": None}]}, ("", "", [], 0)),
    "no-role": ({"messages": [{"content": "谁说的？"}]}, ("", "", [], 0)),
    "rounds": ({"messages": [*QUESTION,
                             {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
                             {"role": "tool", "tool_call_id": "c1", "content": "391"},
                             {"role": "assistant", "content": "想一想", "tool_calls": []},
                             {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}]},
               ("17 × 23 等于多少？", "", [], 2)),
}


@pytest.mark.parametrize(("body", "expected"), BODIES.values(), ids=BODIES.keys())
def test_request_readers(body, expected):
    assert (first_user_message(body), system_prompt(body), offered_tools(body),
            tool_rounds(body)) == expected


# --- the reference model: one planner per kind of task ----------------------------------------

DONE_TIME = ("current_time", "2026-01-01 12:05:06 Asia/Shanghai (UTC+08:00)")


@pytest.mark.parametrize(("question", "results", "expected"), [
    ("2099 年世界杯冠军是谁？", [],
     NextStep(answer="我无法知道 2099 年世界杯的冠军：那是未来的比赛，"
                     "现在没有任何人或工具能告诉我结果。")),
    ("现在几点？", [], NextStep("current_time", {"timezone": "Asia/Shanghai"})),
    ("现在几点？", [DONE_TIME], NextStep(answer=f"现在是 {DONE_TIME[1]}。")),
    ("17 × 23 等于多少？", [], NextStep("calculator", {"expression": "17 * 23"})),
    ("17 × 23 等于多少？", [("calculator", "17 * 23 = 391")], NextStep(answer="17 × 23 = 391。")),
    ("请抓取 https://example.com/ 这个网页，计算它的字符长度，再除以 7。", [],
     NextStep("page_length", {"url": "https://example.com/"})),
    ("请抓取 https://example.com/ 这个网页，计算它的字符长度，再除以 7。",
     [("page_length", "The page https://example.com/ has 335 characters.")],
     NextStep("calculator", {"expression": "335 / 7"})),
    ("北京今天天气怎么样？", [], NextStep("get_weather", {"city": "北京"})),
    ("AAPL 的股价是多少？", [], NextStep("get_stock", {"code": "AAPL"})),
    ("GPT 是什么？", [], NextStep(answer="（脚本参考模型）这个问题不在我的脚本里，我不知道答案。")),
    ("17 × 23 等于多少？", [("calculator", "Error: boom")],
     NextStep(answer="工具返回了错误：Error: boom 我没法据此给出可靠的答案。")),
], ids=["future", "time", "time-answer", "arithmetic", "arithmetic-answer", "page-length",
        "page-length-then-divide", "weather", "stock", "outside-the-script", "tool-error"])
def test_plan(question, results, expected):
    assert plan(question, results) == expected


def test_planners_are_tried_in_order():
    """A question two planners match goes to the earlier one (the clock before arithmetic)."""
    question = "现在几点？顺便算一下 17 × 23。"
    assert [p.__name__ for p in PLANNERS if p(question, {})] == ["plan_time", "plan_arithmetic"]
    assert plan(question, []).tool == "current_time"


SEED_TOOLS = ("你可以使用这些工具:\n- get_weather(city): 查询某城市天气\n"
              "- get_stock(code): 查询某股票价格")


@pytest.mark.parametrize(("prompt", "question"), [
    (tools_in_prompt("17 × 23 等于多少？", demo_registry()), "17 × 23 等于多少？"),
    (f"{SEED_TOOLS}\n请回答用户问题:北京有什么好吃的？", "北京有什么好吃的？"),
    (f"{SEED_TOOLS}\n请回答用户问题:GPT 是什么？", "GPT 是什么？"),
    ("Tools:\n- calculator(expression): Evaluate arithmetic\n\nQuestion: 17 × 23 = ?",
     "17 × 23 = ?"),
], ids=["ours-question-first", "chapter-tools-first", "chapter-uppercase-word", "english"])
def test_question_in_prompt_reads_both_layouts(prompt, question):
    assert question_in_prompt(prompt) == question


# --- the course chapter's own code, run unchanged against the reference model ------------------
# Our transcriptions of the shapes in seed 000 (the loop) and seed 001 (the naive agent and
# its run_agent): our own fake tools and schemas, the same structure.


def weather(city: str) -> str:
    return f"{city}今天晴，18 到 25 摄氏度（示意数据）"


def stock(code: str) -> str:
    return f"{code} 当前价格 142.6 元（示意数据）"


CHAPTER_TOOLS = {"get_weather": weather, "get_stock": stock}
CHAPTER_SCHEMAS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "查询某城市今天的天气",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "城市名，如 北京"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_stock", "description": "查询某股票的当前价格",
        "parameters": {"type": "object", "properties": {
            "code": {"type": "string", "description": "股票代码"}}, "required": ["code"]}}},
]


def dispatch(name: str, arguments: str) -> str:
    func = CHAPTER_TOOLS.get(name)
    if func is None:
        return f"错误：不存在名为 {name} 的工具"
    return func(**json.loads(arguments))


def chapter_naive_agent(client: openai.OpenAI, question: str) -> str:
    """Seed 001's first version: tools listed first, the question last, no tools field."""
    prompt = ("你可以使用这些工具:\n- get_weather(city): 查询某城市天气\n"
              f"- get_stock(code): 查询某股票价格\n请回答用户问题:{question}")
    resp = client.chat.completions.create(model="gpt-4o-mini",
                                          messages=[{"role": "user", "content": prompt}])
    return resp.choices[0].message.content


def chapter_run_agent(client: openai.OpenAI, question: str, max_steps: int = 8) -> str:
    """Seed 001's loop: no system prompt, the SDK's message object appended as it is."""
    messages: list[Any] = [{"role": "user", "content": question}]
    for _ in range(max_steps):
        resp = client.chat.completions.create(model="gpt-4o-mini", messages=messages,
                                              tools=CHAPTER_SCHEMAS)
        msg = resp.choices[0].message
        if not msg.tool_calls:
            return msg.content
        messages.append(msg)
        for tool_call in msg.tool_calls:
            messages.append({"role": "tool", "tool_call_id": tool_call.id,
                             "content": dispatch(tool_call.function.name,
                                                 tool_call.function.arguments)})
    return "已达到最大步数，未能得出最终答案"


def chapter_loop(client: openai.OpenAI, model: str, registry: Any, question: str,
                 max_iters: int = 6) -> str:
    """Seed 000's loop: its system prompt, tool_choice="auto", decoded arguments to call."""
    messages = [{"role": "system", "content": "你是助手。需要时调用工具。"},
                {"role": "user", "content": question}]
    for _ in range(max_iters):
        msg = client.chat.completions.create(
            model=model, messages=messages, tools=registry.to_schemas(), tool_choice="auto",
            temperature=0).choices[0].message
        if not msg.tool_calls:
            return msg.content or ""
        messages.append({"role": "assistant", "content": msg.content, "tool_calls": [
            {"id": tc.id, "type": "function",
             "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
            for tc in msg.tool_calls]})
        for tc in msg.tool_calls:
            args = json.loads(tc.function.arguments)
            messages.append({"role": "tool", "tool_call_id": tc.id,
                             "content": registry.call(tc.function.name, args).output})
    return "达到最大轮次仍无最终回答"


@pytest.mark.parametrize(("question", "expected"), [
    ("北京今天天气怎么样？", "我需要调用 get_weather(city='北京') 才能回答。"),
    ("AAPL 的股价是多少？", "我需要调用 get_stock(code='AAPL') 才能回答。"),
    ("北京有什么好吃的？", "这个问题不在我的脚本里"),
    ("GPT 是什么？", "这个问题不在我的脚本里"),
    ("17 × 23 等于多少？", "需要 calculator 工具，但这次没有提供它"),
    ("2099 年世界杯冠军是谁？", "我无法知道 2099 年世界杯的冠军"),
], ids=["weather", "stock", "city-without-weather", "uppercase-word-not-a-ticker",
        "tool-not-listed", "future"])
def test_chapter_naive_agent_is_read_right(question, expected):
    model = reference_model()
    assert expected in chapter_naive_agent(model.client(), question)
    assert len(model.requests) == 1


@pytest.mark.parametrize(("question", "expected", "rounds"), [
    ("北京今天天气怎么样？", "北京今天晴，18 到 25 摄氏度", 2),
    ("600519 的股价是多少？", "600519 当前价格 142.6 元", 2),
    ("2099 年世界杯冠军是谁？", "我无法知道", 1),
    ("17 × 23 等于多少？", "需要 calculator 工具", 1),
], ids=["weather", "stock", "future", "tool-not-offered"])
def test_chapter_run_agent_runs_against_the_reference_model(question, expected, rounds):
    model = reference_model(max_requests=8)
    assert expected in chapter_run_agent(model.client(), question)
    assert len(model.requests) == rounds
    assert model.requests[-1]["messages"][0] == {"role": "user", "content": question}


@pytest.mark.parametrize(("question", "expected"), [
    ("17 × 23 等于多少？", "17 × 23 = 391。"),
    ("现在几点？", "现在是 "),
    ("2099 年世界杯冠军是谁？", "我无法知道"),
], ids=["calculator", "clock", "future"])
def test_chapter_loop_runs_against_the_reference_model(question, expected):
    model = reference_model(max_requests=6)
    got = chapter_loop(model.client(), REFERENCE_MODEL_NAME, demo_registry(), question)
    assert got.startswith(expected)
    assert all(body["tool_choice"] == "auto" for body in model.requests)


def named(tool: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool}}


@pytest.mark.parametrize(("question", "tool_choice", "reply"), [
    ("17 × 23 等于多少？", "auto", ("calculator", {"expression": "17 * 23"})),
    ("17 × 23 等于多少？", None, ("calculator", {"expression": "17 * 23"})),
    ("17 × 23 等于多少？", "none", "calculator 工具，但这次请求不允许调用工具"),
    ("17 × 23 等于多少？", "required", ("calculator", {"expression": "17 * 23"})),
    ("17 × 23 等于多少？", named("calculator"), ("calculator", {"expression": "17 * 23"})),
    ("17 × 23 等于多少？", named("get_weather"), ("get_weather", {})),
    ("2099 年世界杯冠军是谁？", "auto", "我无法知道 2099 年世界杯的冠军"),
    ("2099 年世界杯冠军是谁？", "none", "我无法知道 2099 年世界杯的冠军"),
    ("2099 年世界杯冠军是谁？", "required", ("current_time", {})),
], ids=["auto-plan", "absent-plan", "none-refuses-the-call", "required-plan-fits",
        "named-plan-fits", "named-overrides-plan", "auto-honest", "none-honest",
        "required-forces-an-unrelated-tool"])
def test_reference_model_follows_tool_choice(question, tool_choice, reply):
    """The reference model treats tool_choice as a provider would: none forbids a call,
    required or a named function forces one (the first offered tool, or the named one)."""
    options = {} if tool_choice is None else {"tool_choice": tool_choice}
    response = reference_model().client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": question}],
        tools=demo_registry().to_schemas(), **options)
    message = response.choices[0].message
    if isinstance(reply, str):
        assert not message.tool_calls and reply in message.content
    else:
        (only,) = message.tool_calls
        assert (only.function.name, json.loads(only.function.arguments)) == reply
