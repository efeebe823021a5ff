"""The prompt a person types at: line editing, history, completion, @file and !command.

    › fix the rounding in @src/units.py     @path attaches a workspace file to the message
    › !python -m pytest -q                  !command runs in the sandbox, for the next turn

On a terminal a line is read with prompt_toolkit: the arrows move the cursor and a
Backspace removes a whole character, Chinese included (they are two columns wide);
Up/Down and Ctrl-R search a history kept per project in the state folder; Tab
completes slash commands and workspace paths; a bracketed paste is one message,
Esc-Enter (or Alt-Enter) starts a new line and Enter sends. From a pipe (or a test
that plays lines) a line is a plain line, as before.

`@path` reads the file through the workspace's guards (`Workspace.read_file`: inside
the workspace only, no link out, capped), and `!command` runs through the same sandbox
as the agent's run_command, with its time limit and output cap. The model sees both as
text in the conversation; the person sees what was attached or run, escaped.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import is_searching
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.key_binding.bindings import search
from prompt_toolkit.styles import Style
from rich.console import Console
from rich.markup import escape

from .coding import MAX_FILE_BYTES, Workspace, WorkspaceError
from .sandbox import NOT_ISOLATED_NOTE, SandboxUnavailable, run_in_sandbox
from .screen import visible

PROMPT = "› "
MAX_HISTORY_ENTRIES = 1_000  # lines a project's history keeps (the oldest go first)
MAX_HISTORY_BYTES = 1_000_000  # a history file larger than this is cut down when loaded
MAX_HISTORY_ENTRY = 20_000  # characters: a longer line (a big paste) is not kept
MAX_MESSAGE_CHARS = 200_000  # a longer message is not sent (attach a file with @path)
MAX_COMPLETIONS = 100  # paths offered by one Tab, at most
MAX_SCANNED = 2_000  # folder entries looked at for one Tab, at most
MAX_MENTIONS = 5  # files one message can attach
MENTION = re.compile(r"(?<!\S)@(\S+)")  # "@path" at the start or after a blank
TRAILING = ",.;:!?，。；：！？、)）]】」』\"'"  # punctuation after a mention, not part of it
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # invalid UTF-8 typed at a terminal
PROMPT_HELP = ("  @路径  把工作区里的这个文件附在消息里（Tab 补全路径）\n"
               "  !命令  自己在沙箱里运行一条命令；命令和输出加进对话，agent 下一轮看得到\n"
               "  Esc-Enter 或 Alt-Enter 换行，Enter 发出；↑↓ 翻历史，Ctrl-R 搜索历史")
UNREADABLE = (("binary", "这是二进制文件，只能附上文本文件"),
              ("larger than", f"文件超过 {MAX_FILE_BYTES:,} 字节，太大了，没法整个附上"))
ATTACHED = "[The user attached the file '{path}' (as read_file shows it):]\n{text}"
RAN = ("[The user ran this command in the sandbox themselves (it was not your tool call); "
       "its result:]\n$ {command}\n{result}")


# --- history --------------------------------------------------------------------


class ProjectHistory(FileHistory):
    """prompt_toolkit's FileHistory, bounded: only the newest MAX_HISTORY_ENTRIES lines,
    from at most the last MAX_HISTORY_BYTES of the file, are loaded (a larger file is
    rewritten with them), and a line longer than MAX_HISTORY_ENTRY is not kept. Any
    character is kept as data; it is shown escaped when recalled. A file that cannot be
    read or written (permissions, a full disk) only means no history: the prompt goes on."""

    def load_history_strings(self) -> Iterable[str]:
        path = Path(os.fsdecode(self.filename))
        try:
            with path.open("rb") as file:
                size = file.seek(0, os.SEEK_END)
                file.seek(max(0, size - MAX_HISTORY_BYTES))
                data = file.read(MAX_HISTORY_BYTES)
        except OSError:
            return []
        lines = data.decode("utf-8", errors="replace").split("\n")
        if size > MAX_HISTORY_BYTES:  # the first entry may be cut: start at a whole one
            lines = list(itertools.dropwhile(lambda line: not line.startswith("#"), lines))
        strings: list[str] = []
        entry: list[str] = []
        for line in [*lines, ""]:
            if line.startswith("+"):
                entry.append(line[1:])
            elif entry:
                strings.append("\n".join(entry))
                entry = []
        kept = strings[-MAX_HISTORY_ENTRIES:]
        if len(kept) < len(strings) or size > MAX_HISTORY_BYTES:
            with contextlib.suppress(OSError):
                self._rewrite(path, kept)
        return reversed(kept)  # newest first, as prompt_toolkit wants

    def store_string(self, string: str) -> None:
        if len(string) <= MAX_HISTORY_ENTRY:
            with contextlib.suppress(OSError):
                super().store_string(string)

    @staticmethod
    def _rewrite(path: Path, strings: list[str]) -> None:
        """Replace the file by `strings` (oldest first), atomically."""
        temp = path.with_name(path.name + ".partial")
        stamp = f"\n# {datetime.datetime.now()}\n"
        with temp.open("wb") as file:
            for string in strings:
                entry = stamp + "".join(f"+{line}\n" for line in string.split("\n"))
                file.write(entry.encode("utf-8", errors="replace"))
        os.replace(temp, path)


def project_history(path: Path | None, root: Path) -> History:
    """The history of the prompt: the file `path`, or this session only when there is
    no path or the path would put it inside the workspace (it is never written there)."""
    if path is None:
        return InMemoryHistory()
    try:
        inside = path.resolve().is_relative_to(root.resolve())
        if not inside:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return InMemoryHistory()
    return InMemoryHistory() if inside else ProjectHistory(path)


# --- Tab completion -----------------------------------------------------------------


class InputCompleter(Completer):
    """Tab completes a slash command at the start of the line (from the command table)
    and otherwise the word under the cursor as a workspace path ("@" allowed in front).

    Paths are looked up through the workspace's guards: only inside it, never through a
    link that leads out, and only MAX_SCANNED entries of a folder are looked at."""

    def __init__(self, commands: Mapping[str, Any],
                 workspace: Workspace) -> None:
        self.commands = commands
        self.workspace = workspace

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterator[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and not any(char.isspace() for char in before):
            for name, command in self.commands.items():
                if name.startswith(before):
                    yield Completion(name, -len(before), display_meta=command.help)
            return
        word = before.split()[-1] if before and not before[-1].isspace() else ""
        yield from self.paths(word.removeprefix("@"))

    def paths(self, word: str) -> Iterator[Completion]:
        """The workspace entries whose path starts with `word` ("src/ma" → "src/main.py")."""
        folder, _, prefix = word.rpartition("/")
        if word.startswith(("/", "~")) or ".." in PurePosixPath(folder).parts:
            return
        try:
            real = self.workspace.resolve(folder or ".")
            with os.scandir(real) as entries:
                found = sorted((entry for entry in itertools.islice(entries, MAX_SCANNED)
                                if entry.name.startswith(prefix)
                                and (prefix.startswith(".") or not entry.name.startswith("."))),
                               key=lambda entry: entry.name)
        except (WorkspaceError, OSError):
            return
        shown = 0
        for entry in found:
            path = Path(entry.path)
            if entry.is_symlink() and not self.workspace.contains(path):
                continue  # a link that leads out is not offered
            name = entry.name + ("/" if path.is_dir() else "")
            yield Completion(name, -len(prefix), display=visible(name))
            shown += 1
            if shown == MAX_COMPLETIONS:
                return


# --- the prompt ---------------------------------------------------------------------


def _newline(event: KeyPressEvent) -> None:
    event.current_buffer.insert_text("\n")


def _send(event: KeyPressEvent) -> None:
    event.current_buffer.validate_and_handle()


class PromptInput:
    """Reads the person's lines at a terminal (prompt_toolkit), or plain lines from a pipe.

    Args:
        console: the session's console (a plain line is read through it).
        commands: the slash commands by name (`terminal.COMMANDS`: each has a help), for Tab.
        workspace: the workspace whose paths Tab completes.
        history: the history file of this project (None: this session only).
    """

    def __init__(self, console: Console, commands: Mapping[str, Any],
                 workspace: Workspace, history: Path | None = None) -> None:
        self.console = console
        self.commands = commands
        self.workspace = workspace
        self.history_path = history
        self.session: PromptSession[str] | None = None  # made on the first typed line

    def read(self) -> str:
        """The next line; "" when there is nothing to send (Ctrl-C dropped the line, or it
        was longer than MAX_MESSAGE_CHARS). EOFError: Ctrl-D or the end of the input."""
        if not (self.console.is_terminal and sys.stdin.isatty()):
            line = self.console.input(f"[bold cyan]{PROMPT}[/]")
        else:
            session = self.prompt_session()
            # Raw mode from before the prompt is written (on a dumb terminal prompt_toolkit
            # writes it first): a Ctrl-D typed as soon as it shows is a key, not lost.
            try:
                with session.input.raw_mode():
                    line = LONE_SURROGATE.sub("\ufffd", session.prompt())
            except KeyboardInterrupt:  # Ctrl-C at the prompt: the line is dropped
                return ""  # (prompt_toolkit has already moved to a new line)
        if len(line) > MAX_MESSAGE_CHARS:
            self.console.print(f"[yellow]这条消息有 {len(line):,} 个字符，超过了上限 "
                               f"{MAX_MESSAGE_CHARS:,}，没有发出。大段内容请放进文件，"
                               "再用 @路径 附上。[/]")
            return ""
        return line

    def prompt_session(self) -> PromptSession[str]:
        if self.session is None:
            keys = KeyBindings()
            keys.add("enter", filter=~is_searching)(_send)
            # Enter in a Ctrl-R search sends the line found, as readline does
            keys.add("enter", filter=is_searching)(search.accept_search_and_accept_input)
            keys.add("escape", "enter")(_newline)  # Esc then Enter, and Alt-Enter
            self.session = PromptSession(
                [("class:prompt", PROMPT)], multiline=True, key_bindings=keys,
                prompt_continuation=lambda width, line, wrap: " " * width,
                history=project_history(self.history_path, self.workspace.root),
                completer=InputCompleter(self.commands, self.workspace),
                complete_while_typing=False, reserve_space_for_menu=6,
                style=Style.from_dict({"prompt": "bold ansicyan"}))
        return self.session


# --- @path and !command -------------------------------------------------------------


def with_mentions(line: str, workspace: Workspace, console: Console) -> str:
    """`line` with the files it mentions as @path attached, for the model. Each attached
    file is named on the screen ("附上了 units.py（12 行）"); one that cannot be attached
    (missing, outside, a link out, a folder, binary) is named with the reason, and the
    message goes without it."""
    attached: list[str] = []
    paths = list(dict.fromkeys(_mentioned(match.group(1), workspace)
                               for match in MENTION.finditer(line)))  # each once, in order
    for number, path in enumerate(paths):
        shown = visible(path)
        if number == MAX_MENTIONS:
            console.print(f"[yellow]一条消息最多附上 {MAX_MENTIONS} 个文件，后面的 @ 没有附上。[/]")
            break
        problem = _why_not(path, workspace)
        text = workspace.read_file(path) if problem is None else ""
        if problem is None and text.startswith("Error: "):  # read_file's own refusals
            problem = next((reason for word, reason in UNREADABLE if word in text),
                           f"读不了（{visible(text.removeprefix('Error: '))}）")
        if problem is not None:
            console.print(f"[yellow]没有附上 {escape(shown)}：{escape(problem)}。[/]")
            continue
        lines, total, cut = _counted(text)
        left = f"，只附上了前 {lines} 行，后面 {total - lines} 行没有附上（agent 可以用 " \
               "read_file 接着读）" if cut else ""
        console.print(f"[dim]附上了 {escape(shown)}（{total} 行{left}）[/]")
        attached.append(ATTACHED.format(path=path, text=text))
    return "\n\n".join([line, *attached])


def _mentioned(word: str, workspace: Workspace) -> str:
    """The path a mention names: trailing punctuation is dropped unless the file's
    name really ends with it."""
    stripped = word.rstrip(TRAILING)
    if stripped != word and stripped and _why_not(word, workspace) is not None:
        return stripped
    return word


def _why_not(path: str, workspace: Workspace) -> str | None:
    """Why `path` cannot be attached, in Chinese; None when it is a file of the workspace."""
    try:
        real = workspace.resolve(path)
    except WorkspaceError as exc:
        if any(word in str(exc) for word in ("outside", "absolute", "'~'")):
            return "它在工作区外面（或者经过一个指向外面的链接），只能附上工作区里的文件"
        if "control characters" in str(exc) or "NUL" in str(exc):
            return "路径里有控制字符，工作区的工具不接受这样的路径"
        return f"这个路径不能用（{visible(str(exc))}）"
    if real.is_dir():
        return "这是一个文件夹，只能附上文件"
    if not real.exists():
        return "工作区里没有这个文件"
    return None


def _counted(text: str) -> tuple[int, int, bool]:
    """(lines attached, lines of the file, whether read_file stopped early) of the
    text `Workspace.read_file` returned."""
    stopped = re.search(r"\[stopped at line (\d+) of (\d+) ", text)
    if stopped:
        return int(stopped.group(1)), int(stopped.group(2)), True
    if text.startswith("(the file ") and text.endswith("is empty)"):
        return 0, 0, False
    rows = sum(1 for row in text.split("\n") if re.match(r" *\d+\| ", row))
    return rows, rows, False


def run_shell(command: str, workspace: Workspace, console: Console,
              add_note: Callable[[str], None]) -> None:
    """`!command`: run it in the sandbox (the agent's own, with run_command's time limit
    and output cap), show it and its output, and hand both to `add_note`: a note from
    the user in the conversation (and the trajectory), which the model sees with the
    next request."""
    command = command.strip()
    if not command:
        console.print("! 后面写一条命令，例如 !python -m pytest -q")
        return
    console.print(f"[dim]在沙箱里运行：[/]{escape(visible(command))}")
    try:
        result = run_in_sandbox(command, workspace.root, timeout=workspace.command_timeout)
    except (SandboxUnavailable, ValueError, OSError) as exc:
        console.print(f"[red]没有运行：{escape(visible(str(exc)))}[/]")
        return
    except KeyboardInterrupt:
        console.print("\n[yellow]⏹ 已中断这条命令；它没有加进对话。[/]")
        return
    output = result.output.rstrip("\n")
    if output:
        console.print(visible(output, multiline=True), markup=False, highlight=False)
    if result.timed_out:
        limit = workspace.command_timeout
        status = f"{limit:g} 秒内没有结束，已经停止"
        model = f"it did not finish within {limit:g} s and was stopped"
    else:
        status, model = f"退出码 {result.exit_code}", f"exit code: {result.exit_code}"
    console.print(f"[dim]（{status}；命令和输出已经加进对话，agent 下一轮会看到）[/]")
    notice = "" if result.isolated else NOT_ISOLATED_NOTE + "\n"
    add_note(RAN.format(command=command, result=f"{notice}{model}\n{output or '(no output)'}"))
