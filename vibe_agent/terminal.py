"""The terminal coding agent: the course's loop, tools and guards as one program.

    python -m vibe_agent code --task NAME      a course task, in a fresh copy
    python -m vibe_agent code DIR              your own project

Every part comes from a lesson; this file only wires them to a prompt:

    prompt line ──> run_agent (04) ── brakes (05) ── trace, saved after each turn (07)
                        │   streamed text shown as it arrives, as Markdown (15, screen.py)
                        │   compaction past a token budget, /compact (11)
                        │   system prompt + AGENTS.md + notes, todo_write, remember (12)
                        ├─> coding tools in the workspace, commands in the sandbox (08)
                        │   every write and command through the approval rule below
                        └─> delegate: a read-only sub-agent (13); tools of MCP servers (14)

One message is one request (typed at `vibe_agent.prompt_input`'s prompt: history,
Tab, several lines, @path attaches a file, !command runs one in the sandbox);
the conversation goes on (`run_agent(layers=[Conversation(...)])`), so
the model sees what it did before. Before each turn the workspace is checkpointed
(`vibe_agent.undo`: /undo puts it back byte for byte, or refuses); after a turn that
changed files the tests give a verdict (the held-out judge of 09–10 on a course task,
the project's test command otherwise, `vibe_agent.verdict`), then the turn's own model
calls, tokens and seconds. Ctrl-C stops the running turn only: the calls it
left unanswered are answered with "interrupted", the history stays valid, and the
prompt comes back. EOF (Ctrl-D) or /exit ends the session with status 0. The saved
trajectory keeps the person's own turns too, so `code --continue` / `--resume` can go on
with a conversation, and /clear starts a fresh one (`vibe_agent.sessions`).

Approval modes, like Claude Code's permission modes:
    ask        every write (its diff shown) and every command is asked first
    auto-edit  writes inside the workspace go ahead, commands are asked
    yolo       nothing is asked: the sandbox is the only boundary
In ask and auto-edit, every call of an MCP server's tool is asked too (it runs outside
the sandbox, as you), unless the server marks the tool read-only (lesson 14). The modes
are defaults: the project's rules in .vibe_agent/settings.json come first (deny beats ask
beats allow; `vibe_agent.permissions`), and answering A writes one for next time.
A diff is shown whole (folded, never cropped; `diff_line`), and a write that was not
asked still shows its diff once it is done. Text from a model, a tool, a file or a
server reaches the screen through `visible`, which escapes control characters.

Slash commands are a table (`COMMANDS`); `@command` adds one.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from . import permissions
from .code_agent import code_agent
from .coding import TOOL_NAMES, Workspace, snapshot, workspace_diff
from .compact import Compaction, Summarizer, compact, scripted_summarizer
from .layers import Conversation
from .loop import AgentResult, StopReason, run_agent
from .memory import MemoryFile, load_project_memory, session_banner
from .plan import render_todos
from .registry import ToolRegistry
from .reply import clean_text
from .sandbox import YES, Action, Policy, why_not_isolated
from .screen import THINKING, Screen, doing, model_lines, next_call, step_line
from .sessions import Resume, clear_command, init_command, restore, write
from .stream import Streaming
from .trace import Trace, TraceStep, shorten
from .undo import Checkpoint, UndoError, remove_store, session_store
from .verdict import find_test_command, run_project_tests

if TYPE_CHECKING:  # imported when first used: prompt_toolkit is only needed at a terminal
    from .prompt_input import PromptInput

APPROVALS = ("ask", "auto-edit", "yolo")
MAX_SHOWN_DIFF_LINES = 80  # rows of a diff shown before an approval, at most
MIN_SHOWN_DIFF_ROWS = 10  # ... at least, however small the terminal
COMPACT_DIFF_ROWS = 12  # rows of a write's diff shown after the fact (auto-edit, yolo)
SHOW_ALL = "a"  # the answer that shows the rest of a diff before answering y/n
INTERRUPTED = "[interrupted by the user: this call was not finished]"
MAX_UNDO_TURNS = 20  # /undo goes back at most this many turns (older checkpoints are dropped)
UNDONE_NOTE = ("[The user ran /undo: the workspace is back as it was before your previous "
               "turn (restored or removed: {paths}). What that turn changed is gone; read a "
               "file again before you edit it.]")


def visible(text: str, *, multiline: bool = False) -> str:
    """`text` with every character that could hide or change what a person sees shown
    escaped (\\r, \\x1b, \\u202e ...): control characters (C0, DEL and the C1 codes
    U+0080-U+009F), format characters such as the bidi overrides, line and paragraph
    separators, and lone surrogates. So a command cannot hide what it really does behind
    a carriage return, and a model, a file or a server cannot clear the screen or
    recolour it with an ANSI sequence. Every text from a model, a tool, a file or a
    server goes through here before it reaches the terminal.

    Each character is escaped on its own, so text cut anywhere (streamed pieces) gives
    the same screen as the whole text.

    Args:
        text: the text to show.
        multiline: keep newlines and tabs (an answer, a diff, AGENTS.md). By default
            they are escaped too: an approval shows one honest line.
    """
    kept = "\n\t" if multiline else ""
    out = []
    for char in text:
        if char not in kept and unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            out.append(char.encode("unicode_escape").decode("ascii"))
        else:
            out.append(char)
    return "".join(out)


@dataclass
class Session:
    """One terminal session: the conversation, the workspace and what was shown."""

    client: openai.OpenAI
    model: str
    root: Path
    console: Console
    approve: str = "ask"
    label: str = ""  # who answers, e.g. "（离线模式：已知修复模型重放…，不是 LLM）"
    system_prompt: str | None = None  # None: lesson 09's rules + AGENTS.md + notes (12)
    stream: bool = True
    max_iters: int = 20
    trajectory: Path | None = None
    suggested: str | None = None  # the course task's prompt, sent by /task
    ask: Callable[[str], str] | None = None  # how a question reaches the person
    tools: ToolRegistry | None = None  # more tools, e.g. an MCP server's (lesson 14)
    timings: bool = True  # show seconds per turn (off: output that is the same every run)
    memory: MemoryFile | None = None  # notes kept across sessions (lesson 12)
    summarize: Summarizer = scripted_summarizer  # for compaction (lesson 11)
    context_budget: int | None = None  # compact when a round's prompt passes it
    delegate: bool = True  # offer a read-only sub-agent (lesson 13)
    test_command: str | None = None  # run after a turn that changed files (None: found, 12)
    judge: Callable[[Path], str] | None = None  # a course task's verdict instead (09-10)
    state_dir: Path | None = None  # where the undo store goes (None: a temporary folder)
    notice: str = ""  # a paragraph for the banner (e.g. what offline mode can do)
    resume: Resume | None = None  # --continue / --resume: what goes on, where (sessions.py)
    rules: permissions.Rules = field(default_factory=permissions.Rules)  # .vibe_agent/settings
    history: Path | None = None  # the prompt's history file, per project (None: this session)
    notify_after: float | None = None  # ring the bell after a turn longer than this (s)
    messages: list[dict[str, Any]] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)
    undo: list[Checkpoint] = field(default_factory=list)  # the workspace before each turn
    registry: ToolRegistry = field(init=False)
    workspace: Workspace = field(init=False)
    reader: PromptInput | None = field(default=None, init=False)  # made when first typed at
    written: dict[str, str | None] = field(default_factory=dict, init=False)  # unasked: old text
    described: set[tuple[str, str]] = field(default_factory=set, init=False)  # (server, tool)
    echo_answer: bool = True  # print the answer (off: `code -p` prints it on stdout itself)
    fixed_model: str = ""  # why /model cannot switch (offline: the known-fix model is no LLM)
    result: AgentResult | None = field(default=None, init=False)  # the last turn's (None: Ctrl-C)
    verdict: str = field(default="", init=False)  # the last turn's verdict line ("": none)

    def __post_init__(self) -> None:
        if self.approve not in APPROVALS:
            raise ValueError(f"approve must be one of {APPROVALS}, not {self.approve!r}")
        self.root = Path(self.root).resolve()
        self.start = snapshot(self.root)
        # The tools run in this (the main) thread, with no time limit of the registry's:
        # an approval question is then asked where Ctrl-C can reach it, and a person
        # thinking it over is not a tool running late. Commands keep the sandbox's own
        # time limit, so nothing can hang.
        self.workspace = Workspace(self.root, Policy(self.rule))  # @path, Tab, !command
        coding = ToolRegistry()
        for name in TOOL_NAMES:  # a Workspace per tool: the rules see which tool asks
            workspace = Workspace(self.root, Policy(functools.partial(self.rule, tool=name)))
            coding.register(getattr(workspace, name), timeout=None)
        agent = code_agent(self.client, self.model, self.root, coding, tools=self.tools,
                           memory=self.memory, delegate=self.delegate)  # bench's `code` too
        self.todos, self.registry = agent.todos, agent.registry
        self.prompt_from_files = self.system_prompt is None  # /clear reads AGENTS.md again
        if self.system_prompt is None:
            self.system_prompt = agent.system_prompt
        self.compaction = Compaction(self.summarize, budget=self.context_budget,
                                     workspace=self.root) if self.context_budget else None
        self.store = session_store(self.state_dir)  # file copies for /undo, on disk
        # Found now, before any turn: a model that rewrites AGENTS.md cannot choose it
        self.tests = find_test_command(self.root, self.test_command)
        self.screen = Screen(self.console)  # the spinner and the answer as Markdown
        if self.resume is not None and self.resume.saved is not None:
            self.notice = "\n".join(filter(None, [self.notice, restore(self, self.resume.saved)]))

    # --- approvals ----------------------------------------------------------------

    def rule(self, action: Action, tool: str = "") -> bool | str:
        """The approval rule the tools obey: the project's permission rules (deny, ask,
        allow), then the approval mode (see the module docstring and permissions.py)."""
        call = permissions.call_of(action.kind, action.detail, tool)
        decision, by = self.rules.decide(call, permissions.mode_default(
            self.approve, action.kind, getattr(action, "read_only", False)))
        if decision == "deny":
            self.end_line()
            self.console.print(visible(f"✗ 项目的权限规则 {by} 不允许：{action.detail}"),
                               style="red", markup=False, highlight=False, soft_wrap=True)
            return permissions.DENIED.format(rule=by)
        if decision == "allow":
            if action.kind == "write":  # its diff is shown once it is done (show_written)
                self.written.setdefault(action.detail, self.text_of(action.detail))
            return True
        self.end_line()
        whole = ""  # the whole diff, when part of it did not fit on the screen
        if action.kind == "write":
            whole = self.show_write(action)
            question = f"允许写入 {visible(action.detail)} 吗？"
        elif action.kind == "tool":
            self.show_tool_call(action)
            question = "允许调用吗？"
        else:
            self.console.print("[bold yellow]agent 想运行命令：[/]", end="")
            self.console.print(visible(action.detail), markup=False, highlight=False)
            question = "允许运行吗？"
        always = permissions.narrowest_rule(call) if self.rules.path is not None else None
        if always:  # the answer A: allow, and write this rule for next time (offered only
            question = visible(permissions.offer(always)) + "\n" + question  # to a person)
        answer = self.ask or (lambda text: self.console.input(text, markup=False))
        try:
            reply = answer(question + (f"[y/N，{SHOW_ALL} 显示全部] " if whole else "[y/N] "))
            if whole and reply.strip().lower() == SHOW_ALL and not (
                    always and reply.strip() == permissions.ALWAYS):
                self.print_diff(whole, rows=None)
                reply = answer(question + "[y/N] ")
        except EOFError:  # (Ctrl-C is not caught: it stops the whole turn)
            self.console.print()
            return "the user did not answer (the input ended). Do not try this again."
        if always and reply.strip() == permissions.ALWAYS:
            self.console.print(visible(permissions.remember(self.rules, always)), markup=False,
                               highlight=False, soft_wrap=True)
            return True
        if reply.strip().lower() in YES:
            self.screen.working(doing(action))  # the spinner again while it runs
            return True
        return "the user said no. Try another way, or ask the user how they want it done."

    def show_write(self, action: Action) -> str:
        """The diff a write would make, coloured (new content when the action carries it);
        returns the whole diff when part of it did not fit on the screen, else ""."""
        self.console.print(f"[bold yellow]agent 想写入[/] {escape(visible(action.detail))}")
        content = action.content
        if content is None:
            return ""
        before = self.text_of(action.detail)
        diff = _diff_texts({} if before is None else {action.detail: before},
                           {action.detail: content})
        return diff if self.print_diff(diff, more=f"（回答 {SHOW_ALL} 先显示全部）") else ""

    def show_written(self) -> None:
        """The diffs of the writes nobody was asked about (auto-edit, yolo), compact and
        after the fact: what the files are now against what they were."""
        for path, before in self.written.items():
            now = self.text_of(path)
            diff = _diff_texts({} if before is None else {path: before},
                               {} if now is None else {path: now}, context=1)
            hunks = "\n".join(diff.split("\n")[2:])  # the tool's line named the file
            self.print_diff(hunks, rows=COMPACT_DIFF_ROWS, more="（/diff 看全部）", indent=4)
        self.written.clear()

    def text_of(self, path: str) -> str | None:
        """The text of a workspace file now (None: there is no such file)."""
        target = self.root / path
        return target.read_text("utf-8", "replace") if target.is_file() else None

    def print_diff(self, diff: str, rows: int | None = 0, more: str = "",
                   indent: int = 0) -> int:
        """Print a unified diff with every line whole: folded at the terminal's width,
        never cropped (`diff_line`). It takes at most `rows` rows of the screen (0: the
        screen's share, None: no limit); the lines that did not fit are counted, not
        shown, and the count is printed with `more`. Returns that count."""
        lines = diff.removesuffix("\n").split("\n") if diff else []
        budget = self.diff_rows() if rows == 0 else rows
        width = max(self.console.width - indent, 10)
        used = 0
        for number, line in enumerate(lines):
            if budget is not None and len(line) > 4 * width * (budget - used + 1):
                text = None  # far too long to fit: not even rendered
            else:
                text = diff_line(line)
                used += len(text.wrap(self.console, width))
            if text is None or budget is not None and used > budget:
                hidden = len(lines) - number
                self.console.print(f"{' ' * indent}[yellow]… 还有 {hidden} 行没有显示"
                                   f"{escape(more)}[/]")
                return hidden
            self.console.print(Padding.indent(text, indent))
        return 0

    def diff_rows(self) -> int:
        """The screen's share for a diff: the rows left for it above the question."""
        return max(MIN_SHOWN_DIFF_ROWS, min(MAX_SHOWN_DIFF_LINES, self.console.height - 8))

    def show_tool_call(self, action: Action) -> None:
        """An MCP call to approve: the server, the tool, the arguments, what the server's
        annotations claim, and the first time, the description the model reads."""
        from .mcp_tools import MCPCall  # loaded already: only an MCP server's tools ask this

        if not isinstance(action, MCPCall):
            self.console.print("[bold yellow]agent 想调用工具：[/]", end="")
            self.console.print(visible(action.detail), markup=False, highlight=False)
            return
        self.console.print("[bold yellow]agent 想调用 MCP 工具：[/]", end="")
        self.console.print(f"服务器 {visible(action.server)} 的 {visible(action.tool)}"
                           f"{action.warning}", markup=False, highlight=False)
        arguments = json.dumps(action.arguments, ensure_ascii=False)
        self.console.print(f"  参数：{visible(arguments)}", markup=False, highlight=False)
        if (action.server, action.tool) not in self.described:  # the first call only
            self.described.add((action.server, action.tool))
            self.console.print("  工具的描述（服务器写的，模型读到的就是这段）：", end="")
            self.console.print(visible(action.description) or "（没有描述）", markup=False,
                               highlight=False)

    # --- one turn -----------------------------------------------------------------

    def turn(self, line: str) -> None:
        """Send one prompt line and run the loop until the model answers (or a brake)."""
        self.screen.working(THINKING)  # a sign of life from Enter on
        checkpoint = self.checkpoint()
        self.record("request", line)  # the trajectory keeps the person's own words
        first_step = len(self.trace)
        self.result, self.verdict = None, ""
        self.written.clear()
        printed: list[str] = []

        def on_text(piece: str) -> None:
            printed.append(piece)
            self.screen.add(piece)  # Markdown, block by block (escaped: `visible`)

        started = time.perf_counter()
        try:
            result = run_agent(self.client, line, self.registry, model=self.model,
                               max_iters=self.max_iters, system_prompt=self.system_prompt or "",
                               trace=self.trace, on_step=self.show_step, layers=[
                                   Conversation(self.messages), self.compaction,
                                   Streaming(on_text) if self.stream else None])
        except KeyboardInterrupt:
            self.screen.finish()
            self.console.print()
            self.close_interrupted_turn()
            self.show_written()  # a write done before Ctrl-C is still shown
            self.console.print("[yellow]⏹ 已中断这一轮；对话记录仍然有效，可以接着说。[/]")
            return
        finally:
            self.save()
        self.end_line()
        self.result = result
        if self.echo_answer and not printed and result.answer:
            self.screen.answer(result.answer)
        if result.stop_reason is not StopReason.ANSWERED:
            self.console.print(f"[yellow]⏹ {escape(visible(result.message))}[/]")
        steps = self.trace[first_step:]
        if any(step.kind == "tool" for step in steps):
            self.show_verdict(checkpoint)
        self.console.print(f"[dim]（{self.turn_figures(steps, started)}）[/]")
        self.screen.notify(time.perf_counter() - started, self.notify_after)

    # --- before and after a turn: the checkpoint, the verdict, the figures -----------

    def checkpoint(self) -> Checkpoint | None:
        """The workspace before a turn, for /undo (the last MAX_UNDO_TURNS are kept)."""
        try:
            checkpoint = self.store.checkpoint(self.root)
        except OSError as exc:
            self.console.print(f"[yellow]没能在这一轮之前存下工作区（{escape(str(exc))}），"
                               "这一轮不能 /undo。[/]")
            return None
        self.undo.append(checkpoint)
        del self.undo[:-MAX_UNDO_TURNS]
        return checkpoint

    def show_verdict(self, checkpoint: Checkpoint | None) -> None:
        """After a turn that called tools: what the tests say, not what the model said."""
        try:
            changed = checkpoint.changes() if checkpoint is not None else None
        except OSError:  # the workspace cannot be read now: the tests still decide
            changed = None
        if changed == []:
            self.verdict = "这一轮没有改动工作区里的文件。"
            self.console.print(self.verdict)
            return
        files = f"改了 {len(changed)} 处 · " if changed else ""
        try:
            if self.judge is not None:
                line = f"判定：{self.judge(self.root)}"
            elif self.tests is not None:
                command, source = self.tests
                outcome = run_project_tests(command, self.root, timings=self.timings)
                line = f"测试（{source}）：{command} → {outcome}"
            else:
                line = ("测试：不知道这个项目怎么运行测试，没有运行（用 --test-command 指定，"
                        "或写进 AGENTS.md）")
        except KeyboardInterrupt:
            line = "测试：被 Ctrl-C 中断了，没有结果"
        self.verdict = files + line
        self.console.print(f"[bold]{escape(visible(self.verdict))}[/]")

    def turn_figures(self, steps: list[TraceStep], started: float) -> str:
        """This turn's model calls, tokens and seconds, and the session's tokens so far."""
        calls = [step for step in steps if step.kind == "model"]
        reported = [step.total_tokens for step in calls if step.total_tokens is not None]
        text = f"这一轮 {len(calls)} 次模型调用"
        if calls and not reported:
            text += "，服务没有报告 usage"
        elif reported:
            text += f"，{sum(reported):,} tokens"
            if len(reported) < len(calls):
                text += f"（{len(calls) - len(reported)} 次调用服务没有报告 usage）"
        if self.timings:
            text += f"，{time.perf_counter() - started:.1f} 秒"
        session = [step.total_tokens for step in self.trace
                   if step.kind == "model" and step.total_tokens is not None]
        return text + (f"；会话合计 {sum(session):,} tokens" if session else "")

    def end_line(self) -> None:
        """Finish the model's streamed words (and clear the spinner) before printing
        anything else."""
        self.screen.finish()

    def close_interrupted_turn(self) -> None:
        """Make the history valid again after Ctrl-C: every tool call answered (only the
        answers after the last assistant message count: a model may reuse an id)."""
        for at in range(len(self.messages) - 1, -1, -1):
            if self.messages[at].get("role") == "assistant":
                answered = {m.get("tool_call_id") for m in self.messages[at + 1:]
                            if m.get("role") == "tool"}
                for call in self.messages[at].get("tool_calls") or []:
                    if call["id"] not in answered:
                        self.messages.append({"role": "tool", "tool_call_id": call["id"],
                                              "content": INTERRUPTED})
                break
        if self.messages and self.messages[-1].get("role") == "user":
            self.messages.append({"role": "assistant",
                                  "content": "[interrupted by the user before an answer]"})
        self.trace.append(TraceStep(round=0, kind="stop", content="用户按了 Ctrl-C",
                                    error_type="KeyboardInterrupt"))

    def show_step(self, step: TraceStep) -> None:
        """A tool step on one compact line: what it read, ran or changed."""
        if step.kind == "compact":
            self.end_line()
            summary = visible(shorten(step.content or "", 90))
            self.console.print(f"[dim]⇣ 压缩了历史：{escape(summary)}[/]")
        if step.kind == "model" and step.decision == "tool_calls":
            self.end_line()  # the model's words before its calls, then a sign of life
            self.screen.working("运行工具")
        if step.kind != "tool":
            return
        self.end_line()  # the model's streamed words end before the step's line
        ok, line = step_line(step, self.timings)  # in Chinese: what was run or changed
        self.console.print(f"  {'[green]▸[/]' if ok else '[red]✗[/]'} {escape(visible(line))}")
        self.show_written()
        self.screen.working(next_call(self.messages))

    def save(self) -> None:
        """Write the trajectory (lesson 07's viewer opens it: `Trace.from_json`)."""
        if self.trajectory is not None:
            self.trajectory.parent.mkdir(parents=True, exist_ok=True)
            temp = self.trajectory.with_suffix(".partial")
            temp.write_text(self.trace.to_json(), encoding="utf-8")
            os.replace(temp, self.trajectory)
            write(self)  # beside it, what --continue / --resume need (sessions.py)

    def record(self, trigger: str, content: str) -> None:
        """A `user` step in the trajectory: what the person did to the conversation."""
        self.trace.append(TraceStep(round=0, kind="user", trigger=trigger,
                                    content=clean_text(content)))

    def add_note(self, trigger: str, note: str) -> None:
        """A note for the model (a user message, English), kept in the trajectory too."""
        self.messages.append({"role": "user", "content": note})
        self.record(trigger, note)
        self.save()

    # --- the prompt ---------------------------------------------------------------

    def banner(self) -> None:
        isolated = why_not_isolated()
        self.console.rule("[bold]Vibe Agent · 终端里的 coding agent[/]")
        for line in model_lines(self.model, self.label):
            self.console.print(visible(line), markup=False)
        if self.notice:
            self.console.print(f"[yellow]{escape(self.notice)}[/]")
        self.console.print(f"工作区：{escape(visible(str(self.root)))}")
        self.console.print(f"审批：{self.approve}（{APPROVAL_NOTES[self.approve]}）")
        if self.rules.allow or self.rules.ask or self.rules.deny:
            self.console.print(visible(self.rules.summary()), markup=False)
        if isolated is None:
            self.console.print("沙箱：bubblewrap（命令只看得见工作区，没有网络，拿不到你的 key）")
        else:
            self.console.print(f"[bold red]⚠ 沙箱：没有隔离（{escape(isolated)}）"
                               "——命令能读写你能读写的一切[/]")
            if self.approve == "yolo":
                self.console.print("[bold red]⚠ yolo + 没有隔离：模型想运行什么就运行什么，"
                                   "直接在你的机器上。[/]")
        if self.trajectory:
            self.console.print(f"[dim]运行记录：{escape(str(self.trajectory))}[/]")
        notes = self.memory.text() if self.memory is not None else ""
        self.console.print(visible(session_banner(load_project_memory(self.root), notes),
                                   multiline=True), markup=False)
        if self.suggested:
            self.console.print(f"任务：{escape(visible(self.suggested, multiline=True))}")
            self.console.print("[dim]输入 /task 把这段任务描述发给 agent。[/]")
        self.console.print("[dim]/help 看命令；Ctrl-C 中断一轮；Ctrl-D 或 /exit 退出。[/]")

    def run(self, lines: Iterable[str] | None = None) -> int:
        """The read-eval loop; returns the exit status (0: ended by EOF or /exit).

        Args:
            lines: the prompt lines to play instead of reading the terminal (a notebook,
                a test); each is shown after the prompt as if typed.
        """
        self.banner()
        played = iter(lines) if lines is not None else None
        while True:
            try:
                line = self.read_line(played)
            except EOFError:
                self.console.print()
                break
            except KeyboardInterrupt:
                self.console.print()
                continue
            if line.strip() and self.handle(line.strip()) is STOP:
                break
        self.save()
        remove_store(self.store)  # nothing can be undone after the session
        if self.trajectory:
            self.console.print(f"[dim]运行记录已保存：{escape(str(self.trajectory))}[/]")
        return 0


    def read_line(self, played: Iterator[str] | None) -> str:
        """The next prompt line, typed or played (EOFError when there is none)."""
        if played is None:  # typed: prompt_toolkit at a terminal, a plain line from a pipe
            from .prompt_input import PromptInput

            if self.reader is None:
                self.reader = PromptInput(self.console, COMMANDS, self.workspace, self.history)
            return self.reader.read()
        line = next(played, None)
        if line is None:
            raise EOFError
        self.console.print(f"[bold cyan]› [/]{escape(visible(line))}")
        return line

    def handle(self, line: str) -> object:
        """One prompt line: a slash command, or a request for the model."""
        from .prompt_input import run_shell, with_mentions

        if line.startswith("!"):  # the person's own command, for the model to see next turn
            run_shell(line[1:], self.workspace, self.console,
                      lambda note: self.add_note("!command", note))
            return None
        if not line.startswith("/"):
            self.turn(with_mentions(line, self.workspace, self.console))
            return None
        name, _, rest = line.partition(" ")
        handler = COMMANDS.get(name)
        if handler is None:
            self.console.print(f"没有命令 {escape(name)}。/help 列出所有命令。")
            return None
        return handler.run(self, rest.strip())


APPROVAL_NOTES = {
    "ask": "每次写文件、运行命令、调用（没有标注只读的）MCP 工具前都先问你",
    "auto-edit": "工作区里的修改直接进行，运行命令、调用（没有标注只读的）MCP 工具前先问你",
    "yolo": "什么都不问，沙箱是唯一的边界",
}


def _diff_texts(before: dict[str, str], after: dict[str, str], context: int = 3) -> str:
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


# ---------------------------------------------------------------------------
# Slash commands
# ---------------------------------------------------------------------------

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
        session.print_diff(diff, rows=None if argument == "all" else 0,
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
