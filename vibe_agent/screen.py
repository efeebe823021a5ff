"""What the terminal agent shows a person while it works (lesson 15's terminal).

    Enter ──> ⠹ 等模型回复… 3 秒          a spinner with the seconds (`Screen.working`), on
                                         the last line, gone before anything else prints
              model's words ──> Markdown  shown raw while a block is being written, then
                                         rendered (rich.markdown) block by block
              a tool step ──> ▸ 运行了 python -m pytest -q → 退出码 1 · 1 failed, 12 passed
                                         one Chinese line (`step_line`): what was run, what
                                         changed, what the tests say

The tools answer the model in English ("exit code: 1", "Edited units.py at line 3.");
those texts stay as they are, in the history and the trace. This module only decides
what a person reads. Everything from a model or a tool goes through `visible` first.

Only a real terminal gets the moving parts (the spinner, the raw preview): a file, a
pipe, a dumb terminal or a notebook gets the same Markdown blocks, and nothing else.
"""

from __future__ import annotations

import json
import os
import re
import sys
import termios
import threading
import time
import unicodedata
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from markdown_it import MarkdownIt
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown, MarkdownElement, Paragraph
from rich.spinner import Spinner
from rich.text import Text

from .sandbox import NOT_ISOLATED_NOTE
from .trace import TraceStep, shorten
from .verdict import pytest_summary

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from .sandbox import Action

REFRESH_PER_SECOND = 10  # spinner frames (and preview redraws) a second
MIN_SPLIT_SECONDS = 0.05  # look for finished Markdown blocks at most this often ...
SPLIT_COST_FACTOR = 5  # ... and never more than 1/5 of the time (a 10,000-line answer)


def _parser() -> MarkdownIt:
    """CommonMark as rich parses it, but with nothing hidden: raw HTML stays text
    (rich drops it), and an image is shown as a link with its address."""
    return MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"]) \
        .disable("image")


# A character that may start or end a line anywhere (CJK ideographs, kana, Hangul, full-
# width forms); rich breaks lines at spaces only, so Chinese text needs its own breaks
WIDE = "\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
UNITS = re.compile(rf"\s+|[{WIDE}]|[^\s{WIDE}]+")
NO_LINE_START = set("，。、；：？！）」』》〉】,.;:?!)")  # with the character before it


def line_breaks(line: str, width: int) -> list[int]:
    """Where to break `line` so that each piece fits in `width` cells: at spaces and
    between CJK characters; a word longer than a whole line is folded."""
    breaks: list[int] = []
    used = previous = 0  # cells on this line; where the last unit started
    for match in UNITS.finditer(line):
        unit = match.group()
        if unit.isspace():  # spaces may hang past the edge: they are stripped
            used += cell_len(unit)
            continue
        parts = [(match.start(), unit)] if cell_len(unit) <= width else [
            (match.start() + at, char) for at, char in enumerate(unit)]
        for start, part in parts:
            size = cell_len(part)
            if used and used + size > width:
                if part in NO_LINE_START and previous > (breaks[-1] if breaks else 0):
                    start, used = previous, cell_len(line[previous:start])  # 。 stays
                else:
                    used = 0
                breaks.append(start)
            used += size
            previous = start
    return breaks


class _Paragraph(Paragraph):
    """A paragraph wrapped with `line_breaks` (Chinese breaks between characters)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.text.split("\n"):
            for part in line.divide(line_breaks(line.plain, options.max_width)):
                part.rstrip()
                part.overflow = "fold"
                yield part


class Answer(Markdown):
    """A model's text as Markdown (code blocks highlighted, wrapped, never cropped), with
    every part of it on screen: links show their address, HTML is shown as written, and
    a line break stays a line break (as in a chat, not joined into one line)."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements, "paragraph_open": _Paragraph}

    def __init__(self, markup: str) -> None:
        super().__init__("", hyperlinks=False)
        self.markup = markup
        self.parsed = _parser().parse(markup)
        for token in self.parsed:
            for child in token.children or []:
                if child.type == "softbreak":
                    child.type = "hardbreak"


