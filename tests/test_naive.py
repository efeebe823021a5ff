"""Lesson 01 and the reference model: the naive parsers on every scripted failure, the
naive agent, the describe-only prompt, and the reference model on the four demo tasks."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx2
import pytest

from vibe_agent.course.reference import REFERENCE_MODEL_NAME
from vibe_agent.course.reference import reference_model as reference
from vibe_agent.course.scripted import ScriptedModel, answer, misbehaving
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.naive import (
    SCRIPTED_FAILURES,
    NextStep,
    ParseFailure,
    ask_with_tools_in_prompt,
    diagnose,
    parse_regex,
    parse_strict,
    run_naive_agent,
)
from vibe_agent.registry import ToolRegistry
from vibe_agent.tools import demo_registry
from vibe_agent.world import World

MODEL = REFERENCE_MODEL_NAME
FIXED_NOW = datetime(2026, 11, 30, 13, 0, tzinfo=UTC)  # 21:00 in Asia/Shanghai
SHANGHAI_NOW = "2026-11-30 21:00:00"

# A fixed page with Chinese text, so its character count differs from its byte count.
PAGE = ('<!doctype html><html><head><meta charset="utf-8"><title>示例网页</title></head>'
        "<body><h1>Example Domain</h1><p>这个网页只用于测试：它的长度是固定的。</p></body></html>")
PAGE_URL = "https://example.com/"
PAGE_TASK = f"请抓取 {PAGE_URL} 这个网页，计算它的字符长度，再除以 7"


def world_serving(handler: Callable[[httpx2.Request], httpx2.Response]) -> World:
    """A world with the fixed clock whose HTTP requests are answered by `handler`."""
    return World(now=lambda: FIXED_NOW,
                 http=httpx2.Client(transport=httpx2.MockTransport(handler)))


@pytest.fixture
def offline() -> Iterator[World]:
    """A world that fails the test if a tool touches the network.

    Raising alone is not enough: the registry turns a tool's exception into "Error:"
    text for the model, so the requests are also recorded and checked at the end.
    """
    used: list[str] = []

    def refuse(request: httpx2.Request) -> httpx2.Response:
        used.append(str(request.url))
        raise AssertionError(f"this test must not use the network: {request.url}")

    yield world_serving(refuse)
    assert used == [], f"a tool used the network: {used}"


def serve_page(request: httpx2.Request) -> httpx2.Response:
    if str(request.url) != PAGE_URL:
        return httpx2.Response(404, text="not found")
    return httpx2.Response(200, html=PAGE)


def tools_run(result) -> list[str]:
    """The tools a run_agent result executed, in order."""
    return [step.tool for step in result.trace if step.kind == "tool"]


# ---------------------------------------------------------------------------
# The two parsers and diagnose, on every scripted failure
# ---------------------------------------------------------------------------

CALC = NextStep(tool="calculator", arguments={"expression": "17 * 23"})
BOLD_CALC = NextStep(tool="**calculator**", arguments={"expression": "17 * 23"})
FAILS = ParseFailure

PARSE_TABLE = [
    # (SCRIPTED_FAILURES key, parse_strict, parse_regex, diagnose)
    ("clean", CALC, CALC, []),
    ("prose_around_json", FAILS, CALC, ["prose_around_json"]),
    ("code_fence", FAILS, CALC, ["code_fence"]),
    ("markdown_bold", BOLD_CALC, BOLD_CALC, ["markdown_bold"]),  # parses; the name is wrong
    ("several_calls", FAILS, FAILS, ["several_calls"]),  # the outermost {...} spans both
    ("prose_instead_of_json", FAILS, FAILS, ["prose_instead_of_json"]),
    # a call, an invented observation and an answer: two JSON objects in one reply
    ("fabricated_observation", FAILS, FAILS, ["fabricated_observation"]),
]


def outcome(parser: Callable[[str], NextStep], text: str) -> NextStep | type[ParseFailure]:
    try:
        return parser(text)
    except ParseFailure:
        return ParseFailure


def test_parse_table_covers_every_scripted_failure():
    assert [row[0] for row in PARSE_TABLE] == list(SCRIPTED_FAILURES)


@pytest.mark.parametrize(("name", "strict", "regex", "problems"), PARSE_TABLE,
                         ids=[row[0] for row in PARSE_TABLE])
def test_parsers_and_diagnose(name, strict, regex, problems):
    text = SCRIPTED_FAILURES[name]
    assert outcome(parse_strict, text) == strict
    assert outcome(parse_regex, text) == regex
    assert diagnose(text) == problems


# ---------------------------------------------------------------------------
# The naive agent on scripted failures: where each one stops
# ---------------------------------------------------------------------------

FINAL = '{"answer": "17 × 23 = 391。"}'
RAN_391 = [("calculator", "17 * 23 = 391")]
RAN_UNKNOWN = [("**calculator**", "Error: unknown tool '**calculator**'. Available tools: ")]

NAIVE_TABLE = [
    # (failure, parser, stop reason, (tool, output prefix) per run, requests sent)
    ("clean", parse_strict, "answered", RAN_391, 2),
    ("clean", parse_regex, "answered", RAN_391, 2),
    ("prose_around_json", parse_strict, "parse_failed", [], 1),
    ("prose_around_json", parse_regex, "answered", RAN_391, 2),
    ("code_fence", parse_strict, "parse_failed", [], 1),
    ("code_fence", parse_regex, "answered", RAN_391, 2),
    ("markdown_bold", parse_strict, "answered", RAN_UNKNOWN, 2),
    ("markdown_bold", parse_regex, "answered", RAN_UNKNOWN, 2),
    ("several_calls", parse_strict, "parse_failed", [], 1),
    ("several_calls", parse_regex, "parse_failed", [], 1),
    ("prose_instead_of_json", parse_strict, "parse_failed", [], 1),
    ("prose_instead_of_json", parse_regex, "parse_failed", [], 1),
    ("fabricated_observation", parse_strict, "parse_failed", [], 1),
    ("fabricated_observation", parse_regex, "parse_failed", [], 1),
]


def test_naive_table_covers_every_scripted_failure_with_both_parsers():
    rows = {(row[0], row[1]) for row in NAIVE_TABLE}
    assert rows == {(name, p) for name in SCRIPTED_FAILURES for p in (parse_strict, parse_regex)}


@pytest.mark.parametrize(
    ("name", "parser", "stop_reason", "runs", "requests"), NAIVE_TABLE,
    ids=[f"{row[0]}-{row[1].__name__.removeprefix('parse_')}" for row in NAIVE_TABLE])
def test_naive_agent_on_a_scripted_failure(offline, name, parser, stop_reason, runs, requests):
    model = ScriptedModel([answer(SCRIPTED_FAILURES[name]), answer(FINAL)])
    result = run_naive_agent(model.client(), "17 × 23 等于多少？", demo_registry(offline),
                             model=MODEL, parser=parser)
    assert result.stop_reason == stop_reason
    assert len(model.requests) == requests
    assert [(tool, args) for tool, args, _ in result.tool_runs] == [
        (tool, {"expression": "17 * 23"}) for tool, _ in runs]
    for (_, _, output), (_, prefix) in zip(result.tool_runs, runs, strict=True):
        assert output.startswith(prefix)
        # the tool's output is what the model reads next, as an "Observation"
        assert model.requests[1]["messages"][-1] == {"role": "user",
                                                     "content": f"Observation: {output}"}
    if stop_reason == "parse_failed":
        assert result.answer is None and result.failure
    else:
        assert result.answer == "17 × 23 = 391。" and result.failure is None


@pytest.mark.parametrize("max_iters", [1, 3], ids=["one-round", "three-rounds"])
def test_naive_agent_stops_at_max_iters(offline, max_iters):
    model = ScriptedModel([answer(SCRIPTED_FAILURES["clean"])] * max_iters)
    result = run_naive_agent(model.client(), "17 × 23 等于多少？", demo_registry(offline),
                             model=MODEL, max_iters=max_iters)
    model.assert_consumed()
    assert result.stop_reason == "max_iters" and result.answer is None
    assert [output for _, _, output in result.tool_runs] == ["17 * 23 = 391"] * max_iters


# ---------------------------------------------------------------------------
# The naive agent with the reference model
# ---------------------------------------------------------------------------

NAIVE_REFERENCE = [
    # (question, tools run, a fragment of the answer)
    ("17 × 23 等于多少？", ["calculator"], "391"),
    ("现在几点？", ["current_time"], SHANGHAI_NOW),
    ("2099 年世界杯冠军是谁？", [], "无法知道"),
    ("北京今天天气怎么样？", ["get_weather"], "Beijing: sunny, 12°C"),
    ("杭州今天天气怎么样？", ["get_weather"], "Error: no weather for '杭州'"),  # reported
]


@pytest.mark.parametrize(("question", "tools", "fragment"), NAIVE_REFERENCE,
                         ids=["17x23", "time", "2099", "weather", "weather-error"])
def test_naive_agent_with_the_reference_model(offline, question, tools, fragment):
    model = reference()
    result = run_naive_agent(model.client(), question, demo_registry(offline), model=MODEL)
    assert result.stop_reason == "answered"
    assert fragment in result.answer
    assert [tool for tool, _, _ in result.tool_runs] == tools
    assert len(model.requests) == len(tools) + 1
    # the reference follows the convention exactly: every reply is one clean JSON object
    replies = [m["content"] for m in result.messages if m["role"] == "assistant"]
    assert [diagnose(text) for text in replies] == [[]] * len(replies)


# ---------------------------------------------------------------------------
# Tools only described in the prompt: nothing can run
# ---------------------------------------------------------------------------


def recording_registry(called: list[str]) -> ToolRegistry:
    """Three tools that record and raise if anything ever calls them."""
    registry = ToolRegistry()

    def never(name: str) -> str:
        called.append(name)
        raise AssertionError(f"{name} must never run: it was only described")

    @registry.tool
    def current_time(timezone: str = "Asia/Shanghai") -> str:
        """Get the current date and time in a timezone.

        Args:
            timezone: an IANA timezone name.
        """
        return never("current_time")

    @registry.tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: numbers and operators.
        """
        return never("calculator")

    @registry.tool
    def get_weather(city: str) -> str:
        """Get today's weather for a city.

        Args:
            city: the city name.
        """
        return never("get_weather")

    return registry


