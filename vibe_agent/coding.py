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
- a path is never checked first and opened later by name (a command running in the
  background could swap a folder for a link in between): it is walked one folder at
  a time from the workspace's own handle, never following a link the walk has not
  checked itself (`O_NOFOLLOW`, `dir_fd`), and a write goes to a temporary file in
  the folder it reached, then `os.replace`;
- writes and commands go through the approval `Policy` first; a command or path with
  control characters (which could hide part of it from the person approving it) is
  refused before anyone is asked;
- when the registry has given up on a call (its time limit), the call no longer
  writes or runs anything, and a command never outlives the call's time limit;
- outputs are capped, and the cap is announced; a regular expression has a time
  limit of its own.

`snapshot(root)` before a run and `workspace_diff(before, root)` after it show what the
agent changed, as a unified diff like `git diff` (both capped). Give the agent its
own folder: it may read everything inside it (a `.env` file too).
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import hashlib
import itertools
import os
import re
import stat
import time
import unicodedata
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import regex

from .registry import CallAbandoned, ToolRegistry, current_deadline
from .sandbox import (
    DEFAULT_POLICY,
    NOT_ISOLATED_NOTE,
    Action,
    Policy,
    Rule,
    run_in_sandbox,
    why_not_isolated,
)

IGNORED_DIRS = frozenset({".git", "__pycache__", ".pytest_cache"})
MAX_FILE_BYTES = 1_000_000  # larger files are not read (nor searched, nor diffed)
MAX_READ_CHARS = 20_000  # read_file stops after this many characters and says how to go on
MAX_LIST_ENTRIES = 200
MAX_HITS = 50  # search_code matches shown
MAX_HIT_CHARS = 200  # of one matching line
MAX_LINE_CHARS = 10_000  # search_code looks at no more than this much of one line
SEARCH_SECONDS = 5.0  # the most time search_code's regular expression may take
MAX_DEPTH = 64  # folders nested deeper are not walked (listing, search, snapshot)
MAX_LINKS = 40  # links followed while walking one path (as Linux allows)
MAX_SNAPSHOT_BYTES = 20_000_000  # text a snapshot keeps; later files by size and hash
MAX_DIFF_CHARS = 500_000  # workspace_diff stops after this much and names the rest
COMMAND_TIMEOUT = 30.0
COMMAND_GRACE = 5.0  # the registry waits this much longer than a command's own limit

TOOL_NAMES = ("list_files", "read_file", "search_code", "write_file", "edit_file", "run_command")

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW  # open a folder, never through a link
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # NONBLOCK: a FIFO must not hang us
# Characters that can make a terminal or a notebook show something other than what
# runs: C0/C1 controls (carriage return, ANSI escapes ...) and bidirectional overrides.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

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


class NoSuchFolder(WorkspaceError):
    """A folder on the way to a path does not exist (write_file creates it)."""


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8192]


def hidden_characters(text: str, allowed: str = "") -> list[str]:
    """The characters of `text` that could hide what it says when it is shown, as
    escapes ('\\r', '\\x1b' ...): control characters and bidirectional overrides.

    Args:
        text: a command line or a path.
        allowed: control characters that are fine here (e.g. "\\t\\n" in a command).
    """
    found = {char for char in text if char not in allowed
             and (unicodedata.category(char) == "Cc" or char in _BIDI)}
    return [repr(char)[1:-1] for char in sorted(found)]