def finished_blocks(text: str) -> int:
    """How many characters at the start of `text` are whole Markdown blocks: blocks a
    later block (or a later line) has already closed. Only complete lines count, so the
    rest may still grow into anything (an open code fence stays open)."""
    complete = text.rfind("\n") + 1
    starts = [token.map[0] for token in _parser().parse(text[:complete])
              if token.level == 0 and token.nesting >= 0 and token.map]
    if len(starts) < 2:
        return 0
    lines = text[:complete].split("\n")
    return sum(len(line) + 1 for line in lines[:starts[-1]])


CONTAINERS = ("bullet_list_open", "ordered_list_open", "blockquote_open", "table_open")


class _SelfClearing(Live):
    """A transient Live display that clears itself before anybody else prints: nothing
    ever lands below, beside or inside it, and it never comes back by itself. While it
    is shown, keys typed are not echoed (an echoed Enter would move the line it
    redraws), and they are dropped when it goes: what nobody saw typed can never answer
    an approval question that was not on the screen yet."""

    def __init__(self, console: Console, get: Callable[[], RenderableType]) -> None:
        super().__init__(console=console, get_renderable=get, transient=True,
                         refresh_per_second=REFRESH_PER_SECOND, vertical_overflow="crop")
        self._own = threading.local()  # set while this thread draws the display itself
        self._echo: list[Any] | None = None  # the terminal's settings, echo included

    def start(self, refresh: bool = False) -> None:
        self._echo = _echo_off()
        super().start(refresh)

    def stop(self) -> None:
        super().stop()
        if self._echo is not None:  # the keys typed meanwhile are dropped (TCSAFLUSH)
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSAFLUSH, self._echo)
            self._echo = None

    def refresh(self) -> None:
        with self._lock:
            self._own.drawing = True
            try:
                super().refresh()
            finally:
                self._own.drawing = False

    def process_renderables(self, renderables: list[ConsoleRenderable]
                            ) -> list[ConsoleRenderable]:
        if getattr(self._own, "drawing", False):
            return super().process_renderables(renderables)
        self.stop()  # someone else prints: clear the display first
        return renderables


def _echo_off() -> list[Any] | None:
    """Stop echoing typed keys (when the input is a terminal); the old settings."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return None
        settings = termios.tcgetattr(fd)
    except (OSError, ValueError, AttributeError, termios.error):
        return None
    quiet = list(settings)
    quiet[3] &= ~termios.ECHO  # the local modes
    termios.tcsetattr(fd, termios.TCSADRAIN, quiet)
    return settings


class _Working:
    """The spinner's line: what is going on and the seconds since it started."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.started = time.perf_counter()
        self.spinner = Spinner("dots", style="cyan")

    def __rich__(self) -> Spinner:
        seconds = time.perf_counter() - self.started
        self.spinner.text = Text(f"{self.what}… {seconds:.1f} 秒", style="dim")
        return self.spinner


