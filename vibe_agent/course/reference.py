"""The scripted reference model: the ideal path on the demo tasks and the lessons' questions.

(The bug-fix tasks have their own scripted model, the known-fix replayer in `known_fix.py`.)

It is NOT a language model. It is a deterministic program, served as a
`ScriptedModel`, that reads a request the way the lessons need and answers with
real ChatCompletion JSON. It recognises three ways of asking:

    native tool_calls    `tools` in the request   -> a tool call, or the answer
    JSON convention      the naive agent's system prompt (JSON_CONVENTION_MARKER)
                                                  -> one JSON object as text
    tools in the prompt  tools only described in the text ("- name(args): ...")
                                                  -> it can only SAY which call it needs

The decision itself is `plan(question, results)`: one small planner per kind of
task (the future, a page's length, the time, arithmetic, weather, a stock), tried
in order. It never computes an answer itself: numbers and facts come from tool
results, and a question outside its script gets an honest "I don't know".
Lesson 13's exploration task ("where is `X` checked?") is answered by the explorer
(`explorer.py`), which also reports `usage` counted by a fixed rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..naive import JSON_CONVENTION_MARKER, NextStep
from . import scripted
from .explorer import explorer_reply
from .scripted import Reply, ScriptedModel, answer, call, calls

REFERENCE_MODEL_NAME = "vibe-reference"

Done = dict[str, str]  # tool name -> its latest result this turn

_ARITHMETIC = re.compile(r"(\d+(?:\.\d+)?)\s*([×xX*÷/+\-])\s*(\d+(?:\.\d+)?)")
_URL = re.compile(r"https?://[^\s，。、）)\"']+")
_CITIES = ("北京", "上海", "广州", "深圳", "杭州", "Beijing", "Shanghai")
UNKNOWN = "（脚本参考模型）这个问题不在我的脚本里，我不知道答案。"


# ---------------------------------------------------------------------------
# The planner: one function per kind of task
# ---------------------------------------------------------------------------


def _result_value(text: str) -> str:
    """The part after '=' in a calculator result, else the text itself."""
    return text.rsplit("=", 1)[-1].strip() if "=" in text else text.strip()


def plan_future(question: str, done: Done) -> NextStep | None:
    """2099: nobody can know, and no tool helps. Say so without calling one."""
    if "2099" not in question:
        return None
    return NextStep(answer="我无法知道 2099 年世界杯的冠军：那是未来的比赛，"
                         "现在没有任何人或工具能告诉我结果。")


def plan_page_length(question: str, done: Done) -> NextStep | None:
    """A page's length divided by 7: page_length, then the calculator, then the answer."""
    url = _URL.search(question)
    if not url or not re.search(r"长度|字符|length", question, re.I):
        return None
    if "page_length" not in done:
        return NextStep("page_length", {"url": url.group(0)})
    count = re.search(r"(\d+) characters", done["page_length"])
    if not count:
        return None
    if "calculator" not in done:
        return NextStep("calculator", {"expression": f"{count.group(1)} / 7"})
    return NextStep(answer=f"这个网页共有 {count.group(1)} 个字符，除以 7 约等于 "
                         f"{_result_value(done['calculator'])}。")


def plan_time(question: str, done: Done) -> NextStep | None:
    """The current time comes from the clock tool."""
    if not re.search(r"几点|时间|what time", question, re.I):
        return None
    if "current_time" not in done:
        return NextStep("current_time", {"timezone": "Asia/Shanghai"})
    return NextStep(answer=f"现在是 {done['current_time']}。")


def plan_arithmetic(question: str, done: Done) -> NextStep | None:
    """One binary operation, computed by the calculator."""
    math = _ARITHMETIC.search(question)
    if not math:
        return None
    if "calculator" not in done:
        op = {"×": "*", "x": "*", "X": "*", "÷": "/"}.get(math.group(2), math.group(2))
        return NextStep("calculator", {"expression": f"{math.group(1)} {op} {math.group(3)}"})
    return NextStep(answer=f"{math.group(0)} = {_result_value(done['calculator'])}。")


