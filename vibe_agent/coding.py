"""The coding agent's tools: read, search, write and edit files, and run commands.

A coding agent works inside one folder, its workspace. Each public method of
`Workspace` is one tool; `coding_registry(root)` registers all six:

    list_files(path)                  what is there
    read_file(path, start, end)       numbered lines, so an edit can point at them
    search_code(pattern, path)        file:line: text for every regex match
    write_file(path, content)         create or replace a whole file (atomically)
    edit_file(path, old, new)         replace one exact, unique piece of text
    run_command(command)              a shell command in the sandbox (vibe_agent.sandbox)

Every guard answers with text starting with "Error:" that tells the model what to do
next; nothing raises for the model's mistakes:

- every path must stay inside the workspace: absolute paths, "~", ".." that climbs
  out and symbolic links leading out are refused;
- writes and commands go through the approval `Policy` first;
- outputs are capped, and the cap is announced.

`snapshot(root)` before a run and `workspace_diff(before, root)` after it show what the
agent changed, as a unified diff like `git diff`. Give the agent its own folder: it
may read everything inside it (a `.env` file too).
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from .registry import ToolRegistry
from .sandbox import DEFAULT_POLICY, NOT_ISOLATED, Action, Policy, Rule, run_in_sandbox

IGNORED_DIRS = frozenset({".git", "__pycache__", ".pytest_cache"})
MAX_FILE_BYTES = 1_000_000  # larger files are not read (nor searched, nor diffed)
MAX_READ_CHARS = 20_000  # read_file stops after this many characters and says how to go on
MAX_LIST_ENTRIES = 200
MAX_HITS = 50  # search_code matches shown
MAX_HIT_CHARS = 200  # of one matching line
COMMAND_TIMEOUT = 30.0

TOOL_NAMES = ("list_files", "read_file", "search_code", "write_file", "edit_file", "run_command")

# Lesson 09's rules for a bug-fixing agent (`vibe_agent.memory.coding_system_prompt` adds
# the project's AGENTS.md and the agent's notes after them).
CODING_SYSTEM_PROMPT = (
    "你是一个修 bug 的编程助手，在一个项目文件夹（工作区）里工作。\n"
    "- 只能用工具读写文件、运行命令；路径都相对工作区根目录，例如 sales/report.py。\n"
    "- 先运行测试 `python -m pytest -q`，看清哪些测试失败、错在哪里。\n"
    "- 动手前先找、先读：用 search_code 找相关的函数，用 read_file 读它的上下文，不要凭猜测改。\n"
    "- 用 edit_file 做最小的修改：old 要从文件里逐字复制（连同缩进），只改修 bug 需要的地方。\n"
    "- 不许修改或删除测试来让它们通过。\n"
    "- 改完再运行一次测试：测试通过才算修好。\n"
    "- 最后的回答说明改了哪个文件、为什么；测试没有通过就如实说，不要声称已经修好。"
)


class WorkspaceError(Exception):
    """A request the tools refuse; the message is what the model reads after "Error: "."""


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


class Workspace:
    """The tools of a coding agent, confined to one folder.

    Args:
        root: the workspace folder.
        policy: approves writes and commands ("allow-all", "ask", a list of allowed
            command prefixes, a function, or a `Policy`).
        command_timeout: seconds before `run_command` kills a command.
    """

    def __init__(self, root: str | Path, policy: Policy | Rule = DEFAULT_POLICY,
                 command_timeout: float = COMMAND_TIMEOUT) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise NotADirectoryError(f"the workspace {self.root} is not a folder")
        self.policy = policy if isinstance(policy, Policy) else Policy(policy)
        self.command_timeout = command_timeout

    # --- paths --------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """The real location of `path`, which must be inside the workspace.

        Raises:
            WorkspaceError: the path is absolute, starts with "~", or leads outside.
        """
        text = path.strip() or "."
        if "\0" in text:
            problem = "it contains a NUL character"
        elif text.startswith("~"):
            problem = "'~' (a home folder) is outside the workspace"
        elif Path(text).is_absolute():
            problem = "absolute paths are not allowed"
        elif not self.contains(self.root / text):  # "..", or a link leading out
            problem = "it leads outside the workspace"
        else:
            return (self.root / text).resolve()
        raise WorkspaceError(f"cannot use the path '{path}': {problem}. Use a path relative to "
                             "the workspace root, such as 'app.py' or 'tests/'.")

    def contains(self, path: Path) -> bool:
        """Whether `path`, with every link followed, is inside the workspace."""
        try:
            return path.resolve().is_relative_to(self.root)
        except (OSError, RuntimeError):  # a link loop, a name too long
            return False

    def shown(self, full: Path) -> str:
        """How a resolved path is shown to the model: relative, with forward slashes."""
        return full.relative_to(self.root).as_posix()

    def _text_file(self, path: str, strict: bool = False) -> tuple[Path, str]:
        """Resolve and read an existing text file (`strict`: refuse invalid UTF-8)."""
        full = self.resolve(path)
        if full.is_dir():
            raise WorkspaceError(f"'{path}' is a folder. Call list_files to see its files.")
        if not full.is_file():
            raise WorkspaceError(f"there is no file '{path}'. Call list_files to see what exists.")
        if full.stat().st_size > MAX_FILE_BYTES:
            raise WorkspaceError(f"'{path}' is larger than {MAX_FILE_BYTES} bytes. Use "
                                 "search_code to find the part you need.")
        data = full.read_bytes()
        if _is_binary(data):
            raise WorkspaceError(f"'{path}' is a binary file, not text.")
        try:
            return full, data.decode("utf-8", errors="strict" if strict else "replace")
        except UnicodeDecodeError:
            raise WorkspaceError(f"'{path}' is not UTF-8 text, so it cannot be edited "
                                 "safely. Use write_file to replace it.") from None

    def walk(self, top: Path) -> Iterator[Path]:
        """Files and folders under `top`, sorted; no ignored folders, no links leading out."""
        for entry in sorted(top.iterdir()):
            if entry.name in IGNORED_DIRS or not self.contains(entry):
                continue
            yield entry
            if entry.is_dir() and not entry.is_symlink():  # a linked folder is not entered
                yield from self.walk(entry)

    def _approve(self, action: Action) -> None:
        reason = self.policy.refusal(action)
        if reason is not None:
            what = "命令" if action.kind == "command" else "写入"
            raise WorkspaceError(f"{what}未获批准：{reason}")

    def _write(self, full: Path, content: str) -> None:
        """Write atomically: a temporary file in the same folder, then os.replace."""
        full.parent.mkdir(parents=True, exist_ok=True)
        temp = full.with_name(f".{full.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            with open(temp, "x", encoding="utf-8") as file:  # "x": never clobber anything
                file.write(content)
            if full.exists():
                temp.chmod(full.stat().st_mode)  # keep an executable script executable
            os.replace(temp, full)
        finally:
            temp.unlink(missing_ok=True)

    # --- the tools ----------------------------------------------------------------

    def list_files(self, path: str = ".") -> str:
        """List the files and folders under a folder of the workspace, recursively.

        Args:
            path: a folder relative to the workspace root; "." is the root.
        """
        try:
            top = self.resolve(path)
        except WorkspaceError as exc:
            return f"Error: {exc}"
        if not top.is_dir():
            return f"Error: '{path}' is not a folder. Use read_file for a file."
        entries = [self.shown(entry) + ("/" if entry.is_dir() else "")
                   for entry in itertools.islice(self.walk(top), MAX_LIST_ENTRIES + 1)]
        if not entries:
            return f"(the folder '{self.shown(top)}' is empty)"
        if len(entries) > MAX_LIST_ENTRIES:  # stop walking early: a folder may be huge
            entries[-1] = (f"[stopped after {MAX_LIST_ENTRIES} entries; list a subfolder to "
                           "see the rest]")
        return "\n".join(entries)

    def read_file(self, path: str, start_line: int | None = None,
                  end_line: int | None = None) -> str:
        """Read a text file of the workspace, with line numbers.

        Args:
            path: the file, relative to the workspace root.
            start_line: the first line to show (1-based); default the first line.
            end_line: the last line to show; default the last line.
        """
        try:
            _, text = self._text_file(path)
        except WorkspaceError as exc:
            return f"Error: {exc}"
        lines = text.splitlines()
        if not lines:
            return f"(the file '{path}' is empty)"
        first = 1 if start_line is None else start_line
        last = len(lines) if end_line is None else end_line
        if not 1 <= first <= last or first > len(lines):
            return (f"Error: cannot show lines {first} to {last}: '{path}' has {len(lines)} "
                    "lines. Choose 1 <= start_line <= end_line.")
        shown: list[str] = []
        size = 0
        for number in range(first, min(last, len(lines)) + 1):
            row = f"{number:>4}| {lines[number - 1]}"
            if shown and size + len(row) > MAX_READ_CHARS:
                shown.append(f"[stopped at line {number - 1} of {len(lines)} to keep the "
                             f"output short; call read_file with start_line={number} to go on]")
                break
            shown.append(row)
            size += len(row) + 1
        return "\n".join(shown)

    def search_code(self, pattern: str, path: str = ".") -> str:
        """Search the workspace's text files for a Python regular expression.

        Args:
            pattern: a Python regular expression, e.g. "def \\w+" or "TODO".
            path: a file or folder to search, relative to the workspace root.
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            return f"Error: invalid regular expression {pattern!r}: {exc}. Fix it and try again."
        try:
            top = self.resolve(path)
        except WorkspaceError as exc:
            return f"Error: {exc}"
        if not top.exists():
            return f"Error: there is no '{path}'. Call list_files to see what exists."
        files = [top] if top.is_file() else (p for p in self.walk(top) if p.is_file())
        hits = itertools.islice(self._matches(regex, files), MAX_HITS + 1)
        lines = [f"{self.shown(file)}:{number}: {text.strip()[:MAX_HIT_CHARS]}"
                 for file, number, text in hits]
        if not lines:
            return f"No matches for {pattern!r} in '{self.shown(top)}'."
        if len(lines) > MAX_HITS:  # stop searching early: the model should narrow it down
            lines[-1] = (f"[stopped after {MAX_HITS} matches; use a more specific pattern "
                         "or path]")
        return "\n".join(lines)

    @staticmethod
    def _matches(regex: re.Pattern[str], files: Iterable[Path]) -> Iterator[tuple[Path, int, str]]:
        """(file, line number, line) for every line that matches, file by file."""
        for file in files:
            for number, line in enumerate((_text_or_none(file) or "").splitlines(), start=1):
                if regex.search(line):
                    yield file, number, line

    def write_file(self, path: str, content: str) -> str:
        """Create a file, or replace a file's whole content. Folders are created as needed.

        Args:
            path: the file, relative to the workspace root.
            content: the complete new content of the file.
        """
        try:
            full = self.resolve(path)
            if full.is_dir():
                raise WorkspaceError(f"'{path}' is a folder. Give a file name.")
            self._approve(Action("write", self.shown(full)))
            self._write(full, content)
        except WorkspaceError as exc:
            return f"Error: {exc}"
        lines = len(content.splitlines())
        return f"Wrote {len(content)} characters ({lines} lines) to {self.shown(full)}."

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace one exact piece of text in a file; it must occur exactly once.

        Args:
            path: the file, relative to the workspace root.
            old: the exact text to replace, whitespace included; add surrounding lines
                if it occurs more than once.
            new: the text to put in its place.
        """
        try:
            full, text = self._text_file(path, strict=True)
            if not old:
                raise WorkspaceError("'old' is empty. Copy the exact text to replace.")
            starts = _occurrences(text, old)
            if len(starts) != 1:
                raise WorkspaceError(_not_unique(path, text, starts))
            self._approve(Action("write", self.shown(full)))
            self._write(full, text.replace(old, new, 1))
        except WorkspaceError as exc:
            return f"Error: {exc}"
        line = text.count("\n", 0, starts[0]) + 1
        return f"Edited {self.shown(full)} at line {line}."

    def run_command(self, command: str) -> str:
        """Run a shell command in the workspace folder and return its exit code and output.

        Args:
            command: the command line, e.g. "python -m pytest -q" or "ls tests".
        """
        try:
            self._approve(Action("command", command))
        except WorkspaceError as exc:
            return f"Error: {exc}"
        result = run_in_sandbox(command, self.root, timeout=self.command_timeout)
        notice = [] if result.isolated else [NOT_ISOLATED]
        output = result.output.rstrip("\n") or "(no output)"
        if result.timed_out:
            return "\n".join([
                f"Error: the command did not finish within {self.command_timeout:g} s and was "
                "stopped, with every process it started. Run something faster or smaller.",
                *notice, "output so far:", output])
        return "\n".join([*notice, f"exit code: {result.exit_code}", output])


def _text_or_none(file: Path) -> str | None:
    """A file's text for searching and diffing; None for binary or very large files."""
    if file.stat().st_size > MAX_FILE_BYTES:
        return None
    data = file.read_bytes()
    return None if _is_binary(data) else data.decode("utf-8", errors="replace")


