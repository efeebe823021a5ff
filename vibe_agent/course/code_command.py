"""`python -m vibe_agent code`: the terminal agent on a course task or on your own folder.

    code --task NAME [--mode ...] [--approve ask|auto-edit|yolo] [--keep]   a fresh copy
    code DIR         [--mode ...] [--approve ...] [--test-command CMD]      your own project

Which model answers is always printed on screen: the scripted known-fix model
(replays the task's known fix; not an LLM), the local SmolLM2, or your provider.
After a turn that changed files, the tests give the verdict: the held-out judge on a
course task, the project's own test command otherwise. A task's fresh copy is removed
when the session ends, unless `--keep` asks to keep it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from ..coding import remove_tree
from ..compact import model_summarizer, scripted_summarizer
from ..memory import MemoryFile
from ..registry import ToolRegistry
from ..sandbox import Action
from ..terminal import APPROVALS, Session
from .client import make_client, resolve_mode, settings
from .judge import verdict_line
from .known_fix import KNOWN_FIX_LABEL, KNOWN_FIX_MODEL_NAME, known_fix_model
from .tasks import SUITE_DIR, BugFixTask, copy_repo, load_suite

CODE_MODES = ("offline", "local", "live")
EXIT_CONFIG = 2
OFFLINE_ON_YOUR_PROJECT = (
    "注意：离线模式下回答你的是已知修复模型——它不是 LLM，"
    "只会重放课程任务自带的修复，在你自己的项目上什么也做不了。要用真正的模型：加 --mode local"
    "（本机的 SmolLM2，先按 README 装好 requirements-local.txt），或者设置 OPENAI_BASE_URL、"
    "OPENAI_API_KEY 和 VIBE_AGENT_MODEL，指向一个 OpenAI 兼容的服务。")


def _positive_tokens(text: str) -> int:
    """--context-budget's value: a whole number of tokens, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} 不行：要写一个正整数（多少个 tokens），例如 6000；不写这个选项就不自动压缩")
    return value


def add_parser(sub: Any) -> None:
    """Add the `code` command to the CLI's subparsers."""
    code = sub.add_parser("code", help="在终端里打开 coding agent（课程任务或你自己的文件夹）")
    code.add_argument("folder", nargs="?", type=Path,
                      help="在这个文件夹里工作（你自己的项目）；和 --task 二选一")
    code.add_argument("--task", metavar="名字",
                      help="课程任务的名字（vibe_agent/data/tasks/ 里的文件夹名）："
                           "复制一份新的再打开")
    code.add_argument("--mode", choices=CODE_MODES,
                      help="谁来回答：offline（没有 key 时的默认：已知修复模型，重放任务自带的"
                           "修复，不是 LLM，不联网）、local（本机 SmolLM2）、"
                           "live（你配置的在线服务）")
    code.add_argument("--approve", choices=APPROVALS, default="ask",
                      help="审批：ask（写文件和运行命令前都问，默认）、auto-edit（只问命令）、"
                           "yolo（什么都不问）")
    code.add_argument("--no-stream", action="store_true", help="不用流式输出（有的服务不支持）")
    code.add_argument("--max-iters", type=int, default=20, help="每一轮最多调用模型几次（默认 20）")
    code.add_argument("--trajectory", type=Path, metavar="PATH",
                      help="运行记录保存到这里（默认：~/.local/state/vibe_agent/sessions/；"
                           "--task 加 --keep 时放在任务旁边）")
    code.add_argument("--context-budget", type=_positive_tokens, metavar="TOKENS",
                      help="一轮的 prompt 超过这么多 tokens 就自动压缩历史（第 11 课；"
                           "不写：不自动压缩，/compact 随时可用）")
    code.add_argument("--test-command", metavar="命令",
                      help="每一轮改了文件之后，在沙箱里运行这条测试命令给出判定（你自己的项目；"
                           "不写：用 AGENTS.md 里写的，或者检测到 pytest 项目时用 "
                           "python -m pytest -q）")
    code.add_argument("--keep", action="store_true",
                      help="--task：会话结束后留下复制出来的工作区（默认删除），并打印它在哪里")
    code.add_argument("--mcp", action="append", default=[], metavar="名字=命令",
                      help="再接一个 MCP 服务器的工具（第 14 课），例如 "
                           "course='python -m vibe_agent.course.mcp_server'；可以写多次")
    code.add_argument("--no-delegate", action="store_true",
                      help="不提供只读的子 agent 工具 delegate（第 13 课）")
    code.add_argument("--notify-after", type=float, metavar="秒",
                      help="一轮超过这么多秒才结束时响一声铃（终端的 bell；不写：不响）")
    code.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Open the session; the exit status (0 after EOF or /exit, 2 for a bad command line)."""
    console = Console(highlight=False)
    if (args.folder is None) == (args.task is None):
        return _usage_error("请给出一个文件夹，或者用 --task 选一个课程任务（二选一）。")
    if args.max_iters < 1:
        return _usage_error("--max-iters 至少是 1。")
    if args.keep and args.task is None:
        return _usage_error("--keep 只用于 --task（你自己的文件夹本来就不会被删）。")
    servers = [_server(text) for text in args.mcp]
    if problem := _servers_problem(servers):
        return _usage_error(problem)
    task: BugFixTask | None = None
    if args.task is not None:
        task = _find_task(args.task)
        if task is None:
            tasks, _ = load_suite(SUITE_DIR)
            names = "、".join(sorted(t.name for t in tasks))
            return _usage_error(f"没有叫 {args.task!r} 的课程任务。可选的有：{names}")
    elif not args.folder.resolve().is_dir():
        return _usage_error(f"{args.folder} 不是一个文件夹。")
    # Every check is done: only now is anything copied or created
    home = Path(tempfile.mkdtemp(prefix="vibe-code-")) if task else None
    try:
        return _open(args, console, task, home, servers)
    finally:
        if home is not None and args.keep:
            console.print(f"工作区留在：{home / 'workspace'}", markup=False, soft_wrap=True)
        elif home is not None:
            _remove(home, console)


def _remove(home: Path, console: Console) -> None:
    """Delete a task's temporary folder; say so (and say it when that fails)."""
    try:
        remove_tree(home)
    except OSError as exc:
        console.print(f"没能删除临时工作区 {home}（{exc.strerror or exc}），请手动删除。",
                      markup=False)
        return
    console.print(f"已删除这次的临时工作区 {home}（想留下它，用 --keep）。", markup=False,
                  style="dim", soft_wrap=True)


