"""The terminal's slash commands: a table (`COMMANDS`), and `@command` adds one.

    @command("/files", "这次会话改过的文件和行数")
    def files_command(session, argument): ...

A command is `fn(session, argument)`: it reads the session (`terminal.Session`: its
workspace, messages, trace, console) and prints for the person; what it tells the
model goes in as a note (`session.add_note`), kept in the trajectory too. It returns
STOP to end the session. /help lists the table in the order the commands were added;
the prompt completes their names with Tab (`vibe_agent.prompt_input`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.markup import escape

from .agents_md import init_command
from .approval import print_diff
from .changes import workspace_diff
from .compact import compact
from .plan import render_todos
from .screen import visible
from .sessions import clear_command
from .trace import shorten
from .undo import UndoError

if TYPE_CHECKING:
    from .terminal import Session

UNDONE_NOTE = ("[The user ran /undo: the workspace is back as it was before your previous "
               "turn (restored or removed: {paths}). What that turn changed is gone; read a "
               "file again before you edit it.]")


STOP = object()  # what a command returns to end the session


@dataclass
class Command:
    name: str
    help: str
    run: Callable[[Session, str], object]


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str) -> Callable[[Callable[[Session, str], object]],
                                              Callable[[Session, str], object]]:
    """Register `fn(session, argument)` as the slash command `name` (e.g. "/diff")."""
    if not name.startswith("/") or " " in name:
        raise ValueError(f"a slash command is one word starting with '/', not {name!r}")

    def add(fn: Callable[[Session, str], object]) -> Callable[[Session, str], object]:
        COMMANDS[name] = Command(name, help, fn)
        return fn

    return add


@command("/help", "列出所有命令")
def _help(session: Session, _: str) -> None:
    for entry in COMMANDS.values():
        session.console.print(f"  [bold]{entry.name}[/]  {escape(entry.help)}")
    from .prompt_input import PROMPT_HELP

    session.console.print(PROMPT_HELP, markup=False, highlight=False)


@command("/exit", "结束会话（Ctrl-D 也可以）")
def _exit(session: Session, _: str) -> object:
    return STOP


@command("/task", "把课程任务的描述发给 agent")
def _task(session: Session, _: str) -> None:
    if session.suggested is None:
        session.console.print("这次会话没有课程任务：直接输入你想让它做的事。")
    else:
        session.console.print(f"[dim]› {escape(session.suggested)}[/]")
        session.turn(session.suggested)


@command("/diff", "这次会话到现在对工作区做的修改（/diff all：不管多长都显示全部）")
def _diff(session: Session, argument: str) -> None:
    diff = workspace_diff(session.start, session.root)
    if not diff:
        session.console.print("工作区没有变化。")
    else:
        print_diff(session.console, diff, rows=None if argument == "all" else 0,
                   more="（/diff all 显示全部）")


@command("/undo", "撤销上一轮对工作区的修改：逐字节恢复，做不到就什么也不动")
def _undo(session: Session, _: str) -> None:
    if not session.undo:
        session.console.print("还没有可以撤销的一轮。")
        return
    try:
        restored = session.undo[-1].restore()
    except UndoError as exc:  # UndoRefused: nothing changed, the checkpoint stays
        session.console.print(f"[red]{escape(str(exc))}[/]")
        return
    except OSError as exc:  # the workspace could not even be read: nothing was changed
        session.console.print(f"[red]没有撤销：读不了工作区（{escape(str(exc))}）。[/]")
        return
    session.undo.pop()
    if not restored:
        session.console.print("上一轮之后工作区没有变化，没有需要恢复的文件。")
        return
    names = "、".join(restored[:5]) + (f" 等 {len(restored)} 处" if len(restored) > 5 else "")
    session.console.print(f"已恢复到上一轮之前的样子：{escape(visible(names))}。"
                          "也告诉了 agent（对话里加了一条说明）。")
    more = f" and {len(restored) - 20} more" if len(restored) > 20 else ""
    session.add_note("/undo", UNDONE_NOTE.format(paths=", ".join(restored[:20]) + more))


@command("/todo", "模型的计划（todo_write 写下的列表）")
def _todo(session: Session, _: str) -> None:
    items = session.todos.items
    session.console.print(visible(render_todos(items), multiline=True) if items
                          else "模型还没有写计划。", markup=False)


@command("/compact", "现在就压缩历史：中间部分换成一段摘要（第 11 课）")
def _compact(session: Session, _: str) -> None:
    before = len(session.messages)
    with session.screen.spinner("正在压缩历史"):
        session.messages[:] = compact(session.messages, session.summarize)
    if len(session.messages) == before:
        session.console.print("历史还很短，没有可以压缩的部分。")
    else:
        session.record("/compact", f"compacted {before} messages into {len(session.messages)}")
        session.save()
        session.console.print(f"历史从 {before} 条消息压缩成 {len(session.messages)} 条"
                              "（system、第一条请求、摘要和最近两轮原样保留）。")


@command("/tokens", "每次模型调用的 prompt tokens（来自 API 的 usage）和合计")
def _tokens(session: Session, _: str) -> None:
    calls = [step for step in session.trace if step.kind == "model"]
    reported = [step.prompt_tokens for step in calls if step.prompt_tokens is not None]
    if not calls:
        session.console.print("还没有调用过模型。")
    elif not reported:
        session.console.print(f"{len(calls)} 次模型调用，服务没有报告 usage。")
    else:
        total = sum((step.total_tokens or 0) for step in calls)
        session.console.print(f"{len(calls)} 次模型调用；最近一次发送 {reported[-1]:,} 个 prompt "
                              f"tokens；合计 {total:,} tokens。")


@command("/clear", "开始新的对话：模型不再记得前面说过的话（工作区、运行记录、/undo 都还在）")
def _clear(session: Session, _: str) -> None:
    clear_command(session)


@command("/init", "根据文件夹里的内容拟一份 AGENTS.md（不问模型），你同意了才写入")
def _init(session: Session, _: str) -> None:
    init_command(session)


@command("/model", "显示现在的模型和运行模式；/model 名字：从下一次请求起换成这个模型")
def _model(session: Session, argument: str) -> None:
    if not argument:
        label = visible(session.label, multiline=True)
        session.console.print(f"模型：{escape(visible(session.model))}\n"
                              f"运行模式和来源（启动时）：{escape(label)}")
        return
    if len(argument) > 200 or any(c.isspace() for c in argument) or visible(argument) != argument:
        session.console.print(f"[yellow]没有换：{escape(visible(shorten(argument, 60)))} 不像"
                              "模型名（一个词，不含空白和控制字符）。[/]")
    elif session.fixed_model:
        session.console.print(f"[yellow]没有换：{escape(session.fixed_model)}[/]")
    else:
        session.model = argument
        session.console.print(f"从下一次请求起用模型 {escape(argument)}（运行记录里每次模型"
                              "调用都记着回答它的模型）。子 agent（delegate）和压缩摘要仍用启动时"
                              "的模型。")
