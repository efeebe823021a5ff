"""The coding agent's editing tools: write_file and edit_file.

A write is approved first (the workspace's `Policy`), and refused once the registry
has given up on the call. It goes to a temporary file in the folder the path's walk
reached, then `os.replace`: a folder swapped for a link meanwhile is never written
through, and a reader never sees half a file. edit_file replaces one exact, unique
piece of text, with the file's own line endings, and only if the file did not change
while the edit waited for approval.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import uuid
from pathlib import PurePosixPath

from .registry import CallAbandoned
from .sandbox import Action
from .workspace import NoSuchFolder, Place, WorkspaceError, WorkspaceFolder


class EditTools(WorkspaceFolder):
    """The tools that change files: write_file and edit_file."""

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

    def _write(self, place: Place, content: str) -> None:
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
