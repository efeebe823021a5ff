"""Scripted models: test doubles that speak the real wire format.

A scripted model is NOT a language model. It is a small program that answers
`POST /chat/completions` with genuine ChatCompletion JSON, served at the HTTP
transport underneath a real `openai.OpenAI` client:

    your code -> openai.OpenAI -> httpx2.Client -> ScriptedModel.handle_request
                                                   (a list of replies or a policy)

So the SDK parses real JSON exactly as it would from a provider, and everything
above the transport (the loop, the registry, the learner's code) runs for real.

Scripts come in two shapes:
- a list of `Reply` objects, consumed in order (running out raises `ScriptExhausted`);
- a policy `f(request_body) -> Reply` that decides from what it was sent.

`misbehaving(name)` builds the models the brakes lesson needs, and
`reference_model()` takes the ideal path on the course's tasks. Scripted models
report no `usage` unless a reply carries one: they have no tokenizer, and we do
not invent token counts.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai

from ..naive import JSON_CONVENTION_MARKER

SCRIPTED_BASE_URL = "http://scripted.invalid/v1"
CREATED = 1_764_460_800  # a fixed timestamp keeps scripted JSON reproducible


class ScriptExhausted(RuntimeError):
    """The scripted model got more requests than its script has replies (a test bug)."""


@dataclass
class ToolCallSpec:
    name: str
    arguments: str  # the raw JSON text, possibly broken on purpose
    id: str | None = None


@dataclass
class Reply:
    """One scripted response: a message, an HTTP error, or exact raw JSON."""

    content: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: dict[str, int] | None = None
    status: int = 200
    raw: dict[str, Any] | None = None  # sent as-is (e.g. a response with no choices)


def answer(content: str, usage: dict[str, int] | None = None) -> Reply:
    """A final answer: content and no tool calls."""
    return Reply(content=content, usage=usage)


def call(name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
         ) -> ToolCallSpec:
    """One tool call; a str `arguments` is sent verbatim (use it for broken JSON)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {},
                                                                   ensure_ascii=False)
    return ToolCallSpec(name, text, id)


def calls(*specs: ToolCallSpec, content: str | None = None,
          usage: dict[str, int] | None = None) -> Reply:
    """A response asking for one or more tool calls."""
    return Reply(content=content, tool_calls=list(specs), usage=usage)


def http_error(status: int, message: str = "scripted failure") -> Reply:
    """An HTTP error response such as 429 (rate limited) or 500."""
    return Reply(status=status, raw={"error": {"message": message, "type": "scripted_error",
                                               "code": str(status)}})


def usage_of(prompt: int, completion: int) -> dict[str, int]:
    """A usage block (for tests of how usage flows through, not a token count)."""
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


Policy = Callable[[dict[str, Any]], Reply]


