"""Walking and removing a folder tree by open handles, without recursion.

Every tool that looks at a whole workspace (listing, search, snapshots, undo
checkpoints, the sandbox lending the workspace to another user, the bench's judge)
walks it with `walk_tree`: one folder handle at a time from an open folder, so

- a link is never entered (a loop of links cannot trap the walk, and a link out of
  the workspace never leads the walk outside);
- a folder swapped for a link while the walk is on its way is not followed: each
  folder is opened with O_NOFOLLOW from the handle of the folder that holds it;
- the walk keeps its own stack, so 1,100 nested folders (which os.walk and
  shutil.rmtree would meet with RecursionError) are walked like 3.

`remove_tree` deletes a tree the same way.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW  # a folder, never through a link


class Found(NamedTuple):
    """One entry the walk met."""

    path: str  # relative to the folder walked (with `base` in front), forward slashes
    info: os.stat_result  # the entry itself (lstat: a link is not followed)
    folder: int  # the open folder that holds it (valid until the walk goes on)
    name: str  # its name in that folder
    deep: bool  # a folder `max_depth` levels down: yielded, its contents not walked


def walk_tree(top: int, base: str = "", *,
              skip: Callable[[str, os.stat_result], bool] | None = None,
              max_depth: int | None = None,
              onerror: Callable[[OSError], None] | None = None) -> Iterator[Found]:
    """Everything under the open folder `top`, parents before children, sorted by name.

    Args:
        top: an open folder handle (not closed here).
        base: put in front of every path ("tests" gives "tests/test_app.py").
        skip: (path, lstat) -> True for an entry to leave out; a folder left out
            is not entered.
        max_depth: folders this many levels below `top` are yielded as `deep` and
            not entered; None walks every level.
        onerror: called with the OSError when a folder cannot be opened or listed
            (it may raise); by default such a folder is passed over, as is an entry
            removed while the walk was on its way.
    """
    stack = [(os.dup(top), base, iter(sorted(os.listdir(top))))]  # the open folders, top down
    try:
        while stack:
            folder, here, names = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(folder)
                stack.pop()
                continue
            path = f"{here}/{name}" if here else name
            try:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:  # removed while we were walking
                continue
            if skip is not None and skip(path, info):
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            deep = is_dir and max_depth is not None and len(stack) >= max_depth
            yield Found(path, info, folder, name, deep)
            if is_dir and not deep:
                try:
                    child = os.open(name, OPEN_FOLDER, dir_fd=folder)
                except OSError as exc:  # swapped for a link or removed meanwhile
                    if onerror is not None:
                        onerror(exc)
                    continue
                try:
                    listing = iter(sorted(os.listdir(child)))
                except OSError as exc:
                    os.close(child)
                    if onerror is not None:
                        onerror(exc)
                    continue
                stack.append((child, path, listing))
    finally:
        for folder, _, _ in stack:
            os.close(folder)


def raise_error(error: OSError) -> None:
    """An `onerror` for walk_tree: a folder it cannot open or list ends the walk."""
    raise error


def remove_tree(root: str | Path) -> None:
    """Delete a folder and everything in it, however deeply nested, never following
    a link (shutil.rmtree recurses, and a 1,100-level tree raises RecursionError).

    Args:
        root: the folder to delete.
    """
    top = os.open(root, OPEN_FOLDER)
    try:
        waiting = [""]  # folders to empty: names in `root` ("" is `root` itself)
        moved = 0
        while waiting:
            name = waiting.pop()
            folder = os.open(name or ".", OPEN_FOLDER, dir_fd=top)
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