DESCRIBED_LINES = [
    "- current_time(timezone): Get the current date and time in a timezone.",
    "- calculator(expression): Evaluate an arithmetic expression.",
    "- get_weather(city): Get today's weather for a city.",
]

DESCRIBED = [
    # (question, the call the reference can only write down)
    ("北京今天天气怎么样？", "get_weather(city='北京')"),
    ("17 × 23 等于多少？", "calculator(expression='17 * 23')"),
    ("现在几点？", "current_time(timezone='Asia/Shanghai')"),
]


@pytest.mark.parametrize(("question", "said_call"), DESCRIBED,
                         ids=["weather", "17x23", "time"])
def test_tools_in_prompt_are_only_described_never_run(question, said_call):
    called: list[str] = []
    model = reference()
    reply = ask_with_tools_in_prompt(model.client(), question, recording_registry(called),
                                     model=MODEL)
    request = model.requests[0]
    assert "tools" not in request and "tool_choice" not in request
    [message] = request["messages"]
    assert message["role"] == "user" and question in message["content"]
    for line in DESCRIBED_LINES:
        assert line in message["content"]
    assert said_call in reply  # the model can only SAY the call...
    assert called == []  # ...and nothing ran it
    assert len(model.requests) == 1


# ---------------------------------------------------------------------------
# The reference model through the real loop: the four demo tasks
# ---------------------------------------------------------------------------