class Screen:
    """The moving parts of one terminal session's screen: the spinner and the answer
    being written. Call `finish` before printing anything else yourself (it prints the
    model's words so far and clears the spinner); any other print clears them too."""

    def __init__(self, console: Console) -> None:
        self.console = console
        # A terminal that can redraw a line; rich's is_terminal alone is not enough: with
        # FORCE_COLOR (a Jupyter kernel sets it) any file counts, even a StringIO
        self.live = (console.is_terminal and not console.is_dumb_terminal
                     and not console.is_jupyter and console.file.isatty())
        self.display: _SelfClearing | None = None
        self.spinning = False  # the display is the spinner (else the preview, or nothing)
        self.pending: list[str] = []  # the model's text not printed yet
        self.blocks = 0  # Markdown blocks printed of the text now being written
        self.after_rule = False  # the last block printed ended with a rule (no blank line)
        self.next_split = 0.0  # when to look for finished blocks again

    # --- the spinner --------------------------------------------------------------

    def working(self, what: str) -> None:
        """Show a spinner with `what` and the seconds from now (a terminal only)."""
        if not self.live or self.pending:  # words are being written: they show life
            return
        self.clear()
        working = _Working(visible(what))
        self.show(lambda: working, spinning=True)

    @contextmanager
    def spinner(self, what: str) -> Iterator[None]:
        """The spinner for as long as the `with` block runs (cleared however it ends)."""
        self.working(what)
        try:
            yield
        finally:
            self.clear()

    def show(self, get: Callable[[], RenderableType], spinning: bool) -> None:
        self.display = _SelfClearing(self.console, get)
        self.spinning = spinning
        self.display.start(refresh=True)

    def clear(self) -> None:
        """Take the spinner or the preview off the screen (nothing else is printed)."""
        if self.display is not None:
            self.display.stop()
            self.display = None
        self.spinning = False

    def notify(self, seconds: float, after: float | None) -> None:
        """Ring the terminal's bell when a turn took longer than `after` seconds (None:
        never), so a person who looked away knows it is their turn."""
        if after is not None and seconds > after and self.console.is_terminal:
            self.console.file.write("\a")  # (rich's bell() says nothing on TERM=dumb)
            self.console.file.flush()

    # --- the model's words --------------------------------------------------------

    def add(self, piece: str) -> None:
        """One streamed piece of the model's text: finished blocks are printed as
        Markdown, the block being written shows raw (a terminal only) until it is done."""
        if self.spinning:
            self.clear()
        self.pending.append(piece)
        now = time.perf_counter()
        if "\n" in piece and now >= self.next_split:
            text = "".join(self.pending)
            cut = finished_blocks(text)
            spent = time.perf_counter() - now
            self.next_split = now + max(MIN_SPLIT_SECONDS, SPLIT_COST_FACTOR * spent)
            if cut:
                self.clear()
                self.pending = [text[cut:]] if text[cut:] else []
                self.print_blocks(text[:cut])
        if self.live and self.pending and (self.display is None
                                           or not self.display.is_started):
            self.show(self.preview, spinning=False)

    def finish(self) -> None:
        """The model stopped writing (a tool call, a question, the answer's end): print
        the rest as Markdown and clear the screen's moving parts."""
        self.clear()
        text, self.pending = "".join(self.pending), []
        if text.strip():
            self.print_blocks(text)
        self.blocks, self.after_rule = 0, False

    def answer(self, text: str) -> None:
        """A whole answer (not streamed), as Markdown."""
        self.finish()
        self.print_blocks(text)
        self.blocks, self.after_rule = 0, False

    def print_blocks(self, text: str) -> None:
        """Print whole Markdown blocks, spaced as if they had been printed in one piece."""
        shown = Answer(visible(text, multiline=True))
        tops = [token for token in shown.parsed if token.level == 0 and token.nesting >= 0]
        # rich puts a blank line between blocks (none after a rule); a list, a quote or a
        # table brings its own
        if self.blocks and not self.after_rule and tops and tops[0].type not in CONTAINERS:
            self.console.print()
        self.console.print(shown)
        self.blocks += len(tops)
        self.after_rule = bool(tops) and tops[-1].type == "hr"

    def preview(self) -> Text:
        """The end of the block being written, raw and dim: as many lines as fit."""
        rows = max(self.console.height - 4, 3)
        width = max(self.console.width, 10)
        shown: list[str] = []
        for line in reversed("".join(self.pending).split("\n")):
            rows -= cell_len(line) // width + 1
            if rows < 0:
                break
            shown.append(line)
        return Text(visible("\n".join(reversed(shown)), multiline=True), style="dim",
                    overflow="fold")


