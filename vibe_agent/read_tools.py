"""The coding agent's reading tools: list_files, read_file and search_code.

They never change anything, so they ask nobody: a path only has to stay inside the
workspace (`vibe_agent.workspace`). Their outputs are capped and the cap is
announced, and a search's regular expression has a time limit of its own (the
`regex` package's), so a pattern that backtracks catastrophically gets an answer
the model can act on, not a hang.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator

import regex

from .registry import current_deadline
from .workspace import MAX_DEPTH, Place, WorkspaceError, WorkspaceFolder, text_or_none

MAX_READ_CHARS = 20_000  # read_file stops after this many characters and says how to go on
MAX_LIST_ENTRIES = 200
MAX_HITS = 50  # search_code matches shown
MAX_HIT_CHARS = 200  # of one matching line
MAX_LINE_CHARS = 10_000  # search_code looks at no more than this much of one line
SEARCH_SECONDS = 5.0  # the most time search_code's regular expression may take


class ReadTools(WorkspaceFolder):
    """The tools that look at the workspace: list_files, read_file, search_code."""

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

    def _listed(self, top: Place) -> Iterator[str]:
        """The lines of list_files: folders end in "/", links leading out are left out."""
        depth = 0 if top.shown == "." else top.shown.count("/") + 1
        for shown, info, *_ in self._entries(top):
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

    def _texts(self, top: Place, info: os.stat_result) -> Iterator[tuple[str, str]]:
        """(shown path, text) of the text files at `top`: the file itself, or every
        file under the folder (through links that stay inside, never out)."""
        if not stat.S_ISDIR(info.st_mode):
            yield top.shown, text_or_none(top.folder, top.name) or ""
            return
        for shown, entry, folder, name, _ in self._entries(top):
            if stat.S_ISREG(entry.st_mode):
                yield shown, text_or_none(folder, name) or ""
            elif stat.S_ISLNK(entry.st_mode) and self._link_target(shown) is not None:
                with self._locate(shown) as place:  # walked again: it may have changed
                    target = place.lstat()
                    if target is not None and stat.S_ISREG(target.st_mode):
                        yield shown, text_or_none(place.folder, place.name) or ""


def _lines(text: str) -> list[str]:
    """A file's lines as edit_file sees them: split at "\\n" only (a "\\r" stays on its
    line; str.splitlines would also split at "\\x0c", "\\u2028" ...)."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines



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