class ScriptedModel(httpx2.BaseTransport):
    """A model played by a script, at the HTTP transport of a real client.

    Args:
        script: a list of replies (used in order) or a policy function.
        name: shown in provenance; says what this model is.
    """

    def __init__(self, script: Sequence[Reply] | Policy, *, name: str = "scripted") -> None:
        self.name = name
        self._policy = script if callable(script) else None
        self._replies = [] if callable(script) else list(script)
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    def client(self) -> openai.OpenAI:
        """A genuine `openai.OpenAI` whose HTTP requests reach this model."""
        return openai.OpenAI(api_key="scripted-no-key", base_url=SCRIPTED_BASE_URL,
                             http_client=httpx2.Client(transport=self), max_retries=0)

    @property
    def remaining(self) -> int:
        """Replies not yet used (always 0 for a policy)."""
        return max(0, len(self._replies) - len(self.requests)) if self._policy is None else 0

    def assert_consumed(self) -> None:
        """Raise if the script still has replies nobody asked for."""
        if self.remaining:
            raise AssertionError(f"scripted model {self.name!r}: {self.remaining} of "
                                 f"{len(self._replies)} replies were never requested")

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if not request.url.path.endswith("/chat/completions"):
            return httpx2.Response(404, json={"error": {"message": "scripted models only "
                                                        "serve /chat/completions"}})
        body = json.loads(request.content)
        self.requests.append(body)
        problem = protocol_error(body)
        if problem:  # what a real provider answers to a broken history
            return httpx2.Response(400, json={"error": {
                "message": problem, "type": "invalid_request_error", "code": None}})
        reply = self._next_reply(body)
        if reply.raw is not None:
            return httpx2.Response(reply.status, json=reply.raw)
        return httpx2.Response(reply.status, json=self.completion(body["model"], reply))

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._policy is not None:
            return self._policy(body)
        if len(self.requests) > len(self._replies):
            raise ScriptExhausted(
                f"scripted model {self.name!r} got request #{len(self.requests)} but its "
                f"script has only {len(self._replies)} replies; add replies or look for "
                "an unexpected extra round"
            )
        return self._replies[len(self.requests) - 1]

    def completion(self, model: str, reply: Reply) -> dict[str, Any]:
        """Build the ChatCompletion JSON for a reply."""
        n = next(self._ids)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": spec.id or f"call_{n}_{i}", "type": "function",
                 "function": {"name": spec.name, "arguments": spec.arguments}}
                for i, spec in enumerate(reply.tool_calls, 1)
            ]
        body: dict[str, Any] = {
            "id": f"chatcmpl-{self.name}-{n}",
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        }
        if reply.usage is not None:
            body["usage"] = reply.usage
        return body


def protocol_error(body: dict[str, Any]) -> str | None:
    """The tool_calls rules a provider enforces, or None when the history keeps them.

    Every `role: tool` message must answer an id from the assistant message right
    before it, and every id must be answered before the conversation goes on.
    (OpenAI answers HTTP 400 with a message like the ones below.)
    """
    pending: list[str] = []
    for i, m in enumerate(body.get("messages") or []):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in pending:
                return (f"Invalid parameter: messages[{i}]: a message with role 'tool' must be "
                        "a response to a preceding message with 'tool_calls' "
                        f"(tool_call_id {m.get('tool_call_id')!r} matches none).")
            pending.remove(m["tool_call_id"])
            continue
        if pending:
            return (f"Invalid parameter: messages[{i}]: an assistant message with "
                    "'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. Missing: {', '.join(pending)}.")
        pending = [tc["id"] for tc in m.get("tool_calls") or []]
    if pending:
        return ("Invalid parameter: the last assistant message has 'tool_calls' that were "
                f"never answered: {', '.join(pending)}.")
    return None


# ---------------------------------------------------------------------------
# Reading a request: what was asked, which tools exist, what came back
# ---------------------------------------------------------------------------


