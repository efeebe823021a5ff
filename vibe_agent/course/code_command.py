"""`python -m vibe_agent code`: the terminal agent on a course task or on your own folder.

    code --task NAME [--mode ...] [--approve ask|auto-edit|yolo] [--keep]   a fresh copy
    code DIR         [--mode ...] [--approve ...] [--test-command CMD]      your own project
    code -p "request" [DIR | --task NAME] [--output-format json]          one request, no prompt
    code ... --model NAME                                                 live: the model to ask

Which model answers is always printed on screen: the scripted known-fix model
(replays the task's known fix; not an LLM), the local SmolLM2, or your provider.
After a turn that changed files, the tests give the verdict: the held-out judge on a
course task, the project's own test command otherwise. A task's fresh copy is removed
when the session ends, unless `--keep` asks to keep it.

`-p` runs one request and exits (vibe_agent.course.headless: exit codes 0 done,
1 a brake, 2 a bad command line, 3 refused, 4 the model service failed, 130 Ctrl-C).
With no terminal to ask (stdin is not a terminal), `ask` refuses what it would ask,
and says so once at the start, in an interactive run as in `-p`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from ..coding import remove_tree
from ..compact import model_summarizer, scripted_summarizer
from ..memory import MemoryFile
from ..permissions import SettingsError, load_rules
from ..registry import ToolRegistry
from ..sandbox import Action
from ..sessions import SessionError, add_arguments, chosen, last_file, place_of
from ..terminal import APPROVALS, Session
from .chinese_argparse import positive_int_type
from .client import make_client, resolve_mode, settings
from .headless import EXIT_CODES_HELP, no_terminal_note, refuse_unasked, run_once
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
LOCAL_MODEL = "本机模式（--mode local）只有 SmolLM2 一个模型。要换模型：用 --mode live。"
OFFLINE_MODEL = ("离线模式下回答的是已知修复模型（不是 LLM），没有别的模型可换。要用真正的模型，"
                 "重新启动：--mode local（本机的 SmolLM2），或者设置 OPENAI_BASE_URL、"
                 "OPENAI_API_KEY 后用 --mode live --model 名字。")


# --context-budget's value: a whole number of tokens, at least 1
_positive_tokens = positive_int_type(
    "{text!r} 不行：要写一个正整数（多少个 tokens），例如 6000；不写这个选项就不自动压缩")


def task_names() -> list[str]:
    """The course tasks `--task` accepts."""
    tasks, _ = load_suite(SUITE_DIR)
    return sorted(task.name for task in tasks)


def add_parser(sub: Any) -> None:
    """Add the `code` command to the CLI's subparsers."""
    code = sub.add_parser("code", help="在终端里打开 coding agent（课程任务或你自己的文件夹）",
                          epilog=f"课程任务（--task 名字）：{', '.join(task_names())}\n\n"
                                 + EXIT_CODES_HELP)
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
    add_arguments(code)  # --continue, --resume (vibe_agent/sessions.py)
    # Choosing the model and running headless (issue 28)
    code.add_argument("--model", metavar="名字",
                      help="live 模式下问哪个模型（和 VIBE_AGENT_MODEL 一样；会话里用 /model 换）")
    code.add_argument("-p", "--print", dest="request", metavar="请求",
                      help="只做这一个请求，不进入交互：回答打印到标准输出，进度到标准错误，"
                           "然后退出（退出码见下）；写 /task 发送课程任务的描述")
    code.add_argument("--output-format", choices=("text", "json"), default="text",
                      help="-p 的输出：text（只有回答，默认）或 json（一个 JSON 对象：回答、"
                           "停止原因、判定、tokens、调用次数、运行记录的路径）")
    code.add_argument("--notify-after", type=float, metavar="秒",
                      help="一轮超过这么多秒才结束时响一声铃（终端的 bell；不写：不响）")
    code.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Open the session; the exit status (0 after EOF or /exit, 2 for a bad command line)."""
    # With -p, stdout is the answer's (or the JSON object's) alone
    console = Console(highlight=False, stderr=args.request is not None)
    if args.folder is None and args.task is None:  # --continue: here; --resume: its own
        args.folder, args.task = place_of(args)
    if (args.folder is None) == (args.task is None):
        return _usage_error("请给出一个文件夹，或者用 --task 选一个课程任务（二选一）。")
    if args.max_iters < 1:
        return _usage_error("--max-iters 至少是 1。")
    if args.keep and args.task is None:
        return _usage_error("--keep 只用于 --task（你自己的文件夹本来就不会被删）。")
    if args.output_format == "json" and args.request is None:
        return _usage_error("--output-format json 只用于 -p（一个请求，一个 JSON 对象）。")
    args.mode = args.mode or resolve_mode(None, settings())
    if args.model is not None and args.mode != "live":
        return _usage_error(f"--model 只用于 live 模式（现在是 {args.mode}：" + (
            "回答的是本机的 SmolLM2，没有别的模型）。" if args.mode == "local" else
            "回答的是已知修复模型，它不是 LLM）。要用在线服务，设置 OPENAI_BASE_URL 和 "
            "OPENAI_API_KEY。"))
    if args.request is not None and not args.request.strip():
        return _usage_error("-p 后面要写请求，例如 -p \"修好失败的测试\""
                            "（--task 时可以写 /task）。")
    servers = [_server(text) for text in args.mcp]
    if problem := _servers_problem(servers):
        return _usage_error(problem)
    task: BugFixTask | None = None
    if args.task is not None:
        task = _find_task(args.task)
        if task is None:
            return _usage_error(f"没有叫 {args.task!r} 的课程任务。可选的有："
                                f"{', '.join(task_names())}")
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
    try:  # the project's permission rules, whole or not at all
        rules = load_rules(root)
    except SettingsError as exc:
        Console(stderr=True, highlight=False).print(f"设置文件有误，会话没有开始：{exc}",
                                                    markup=False)
        return EXIT_CONFIG
    if args.model is not None:  # the same as VIBE_AGENT_MODEL, for this process
        os.environ["VIBE_AGENT_MODEL"] = args.model
    client, model, label = _client(args.mode, task)
    key = task.name if task else f"{root.name}-{_digest(root)}"
    try:  # --continue / --resume: the conversation to go on with (sessions.py)
        resume = chosen(args, last_file(_state_dir(), key), task.name if task else None)
    except SessionError as exc:
        return _usage_error(str(exc))
    summarize = scripted_summarizer if model == KNOWN_FIX_MODEL_NAME else model_summarizer(
        client, model=model)
    session: Session | None = None

    def approve(action: Action) -> bool | str:
        """MCP calls obey the session's approval rule (the project's permission rules,
        then --approve), asked at its prompt."""
        assert session is not None, "no tool runs before the session does"
        return session.rule(action)

    with ExitStack() as stack:
        mcp_tools = []
        for name, command in filter(None, servers):
            # the SDK costs ~0.7 s of CPU to import: only a session with a server pays it
            from ..mcp_tools import MCPServerError, mcp_registry

            try:
                mcp_tools.append(stack.enter_context(mcp_registry(command, name=name,
                                                                  policy=approve)))
            except MCPServerError as exc:
                Console(stderr=True, highlight=False).print(
                    f"MCP 服务器 {name} 没有启动起来（--mcp {name}=…）：{exc}", markup=False)
                return EXIT_CONFIG
        headless = args.request is not None
        session = Session(client, model, root, console, approve=args.approve, label=label,
                          stream=not (args.no_stream or headless), echo_answer=not headless,
                          max_iters=args.max_iters,
                          trajectory=trajectory, suggested=task.prompt if task else None,
                          tools=ToolRegistry.combine(*mcp_tools), summarize=summarize,
                          memory=MemoryFile(_state_dir() / "memory" / f"{key}.md"),
                          context_budget=args.context_budget,
                          delegate=not args.no_delegate, test_command=args.test_command,
                          judge=verdict_line(task) if task else None, rules=rules,
                          state_dir=home or _state_dir() / "undo", resume=resume,
                          history=_state_dir() / "history" / f"{key}.txt",
                          notify_after=args.notify_after,
                          notice=OFFLINE_ON_YOUR_PROJECT if (
                              model == KNOWN_FIX_MODEL_NAME and task is None) else "",
                          fixed_model=OFFLINE_MODEL if model == KNOWN_FIX_MODEL_NAME else
                          LOCAL_MODEL if args.mode == "local" else "")
        if not sys.stdin.isatty() and (note := no_terminal_note(args.approve)):
            session.ask = refuse_unasked  # never reads stdin: its lines are requests, not answers
            session.notice = "\n".join(filter(None, [session.notice, note]))  # said once
        if headless:
            return run_once(session, args.request, json_output=args.output_format == "json")
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
    Console(stderr=True, highlight=False).print(f"命令行参数有误：{text}", markup=False,
                                                soft_wrap=True)  # never folded mid-word
    return EXIT_CONFIG

