"""The scripted explorer: lesson 13's parent and child on "where is X handled?" (NOT an LLM).

It is a deterministic program, part of the scripted reference model (`reference.py`
asks it first), that plays both sides of a delegation:

    parent, offered `delegate`     delegate(task) once, then answer with the child's line
    reader, offered `read_file`    list_files, then read_file one .py file per round, in
                                   the listed order, until a line checks the term
                                   (an `if` with it); answer in one line
                                   (a question naming `files.py` reads only those)

The question names the term in backticks and asks 在哪里 (where), e.g. `QUESTION`.
Anything else is not the explorer's: `explorer_reply` returns None and the reference
model answers as usual.

Token counts: the explorer reports `usage` on every reply, counted by one fixed
rule (`count_tokens`): every run of letters, digits and underscores is one token,
every other character that is not white space (a Chinese character, a bracket) is
one. That is NOT a real tokenizer's count; it is a deterministic rule, so the same
request always costs the same and comparisons (with / without delegation) are fair.
A real model's cassette carries its provider's own `usage` instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from . import scripted
from .matching import normalise
from .scripted import Reply, ScriptedModel, answer, call, calls, usage_of

EXPLORE_DIR = Path(__file__).resolve().parents[1] / "data" / "explore"
SHOPFRONT = EXPLORE_DIR / "shopfront"  # an 18-file shop: the coupon check is in shop/pricing.py
QUESTION = "在这个项目里，`expires_on`（优惠券的最后可用日）是在哪里检查的？"
TWO_FILE_QUESTION = "只看 `shop/coupons.py` 和 `shop/pricing.py`：`expires_on` 是在哪里检查的？"
EXPLORER_NAME = "scripted-explorer"
EXPLORER_LABEL = "脚本探索模型（确定性的程序，不是 LLM）"
COUNTING_RULE = ("按固定规则数出来的 tokens：连续的字母、数字、下划线算 1 个，其他每个非空白字符"
                 "（一个汉字、一个括号）算 1 个。不是真实分词器的结果。")

_TERM = re.compile(r"`(\w+)`[^`\n]*?在哪里")
_PATHS = re.compile(r"`([\w./-]+\.py)`")
_TOKEN = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")
_NUMBERED = re.compile(r"^\s*(\d+)\| (.*)$")


def count_tokens(text: str) -> int:
    """Tokens of a text by the explorer's counting rule (see the module docstring)."""
    return len(_TOKEN.findall(text))


def request_tokens(body: dict[str, Any]) -> int:
    """A request's prompt tokens by the rule: every message's role, content and tool
    calls, and the tools' JSON Schemas (they are sent every round too). Counted on the
    request as a recording keeps it (`cassette.normalise`: no empty values), so a
    re-recording counts the same."""
    body = normalise(body)
    total = count_tokens(json.dumps(body.get("tools") or [], ensure_ascii=False))
    for message in body["messages"]:
        total += count_tokens(str(message.get("role") or ""))
        total += count_tokens(str(message.get("content") or ""))
        for tool_call in message.get("tool_calls") or []:
            function = tool_call.get("function") or {}
            total += count_tokens(f"{function.get('name')} {function.get('arguments')}")
    return total


def reply_tokens(reply: Reply) -> int:
    """A reply's completion tokens by the rule."""
    text = reply.content or ""
    return count_tokens(text + " ".join(f"{c.name} {c.arguments}" for c in reply.tool_calls))


def counted(body: dict[str, Any], reply: Reply) -> Reply:
    """The reply with `usage` counted by the rule."""
    reply.usage = usage_of(request_tokens(body), reply_tokens(reply))
    return reply


