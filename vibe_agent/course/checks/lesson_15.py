"""Lesson 15's checkers: your own `accumulate`, and a slash command for the terminal agent."""

from __future__ import annotations

import io
import json
import re
import tempfile
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console

from ...coding import snapshot
from ...stream import accumulate, assemble
from ...terminal import Session
from ..scripted import ScriptedModel
from ..sse import call_delta as call
from ..sse import chunk_body as chunk
from ..sse import sdk_chunks
from . import Problem, Report, attempt, checker, fail, short

# --- exercise 15.1: my_accumulate ---------------------------------------------------


def _accumulate_cases() -> list[tuple[str, list[dict[str, Any]], str]]:
    """(name, chunks, hint): fresh ids and values every run, so nothing can be hard-coded."""
    a, b = f"call_{uuid.uuid4().hex[:6]}", f"call_{uuid.uuid4().hex[:6]}"
    x, y = uuid.uuid4().int % 900 + 100, uuid.uuid4().int % 90 + 10
    expr = f'{{"expression": "{x} * {y}"}}'
    return [
        ("只有文字", [chunk({"role": "assistant", "content": ""}), chunk({"content": f"{x} × "}),
                  chunk({"content": f"{y} = {x * y}"}), chunk({}, "stop")],
         "把每个数据块 delta.content 里的文字按到达顺序接起来。"),
        ("两个调用交替到达", [
            chunk({"role": "assistant", "content": ""}), chunk(call(0, a, "calculator", "")),
            chunk(call(1, b, "get_time", "")), chunk(call(0, arguments=expr[:9])),
            chunk(call(1, arguments="{}")), chunk(call(0, arguments=expr[9:])),
            chunk({}, "tool_calls")],
         "按 delta 里的 index 把参数接到对应的那个调用上，不要接到“最后一个到达的调用”上。"),
        ("id 只在第一个 delta 里", [
            chunk(call(0, a, "calculator", expr[:5])), chunk(call(0, "", None, expr[5:])),
            chunk({}, "tool_calls")],
         "后面的 delta 里 id 是空字符串或没有：只在还没有 id 时记下它，别用空值覆盖。"),
        ("只有一个调用、没有 index", [
            chunk(call(None, a, "calculator", expr[:7])),
            chunk(call(None, None, None, expr[7:])),
            chunk({}, "tool_calls")],
         "有的服务只有一个调用时不发 index（是 None）：这时接到上一个调用上（没有就当第 0 个）。"),
        ("参数在 JSON 转义中间断开", [
            chunk(call(0, a, "search", '{"q": "\\u4e')),
            chunk(call(0, arguments='2d\\u6587"}')),
            chunk({}, "tool_calls")],
         "参数是一段被切开的文字：先原样接起来，整段接完之前不要 json.loads 任何一块。"),
        ("最后一块只有 usage、没有 choices", [
            chunk({"content": "好"}), chunk({}, "stop"),
            chunk(None, usage={"prompt_tokens": x, "completion_tokens": y,
                                "total_tokens": x + y})],
         "stream_options 的 include_usage 会在最后多发一块：choices 是空列表，跳过它。"),
        ("调用按 index 排序", [
            chunk(call(1, b, "get_time", "{}")), chunk(call(0, a, "calculator", expr)),
            chunk({}, "tool_calls")],
         "结果里的 tool_calls 按 index 从小到大排，不按到达顺序。"),
        ("每个 delta 都重复 id", [
            chunk(call(0, a, "calculator", "")), chunk(call(0, a, None, expr[:9])),
            chunk(call(0, a, None, expr[9:])), chunk({}, "tool_calls")],
         f"有的服务在每个 delta 里都重复 id：id 只记第一次出现的值，别接起来（会变成 {a}{a}）。"),
        ("每个 delta 都重复函数名", [
            chunk(call(0, a, "calculator", "")), chunk(call(0, "", "calculator", expr[:9])),
            chunk(call(0, None, "calculator", expr[9:])), chunk({}, "tool_calls")],
         "函数名和 id 一样只记第一次出现的值：有的服务每个 delta 都重复 name，"
         "接起来就成了 calculatorcalculator。"),
        ("一个数据块里有两个调用", [
            chunk(_two(call(0, a, "calculator", ""), call(1, b, "get_time", "{}"))),
            chunk(call(0, arguments=expr)), chunk({}, "tool_calls")],
         "delta.tool_calls 是一个列表：一个数据块里可以有几个调用的片段，"
         "每一项都要处理，不能只看第一项。"),
        ("几个调用，后面的片段没有 index", [
            chunk(call(0, a, "calculator", "")), chunk(call(None, None, None, expr[:9])),
            chunk(call(1, b, "get_time", "")), chunk(call(None, None, None, "{}")),
            chunk(call(0, arguments=expr[9:])), chunk({}, "tool_calls")],
         "index 是 None 的片段属于上一个调用：先把 None 换成上一个 index，再拿它当键"
         "（直接用 None 当键，会多出一个调用，排序时还会 TypeError）。"),
    ]