@dataclass
class _Place:
    """A place in the workspace reached without following a link out of it: the open
    folder that holds it, and its name there ("" when it is that folder itself)."""

    folder: int
    name: str
    shown: str  # as the model sees it: relative, forward slashes, "." for the root

    def lstat(self) -> os.stat_result | None:
        """The entry itself (a link is not followed); None when nothing is there."""
        if not self.name:
            return os.fstat(self.folder)
        try:
            return os.stat(self.name, dir_fd=self.folder, follow_symlinks=False)
        except FileNotFoundError:
            return None


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

        Only for showing where a path leads: the tools never open this Path by name.

        Raises:
            WorkspaceError: the path is absolute, starts with "~", or leads outside.
        """
        with self._locate(path) as place:
            return self.root / place.shown

    def contains(self, path: Path) -> bool:
        """Whether `path`, with every link followed, is inside the workspace."""
        try:
            return path.resolve().is_relative_to(self.root)
        except (OSError, RuntimeError):  # a link loop, a name too long
            return False

    def shown(self, full: Path) -> str:
        """How a resolved path is shown to the model: relative, with forward slashes."""
        return full.relative_to(self.root).as_posix()

    def _refuse(self, path: str, problem: str) -> WorkspaceError:
        return WorkspaceError(f"cannot use the path '{path}': {problem}. Use a path relative "
                              "to the workspace root, such as 'app.py' or 'tests/'.")

    @contextlib.contextmanager
    def _locate(self, path: str, make_folders: bool = False) -> Iterator[_Place]:
        """Walk to `path` one name at a time from the workspace's own folder handle.

        Links are read and followed by this walk itself, only while they stay inside;
        a folder is opened with O_NOFOLLOW, so a folder swapped for a link between
        two steps is refused, never followed. The last name need not exist yet.
        `make_folders` creates missing folders on the way (for write_file).

        Raises:
            WorkspaceError: the path is spelled as an escape, leads outside, or a
                folder on the way is missing or not a folder.
        """
        text = path.strip() or "."
        hidden = hidden_characters(path)  # before strip(): "\r" at the end counts too
        if "\0" in text:
            raise self._refuse(path, "it contains a NUL character")
        if hidden:
            raise self._refuse(path, f"it contains control characters ({' '.join(hidden)})")
        if text.startswith("~"):
            raise self._refuse(path, "'~' (a home folder) is outside the workspace")
        if PurePosixPath(text).is_absolute():
            raise self._refuse(path, "absolute paths are not allowed")
        todo = list(reversed(PurePosixPath(text).parts))  # names still to walk, next last
        folders = [os.open(self.root, _DIR)]  # the open folders from the root down
        names: list[str] = []  # their names, for what the model is shown
        links = 0
        try:
            while todo:
                name = todo.pop()
                if name == "..":
                    if not names:
                        raise self._refuse(path, "it leads outside the workspace")
                    names.pop()
                    os.close(folders.pop())
                    continue
                here = _Place(folders[-1], name, "/".join([*names, name]))
                try:
                    info = here.lstat()
                    is_link = info is not None and stat.S_ISLNK(info.st_mode)
                    target = PurePosixPath(os.readlink(name, dir_fd=folders[-1])) if (
                        is_link) else None
                except OSError as exc:  # a name too long, a folder we may not read ...
                    raise self._refuse(path, (exc.strerror or str(exc)).lower()) from None
                if target is not None:
                    links += 1
                    if links > MAX_LINKS:
                        raise self._refuse(path, "it goes round a loop of links")
                    if target.is_absolute():  # fine only if it names a place in the root
                        if not target.is_relative_to(self.root):
                            raise self._refuse(path, "it leads outside the workspace")
                        target = target.relative_to(self.root)
                        for folder in folders[1:]:
                            os.close(folder)
                        del folders[1:], names[:]
                    todo += reversed(target.parts)
                    continue
                if not todo:  # the last name: the caller opens it
                    yield here
                    return
                if info is None and make_folders:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, dir_fd=folders[-1])
                try:
                    folders.append(os.open(name, _DIR, dir_fd=folders[-1]))
                except FileNotFoundError:
                    raise NoSuchFolder(f"there is no folder '{here.shown}'. Call list_files "
                                       "to see what exists.") from None
                except OSError as exc:
                    if exc.errno == errno.ELOOP:  # it became a link since lstat: walk again
                        todo.append(name)
                        links += 1
                        continue
                    raise WorkspaceError(f"'{here.shown}' is not a folder.") from None
                names.append(name)
            yield _Place(folders[-1], "", "/".join(names) or ".")
        finally:
            for folder in folders:
                os.close(folder)

    def _open_folder(self, place: _Place) -> int:
        """An open handle of the folder at `place` (the caller closes it)."""
        if not place.name:
            return os.dup(place.folder)
        return os.open(place.name, _DIR, dir_fd=place.folder)

    def _read_bytes(self, place: _Place, path: str) -> bytes:
        """The bytes of the regular file at `place`, checked on the handle actually opened."""
        try:
            fd = os.open(place.name or ".", _FILE, dir_fd=place.folder)
        except FileNotFoundError:
            raise WorkspaceError(f"there is no file '{path}'. Call list_files to see what "
                                 "exists.") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WorkspaceError(f"'{path}' changed while it was being opened (it became "
                                     "a link). Try again.") from None
            raise WorkspaceError(f"cannot read '{path}': {exc.strerror}.") from None
        info = os.fstat(fd)  # what was really opened
        problem = None
        if stat.S_ISDIR(info.st_mode):
            problem = f"'{path}' is a folder. Call list_files to see its files."
        elif not stat.S_ISREG(info.st_mode):
            problem = f"'{path}' is not a regular file."
        elif info.st_size > MAX_FILE_BYTES:
            problem = (f"'{path}' is larger than {MAX_FILE_BYTES} bytes. Use search_code to "
                       "find the part you need.")
        if problem:
            os.close(fd)
            raise WorkspaceError(problem)
        with os.fdopen(fd, "rb") as file:
            return file.read(MAX_FILE_BYTES + 1)

    def _text_file(self, place: _Place, path: str, strict: bool = False) -> str:
        """The text of an existing text file (`strict`: refuse invalid UTF-8)."""
        data = self._read_bytes(place, path)
        if _is_binary(data):
            raise WorkspaceError(f"'{path}' is a binary file, not text.")
        try:
            return data.decode("utf-8", errors="strict" if strict else "replace")
        except UnicodeDecodeError:
            raise WorkspaceError(f"'{path}' is not UTF-8 text, so it cannot be edited "
                                 "safely. Use write_file to replace it.") from None

    def _entries(self, top: _Place) -> Iterator[tuple[str, os.stat_result, int, str]]:
        """(shown path, lstat, open folder, name) for everything under `top`, depth
        first and sorted; ignored folders and folders deeper than MAX_DEPTH are not
        entered, links are never entered (a loop cannot trap the walk)."""
        stack = [(self._open_folder(top), "" if top.shown == "." else top.shown)]
        pending = [iter(sorted(os.listdir(stack[0][0])))]
        try:
            while stack:
                folder, base = stack[-1]
                name = next(pending[-1], None)
                if name is None:
                    os.close(folder)
                    stack.pop()
                    pending.pop()
                    continue
                if name in IGNORED_DIRS:
                    continue
                try:
                    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
                except FileNotFoundError:  # deleted while we were walking
                    continue
                shown = f"{base}/{name}" if base else name
                yield shown, info, folder, name
                if stat.S_ISDIR(info.st_mode) and len(stack) < MAX_DEPTH:
                    try:
                        child = os.open(name, _DIR, dir_fd=folder)
                    except OSError:  # swapped for a link or removed meanwhile: skip it
                        continue
                    stack.append((child, shown))
                    pending.append(iter(sorted(os.listdir(child))))
        finally:
            for folder, _ in stack:
                os.close(folder)

    def walk(self, top: Path) -> Iterator[Path]:
        """Files and folders under `top`, sorted; no ignored folders, no links leading out."""
        with self._locate(self.shown(top)) as place:
            for shown, info, _, _ in self._entries(place):
                if not stat.S_ISLNK(info.st_mode) or self._link_target(shown) is not None:
                    yield self.root / shown

    def _link_target(self, shown: str) -> os.stat_result | None:
        """What a link inside the workspace leads to (stat), None if it leads out."""
        try:
            with self._locate(shown) as place:
                return place.lstat()
        except (WorkspaceError, OSError):
            return None

    def _approve(self, action: Action) -> None:
        if action.kind == "command":  # a path was checked when it was walked
            hidden = hidden_characters(action.detail, allowed="\t\n")
            if hidden:
                raise WorkspaceError(
                    f"the command contains control characters ({' '.join(hidden)}): they "
                    "could make it look like another command to the person approving it. "
                    "Write it without them (or put the code in a file with write_file).")
        reason = self.policy.refusal(action)
        if reason is not None:
            what = "command" if action.kind == "command" else "write"
            raise WorkspaceError(f"the {what} was not approved: {reason}")

    def _write(self, place: _Place, content: str) -> None:
        """Write atomically into the folder the walk reached: a temporary file there,
        then os.replace (which replaces a link that appeared meanwhile, never follows it)."""
        temp = f".{place.name[:200]}.{uuid.uuid4().hex[:8]}.tmp"
        info = place.lstat()
        mode = stat.S_IMODE(info.st_mode) if info and stat.S_ISREG(info.st_mode) else 0o644
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode,
                         dir_fd=place.folder)  # EXCL: never clobber anything
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
                    os.fchmod(fd, mode)  # keep an executable script executable (not umask)
                    file.write(content)
                os.replace(temp, place.name, src_dir_fd=place.folder, dst_dir_fd=place.folder)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=place.folder)
        except OSError as exc:
            raise WorkspaceError(f"cannot write '{place.shown}': "
                                 f"{exc.strerror or exc}.") from None

    @staticmethod
    def _acting() -> contextlib.AbstractContextManager[None]:
        """While writing or running: refused once the registry gave up on this call."""
        deadline = current_deadline()
        return contextlib.nullcontext() if deadline is None else deadline.acting()

    # --- the tools ----------------------------------------------------------------

    def list_files(self, path: str = ".") -> str:
        """List the files and folders under a folder of the workspace, recursively.

        Args:
            path: a folder relative to the workspace root; "." is the root.
        """
        try:
            with self._locate(path) as top:
                info = top.lstat()
                if info is None or not stat.S_ISDIR(info.st_mode):
                    return f"Error: '{path}' is not a folder. Use read_file for a file."
                entries = list(itertools.islice(self._listed(top), MAX_LIST_ENTRIES + 1))
        except WorkspaceError as exc:
            return f"Error: {exc}"
        if not entries:
            return f"(the folder '{top.shown}' is empty)"
        if len(entries) > MAX_LIST_ENTRIES:  # stop walking early: a folder may be huge
            entries[-1] = (f"[stopped after {MAX_LIST_ENTRIES} entries; list a subfolder to "
                           "see the rest]")
        return "\n".join(entries)

    def _listed(self, top: _Place) -> Iterator[str]:
        """The lines of list_files: folders end in "/", links leading out are left out."""
        depth = 0 if top.shown == "." else top.shown.count("/") + 1
        for shown, info, _, _ in self._entries(top):
            if stat.S_ISLNK(info.st_mode):
                target = self._link_target(shown)
                if target is None:
                    continue
                info = target
            is_dir = stat.S_ISDIR(info.st_mode)
            too_deep = is_dir and shown.count("/") + 1 - depth >= MAX_DEPTH
            yield shown + ("/" if is_dir else "") + (
                f" [not listed: more than {MAX_DEPTH} folders deep]" if too_deep else "")

    def read_file(self, path: str, start_line: int | None = None,
                  end_line: int | None = None) -> str:
        """Read a text file of the workspace, with line numbers.

        Args:
            path: the file, relative to the workspace root.
            start_line: the first line to show (1-based); default the first line.
            end_line: the last line to show; default the last line.
        """
        try:
            with self._locate(path) as place:
                text = self._text_file(place, path)
        except WorkspaceError as exc:
            return f"Error: {exc}"
        lines = _lines(text)
        if not lines:
            return f"(the file '{path}' is empty)"
        first = 1 if start_line is None else start_line
        last = len(lines) if end_line is None else end_line
        if not 1 <= first <= last or first > len(lines):
            return (f"Error: cannot show lines {first} to {last}: '{path}' has {len(lines)} "
                    "lines. Choose 1 <= start_line <= end_line.")
        shown: list[str] = []
        if "\r\n" in text:
            shown.append("[this file ends its lines with \\r\\n (Windows); they are not shown, "
                         "and edit_file matches and writes them the same way]")
        size = 0
        for number in range(first, min(last, len(lines)) + 1):
            row = f"{number:>4}| {lines[number - 1].removesuffix(chr(13))}"
            if len(row) > MAX_READ_CHARS:  # one huge line (minified code, data)
                row = (f"{row[:MAX_READ_CHARS]} [line {number} goes on: it has "
                       f"{len(lines[number - 1])} characters; use search_code to find text "
                       "in it]")
            if size and size + len(row) > MAX_READ_CHARS:
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
        try:  # `re` checks the syntax (its messages are the familiar ones); the `regex`
            re.compile(pattern)  # package matches, because it has a time limit
            compiled = regex.compile(pattern, flags=regex.VERSION0)
        except (re.error, regex.error, OverflowError, RecursionError) as exc:
            return f"Error: invalid regular expression {pattern!r}: {exc}. Fix it and try again."
        deadline = current_deadline()
        seconds = SEARCH_SECONDS if deadline is None else min(SEARCH_SECONDS,
                                                              deadline.remaining() / 2)
        try:
            with self._locate(path) as top:
                info = top.lstat()
                if info is None:
                    return f"Error: there is no '{path}'. Call list_files to see what exists."
                hits = list(itertools.islice(
                    _matches(compiled, self._texts(top, info), seconds), MAX_HITS + 1))
        except WorkspaceError as exc:
            return f"Error: {exc}"
        except TimeoutError:
            return (f"Error: searching for {pattern!r} took longer than {seconds:.3g} s: the "
                    "pattern may backtrack catastrophically (like (a+)+$), or the folder is "
                    "large. Use a simpler pattern (e.g. a plain word) or a smaller path.")
        lines = [f"{file}:{number}: {text.strip()[:MAX_HIT_CHARS]}" for file, number, text in hits]
        if not lines:
            return f"No matches for {pattern!r} in '{top.shown}'."
        if len(lines) > MAX_HITS:  # stop searching early: the model should narrow it down
            lines[-1] = (f"[stopped after {MAX_HITS} matches; use a more specific pattern "
                         "or path]")
        return "\n".join(lines)

    def _texts(self, top: _Place, info: os.stat_result) -> Iterator[tuple[str, str]]:
        """(shown path, text) of the text files at `top`: the file itself, or every
        file under the folder (through links that stay inside, never out)."""
        if not stat.S_ISDIR(info.st_mode):
            yield top.shown, _text_or_none(top.folder, top.name) or ""
            return
        for shown, entry, folder, name in self._entries(top):
            if stat.S_ISREG(entry.st_mode):
                yield shown, _text_or_none(folder, name) or ""
            elif stat.S_ISLNK(entry.st_mode) and self._link_target(shown) is not None:
                with self._locate(shown) as place:  # walked again: it may have changed
                    target = place.lstat()
                    if target is not None and stat.S_ISREG(target.st_mode):
                        yield shown, _text_or_none(place.folder, place.name) or ""

    def write_file(self, path: str, content: str) -> str:
        """Create a file, or replace a file's whole content. Folders are created as needed.

        Args:
            path: the file, relative to the workspace root.
            content: the complete new content of the file.
        """
        try:
            shown = self._locate_shown(path)
            self._approve(Action("write", shown, content))
            with self._acting(), self._locate(path, make_folders=True) as place:
                info = place.lstat()
                if not place.name or info is not None and stat.S_ISDIR(info.st_mode):
                    raise WorkspaceError(f"'{path}' is a folder. Give a file name.")
                self._write(place, content)
        except WorkspaceError as exc:
            return f"Error: {exc}"
        except CallAbandoned:
            return "Error: the time limit of this call had passed, so nothing was written."
        lines = len(content.splitlines())
        return f"Wrote {len(content)} characters ({lines} lines) to {place.shown}."

    def _locate_shown(self, path: str) -> str:
        """Where `path` leads, as shown to a person approving a write (nothing created)."""
        try:
            with self._locate(path) as place:
                return place.shown
        except NoSuchFolder:  # write_file will create it (but never to climb out of it)
            if ".." in PurePosixPath(path.strip()).parts:
                raise
            return PurePosixPath(path.strip()).as_posix()

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace one exact piece of text in a file; it must occur exactly once.

        Args:
            path: the file, relative to the workspace root.
            old: the exact text to replace, whitespace included; add surrounding lines
                if it occurs more than once.
            new: the text to put in its place.
        """
        try:
            if not old:
                raise WorkspaceError("'old' is empty. Copy the exact text to replace.")
            with self._locate(path) as place:
                text = self._text_file(place, path, strict=True)
                old, new = _same_line_endings(text, old, new)
                starts = _occurrences(text, old)
                if len(starts) != 1:
                    raise WorkspaceError(_not_unique(path, text, starts))
                self._approve(Action("write", place.shown, text.replace(old, new, 1)))
                with self._acting():
                    if self._text_file(place, path, strict=True) != text:  # changed meanwhile
                        raise WorkspaceError(f"'{path}' changed while the edit waited for "
                                             "approval. Call read_file and try again.")
                    self._write(place, text.replace(old, new, 1))
        except WorkspaceError as exc:
            return f"Error: {exc}"
        except CallAbandoned:
            return "Error: the time limit of this call had passed, so nothing was edited."
        line = text.count("\n", 0, starts[0]) + 1
        return f"Edited {place.shown} at line {line}."

    def run_command(self, command: str) -> str:
        """Run a shell command in the workspace folder and return its exit code and output.

        Args:
            command: the command line, e.g. "python -m pytest -q" or "ls tests".
        """
        try:
            self._approve(Action("command", command))
        except WorkspaceError as exc:
            return f"Error: {exc}"
        why_not_isolated()  # checked once per process, before the clock starts
        try:
            with self._acting():
                limit = self._time_for_command()
                if limit <= 0:
                    return ("Error: this call's time limit was used up before the command "
                            "could start (waiting for approval?), so it did not run.")
                result = run_in_sandbox(command, self.root, timeout=limit)
        except CallAbandoned:
            return "Error: the time limit of this call had passed, so the command did not run."
        notice = [] if result.isolated else [NOT_ISOLATED_NOTE]
        output = result.output.rstrip("\n") or "(no output)"
        if result.timed_out:
            return "\n".join([
                f"Error: the command did not finish within {limit:.3g} s and was "
                "stopped, with every process it started. Run something faster or smaller.",
                *notice, "output so far:", output])
        return "\n".join([*notice, f"exit code: {result.exit_code}", output])

    def _time_for_command(self) -> float:
        """Seconds the command may run: its own limit, but never beyond the tool call's
        (with a margin to stop it and report), so it never outlives the call."""
        deadline = current_deadline()
        if deadline is None:
            return self.command_timeout
        left = deadline.remaining()
        return min(self.command_timeout, left - min(1.0, left / 4))


