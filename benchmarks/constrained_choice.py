"""Does SmolLM2-135M pick the right tool under constrained decoding? A measurement.

    python benchmarks/constrained_choice.py [--max-tokens 96] [--out PATH]

Each question is sent once, as the first round of the agent loop would send it: the
loop's system prompt, the six demo tools, temperature 0. Three ways to decode:

- native: llama.cpp's own tool-call handling (tool_choice="auto"; its grammar switches
  on only once the model writes "<tool_call>"). This is what local mode does today.
- constrained: `vibe_agent.course.local.ConstrainedChoice`: the reply must be one JSON
  object, either {"tool": <an offered tool>, "arguments": {...}} or
  {"tool": "none", "answer": "..."}; llama.cpp samples under that schema.
- constrained-yes-no: the same, but the object opens with "need_tool": "yes" | "no",
  so the first free choice is a yes/no token instead of the first piece of a tool name.

Per question: the right branch (a call when a tool is needed, an answer when not), the
right tool, arguments valid against the tool's JSON schema, and arguments that are
right for the question (the right tool, e.g. a calculator expression that computes 391).

Tried by hand on six of these questions before this script, not repeated here: a
grammar allowing "<tool_call>...</tool_call>" or text not starting with "<" (the same
replies as native: the model never starts with "<"); the JSON schema with keys
"name"/"answer", with the format also spelt out in the system prompt, and with "none"
listed first (always a tool, mostly fetch_url or get_stock); and scoring each option's
whole name by its log-probability under a forced grammar (1 of 6 right). Prints a table
and the rates, and writes them with provenance to benchmarks/results/constrained_choice.json.
60 requests with a ~1,000-token prompt each, of which all but the question is cached.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import openai

from vibe_agent.course.local import (
    CONSTRAINED_DECODING_INFO,
    LOCAL_MODEL_INFO,
    LOCAL_MODEL_NAME,
    NO_TOOL,
    ConstrainedChoice,
    LocalServer,
    choice_schema,
)
from vibe_agent.course.pages import EXAMPLE_URL
from vibe_agent.course.scenarios import DEMO_TASKS
from vibe_agent.loop import DEFAULT_SYSTEM_PROMPT
from vibe_agent.tools import DemoTools, demo_registry
from vibe_agent.world import World

RESULTS = Path(__file__).with_name("results") / "constrained_choice.json"
CALCULATOR = DemoTools()  # only its calculator is used: no network


def computes(value: float) -> Callable[[dict[str, Any]], bool]:
    """The calculator expression evaluates to `value`."""
    def check(arguments: dict[str, Any]) -> bool:
        result = CALCULATOR.calculator(str(arguments.get("expression", "")))
        return not result.startswith("Error") and float(result.rpartition(" = ")[2]) == value
    return check


def has(key: str, *accepted: str) -> Callable[[dict[str, Any]], bool]:
    """The argument `key` is one of `accepted` (case and spaces ignored)."""
    wanted = {a.strip().lower() for a in accepted}
    return lambda arguments: str(arguments.get(key, "")).strip().lower() in wanted


def anything(arguments: dict[str, Any]) -> bool:
    return True


@dataclass
class Question:
    text: str
    tools: tuple[str, ...]  # the right tools; empty: no tool fits, answer directly
    right_arguments: Callable[[dict[str, Any]], bool] = anything
    source: str = "extra"


DEMO = {task.number: task.question for task in DEMO_TASKS}
QUESTIONS = [
    Question(DEMO[1], ("current_time",), anything, "demo task 1"),
    Question(DEMO[2], ("calculator",), computes(391), "demo task 2"),
    Question(DEMO[3], ("page_length", "fetch_url"), has("url", EXAMPLE_URL, EXAMPLE_URL[:-1]),
             "demo task 3"),
    Question(DEMO[4], (), anything, "demo task 4"),
    Question("伦敦现在几点？", ("current_time",), has("timezone", "Europe/London")),
    Question("128 × 46 等于多少？", ("calculator",), computes(128 * 46)),
    Question("(3 + 5) 的平方除以 4 是多少？", ("calculator",), computes((3 + 5) ** 2 / 4)),
    Question("北京今天天气怎么样？", ("get_weather",), has("city", "Beijing", "北京")),
    Question("What's the weather in Shanghai today?", ("get_weather",),
             has("city", "Shanghai", "上海")),
    Question("贵州茅台（600519）现在股价多少？", ("get_stock",), has("code", "600519")),
    Question("What is Apple's (AAPL) stock price right now?", ("get_stock",), has("code", "AAPL")),
    Question(f"{EXAMPLE_URL} 这个网页有多少个字符？", ("page_length", "fetch_url"),
             has("url", EXAMPLE_URL, EXAMPLE_URL[:-1])),
    Question("你好", ()),
    Question("法国首都是哪里？", ()),
    Question("谢谢你的帮助！", ()),
    Question("请用一句话介绍你自己。", ()),
    Question("写一首关于春天的两行短诗。", ()),
    Question("What is the capital of Japan?", ()),
    Question("Python 是什么编程语言？", ()),
    Question("把“早上好”翻译成英文。", ()),
]


def yes_no_schema(tools: list[dict[str, Any]] | None, tool_choice: Any = "auto"
                  ) -> dict[str, Any] | None:
    """`choice_schema` with a yes/no decision first: {"need_tool": "yes", "tool": ...}."""
    schema = choice_schema(tools, tool_choice)
    if schema is None:
        return None
    for branch in schema["anyOf"]:
        answer = branch["properties"]["tool"]["const"] == NO_TOOL
        branch["properties"] = {"need_tool": {"const": "no" if answer else "yes"},
                                **branch["properties"]}
        branch["required"] = ["need_tool", *branch["required"]]
        if answer:  # the answer branch needs no "tool" key once need_tool says "no"
            del branch["properties"]["tool"]
            branch["required"].remove("tool")
    return schema


VARIANTS: dict[str, dict[str, Any]] = {
    "native": {"schema": None, "how": "llama.cpp's own tool calling, tool_choice=auto "
               "(lazy grammar, switched on by '<tool_call>')"},
    "constrained": {"schema": choice_schema, "how": CONSTRAINED_DECODING_INFO["decoding"]},
    "constrained-yes-no": {"schema": yes_no_schema, "how": "as constrained, but the object "
                           "opens with \"need_tool\": \"yes\"|\"no\""},
}


@dataclass
class Outcome:
    """What one variant did with one question."""

    picked: str  # a tool name, or "answer"
    arguments: dict[str, Any] | None = None
    valid: bool = False  # arguments complete and valid against the tool's schema
    right_arguments: bool = False
    finish_reason: str = ""
    text: str = ""  # the reply as the model wrote it (content, or the call)
    seconds: float = 0.0
    scores: dict[str, bool] = field(default_factory=dict)


def client_for(server: LocalServer, schema: Callable | None) -> openai.OpenAI:
    import httpx2

    transport = ConstrainedChoice(schema=schema) if schema else httpx2.HTTPTransport()
    return openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0,
                         http_client=httpx2.Client(transport=transport, timeout=900))


def ask(client: openai.OpenAI, question: Question, tools: list[dict[str, Any]],
        max_tokens: int) -> Outcome:
    started = time.monotonic()
    reply = client.chat.completions.create(
        model=LOCAL_MODEL_NAME, temperature=0, max_tokens=max_tokens, tools=tools,
        tool_choice="auto", messages=[{"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
                                      {"role": "user", "content": question.text}])
    seconds = time.monotonic() - started
    choice = reply.choices[0]
    calls = choice.message.tool_calls or []
    if calls:
        call = calls[0].function
        outcome = Outcome(call.name, text=f"{call.name}({call.arguments})")
        try:
            outcome.arguments = json.loads(call.arguments)
            schema = next(t["function"]["parameters"] for t in tools
                          if t["function"]["name"] == call.name)
            jsonschema.validate(outcome.arguments, schema)
            outcome.valid = choice.finish_reason == "tool_calls"
        except (json.JSONDecodeError, jsonschema.ValidationError, StopIteration):
            outcome.valid = False
    else:
        content = choice.message.content or ""
        # a constrained reply cut off by max_tokens is raw JSON: read its branch anyway
        cut = re.match(r'\s*\{\s*(?:"need_tool":\s*"\w+",\s*)?"tool":\s*"(\w+)"', content)
        picked = cut.group(1) if cut and cut.group(1) != NO_TOOL else "answer"
        outcome = Outcome(picked, text=content)
    outcome.finish_reason = choice.finish_reason
    outcome.seconds = round(seconds, 1)
    if outcome.picked in question.tools and outcome.valid and outcome.arguments is not None:
        outcome.right_arguments = bool(question.right_arguments(outcome.arguments))
    needs_tool = bool(question.tools)
    outcome.scores = {
        "branch": (outcome.picked != "answer") == needs_tool,
        "tool": outcome.picked in question.tools,
        "valid": outcome.valid,
        "right_arguments": outcome.right_arguments,
        "all": outcome.right_arguments if needs_tool else outcome.picked == "answer",
    }
    return outcome


def rates(outcomes: list[Outcome], questions: list[Question]) -> dict[str, str]:
    def rate(key: str, rows: list[tuple[Question, Outcome]]) -> str:
        return f"{sum(o.scores[key] for _, o in rows)}/{len(rows)}"

    pairs = list(zip(questions, outcomes, strict=True))
    tool_rows = [(q, o) for q, o in pairs if q.tools]
    calls = [(q, o) for q, o in pairs if o.picked != "answer"]
    return {
        "right branch (all questions)": rate("branch", pairs),
        "right branch, tool needed": rate("branch", tool_rows),
        "right branch, no tool needed": rate("branch", [(q, o) for q, o in pairs
                                                        if not q.tools]),
        "right tool (tool needed)": rate("tool", tool_rows),
        "valid arguments (of the calls made)": rate("valid", calls),
        "right arguments (tool needed)": rate("right_arguments", tool_rows),
        "all right (all questions)": rate("all", pairs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    tools = demo_registry(World()).to_schemas()
    results: dict[str, list[Outcome]] = {}
    # The prompt cache stays on: every request starts with the same ~950 tokens (system
    # prompt and tools), so only the question is new. That saves most of the CPU; the
    # order of the requests is fixed, so a rerun reuses the cache the same way.
    with LocalServer(n_ctx=4096, deterministic=False) as server:
        fingerprint = client_for(server, None).chat.completions.create(  # llama.cpp's build
            model=LOCAL_MODEL_NAME, max_tokens=1, messages=[{"role": "user", "content": "hi"}]
        ).system_fingerprint or ""
        for name, variant in VARIANTS.items():
            client = client_for(server, variant["schema"])
            results[name] = []
            for question in QUESTIONS:
                outcome = ask(client, question, tools, args.max_tokens)
                results[name].append(outcome)
                print(f"{name:<19} {outcome.seconds:5.1f}s {question.text[:24]:<26} "
                      f"-> {outcome.picked:<13} {'ok' if outcome.scores['all'] else '--'}",
                      flush=True)

    print()
    header = f"{'question':<30} {'right':<22} " + " ".join(f"{n:<20}" for n in VARIANTS)
    print(header)
    for i, question in enumerate(QUESTIONS):
        right = "/".join(question.tools) or "answer"
        cells = []
        for name in VARIANTS:
            outcome = results[name][i]
            mark = "✓" if outcome.scores["all"] else ("~" if outcome.scores["branch"] else "✗")
            cells.append(f"{mark} {outcome.picked:<18}")
        print(f"{question.text[:28]:<30} {right[:22]:<22} " + " ".join(cells))
    print("✓ all right   ~ right branch only   ✗ wrong branch\n")
    summary = {name: rates(results[name], QUESTIONS) for name in VARIANTS}
    width = max(len(key) for key in summary["native"])
    print(f"{'rate':<{width}}  " + " ".join(f"{n:<20}" for n in VARIANTS))
    for key in summary["native"]:
        print(f"{key:<{width}}  " + " ".join(f"{summary[n][key]:<20}" for n in VARIANTS))

    record = {
        "experiment": __doc__.splitlines()[0],
        "provenance": {
            "model": LOCAL_MODEL_NAME, **LOCAL_MODEL_INFO,
            "llama_cpp_build": fingerprint,
            "server": "vibe_agent.course.local.LocalServer(n_ctx=4096, deterministic=False): "
                      "prompt cache on (the shared system prompt and tools), 2 threads",
            "date": datetime.now(UTC).replace(microsecond=0).isoformat(),
            "machine": f"{platform.machine()}, {platform.system()}",
            "command": "python benchmarks/constrained_choice.py",
        },
        "request": {"system_prompt": DEFAULT_SYSTEM_PROMPT, "tools": [t["function"]["name"]
                    for t in tools], "temperature": 0, "max_tokens": args.max_tokens,
                    "tool_choice": "auto"},
        "variants": {name: {"how": v["how"],
                            "json_schema": v["schema"](tools, "auto") if v["schema"] else None}
                     for name, v in VARIANTS.items()},
        "grammar_note": "llama.cpp converts each json_schema into a GBNF grammar itself "
                        "(response_format type json_schema); sampling is restricted to tokens "
                        "that keep the reply valid under it",
        "rates": summary,
        "rows": [{"question": q.text, "source": q.source, "right_tools": list(q.tools),
                  **{name: {key: value for key, value in vars(results[name][i]).items()}
                     for name in VARIANTS}} for i, q in enumerate(QUESTIONS)],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n",
                        encoding="utf-8")
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
