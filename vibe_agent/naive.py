"""The naive way: tools only described in the prompt, and a JSON output convention.

Lesson 01 builds these on purpose, to watch them fail:

1. `ask_with_tools_in_prompt` writes the tool descriptions into the prompt and
   hopes. Nothing ever runs a tool: whatever the model says about the weather,
   it made up.
2. `run_naive_agent` asks the model to reply with ONE JSON object,
   `{"tool": ..., "arguments": {...}}` or `{"answer": ...}`, parses the text with
   json/regex, runs the tool and feeds the result back as "Observation: ...".
   It works until the model adds one sentence, a code fence or a second call.

`parse_strict` and `parse_regex` are the two parsers people usually write first;
`diagnose` names what went wrong with a reply. The native `tool_calls` protocol
(lesson 02 onwards) makes all of this unnecessary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from .registry import ToolRegistry


def describe_tools(registry: ToolRegistry) -> str:
    """The tools as plain text lines, the way a prompt would describe them."""
    lines = []
    for schema in registry.to_schemas():
        fn = schema["function"]
        params = ", ".join(fn["parameters"]["properties"])
        lines.append(f"- {fn['name']}({params}): {fn['description']}")
    return "\n".join(lines)


def tools_in_prompt(question: str, registry: ToolRegistry) -> str:
    """Stage 1: a prompt that only *describes* the tools."""
    return f"请回答用户的问题：{question}\n\n你可以使用这些工具：\n{describe_tools(registry)}"


def ask_with_tools_in_prompt(client: openai.OpenAI, question: str, registry: ToolRegistry, *,
                             model: str, **request_options: Any) -> str:
    """Send the describe-only prompt and return the model's text. No tool can run here.

    Args:
        client: an `openai.OpenAI` client.
        question: the user's question.
        registry: the tools to describe (their functions are never called).
        model: the model name.
        request_options: extra request fields, e.g. temperature or seed.
    """
    response = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": tools_in_prompt(question, registry)}],
        **request_options,
    )
    return response.choices[0].message.content or ""


# The first line of the JSON-convention prompt; the reference model recognises the
# convention by it.
JSON_CONVENTION_MARKER = "你是一个通过 JSON 调用工具的助手。"


def json_convention_prompt(registry: ToolRegistry) -> str:
    """Stage 2: a system prompt that asks for exactly one JSON object per reply."""
    return (
        f"{JSON_CONVENTION_MARKER}\n"
        f"可用工具：\n{describe_tools(registry)}\n\n"
        "每次回复只输出一个 JSON 对象，不要输出任何其他文字：\n"
        '- 需要工具时：{"tool": "工具名", "arguments": {"参数名": "值"}}\n'
        '- 可以回答时：{"answer": "最终回答"}\n'
        "工具结果会以 “Observation: ...” 的形式发给你。"
    )


# ---------------------------------------------------------------------------
# Parsing the reply: the part that breaks
# ---------------------------------------------------------------------------


@dataclass
class NextStep:
    """One step of an agent: a tool call, or a final answer.

    Parsed here out of a model's reply; the course's scripted reference model
    (`vibe_agent.course.reference.plan`) decides its next step in the same shape.
    """

    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None


class ParseFailure(ValueError):
    """The reply could not be read as one next step."""


def _to_next_step(data: Any) -> NextStep:
    if isinstance(data, dict) and "answer" in data:
        if not isinstance(data["answer"], str):
            raise ParseFailure("“answer” 必须是字符串")
        return NextStep(answer=data["answer"])
    if isinstance(data, dict) and isinstance(data.get("tool"), str):
        arguments = data.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ParseFailure("“arguments” 不是 JSON 对象")
        return NextStep(tool=data["tool"], arguments=arguments)
    raise ParseFailure("JSON 里既没有 “tool” 也没有 “answer”")


def parse_strict(text: str) -> NextStep:
    """The reply must be exactly one JSON object (json.loads on the whole text)."""
    try:
        return _to_next_step(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ParseFailure(f"整段回复不是 JSON（json 模块说：{exc.msg}）") from exc


_BRACES = re.compile(r"\{.*\}", re.DOTALL)


def parse_regex(text: str) -> NextStep:
    """Forgiving: take the outermost {...} in the text and parse that."""
    match = _BRACES.search(text)
    if not match:
        raise ParseFailure("回复里找不到 {...}")
    try:
        return _to_next_step(json.loads(match.group(0)))
    except json.JSONDecodeError as exc:
        raise ParseFailure(f"{{...}} 这一段不是 JSON（json 模块说：{exc.msg}）") from exc


Parser = Callable[[str], NextStep]


def diagnose(text: str) -> list[str]:
    """Name the known failure patterns visible in a reply (empty for a clean one)."""
    problems = []
    stripped = text.strip()
    if "```" in text:
        problems.append("code_fence")
    outside = _BRACES.sub("", text)
    if "**" in outside or re.search(r'"tool"\s*:\s*"\*\*', text):
        problems.append("markdown_bold")  # around the JSON, or inside the tool name
    if re.search(r"^\s*(Observation|观察)\s*[:：]", text, re.MULTILINE):
        problems.append("fabricated_observation")
    objects = re.findall(r'\{\s*"(?:tool|answer)"', text)
    if len(re.findall(r'\{\s*"tool"', text)) > 1:
        problems.append("several_calls")
    if not objects:
        problems.append("prose_instead_of_json")
    elif not (stripped.startswith("{") and stripped.endswith("}")) and "code_fence" not in problems:
        problems.append("prose_around_json")
    return problems


# ---------------------------------------------------------------------------
# The naive agent loop
# ---------------------------------------------------------------------------


@dataclass
class NaiveResult:
    answer: str | None
    stop_reason: str  # "answered" | "parse_failed" | "max_iters"
    messages: list[dict[str, Any]]
    failure: str | None = None  # why parsing failed, if it did
    tool_runs: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)


def run_naive_agent(client: openai.OpenAI, question: str, registry: ToolRegistry, *,
                    model: str, parser: Parser = parse_regex, max_iters: int = 6,
                    temperature: float | None = 0, **request_options: Any) -> NaiveResult:
    """The prompt-convention agent: parse JSON out of the model's text.

    Args:
        client: an `openai.OpenAI` client.
        question: the user's question.
        registry: the tools (run through `registry.call`).
        model: the model name.
        parser: `parse_regex` or `parse_strict` (or your own).
        max_iters: most model calls.
        temperature: sampling temperature (None: not sent).
        request_options: extra request fields.
    """
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": json_convention_prompt(registry)},
        {"role": "user", "content": question},
    ]
    if temperature is not None:
        request_options["temperature"] = temperature
    runs: list[tuple[str, dict[str, Any], str]] = []
    for _ in range(max_iters):
        response = client.chat.completions.create(model=model, messages=messages,  # type: ignore[arg-type]
                                                  **request_options)
        text = response.choices[0].message.content or ""
        messages.append({"role": "assistant", "content": text})
        try:
            step = parser(text)
        except ParseFailure as exc:
            return NaiveResult(None, "parse_failed", messages, str(exc), runs)
        if step.answer is not None:
            return NaiveResult(step.answer, "answered", messages, None, runs)
        output = registry.call(step.tool or "", step.arguments).output
        runs.append((step.tool or "", step.arguments, output))
        messages.append({"role": "user", "content": f"Observation: {output}"})
    return NaiveResult(None, "max_iters", messages, None, runs)


# Replies that show each documented failure. They are SCRIPTED examples written by
# us to show the pattern, not any model's output; lesson 01 labels them so and
# shows real SmolLM2 replies next to them.
SCRIPTED_FAILURES: dict[str, str] = {
    "clean": '{"tool": "calculator", "arguments": {"expression": "17 * 23"}}',
    "prose_around_json": ('好的，我先用计算器算一下。\n'
                          '{"tool": "calculator", "arguments": {"expression": "17 * 23"}}\n'
                          '算完我再告诉你。'),
    "code_fence": ('```json\n{"tool": "calculator", "arguments": {"expression": "17 * 23"}}\n'
                   '```'),
    "markdown_bold": '{"tool": "**calculator**", "arguments": {"expression": "17 * 23"}}',
    "several_calls": ('{"tool": "calculator", "arguments": {"expression": "17 * 23"}}\n'
                      '{"tool": "current_time", "arguments": {}}'),
    "prose_instead_of_json": "17 乘以 23 等于 391。",
    "fabricated_observation": ('{"tool": "get_weather", "arguments": {"city": "北京"}}\n'
                               'Observation: 北京今天晴，26 摄氏度\n'
                               '{"answer": "北京今天晴，26 摄氏度。"}'),
}