def _lines(text: str) -> list[str]:
    """A file's lines as edit_file sees them: split at "\\n" only (a "\\r" stays on its
    line; str.splitlines would also split at "\\x0c", "\\u2028" ...)."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _text_or_none(folder: int, name: str) -> str | None:
    """A file's text for searching and diffing; None for binary, very large or
    vanished files. Opened without following a link."""
    try:
        fd = os.open(name or ".", _FILE, dir_fd=folder)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as file:
        data = file.read(MAX_FILE_BYTES + 1)
    return None if _is_binary(data) else data.decode("utf-8", errors="replace")


def _matches(compiled: regex.Pattern[str], texts: Iterable[tuple[str, str]],
             seconds: float) -> Iterator[tuple[str, int, str]]:
    """(file, line number, line) for every line that matches, file by file.

    Only the first MAX_LINE_CHARS characters of a line are searched, and the whole
    search may take `seconds` of matching.

    Raises:
        TimeoutError: the matching took longer than `seconds` in all.
    """
    budget = seconds
    for file, text in texts:
        for number, line in enumerate(_lines(text), start=1):
            if budget <= 0:
                raise TimeoutError(f"the search took longer than {seconds:g} s")
            started = time.monotonic()
            found = compiled.search(line[:MAX_LINE_CHARS], timeout=budget,
                                    concurrent=True)  # other threads go on meanwhile
            budget -= time.monotonic() - started
            if found:
                yield file, number, line


def _occurrences(text: str, old: str) -> list[int]:
    """Start offsets of every occurrence of `old` in `text`, overlapping ones too
    ("ab\\nab\\n" occurs twice in "ab\\nab\\nab\\n": at 0 and at 3)."""
    starts: list[int] = []
    index = text.find(old)
    while index != -1:
        starts.append(index)
        index = text.find(old, index + 1)
    return starts


def _same_line_endings(text: str, old: str, new: str) -> tuple[str, str]:
    """`old` and `new` with the file's line endings: read_file does not show "\\r", so
    in a file whose lines end in "\\r\\n" a multi-line `old` copied from it has "\\n";
    and the lines `new` brings end in "\\r\\n" like the others."""
    if "\r\n" not in text:
        return old, new

    def crlf(value: str) -> str:
        return re.sub(r"(?<!\r)\n", "\r\n", value)

    return (old if old in text else crlf(old)), crlf(new)


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

    `run_command`'s time limit in the registry is the command's own plus
    COMMAND_GRACE, so the command is stopped (and reported) before the registry
    would give up on it.

    Args:
        root: the workspace folder.
        policy: approves writes and commands; the default allows a few safe commands.
        command_timeout: seconds before `run_command` kills a command.
    """
    workspace = Workspace(root, policy, command_timeout)
    registry = ToolRegistry()
    for name in TOOL_NAMES:
        if name == "run_command":  # the command's own limit, plus time to be stopped
            registry.register(workspace.run_command, timeout=command_timeout + COMMAND_GRACE)
        else:
            registry.register(getattr(workspace, name))
    return registry