def plan_weather(question: str, done: Done) -> NextStep | None:
    """The weather of a known city."""
    city = next((c for c in _CITIES if c in question), None)
    if not city or "天气" not in question:
        return None
    if "get_weather" not in done:
        return NextStep("get_weather", {"city": city})
    return NextStep(answer=done["get_weather"])


def plan_stock(question: str, done: Done) -> NextStep | None:
    """The price of a stock named by its code (600519) or ticker (AAPL)."""
    stock = re.search(r"\b(\d{6}|[A-Z]{2,5})\b", question)
    if not stock or not re.search(r"股价|股票|stock", question, re.I):
        return None
    if "get_stock" not in done:
        return NextStep("get_stock", {"code": stock.group(1)})
    return NextStep(answer=done["get_stock"])


PLANNERS: tuple[Callable[[str, Done], NextStep | None], ...] = (
    plan_future, plan_page_length, plan_time, plan_arithmetic, plan_weather, plan_stock)


def plan(question: str, results: list[tuple[str, str]]) -> NextStep:
    """The ideal next step for a question, given the tool results so far.

    Args:
        question: the user's question (only the question, not the tool descriptions).
        results: (tool name, result text) pairs already returned this turn.
    """
    if results and results[-1][1].startswith("Error"):
        return NextStep(answer=f"工具返回了错误：{results[-1][1]} 我没法据此给出可靠的答案。")
    done = dict(results)
    for planner in PLANNERS:
        step = planner(question, done)
        if step is not None:
            return step
    return NextStep(answer=UNKNOWN)


def _missing_tool(tool: str) -> str:
    return f"回答这个问题需要 {tool} 工具，但这次没有提供它，所以我无法回答。"


# ---------------------------------------------------------------------------
# Reading a request
# ---------------------------------------------------------------------------

# "- get_weather(city): ..." — a tool described in a prompt (ours and the seed's layout)
_TOOL_LINE = re.compile(r"^\s*[-*]\s*(\w+)\s*\([^)\n]*\)\s*[:：]", re.MULTILINE)
# "你可以使用这些工具：" / "Tools:" — the heading above such a list
_TOOLS_HEADING = re.compile(r"^[^\n]{0,30}(?:工具|tools?)[^\n]{0,10}[:：]\s*$", re.I)
# "请回答用户问题：" / "Question:" — words put in front of the question itself
_LEAD_IN = re.compile(r"^[^\n:：]{0,20}?(?:问题|question)\s*[:：]\s*", re.I)


def described_tools(prompt: str) -> list[str]:
    """The tool names a prompt describes as lines like "- name(args): what it does"."""
    return _TOOL_LINE.findall(prompt)


def question_in_prompt(prompt: str) -> str:
    """The question in a prompt that also describes tools, wherever the list stands.

    Both layouts read the same: ours (question first, then the tool list) and the
    chapter's naive agent (the tool list first, then "请回答用户问题:{question}").
    """
    kept = [line for line in prompt.splitlines()
            if not _TOOL_LINE.match(line) and not _TOOLS_HEADING.match(line.strip())]
    return _LEAD_IN.sub("", "\n".join(kept).strip(), count=1).strip()