def calls_made(body: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(tool, arguments, result) of every call answered so far in this conversation."""
    asked: dict[str, tuple[str, dict[str, Any]]] = {}
    done = []
    for message in body["messages"]:
        for tool_call in message.get("tool_calls") or []:
            try:
                arguments = json.loads(tool_call["function"]["arguments"] or "{}")
            except ValueError:
                arguments = {}
            asked[tool_call["id"]] = (tool_call["function"]["name"], arguments)
        if message["role"] == "tool" and message.get("tool_call_id") in asked:
            name, arguments = asked[message["tool_call_id"]]
            done.append((name, arguments, str(message.get("content") or "")))
    return done


def child_task(term: str, paths: list[str]) -> str:
    """What the parent hands its child: self-contained (the files the question named,
    if any), asking for one line back."""
    where = "只看 " + " 和 ".join(f"`{p}`" for p in paths) + "：" if paths else "在当前项目里"
    return (f"{where}找出 `{term}` 是在哪里检查的（哪个文件、哪一行有用它做判断的 if）。"
            "只回答一行：文件路径、行号和那一行代码。")


def checking_line(term: str, text: str) -> tuple[int, str] | None:
    """(line number, code) of the first numbered line of `text` that checks `term`."""
    for row in text.splitlines():
        numbered = _NUMBERED.match(row)
        if numbered and term in numbered.group(2) and re.search(r"\bif\b", numbered.group(2)):
            return int(numbered.group(1)), numbered.group(2).strip()
    return None


def _parent_reply(question: str, term: str,
                  done: list[tuple[str, dict[str, Any], str]]) -> Reply:
    delegated = [result for name, _, result in done if name == "delegate"]
    if not delegated:
        return calls(call("delegate", {"task": child_task(term, _PATHS.findall(question))}))
    if delegated[-1].startswith("Error"):
        return answer(f"子 agent 没能查到：{delegated[-1]}")
    return answer(delegated[-1])


def _reader_reply(question: str, term: str, offered: list[str],
                  done: list[tuple[str, dict[str, Any], str]], transcript: bool) -> Reply:
    read = {arguments.get("path"): result for name, arguments, result in done
            if name == "read_file"}
    for path, result in read.items():
        found = checking_line(term, result)
        if found:
            if transcript:  # the misbehaving child: everything it read, not the conclusion
                return answer("\n\n".join(f"== {p} ==\n{text}" for p, text in read.items()))
            return answer(f"`{term}` 在 {path} 第 {found[0]} 行检查：`{found[1]}`")
    paths = _PATHS.findall(question)
    if not paths:
        listings = [result for name, _, result in done if name == "list_files"]
        if not listings:
            if "list_files" not in offered:
                return answer("我没有 list_files 工具，不知道项目里有哪些文件。")
            return calls(call("list_files", {"path": "."}))
        paths = [line.strip() for line in listings[-1].splitlines()
                 if line.strip().endswith(".py")]
    unread = [path for path in paths if path not in read]
    if not unread:
        return answer(f"读完了 {len(read)} 个文件，没有找到检查 `{term}` 的地方。")
    return calls(call("read_file", {"path": unread[0]}))


def explorer_reply(body: dict[str, Any], *, transcript: bool = False) -> Reply | None:
    """The explorer's next reply, with counted usage; None when the request is not an
    exploration question ("`term` ... 在哪里") with `delegate` or `read_file` offered.

    Args:
        body: the chat completion request.
        transcript: answer as a reader with everything read instead of one line
            (the misbehaving child of lesson 13).
    """
    question = scripted.first_user_message(body)
    term = _TERM.search(question)
    offered = scripted.offered_tools(body)
    if term is None or not {"delegate", "read_file"} & set(offered):
        return None
    done = calls_made(body)
    if "delegate" in offered:
        reply = _parent_reply(question, term.group(1), done)
    else:
        reply = _reader_reply(question, term.group(1), offered, done, transcript)
    return counted(body, reply)


def explorer_model(*, transcript: bool = False, max_requests: int | None = 200
                   ) -> ScriptedModel:
    """The explorer alone as a scripted model (not an LLM); requests it does not know
    are answered with a plain "not my task" line.

    Args:
        transcript: its children answer with everything they read (misbehaving).
        max_requests: the request cap (None: no cap).
    """
    def respond(body: dict[str, Any]) -> Reply:
        reply = explorer_reply(body, transcript=transcript)
        return reply if reply is not None else answer("（脚本探索模型）这不是我的任务。")

    name = EXPLORER_NAME + ("-transcript" if transcript else "")
    return ScriptedModel(respond, name=name, max_requests=max_requests)


def model_steps(steps: list[Any], *, children: bool = True) -> list[Any]:
    """The model steps of a trace, and (children=True) those of every sub-agent under it."""
    found = []
    for step in steps:
        if step.kind == "model":
            found.append(step)
        if children:
            found += model_steps(step.children)
    return found