# ---------------------------------------------------------------------------
# A tool step on one line, in Chinese
# ---------------------------------------------------------------------------

# The registry's and the loop's outcomes (`TraceStep.outcome`) as a person reads them
OUTCOME_WORDS = {
    "unknown_tool": "模型要的工具不存在",
    "invalid_json": "模型给的参数不是合法的 JSON",
    "bad_arguments": "模型给的参数不对",
    "tool_raised": "工具出错了",
    "tool_error": "工具报告了错误",
    "timeout": "超时，没有等到结果",
    "bad_result": "工具的结果不能用",
    "refused": "刹车拦下了这次调用（重复或循环）",
    "not_run": "这一轮已经刹车，没有运行",
    "cut_off": "参数被 max_tokens 截断了，没有运行",
}
# What the coding tools' own "Error: …" texts mean (coding.py, sandbox.py), first match
TOOL_ERRORS = (
    ("not approved: the user said no", "你没有批准"),
    ("not approved: the user did not answer", "没有得到回答（输入结束了）"),
    ("not approved", "没有得到批准"),
    ("did not finish within", "超时，已经连同它启动的进程一起停下"),
    ("the command contains control characters", "命令里有控制字符，没有运行"),
    ("contains control characters", "路径里有控制字符，没有执行"),
    ("time limit", "超过了这次调用的时间限制"),
)
EXIT_CODE = re.compile(r"^exit code: (-?\d+)$", re.MULTILINE)
EDITED_LINE = re.compile(r" at line (\d+)\.$")


def step_line(step: TraceStep, timings: bool = True) -> tuple[bool, str]:
    """A tool step as one line for a person: (went well, what it did, in Chinese).

    Args:
        step: a tool step of the trace.
        timings: keep pytest's seconds ("in 0.40s"); False for output that never varies.
    """
    try:
        arguments = json.loads(step.arguments or "{}")
    except json.JSONDecodeError:
        arguments = {}
    arguments = arguments if isinstance(arguments, dict) else {}
    result = (step.result or "").strip()
    tool = step.tool or "?"
    if step.outcome == "ok":
        return True, _what(tool, arguments, "了") + _how(tool, arguments, result, timings)
    if step.outcome == "tool_error":
        why = next((words for text, words in TOOL_ERRORS if text in result), None)
        if why is None:  # the tool's own words, for the model, labelled as such
            first = result.splitlines()[0] if result else ""
            why = f"出错了，告诉模型的是：{shorten(first.removeprefix('Error: '), 70)}"
    else:
        why = OUTCOME_WORDS.get(step.outcome or "", f"没有成功（{step.outcome}）")
    return False, f"{_what(tool, arguments, '')}：{why}"


def _what(tool: str, arguments: dict[str, object], done: str) -> str:
    """What the call was meant to do (`done`: "了" once it is done), from its name and
    arguments."""
    def arg(name: str, width: int = 70) -> str:
        return shorten(str(arguments.get(name) or ""), width)

    if tool == "run_command":
        return f"运行{done} {arg('command')}"
    if tool in ("read_file", "edit_file", "write_file"):
        verb = {"read_file": "读", "edit_file": "改", "write_file": "写"}[tool]
        return f"{verb}{done} {arg('path')}"
    if tool == "list_files":
        return f"看{done} {arg('path') or '工作区'} 里有哪些文件"
    if tool == "search_code":
        return f"搜索{done} {arg('pattern')}"
    if tool == "todo_write":
        return f"更新{done}计划（/todo 查看）"
    if tool == "remember":
        return f"记下{done}一条笔记"
    if tool == "delegate":
        return f"交给{done}只读的子 agent：{arg('task', 60)}"
    if tool.startswith("mcp__"):
        server, _, name = tool.removeprefix("mcp__").partition("__")
        return f"调用{done} MCP 服务器 {server} 的工具 {name}"
    return f"调用{done} {tool}"


