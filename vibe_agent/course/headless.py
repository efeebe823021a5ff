"""`python -m vibe_agent code -p "request"`: one request, no prompt, for scripts and CI.

The session is the terminal agent's own (`terminal.Session`): the same tools, approvals,
undo store, trajectory and verdict. What a person would watch (tool lines, approvals,
the verdict, the figures) goes to stderr; stdout gets only the answer, or with
`--output-format json` one JSON object (nothing is streamed: the answer is printed once,
whole, when the turn ends):

    {"answer": ..., "stop_reason": "answered", "verdict": "...", "tokens": 1527,
     "model_calls": 4, "tool_calls": 3, "refused": 0, "model": ..., "trajectory": ...,
     "exit_code": 0}

`tokens` is the API's usage summed over the run, null when a call reported none;
`verdict` is the end-of-turn line (the judge's on a course task, the project's tests
otherwise), null when the turn called no tool. json.dumps escapes every control and
non-ASCII character, so no byte of the model's text can act on a terminal.

Approvals come from --approve. With no terminal to ask (stdin is not a terminal),
`ask` refuses every write, command and MCP call, and auto-edit every command and MCP
call: said once at the start, and the model reads that nobody answered.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TextIO

from rich.markup import escape

from ..loop import StopReason
from ..sandbox import YES, why_not_isolated
from ..terminal import APPROVAL_NOTES, SHOW_ALL, Session, visible
from ..undo import remove_store

# What `code -p` exits with (also in `code --help` and the README).
EXIT_DONE = 0  # the model answered
EXIT_BRAKE = 1  # a brake stopped it (max_iters, a loop, tool errors, cut off, ...)
EXIT_USAGE = 2  # a command-line or configuration problem: nothing ran
EXIT_REFUSED = 3  # an action it asked for was refused (or nobody could be asked)
EXIT_ERROR = 4  # the model service failed or sent what the loop cannot use
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
ERROR_STOPS = (StopReason.PROVIDER_ERROR, StopReason.REPLY_TOO_LONG)
EXIT_CODES_HELP = ("-p 的退出码：0 完成（模型给出了回答）；1 被刹车停下（轮数上限、兜圈子、"
                   "回答被截断……）；2 命令行或配置有误；3 有操作没有得到批准（或没有终端可以问）；"
                   "4 模型服务出错；130 按了 Ctrl-C。")


def no_terminal_note(approve: str) -> str:
    """What is refused when nobody can be asked ("" in yolo: nothing is asked)."""
    refused = {"ask": "写文件、运行命令和调用（没有标注只读的）MCP 工具",
               "auto-edit": "运行命令和调用（没有标注只读的）MCP 工具"}.get(approve)
    if refused is None:
        return ""
    return (f"没有终端可以问你（标准输入不是终端）：{refused}一律拒绝，不再逐个说明。"
            "想让它做，用 --approve auto-edit 或 --approve yolo。")


def refuse_unasked(question: str) -> str:
    """`Session.ask` when there is no terminal: nobody answers (the model is told so)."""
    raise EOFError("no terminal to ask")


class Answers:
    """Wraps how a question reaches the person, and counts the refusals."""

    def __init__(self, ask: Callable[[str], str]) -> None:
        self.ask = ask
        self.refused = 0

    def __call__(self, question: str) -> str:
        try:
            reply = self.ask(question)
        except EOFError:
            self.refused += 1
            raise
        if reply.strip().lower() not in (*YES, SHOW_ALL):
            self.refused += 1
        return reply


def run_once(session: Session, request: str, *, json_output: bool,
             out: TextIO | None = None) -> int:
    """Send `request` (or the course task's, for "/task"), print the answer or the JSON
    object on `out` (stdout), and return the exit code (see EXIT_*)."""
    out = out or sys.stdout
    console = session.console
    answers = Answers(session.ask or (lambda text: console.input(text, markup=False)))
    session.ask = answers
    console.print(f"模型：{escape(visible(session.model))}  {escape(visible(session.label))}")
    if session.notice:
        console.print(f"[yellow]{escape(session.notice)}[/]")
    console.print(f"工作区：{escape(visible(str(session.root)))}")
    console.print(f"审批：{session.approve}（{APPROVAL_NOTES[session.approve]}）")
    if (isolated := why_not_isolated()) is not None:
        console.print(f"[bold red]⚠ 沙箱：没有隔离（{escape(isolated)}）"
                      "——命令能读写你能读写的一切[/]")
    if request.strip() == "/task" and session.suggested:
        request = session.suggested
    try:
        session.turn(request)
    finally:
        remove_store(session.store)  # nothing can be undone after a headless run
    result = session.result
    if result is None:
        code = EXIT_INTERRUPTED
    elif result.stop_reason in ERROR_STOPS:
        code = EXIT_ERROR
    elif answers.refused:
        code = EXIT_REFUSED
    elif result.stop_reason is not StopReason.ANSWERED:
        code = EXIT_BRAKE
    else:
        code = EXIT_DONE
    if session.trajectory:
        console.print(f"[dim]运行记录已保存：{escape(str(session.trajectory))}[/]")
    if json_output:
        steps = session.trace
        out.write(json.dumps({
            "answer": result.answer if result else None,
            "stop_reason": result.stop_reason.value if result else "interrupted",
            "message": result.message if result else "interrupted by Ctrl-C",
            "verdict": session.verdict or None,
            "tokens": result.total_tokens if result else None,
            "model_calls": sum(step.kind == "model" for step in steps),
            "tool_calls": sum(step.kind == "tool" for step in steps),
            "refused": answers.refused,
            "model": session.model,
            "trajectory": str(session.trajectory) if session.trajectory else None,
            "exit_code": code,
        }) + "\n")
    elif result is not None and result.answer:
        out.write(visible(result.answer, multiline=True).rstrip("\n") + "\n")
    out.flush()
    return code