def _open(args: argparse.Namespace, console: Console, task: BugFixTask | None,
          home: Path | None, servers: list[tuple[str, list[str]] | None]) -> int:
    """Copy the task (if any), start the MCP servers and run the session."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if task is not None and home is not None:
        root = copy_repo(task, home / "workspace")
        trajectory = args.trajectory or (home / "trajectory.json" if args.keep else (
            _state_dir() / "sessions" / f"task-{task.name}-{stamp}.json"))
        console.print(f"已把任务复制到一个新的工作区：{root}", markup=False, soft_wrap=True)
    else:
        root = args.folder.resolve()
        trajectory = args.trajectory or _state_dir() / "sessions" / (
            f"{root.name}-{_digest(root)}-{stamp}.json")
    client, model, label = _client(args.mode, task)
    key = task.name if task else f"{root.name}-{_digest(root)}"
    summarize = scripted_summarizer if model == KNOWN_FIX_MODEL_NAME else model_summarizer(
        client, model=model)
    from ..mcp_tools import MCPServerError, mcp_registry  # the SDK imports slowly: only now

    session: Session | None = None

    def approve(action: Action) -> bool | str:
        """MCP calls obey the session's approval rule (--approve), asked at its prompt."""
        assert session is not None, "no tool runs before the session does"
        return session.rule(action)

    with ExitStack() as stack:
        mcp_tools = []
        for name, command in filter(None, servers):
            try:
                mcp_tools.append(stack.enter_context(mcp_registry(command, name=name,
                                                                  policy=approve)))
            except MCPServerError as exc:
                Console(stderr=True, highlight=False).print(
                    f"MCP 服务器 {name} 没有启动起来（--mcp {name}=…）：{exc}", markup=False)
                return EXIT_CONFIG
        session = Session(client, model, root, console, approve=args.approve, label=label,
                          stream=not args.no_stream, max_iters=args.max_iters,
                          trajectory=trajectory, suggested=task.prompt if task else None,
                          tools=ToolRegistry.combine(*mcp_tools), summarize=summarize,
                          memory=MemoryFile(_state_dir() / "memory" / f"{key}.md"),
                          context_budget=args.context_budget,
                          delegate=not args.no_delegate, test_command=args.test_command,
                          judge=verdict_line(task) if task else None,
                          state_dir=home or _state_dir() / "undo",
                          notify_after=args.notify_after,
                          notice=OFFLINE_ON_YOUR_PROJECT if (
                              model == KNOWN_FIX_MODEL_NAME and task is None) else "")
        return session.run()


def _server(text: str) -> tuple[str, list[str]] | None:
    """NAME=COMMAND as (name, argv); None when it is not written that way."""
    name, _, command = text.partition("=")
    try:
        argv = shlex.split(command) if command.strip() else []
    except ValueError:  # an unclosed quote
        return None
    return (name.strip(), argv) if name.strip() and argv else None


def _servers_problem(servers: list[tuple[str, list[str]] | None]) -> str | None:
    """What is wrong with the --mcp options, in Chinese; None when nothing is."""
    if not servers:
        return None
    if None in servers:
        return ("--mcp 要写成 名字=命令，例如 course='python -m vibe_agent.course.mcp_server'"
                "（引号要成对）。")
    from ..mcp_tools import SERVER_NAME

    names = [name for name, _ in filter(None, servers)]
    for name in names:
        if not SERVER_NAME.fullmatch(name):
            return (f"--mcp 的服务器名 {name!r} 不能用：只能有字母、数字、- 和单个 _"
                    f"（它是工具名 mcp__{{服务器名}}__{{工具名}} 的一部分，里面不能有 __）。")
    if len(set(names)) < len(names):
        twice = next(name for name in names if names.count(name) > 1)
        return f"--mcp 的服务器名 {twice!r} 用了两次：每个服务器要有自己的名字。"
    return None


def _client(mode: str | None, task: BugFixTask | None) -> tuple[Any, str, str]:
    """The client, the model name and the on-screen label for `mode`."""
    chosen = mode or resolve_mode(None, settings())
    if chosen in ("offline", "replay", "reference"):  # from VIBE_AGENT_MODE: no network
        return (known_fix_model([task] if task else []).client(), KNOWN_FIX_MODEL_NAME,
                f"（离线模式：{KNOWN_FIX_LABEL}）")
    client = make_client(chosen)
    return client, client.model, f"（{client.describe()}）"


def _find_task(name: str) -> BugFixTask | None:
    tasks, _ = load_suite(SUITE_DIR)
    return next((task for task in tasks if task.name == name), None)


def _state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "vibe_agent"


def _digest(path: Path) -> str:
    return hashlib.sha256(str(path).encode()).hexdigest()[:8]


def _usage_error(text: str) -> int:
    Console(stderr=True, highlight=False).print(f"命令行参数有误：{text}", markup=False)
    return EXIT_CONFIG