def _two(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """One delta carrying the pieces of two calls."""
    return {"tool_calls": first["tool_calls"] + second["tool_calls"]}


def _normalised(message: Any) -> Any:
    """The parts that matter: role, content (None and "" alike when there are calls) and
    the calls; `tool_calls` missing, None and [] alike."""
    if not isinstance(message, dict):
        return message
    calls = message.get("tool_calls") or []
    content = message.get("content")
    if calls and content == "":
        content = None
    return {"role": message.get("role"), "content": content, "tool_calls": calls}


@checker("练习 15.1：my_accumulate —— 把流式数据块拼回一条 assistant 消息", accumulate, assemble,
         hint="这个练习就是自己写出 accumulate：不要调用包里的 accumulate / assemble。")
def check_accumulate(fn: Any, report: Report) -> None:
    """Exercise 15.1: `my_accumulate(chunks) -> dict`, checked on SDK chunk objects."""
    for name, chunks, hint in _accumulate_cases():
        with report.case(name):
            wanted = _normalised(accumulate(chunks))
            got = attempt(fn, sdk_chunks(chunks)).get(hint)
            if not isinstance(got, dict):
                fail(f"应该返回一个字典（assistant 消息），得到 {short(got)}",
                     "返回 {\"role\": \"assistant\", \"content\": ..., \"tool_calls\": [...]}。")
            if _normalised(got) != wanted:
                fail(f"期望 {short(wanted, 160)}，得到 {short(_normalised(got), 160)}", hint)
            calls = got.get("tool_calls") or []
            for call in calls:
                if call.get("type") != "function":
                    fail("每个 tool_call 都要有 \"type\": \"function\"。",
                         "非流式接口给的 tool_calls 每一项都带 type，放回历史时服务商会检查。")


# --- exercise 15.2: the /files slash command ----------------------------------------

FILES = {"app.py": "def total(items):\n    return sum(items)\n",
         "README.md": "# demo\n\nA tiny project.\n",
         "old.txt": "to be removed\nsecond line\n"}


def _files_cases() -> list[tuple[str, Any, list[str], str]]:
    n = uuid.uuid4().int % 5 + 2

    def edit_app(root: Path) -> None:
        (root / "app.py").write_text("def total(items):\n    return sum(items) + 0\n"
                                     + "".join(f"# note {i}\n" for i in range(n)))

    def add_and_delete(root: Path) -> None:
        (root / "notes").mkdir()
        (root / "notes" / "todo.md").write_text("".join(f"- item {i}\n" for i in range(n)))
        (root / "old.txt").unlink()

    def plus_plus(root: Path) -> None:  # added lines that themselves start with "++"
        (root / "README.md").write_text("# demo\n\n++ counted twice?\n+++ and this?\n"
                                        "A tiny project.\n")

    def edit_twice(root: Path) -> None:  # the session's whole change, not the last turn's
        (root / "app.py").write_text("def total(items):\n    return 0\n# extra\n")

    def repeat_a_line(root: Path) -> None:  # the same line added n + 1 times
        (root / "README.md").write_text(FILES["README.md"] + "A tiny project.\n" * (n + 1))

    def new_file_first(root: Path) -> None:  # a new path that sorts before a changed one
        (root / "app.py").write_text("def total(items):\n    return sum(items) or 0\n")
        (root / "api.md").write_text("".join(f"- endpoint {i}\n" for i in range(n)))

    return [
        ("没有改动", lambda root: None, ["没有改动的文件。"],
         "和会话开始时（session.start）比，一个文件都没变：打印“没有改动的文件。”"),
        ("改了一个文件", edit_app, [f"app.py +{n + 1} -1"],
         "每个改过的文件一行：路径、加了几行、删了几行，格式是 “app.py +2 -1”。"),
        ("新文件和删掉的文件", add_and_delete, [f"notes/todo.md +{n} -0", "old.txt +0 -2"],
         "新文件：所有行都是加的；删掉的文件：所有行都是删的。按路径排序。"),
        ("内容本身以 ++ 开头的行", plus_plus, ["README.md +2 -0"],
         "diff 里 '+++ ' 开头的不一定是文件头：文件内容以 '++' 开头的新行在 diff 里也是 '+++…'。"
         "按文件数行，别靠跳过 '+++' 开头的行。"),
        ("会话里改过两轮", edit_twice, ["app.py +2 -1"],
         "要和会话开始时（session.start）比，不是和上一轮之前（session.undo）比。"),
        ("加了几行一模一样的", repeat_a_line, [f"README.md +{n + 1} -0"],
         "重复的行也要一行一行地算：用集合求差（set(新) - set(旧)），"
         "和原有的行一样的新行一行也不算。数 diff 里的 '+' 行和 '-' 行。"),
        ("新文件的路径排在前面", new_file_first, [f"api.md +{n} -0", "app.py +1 -1"],
         "所有改过的文件（改了的、新建的、删掉的）放在一起按路径排序，不要分组先后打印。"),
    ]


def _files_problem(lines: list[str], wanted: list[str]) -> Problem:
    """A mistake recognised by what came back (beyond the case's own hint), or None."""
    if sorted(lines) == sorted(wanted):
        return (f"行都对，顺序不对：期望 {json.dumps(wanted, ensure_ascii=False)}",
                "所有改过的文件放在一起按路径排序（sorted），不按改动的种类分组。")
    rows = [re.fullmatch(r"(.+) \+(\d+) -(\d+)", row) for row in wanted]
    with_headers = [f"{m[1]} +{int(m[2]) + 1} -{int(m[3]) + 1}" for m in rows if m]
    if wanted != ["没有改动的文件。"] and lines == with_headers:
        return ("每个文件都多算了一行加的、一行删的。",
                "diff 开头的 '--- a/路径' 和 '+++ b/路径' 是文件头，不是改动的行：别把它们数进去。")
    return None


def _session(root: Path) -> tuple[Session, Console]:
    console = Console(record=True, width=120, file=io.StringIO(), force_jupyter=False,
                      color_system=None)
    session = Session(ScriptedModel([], name="checker").client(), "checker", root, console)
    return session, console


@checker("练习 15.2：/files —— 列出这次会话改过的文件和行数")
def check_files_command(fn: Any, report: Report) -> None:
    """Exercise 15.2: `files_command(session, argument)` prints the changed files."""
    for name, change, wanted, hint in _files_cases():
        with report.case(name), tempfile.TemporaryDirectory() as temp:
            root = Path(temp)
            for path, text in FILES.items():
                (root / path).write_text(text)
            session, console = _session(root)
            if name == "会话里改过两轮":  # turn 1 added a line; turn 2 changes another
                session.undo.append(snapshot(root))
                (root / "app.py").write_text(FILES["app.py"] + "# extra\n")
                session.undo.append(snapshot(root))
            change(root)
            before = {p.relative_to(root).as_posix(): p.read_bytes()
                      for p in root.rglob("*") if p.is_file()}
            console.export_text(clear=True)
            attempt(fn, session, "").get("这个函数不应该抛异常。")
            lines = [line.strip() for line in console.export_text().splitlines() if line.strip()]
            after = {p.relative_to(root).as_posix(): p.read_bytes()
                     for p in root.rglob("*") if p.is_file()}
            if after != before:
                fail("它改动了工作区里的文件。", "/files 只看不改：不要写、也不要恢复任何文件。")
            if not lines:
                fail("什么也没打印出来（print() 打印的不进会话的 console）。",
                     "用 session.console.print(...) 打印。")
            if lines != wanted:
                if problem := _files_problem(lines, wanted):
                    fail(*problem)
                fail(f"期望 {json.dumps(wanted, ensure_ascii=False)}，"
                     f"得到 {json.dumps(lines, ensure_ascii=False)}", hint)