def _how(tool: str, arguments: dict[str, object], result: str, timings: bool) -> str:
    """How a call that went well turned out, from its result (the tools' formats)."""
    if tool == "run_command":
        code = EXIT_CODE.search(result)
        summary = pytest_summary(result, timings)
        how = f" → 退出码 {code.group(1)}" if code else ""
        how += f" · 测试：{summary}" if summary else ""
        return how + ("（没有隔离：直接在本机运行）" if NOT_ISOLATED_NOTE in result else "")
    if tool == "edit_file":
        line = EDITED_LINE.search(result)
        return f"（第 {line.group(1)} 行）" if line else ""
    if tool == "write_file":
        return f"（{len(str(arguments.get('content') or '').splitlines())} 行）"
    if tool == "search_code":
        found = sum(1 for line in result.splitlines() if re.match(r"^\S.*?:\d+:", line))
        return "：没有找到" if result.startswith("No matches") else f"：{found} 处"
    return ""


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


def doing(action: Action) -> str:
    """What an approved action is doing while it runs (the spinner's words)."""
    if action.kind == "command":
        return f"运行 {shorten(action.detail, 60)}"
    return "写入文件" if action.kind == "write" else "调用工具"


def next_call(messages: Sequence[dict[str, Any]]) -> str:
    """What the loop does next after a tool step: the next call of the same reply, or
    ask the model again (the spinner's words)."""
    for at in range(len(messages) - 1, -1, -1):
        if messages[at].get("role") == "assistant":
            answered = {m.get("tool_call_id") for m in messages[at + 1:]
                        if m.get("role") == "tool"}
            for call in messages[at].get("tool_calls") or []:
                if call.get("id") not in answered:
                    function = call.get("function") or {}
                    try:
                        arguments = json.loads(function.get("arguments") or "{}")
                    except json.JSONDecodeError:
                        arguments = {}
                    return _what(str(function.get("name")), arguments
                                 if isinstance(arguments, dict) else {}, "")
            break
    return THINKING


THINKING = "等模型回复"


def model_lines(model: str, label: str) -> list[str]:
    """The banner's lines about who answers: `模型：NAME （label）`, or, when the label
    is a client's own description (mode, model, endpoint, one a line), those lines."""
    inner = label.strip().removeprefix("（").removesuffix("）")
    if "\n" in inner:
        return inner.splitlines()
    return [f"模型：{model}  {label}".rstrip()]


DECISION_WORDS = {"tool_calls": "要调用工具", "answer": "给出回答", "error": "没有可用的回复"}


def trace_line(step: TraceStep, width: int = 100) -> str:
    """A trace step as one line in Chinese for a person (`python -m vibe_agent demo`);
    the trace itself keeps its identifiers (`trace.render_step`)."""
    head = f"[{step.round}]"
    if step.kind == "model":
        tokens = ("tokens 没有报告" if step.total_tokens is None and step.prompt_tokens is None
                  else f"tokens {step.prompt_tokens}+{step.completion_tokens}")
        said = f"：{shorten(step.content, width // 2)}" if step.content else ""
        cut = "（被 max_tokens 截断）" if step.finish_reason == "length" else ""
        return (f"{head} 模型{DECISION_WORDS.get(step.decision or '', step.decision)}{cut}"
                f"{said}（{tokens}，{step.elapsed_ms:.0f} ms）")
    if step.kind == "tool":
        failed = "" if step.outcome == "ok" else \
            f" 出错（{OUTCOME_WORDS.get(step.outcome or '', step.outcome)}）"
        return (f"{head} 工具 {step.tool}({shorten(step.arguments, width // 3)}){failed} "
                f"→ 结果：{shorten(step.result, width // 2)}（{step.elapsed_ms:.0f} ms）")
    if step.kind == "stop":
        return f"{head} 结束：{shorten(step.content, width)}"
    return f"{head} {step.kind}：{shorten(step.content, width)}"
