"""The workspace a coding agent may not leave: its paths, and the guards every tool passes.

`WorkspaceFolder` is the part of `vibe_agent.coding.Workspace` that all six tools
share (the tools themselves are in read_tools.py, edit_tools.py and coding.py):

- every path must stay inside the workspace: absolute paths, "~", ".." that climbs
  out and symbolic links leading out are refused;
- a path is never checked first and opened later by name (a command running in the
  background could swap a folder for a link in between): it is walked one folder at
  a time from the workspace's own handle, never following a link the walk has not
  checked itself (`O_NOFOLLOW`, `dir_fd`);
- writes and commands go through the approval `Policy` first; a command or path with
  control characters (which could hide part of it from the person approving it) is
  refused before anyone is asked;
- when the registry has given up on a call (its time limit), the call no longer
  writes or runs anything.

Every guard raises `WorkspaceError`, whose message the tool returns after "Error: ".
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .registry import current_deadline
from .sandbox import DEFAULT_POLICY, Action, Policy, Rule
from .tree import OPEN_FOLDER, Found, walk_tree

IGNORED_DIRS = frozenset({".git", "__pycache__", ".pytest_cache"})
MAX_FILE_BYTES = 1_000_000  # larger files are not read (nor searched, nor diffed)
MAX_DEPTH = 64  # folders nested deeper are not walked (listing, search, snapshot)
MAX_LINKS = 40  # links followed while walking one path (as Linux allows)
COMMAND_TIMEOUT = 30.0

_DIR = OPEN_FOLDER  # open a folder, never through a link
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # NONBLOCK: a FIFO must not hang us
# Characters that can make a terminal or a notebook show something other than what
# runs: C0/C1 controls (carriage return, ANSI escapes ...) and bidirectional overrides.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


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
class Place:
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



class WorkspaceFolder:
    """One folder the tools may not leave, and the guards they share.

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
    def _locate(self, path: str, make_folders: bool = False) -> Iterator[Place]:
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
                here = Place(folders[-1], name, "/".join([*names, name]))
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
            yield Place(folders[-1], "", "/".join(names) or ".")
        finally:
            for folder in folders:
                os.close(folder)

    def _open_folder(self, place: Place) -> int:
        """An open handle of the folder at `place` (the caller closes it)."""
        if not place.name:
            return os.dup(place.folder)
        return os.open(place.name, _DIR, dir_fd=place.folder)

    def _read_bytes(self, place: Place, path: str) -> bytes:
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

    def _text_file(self, place: Place, path: str, strict: bool = False) -> str:
        """The text of an existing text file (`strict`: refuse invalid UTF-8)."""
        data = self._read_bytes(place, path)
        if _is_binary(data):
            raise WorkspaceError(f"'{path}' is a binary file, not text.")
        try:
            return data.decode("utf-8", errors="strict" if strict else "replace")
        except UnicodeDecodeError:
            raise WorkspaceError(f"'{path}' is not UTF-8 text, so it cannot be edited "
                                 "safely. Use write_file to replace it.") from None

    def _entries(self, top: Place) -> Iterator[Found]:
        """Everything under `top` (`vibe_agent.tree.walk_tree`): sorted, parents first;
        ignored folders and folders deeper than MAX_DEPTH are not entered, links are
        never entered (a loop cannot trap the walk)."""
        folder = self._open_folder(top)
        try:
            yield from walk_tree(folder, "" if top.shown == "." else top.shown,
                                 skip=_ignored, max_depth=MAX_DEPTH)
        finally:
            os.close(folder)

    def walk(self, top: Path) -> Iterator[Path]:
        """Files and folders under `top`, sorted; no ignored folders, no links leading out."""
        with self._locate(self.shown(top)) as place:
            for shown, info, *_ in self._entries(place):
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

    @staticmethod
    def _acting() -> contextlib.AbstractContextManager[None]:
        """While writing or running: refused once the registry gave up on this call."""
        deadline = current_deadline()
        return contextlib.nullcontext() if deadline is None else deadline.acting()


def _ignored(path: str, info: os.stat_result) -> bool:
    """Whether the walk passes over this entry (and, for a folder, all it holds)."""
    return path.rpartition("/")[2] in IGNORED_DIRS


def text_or_none(folder: int, name: str) -> str | None:
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