DEMO_TASKS = [
    # (question, tools run in order, model calls, a fragment of the answer)
    ("现在几点？", ["current_time"], 2, SHANGHAI_NOW),
    ("17 × 23 等于多少？", ["calculator"], 2, "391"),
    ("2099 年世界杯冠军是谁？", [], 1, "无法知道"),
]


@pytest.mark.parametrize(("question", "tools", "model_calls", "fragment"), DEMO_TASKS,
                         ids=["1-time", "2-17x23", "4-2099"])
def test_reference_on_a_demo_task(offline, question, tools, model_calls, fragment):
    result = run_agent(reference().client(), question, demo_registry(offline), model=MODEL)
    assert result.stop_reason is StopReason.ANSWERED
    assert tools_run(result) == tools
    assert result.model_calls == model_calls
    assert fragment in result.answer


def test_reference_on_the_page_task_chains_two_tools():
    fetched: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        fetched.append(str(request.url))
        return serve_page(request)

    result = run_agent(reference().client(), PAGE_TASK, demo_registry(world_serving(handler)),
                       model=MODEL)
    assert result.stop_reason is StopReason.ANSWERED
    assert result.model_calls == 3
    assert tools_run(result) == ["page_length", "calculator"]
    assert fetched == [PAGE_URL]
    calculator_step = [step for step in result.trace if step.kind == "tool"][1]
    assert calculator_step.arguments == f'{{"expression": "{len(PAGE)} / 7"}}'
    # the oracle: Python's own len() and division
    assert f"共有 {len(PAGE)} 个字符" in result.answer
    value = re.search(r"约等于 ([\d.]+)", result.answer)
    assert value and float(value.group(1)) == pytest.approx(len(PAGE) / 7, rel=1e-11)