def naive_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool name, result) pairs in a JSON-convention conversation ("Observation: ...")."""
    results: list[tuple[str, str]] = []
    last_tool = "?"
    for m in body["messages"][1:]:
        text = str(m.get("content") or "")
        if m["role"] == "assistant":
            found = re.search(r'"tool"\s*:\s*"([^"]+)"', text)
            last_tool = found.group(1) if found else "?"
        elif m["role"] == "user" and text.startswith("Observation: "):
            results.append((last_tool, text.removeprefix("Observation: ")))
    return results


# ---------------------------------------------------------------------------
# The responder: one reply per way of asking
# ---------------------------------------------------------------------------


def _json_convention_reply(body: dict[str, Any], system: str) -> Reply:
    """The naive agent's convention: exactly one JSON object as the reply's text."""
    step = plan(scripted.first_user_message(body), naive_results(body))
    if step.tool and step.tool not in described_tools(system):
        step = NextStep(answer=_missing_tool(step.tool))
    data = ({"answer": step.answer} if step.tool is None
            else {"tool": step.tool, "arguments": step.arguments})
    return answer(json.dumps(data, ensure_ascii=False))


def _described_tools_reply(prompt: str) -> Reply:
    """Tools only described in the prompt: the best a model can do is SAY the call."""
    step = plan(question_in_prompt(prompt), [])
    if step.tool is None:
        return answer(step.answer or "")
    if step.tool not in described_tools(prompt):
        return answer(_missing_tool(step.tool))
    args = ", ".join(f"{k}={v!r}" for k, v in step.arguments.items())
    return answer(f"我需要调用 {step.tool}({args}) 才能回答。"
                  "（我只能写下这句话，没有程序会替我执行它。）")


def forced_tool(body: dict[str, Any]) -> str | None:
    """The tool `tool_choice` forces: a named function, "*" for "required", else None."""
    choice = body.get("tool_choice")
    if choice == "required":
        return "*"
    if isinstance(choice, dict):
        return str((choice.get("function") or {}).get("name") or "") or None
    return None


def local_name(name: str) -> str:
    """A tool's own name without an MCP server's prefix: mcp__course__calculator -> calculator."""
    return name.rsplit("__", 1)[-1] if name.startswith("mcp__") else name


def _offered_as(tool: str | None, offered: list[str]) -> str | None:
    """The offered name for a planned tool: itself, else an MCP server's tool of that name."""
    if tool is None or tool in offered:
        return tool
    return next((name for name in offered if local_name(name) == tool), tool)


def _native_reply(body: dict[str, Any], question: str) -> Reply:
    """Native tool_calls: call an offered tool, or answer — as `tool_choice` allows.

    "auto" (or none sent): the plan decides. "none": no call, whatever the plan wants.
    "required" or a named function: a call, whatever the plan wants; when the plan has
    no fitting call it makes the forced one with no arguments (the first offered tool for
    "required"), the way a constrained provider forces a model to emit some call.
    """
    offered = scripted.offered_tools(body)
    results = scripted.results_this_turn(body)
    step = plan(question, [(local_name(name), text) for name, text in results])
    step.tool = _offered_as(step.tool, offered)
    if body.get("tool_choice") == "none":
        if step.tool is None:
            return answer(step.answer or "")
        return answer(f"回答这个问题需要 {step.tool} 工具，但这次请求不允许调用工具"
                      "（tool_choice=\"none\"），所以我无法回答。")
    forced = forced_tool(body)
    fits = step.tool in offered and forced in ("*", step.tool)
    if forced and offered and not fits:
        return calls(call(offered[0] if forced == "*" else forced, {}))
    if step.tool is None:
        return answer(step.answer or "")
    if step.tool not in offered:
        return answer(_missing_tool(step.tool))
    return calls(call(step.tool, step.arguments))


def reference_responder(body: dict[str, Any]) -> Reply:
    """The reference model's responder: native tool_calls, or the naive prompt conventions;
    lesson 13's "where is X handled?" goes to the explorer (`explorer.py`)."""
    explored = explorer_reply(body)
    if explored is not None:
        return explored
    system = scripted.system_prompt(body)
    if JSON_CONVENTION_MARKER in system:
        return _json_convention_reply(body, system)
    prompt = scripted.first_user_message(body)
    if "tools" not in body and described_tools(prompt):
        return _described_tools_reply(prompt)
    return _native_reply(body, prompt)


def reference_model(*, max_requests: int | None = None,
                    context_window: int | None = None) -> ScriptedModel:
    """The scripted reference model: takes the ideal path, states it is scripted.

    Args:
        max_requests: the request cap (None: no cap).
        context_window: a window in tokens it enforces as OpenAI does (None: none).
    """
    return ScriptedModel(reference_responder, name=REFERENCE_MODEL_NAME,
                         max_requests=max_requests, context_window=context_window)
