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
The approval of an action is `vibe_agent.approval`: a diff is shown whole (folded,
never cropped; `diff_line`), and a write that was not asked still shows its diff once
it is done. Text from a model, a tool, a file or a server reaches the screen through
`visible` (`vibe_agent.screen`), which escapes control characters.

Slash commands are a table (`COMMANDS`, `vibe_agent.commands`); `@command` adds one.
/init's AGENTS.md proposal is `vibe_agent.agents_md`. The names the lessons use are
importable from here too: Session, COMMANDS, command, visible, APPROVALS.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai
from rich.console import Console
from rich.markup import escape

from . import approval, permissions
from .approval import SHOW_ALL, show_written
from .code_agent import code_agent
from .coding import TOOL_NAMES, Workspace, snapshot
from .commands import COMMANDS, STOP, Command, command
from .compact import Compaction, Summarizer, scripted_summarizer
from .layers import Conversation
from .loop import AgentResult, StopReason, run_agent
from .memory import MemoryFile, load_project_memory, session_banner
from .registry import ToolRegistry
from .reply import clean_text
from .sandbox import Action, Policy, why_not_isolated
from .screen import THINKING, Screen, model_lines, next_call, step_line, visible
from .sessions import Resume, restore, write
from .stream import Streaming
from .trace import Trace, TraceStep, shorten
from .undo import Checkpoint, remove_store, session_store
from .verdict import find_test_command, run_project_tests

if TYPE_CHECKING:  # imported when first used: prompt_toolkit is only needed at a terminal
    from .prompt_input import PromptInput

__all__ = ["APPROVALS", "APPROVAL_NOTES", "COMMANDS", "SHOW_ALL", "STOP", "Command", "Session",
           "command", "visible"]

APPROVALS = ("ask", "auto-edit", "yolo")
INTERRUPTED = "[interrupted by the user: this call was not finished]"
MAX_UNDO_TURNS = 20  # /undo goes back at most this many turns (older checkpoints are dropped)


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
        allow), then the approval mode (`approval.rule`: the question, the diff shown)."""
        return approval.rule(self, action, tool)

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
            show_written(self)  # a write done before Ctrl-C is still shown
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
        show_written(self)
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