def _occurrences(text: str, old: str) -> list[int]:
    """Start offsets of the non-overlapping occurrences of `old` in `text`."""
    starts: list[int] = []
    index = text.find(old)
    while index != -1:
        starts.append(index)
        index = text.find(old, index + len(old))
    return starts


def _not_unique(path: str, text: str, starts: list[int]) -> str:
    """Why an edit cannot be applied: its text occurs 0 times, or more than once."""
    if not starts:
        return (f"the text in 'old' does not occur in '{path}'. Call read_file and copy the "
                "exact text, spaces and indentation included.")
    lines = ", ".join(str(text.count("\n", 0, start) + 1) for start in starts)
    return (f"the text in 'old' occurs {len(starts)} times in '{path}' (lines {lines}). "
            "Add surrounding lines to 'old' so that it matches exactly once.")


def coding_registry(root: str | Path, *, policy: Policy | Rule = DEFAULT_POLICY,
                    command_timeout: float = COMMAND_TIMEOUT) -> ToolRegistry:
    """A registry with the six coding tools, all working in `root`.

    Args:
        root: the workspace folder.
        policy: approves writes and commands; the default allows a few safe commands.
        command_timeout: seconds before `run_command` kills a command.
    """
    workspace = Workspace(root, policy, command_timeout)
    registry = ToolRegistry()
    for name in TOOL_NAMES:
        registry.register(getattr(workspace, name))
    return registry