# ---------------------------------------------------------------------------
# What did the agent change?
# ---------------------------------------------------------------------------


def snapshot(root: str | Path) -> dict[str, str]:
    """The text of every file in a folder, by relative path.

    Binary and very large files are skipped, and so are links: the files they point
    to are in the snapshot themselves. After MAX_SNAPSHOT_BYTES of text, a file is
    kept as one line with its size and SHA-256, so a change still shows in the diff.
    Folders deeper than MAX_DEPTH are not read.

    Args:
        root: the folder, e.g. the workspace before the agent runs.
    """
    workspace = Workspace(root, "allow-all")
    texts: dict[str, str] = {}
    kept = 0
    with workspace._locate(".") as top:
        for shown, info, folder, name in workspace._entries(top):
            text = _text_or_none(folder, name) if stat.S_ISREG(info.st_mode) else None
            if text is None:
                continue
            if kept + len(text) > MAX_SNAPSHOT_BYTES:  # keep memory bounded
                digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
                text = (f"[{len(text)} characters, sha256 {digest}: not kept, the snapshot "
                        "is full]\n")
            texts[shown] = text
            kept += len(text)
    return texts


def workspace_diff(before: Path | dict[str, str], root: str | Path) -> str:
    """What changed in `root` since `before`, as a unified diff with a/ and b/ prefixes.

    It stops after MAX_DIFF_CHARS characters and names the files it left out.

    Args:
        before: a `snapshot()` taken earlier, or a folder holding the earlier state.
        root: the folder now.
    """
    old = before if isinstance(before, dict) else snapshot(before)
    new = snapshot(root)
    parts: list[str] = []
    size = 0
    changed = [name for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]
    for i, name in enumerate(changed):
        headers = [f"--- a/{name}\n" if name in old else "--- /dev/null\n",
                   f"+++ b/{name}\n" if name in new else "+++ /dev/null\n"]
        hunks = list(difflib.unified_diff(_diff_lines(old.get(name, "")),
                                          _diff_lines(new.get(name, ""))))
        piece = "".join(headers + hunks[2:])  # difflib's own two header lines are replaced
        if size + len(piece) > MAX_DIFF_CHARS:  # keep whole lines up to the cap, then stop
            parts.append(piece[: MAX_DIFF_CHARS - size].rpartition("\n")[0] + "\n")
            rest = changed[i + 1:]
            names = ", ".join(rest[:100]) + " …" * (len(rest) > 100)
            parts.append(f"[diff stopped at {MAX_DIFF_CHARS} characters, inside {name}; "
                         f"{len(rest)} more changed files: {names or '(none)'}]\n")
            break
        parts.append(piece)
        size += len(piece)
    return "".join(parts)


def _diff_lines(text: str) -> list[str]:
    """Lines with their endings; a missing final newline is marked as git marks it."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def remove_tree(root: str | Path) -> None:
    """Delete a folder and everything in it, however deeply nested, never following
    a link (shutil.rmtree recurses, and a 1,100-level tree raises RecursionError).

    Args:
        root: the folder to delete.
    """
    top = os.open(root, _DIR)
    try:
        waiting = [""]  # folders to empty: names in `root` ("" is `root` itself)
        moved = 0
        while waiting:
            name = waiting.pop()
            folder = os.open(name or ".", _DIR, dir_fd=top)
            try:
                for entry in os.listdir(folder):
                    info = os.stat(entry, dir_fd=folder, follow_symlinks=False)
                    if not stat.S_ISDIR(info.st_mode):
                        os.unlink(entry, dir_fd=folder)
                    elif not name:
                        waiting.append(entry)
                    else:  # flatten: move the subfolder up into `root`, no deeper than 1
                        moved += 1
                        flat = f".removing-{moved}-{uuid.uuid4().hex[:8]}"
                        os.rename(entry, flat, src_dir_fd=folder, dst_dir_fd=top)
                        waiting.append(flat)
            finally:
                os.close(folder)
            if name:
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(root)