MISSING_TOOL = [
    # (question, the tools offered, the tool the reference needs)
    ("现在几点？", ("calculator",), "current_time"),
    ("17 × 23 等于多少？", ("current_time",), "calculator"),
    (PAGE_TASK, ("calculator", "fetch_url"), "page_length"),
    ("北京今天天气怎么样？", (), "get_weather"),
]


@pytest.mark.parametrize(("question", "offered", "needed"), MISSING_TOOL,
                         ids=["time", "17x23", "page", "no-tools-at-all"])
def test_reference_says_when_the_needed_tool_is_not_offered(offline, question, offered, needed):
    model = reference()
    result = run_agent(model.client(), question, demo_registry(offline, names=offered),
                       model=MODEL)
    assert result.stop_reason is StopReason.ANSWERED
    assert result.model_calls == 1 and tools_run(result) == []
    assert needed in result.answer and "没有提供" in result.answer


def test_naive_reference_says_when_the_needed_tool_is_not_offered(offline):
    model = reference()
    result = run_naive_agent(model.client(), "现在几点？",
                             demo_registry(offline, names=("calculator",)), model=MODEL)
    assert result.stop_reason == "answered" and result.tool_runs == []
    assert "current_time" in result.answer and "没有提供" in result.answer


TOOL_ERRORS = [
    # (question, the tool that fails, a fragment of its error text)
    ("17 ÷ 0 等于多少？", "calculator", "division by zero"),
    ("杭州今天天气怎么样？", "get_weather", "no weather for '杭州'"),
    (PAGE_TASK.replace(PAGE_URL, "https://example.com/missing"), "page_length", "HTTP 404"),
]


@pytest.mark.parametrize(("question", "tool", "error"), TOOL_ERRORS,
                         ids=["division-by-zero", "unknown-city", "http-404"])
def test_reference_reports_a_tool_error_instead_of_inventing(question, tool, error):
    result = run_agent(reference().client(), question, demo_registry(world_serving(serve_page)),
                       model=MODEL)
    assert result.stop_reason is StopReason.ANSWERED
    assert tools_run(result) == [tool]  # no further call after the error
    output = result.messages[-2]["content"]
    assert output.startswith("Error:") and error in output
    assert result.answer.startswith("工具返回了错误") and output in result.answer


def test_misbehaving_with_an_unknown_name_lists_the_names():
    with pytest.raises(KeyError, match=r"'sings_opera'.*'http_429'.*'repeat_forever'"):
        misbehaving("sings_opera")


@pytest.mark.parametrize(
    ("text", "problems"),
    [
        ('{"answer": "17 × 23 = **391**"}', []),
        ('**{"tool": "calculator", "arguments": {"expression": "1 + 1"}}**',
         ["markdown_bold", "prose_around_json"]),
        ('{"answer": 391}', []),
    ],
    ids=["bold-inside-an-answer-is-fine", "bold-around-json", "non-string-answer"],
)
def test_diagnose_edge_cases(text, problems):
    assert diagnose(text) == problems


def test_a_non_string_answer_is_named():
    with pytest.raises(ParseFailure, match="“answer” 必须是字符串"):
        parse_strict('{"answer": 391}')