def offered_tools(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def current_question(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    return str(users[0]["content"]) if users else ""


def _system_prompt(body: dict[str, Any]) -> str:
    return next((str(m["content"]) for m in body["messages"] if m["role"] == "system"), "")


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


def results_this_turn(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool name, result text) for every tool message after the first user message."""
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for m in body["messages"]:
        for tc in m.get("tool_calls") or []:
            names[tc["id"]] = tc["function"]["name"]
        if m["role"] == "tool":
            results.append((names.get(m.get("tool_call_id", ""), "?"), str(m["content"])))
    return results


# ---------------------------------------------------------------------------
# Misbehaving models for the brakes lesson and the tests
# ---------------------------------------------------------------------------


def _first_tool(body: dict[str, Any]) -> str:
    """The calculator if offered (the misbehaviours send its arguments), else any tool."""
    tools = offered_tools(body)
    return "calculator" if "calculator" in tools or not tools else tools[0]


def _wrong_value(schema: dict[str, Any]) -> Any:
    return {"string": 42, "integer": "many", "number": "lots", "boolean": "yes",
            "array": "not a list"}.get(schema.get("type", "string"), None)


def _wrong_types_call(body: dict[str, Any]) -> ToolCallSpec:
    tool = (body.get("tools") or [{"function": {"name": "calculator", "parameters": {
        "properties": {"expression": {"type": "string"}}}}}])[0]["function"]
    props = tool.get("parameters", {}).get("properties", {})
    return call(tool["name"], {n: _wrong_value(s) for n, s in props.items()})


def _says_done_while_calling(body: dict[str, Any]) -> Reply:
    if results_this_turn(body):
        return answer("工具结果已收到，这是最终回答。")
    return calls(call(_first_tool(body), {"expression": "17 * 23"}), content="完成！")


def _parallel_calls(body: dict[str, Any]) -> Reply:
    results = results_this_turn(body)
    if results:
        return answer("；".join(text for _, text in results))
    return calls(call("calculator", {"expression": "17 * 23"}, id="call_b"),
                 call("calculator", {"expression": "2 ** 10"}, id="call_a"),
                 call("current_time", {"timezone": "Asia/Shanghai"}, id="call_c"))


def _omits_usage() -> list[Reply]:
    return [calls(call("calculator", {"expression": "17 * 23"}), usage=usage_of(100, 10)),
            answer("17 × 23 = 391。")]  # the second response carries no usage at all


MISBEHAVIOURS: dict[str, Callable[[], Sequence[Reply] | Policy]] = {
    "repeat_forever": lambda: lambda body: calls(call(_first_tool(body),
                                                      {"expression": "17 * 23"})),
    "invalid_json": lambda: lambda body: calls(call(_first_tool(body), '{"expression": 17 * 23')),
    "unknown_tool": lambda: lambda body: calls(call("search_web", {"query": "17 × 23"})),
    "wrong_types": lambda: lambda body: calls(_wrong_types_call(body)),
    "parallel_calls": lambda: _parallel_calls,
    "says_done_while_calling": lambda: _says_done_while_calling,
    "http_429": lambda: lambda body: http_error(429, "Rate limit reached, retry later"),
    "http_500": lambda: lambda body: http_error(500, "Internal server error"),
    "no_choices": lambda: lambda body: Reply(raw={
        "id": "chatcmpl-empty", "object": "chat.completion", "created": CREATED,
        "model": body["model"], "choices": []}),
    "omits_usage": _omits_usage,
}


def misbehaving(name: str) -> ScriptedModel:
    """A scripted model with a named misbehaviour (see `MISBEHAVIOURS`).

    Args:
        name: one of the keys of `MISBEHAVIOURS`, e.g. "repeat_forever".
    """
    if name not in MISBEHAVIOURS:
        raise KeyError(f"unknown misbehaviour {name!r}; choose from {sorted(MISBEHAVIOURS)}")
    return ScriptedModel(MISBEHAVIOURS[name](), name=f"scripted-{name}")


# ---------------------------------------------------------------------------
# The scripted reference model: the ideal path on the course's tasks
# ---------------------------------------------------------------------------


@dataclass
class Step:
    """What the reference decides next: a tool call, or a final answer."""

    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None


_ARITHMETIC = re.compile(r"(\d+(?:\.\d+)?)\s*([×xX*÷/+\-])\s*(\d+(?:\.\d+)?)")
_URL = re.compile(r"https?://[^\s，。、）)\"']+")
_CITIES = ("北京", "上海", "广州", "深圳", "杭州", "Beijing", "Shanghai")


def _result_value(text: str) -> str:
    """The part after '=' in a calculator result, else the text itself."""
    return text.rsplit("=", 1)[-1].strip() if "=" in text else text.strip()


def plan(question: str, results: list[tuple[str, str]]) -> Step:
    """The ideal next step for a question, given the tool results so far.

    Args:
        question: the user's question.
        results: (tool name, result text) pairs already returned this turn.
    """
    if results and results[-1][1].startswith("Error"):
        return Step(answer=f"工具返回了错误：{results[-1][1]} 我没法据此给出可靠的答案。")
    done = {name: text for name, text in results}
    if "2099" in question:
        return Step(answer="我无法知道 2099 年世界杯的冠军：那是未来的比赛，"
                           "现在没有任何人或工具能告诉我结果。")
    url = _URL.search(question)
    if url and re.search(r"长度|字符|length", question, re.I):
        if "page_length" not in done:
            return Step("page_length", {"url": url.group(0)})
        count = re.search(r"(\d+) characters", done["page_length"])
        if "calculator" not in done and count:
            return Step("calculator", {"expression": f"{count.group(1)} / 7"})
        if count:
            return Step(answer=f"这个网页共有 {count.group(1)} 个字符，除以 7 约等于 "
                               f"{_result_value(done['calculator'])}。")
    if re.search(r"几点|时间|what time", question, re.I):
        if "current_time" not in done:
            return Step("current_time", {"timezone": "Asia/Shanghai"})
        return Step(answer=f"现在是 {done['current_time']}。")
    math = _ARITHMETIC.search(question)
    if math:
        op = {"×": "*", "x": "*", "X": "*", "÷": "/"}.get(math.group(2), math.group(2))
        expression = f"{math.group(1)} {op} {math.group(3)}"
        if "calculator" not in done:
            return Step("calculator", {"expression": expression})
        return Step(answer=f"{math.group(0)} = {_result_value(done['calculator'])}。")
    city = next((c for c in _CITIES if c in question), None)
    if city and "天气" in question:
        if "get_weather" not in done:
            return Step("get_weather", {"city": city})
        return Step(answer=done["get_weather"])
    stock = re.search(r"\b(\d{6}|[A-Z]{2,5})\b", question)
    if stock and re.search(r"股价|股票|stock", question, re.I):
        if "get_stock" not in done:
            return Step("get_stock", {"code": stock.group(1)})
        return Step(answer=done["get_stock"])
    return Step(answer="（脚本参考模型）这个问题不在我的脚本里，我不知道答案。")


def _missing_tool(tool: str) -> str:
    return f"回答这个问题需要 {tool} 工具，但这次没有提供它，所以我无法回答。"


def reference_policy(body: dict[str, Any]) -> Reply:
    """The reference model's policy: native tool_calls, or the naive prompt conventions."""
    system = _system_prompt(body)
    if JSON_CONVENTION_MARKER in system:  # the naive agent's one-JSON-object convention
        step = plan(current_question(body), naive_results(body))
        if step.tool and f"- {step.tool}(" not in system:
            step = Step(answer=_missing_tool(step.tool))
        data = ({"answer": step.answer} if step.tool is None
                else {"tool": step.tool, "arguments": step.arguments})
        return answer(json.dumps(data, ensure_ascii=False))
    prompt = current_question(body)
    described = "tools" not in body and "\n- " in prompt  # tools only described in the text
    question = prompt.split("\n\n", 1)[0] if described else prompt
    step = plan(question, results_this_turn(body))
    if described and step.tool and f"- {step.tool}(" in prompt:
        # tools only described in the prompt: the best a model can do is SAY the call
        args = ", ".join(f"{k}={v!r}" for k, v in step.arguments.items())
        return answer(f"我需要调用 {step.tool}({args}) 才能回答。"
                      "（我只能写下这句话，没有程序会替我执行它。）")
    if step.tool is None:
        return answer(step.answer or "")
    if step.tool not in offered_tools(body):
        return answer(_missing_tool(step.tool))
    return calls(call(step.tool, step.arguments))


REFERENCE_MODEL_NAME = "vibe-reference"


def reference_model() -> ScriptedModel:
    """The scripted reference model: takes the ideal path, states it is scripted."""
    return ScriptedModel(reference_policy, name=REFERENCE_MODEL_NAME)