# ---------------------------------------------------------------------------
# What did the agent change?
# ---------------------------------------------------------------------------


def snapshot(root: str | Path) -> dict[str, str]:
    """The text of every file in a folder, by relative path.

    Binary and very large files are skipped, and so are links: the files they point
    to are in the snapshot themselves.

    Args:
        root: the folder, e.g. the workspace before the agent runs.
    """
    workspace = Workspace(root, "allow-all")
    texts = {workspace.shown(file): _text_or_none(file)
             for file in workspace.walk(workspace.root)
             if file.is_file() and not file.is_symlink()}
    return {name: text for name, text in texts.items() if text is not None}


def workspace_diff(before: Path | dict[str, str], root: str | Path) -> str:
    """What changed in `root` since `before`, as a unified diff with a/ and b/ prefixes.

    Args:
        before: a `snapshot()` taken earlier, or a folder holding the earlier state.
        root: the folder now.
    """
    old = before if isinstance(before, dict) else snapshot(before)
    new = snapshot(root)
    parts: list[str] = []
    for name in sorted(old.keys() | new.keys()):
        if old.get(name) == new.get(name):
            continue
        headers = [f"--- a/{name}\n" if name in old else "--- /dev/null\n",
                   f"+++ b/{name}\n" if name in new else "+++ /dev/null\n"]
        hunks = list(difflib.unified_diff(_diff_lines(old.get(name, "")),
                                          _diff_lines(new.get(name, ""))))
        parts += headers + hunks[2:]  # difflib's own two header lines are replaced
    return "".join(parts)


def _diff_lines(text: str) -> list[str]:
    """Lines with their endings; a missing final newline is marked as git marks it."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines
