"""The approval of an action at the terminal: the rule the tools obey, and what a
person is shown before answering (lesson 08's policy, lesson 15's terminal).

    a write ──> its diff, coloured, whole or the screen's share (answer a: the rest)
    a command ──> the command line, escaped (`visible`)
    an MCP call ──> the server, the tool, its arguments, and the first time, the
                    description the model reads (lesson 14)

The project's permission rules decide first (deny beats ask beats allow,
`vibe_agent.permissions`); the approval mode (ask, auto-edit, yolo) is the default
below them. A write nobody was asked about still shows its diff once it is done
(`show_written`). A diff line is folded at the terminal's width, never cropped, and a
long run of blanks is shown as its count (`diff_line`), so nothing hides behind it.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from . import permissions
from .sandbox import YES, Action
from .screen import doing, visible

if TYPE_CHECKING:
    from .terminal import Session

MAX_SHOWN_DIFF_LINES = 80  # rows of a diff shown before an approval, at most
MIN_SHOWN_DIFF_ROWS = 10  # ... at least, however small the terminal
COMPACT_DIFF_ROWS = 12  # rows of a write's diff shown after the fact (auto-edit, yolo)
SHOW_ALL = "a"  # the answer that shows the rest of a diff before answering y/n


def rule(session: Session, action: Action, tool: str = "") -> bool | str:
    """The approval rule the tools obey: the project's permission rules (deny, ask,
    allow), then the approval mode (see the module docstring and permissions.py)."""
    call = permissions.call_of(action.kind, action.detail, tool)
    decision, by = session.rules.decide(call, permissions.mode_default(
        session.approve, action.kind, getattr(action, "read_only", False)))
    if decision == "deny":
        session.end_line()
        session.console.print(visible(f"✗ 项目的权限规则 {by} 不允许：{action.detail}"),
                              style="red", markup=False, highlight=False, soft_wrap=True)
        return permissions.DENIED.format(rule=by)
    if decision == "allow":
        if action.kind == "write":  # its diff is shown once it is done (show_written)
            session.written.setdefault(action.detail, text_of(session.root, action.detail))
        return True
    session.end_line()
    whole = ""  # the whole diff, when part of it did not fit on the screen
    if action.kind == "write":
        whole = show_write(session, action)
        question = f"允许写入 {visible(action.detail)} 吗？"
    elif action.kind == "tool":
        show_tool_call(session, action)
        question = "允许调用吗？"
    else:
        session.console.print("[bold yellow]agent 想运行命令：[/]", end="")
        session.console.print(visible(action.detail), markup=False, highlight=False)
        question = "允许运行吗？"
    always = permissions.narrowest_rule(call) if session.rules.path is not None else None
    if always:  # the answer A: allow, and write this rule for next time (offered only
        question = visible(permissions.offer(always)) + "\n" + question  # to a person)
    answer = session.ask or (lambda text: session.console.input(text, markup=False))
    try:
        reply = answer(question + (f"[y/N，{SHOW_ALL} 显示全部] " if whole else "[y/N] "))
        if whole and reply.strip().lower() == SHOW_ALL and not (
                always and reply.strip() == permissions.ALWAYS):
            print_diff(session.console, whole, rows=None)
            reply = answer(question + "[y/N] ")
    except EOFError:  # (Ctrl-C is not caught: it stops the whole turn)
        session.console.print()
        return "the user did not answer (the input ended). Do not try this again."
    if always and reply.strip() == permissions.ALWAYS:
        session.console.print(visible(permissions.remember(session.rules, always)),
                              markup=False, highlight=False, soft_wrap=True)
        return True
    if reply.strip().lower() in YES:
        session.screen.working(doing(action))  # the spinner again while it runs
        return True
    return "the user said no. Try another way, or ask the user how they want it done."


def show_write(session: Session, action: Action) -> str:
    """The diff a write would make, coloured (new content when the action carries it);
    returns the whole diff when part of it did not fit on the screen, else ""."""
    session.console.print(f"[bold yellow]agent 想写入[/] {escape(visible(action.detail))}")
    content = action.content
    if content is None:
        return ""
    before = text_of(session.root, action.detail)
    diff = diff_texts({} if before is None else {action.detail: before},
                      {action.detail: content})
    shown = print_diff(session.console, diff, more=f"（回答 {SHOW_ALL} 先显示全部）")
    return diff if shown else ""


def show_written(session: Session) -> None:
    """The diffs of the writes nobody was asked about (auto-edit, yolo), compact and
    after the fact: what the files are now against what they were."""
    for path, before in session.written.items():
        now = text_of(session.root, path)
        diff = diff_texts({} if before is None else {path: before},
                          {} if now is None else {path: now}, context=1)
        hunks = "\n".join(diff.split("\n")[2:])  # the tool's line named the file
        print_diff(session.console, hunks, rows=COMPACT_DIFF_ROWS, more="（/diff 看全部）",
                   indent=4)
    session.written.clear()


def text_of(root: Path, path: str) -> str | None:
    """The text of a workspace file now (None: there is no such file)."""
    target = root / path
    return target.read_text("utf-8", "replace") if target.is_file() else None


def print_diff(console: Console, diff: str, rows: int | None = 0, more: str = "",
               indent: int = 0) -> int:
    """Print a unified diff with every line whole: folded at the terminal's width,
    never cropped (`diff_line`). It takes at most `rows` rows of the screen (0: the
    screen's share, None: no limit); the lines that did not fit are counted, not
    shown, and the count is printed with `more`. Returns that count."""
    lines = diff.removesuffix("\n").split("\n") if diff else []
    budget = diff_rows(console) if rows == 0 else rows
    width = max(console.width - indent, 10)
    used = 0
    for number, line in enumerate(lines):
        if budget is not None and len(line) > 4 * width * (budget - used + 1):
            text = None  # far too long to fit: not even rendered
        else:
            text = diff_line(line)
            used += len(text.wrap(console, width))
        if text is None or budget is not None and used > budget:
            hidden = len(lines) - number
            console.print(f"{' ' * indent}[yellow]… 还有 {hidden} 行没有显示"
                          f"{escape(more)}[/]")
            return hidden
        console.print(Padding.indent(text, indent))
    return 0


def diff_rows(console: Console) -> int:
    """The screen's share for a diff: the rows left for it above the question."""
    return max(MIN_SHOWN_DIFF_ROWS, min(MAX_SHOWN_DIFF_LINES, console.height - 8))


def show_tool_call(session: Session, action: Action) -> None:
    """An MCP call to approve: the server, the tool, the arguments, what the server's
    annotations claim, and the first time, the description the model reads."""
    from .mcp_tools import MCPCall  # loaded already: only an MCP server's tools ask this

    if not isinstance(action, MCPCall):
        session.console.print("[bold yellow]agent 想调用工具：[/]", end="")
        session.console.print(visible(action.detail), markup=False, highlight=False)
        return
    session.console.print("[bold yellow]agent 想调用 MCP 工具：[/]", end="")
    session.console.print(f"服务器 {visible(action.server)} 的 {visible(action.tool)}"
                          f"{action.warning}", markup=False, highlight=False)
    arguments = json.dumps(action.arguments, ensure_ascii=False)
    session.console.print(f"  参数：{visible(arguments)}", markup=False, highlight=False)
    if (action.server, action.tool) not in session.described:  # the first call only
        session.described.add((action.server, action.tool))
        session.console.print("  工具的描述（服务器写的，模型读到的就是这段）：", end="")
        session.console.print(visible(action.description) or "（没有描述）", markup=False,
                              highlight=False)


def diff_texts(before: dict[str, str], after: dict[str, str], context: int = 3) -> str:
    """A unified diff between two {path: text} maps (the same format as workspace_diff),
    with `context` unchanged lines around each change."""
    parts: list[str] = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name, ""), after.get(name, "")
        if old != new:
            parts += difflib.unified_diff(old.splitlines(keepends=True),
                                          new.splitlines(keepends=True),
                                          f"a/{name}", f"b/{name}", n=context)
    return "".join(parts)


LONG_BLANKS = 16  # a run of blanks inside a line wider than this is shown as its count
LONG_INDENT = 60  # ... at the start of a line (deep indentation is shown as it is)
BLANKS = re.compile(r"[^\S\n]+")  # spaces, tabs, wide and other Unicode spaces
DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("+", "green"), ("-", "red"), ("@@", "cyan"))


def diff_line(line: str) -> Text:
    """One line of a diff as a person is shown it: escaped (`visible`), coloured, and
    folded at the terminal's width rather than cropped. A run of blanks that could push
    the rest of the line out of sight, or that ends the line, is shown as its count
    (x = 1「150 个空格」; os.system(...)), so nothing can hide behind it."""
    line = visible(line, multiline=True)
    style = next((style for start, style in DIFF_STYLES if line.startswith(start)), "")
    text = Text(style=style, overflow="fold")
    shown = 0
    for run in BLANKS.finditer(line):
        blanks = run.group()
        limit = LONG_INDENT if run.start() <= 1 else 0 if run.end() == len(line) else LONG_BLANKS
        if len(blanks.expandtabs(8)) > limit:
            name = "空格" if blanks.strip(" ") == "" else "制表符" if blanks.strip("\t") == "" \
                else "空白字符"
            text.append(line[shown:run.start()])
            text.append(f"「{len(blanks)} 个{name}」", style="reverse")
            shown = run.end()
    text.append(line[shown:])
    return text

