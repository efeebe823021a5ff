"""Undo for the terminal agent: put the workspace back as it was, byte for byte, or refuse.

A turn may change anything in the workspace: `edit_file` rewrites one file, but a
command can delete a folder, rewrite a 30 MB data file or swap a file for a link. We
cannot know in advance which files a command will touch, so before every turn the
session takes a `Checkpoint` of the whole workspace:

    store.checkpoint(root)     before a turn: the state of every entry (its stat), and the
        │                      bytes of every file copied into a content-addressed store on
        │                      disk (objects/<sha256>), once per content: a file whose stat
        │                      has not changed since the last checkpoint is not read again
        ▼
    ... the turn runs: tools, commands ...
        │
    checkpoint.changes()       what differs now (a stat that changed is hashed again)
    checkpoint.restore()       1. compare: what to remove, what to put back
                               2. check: every file to put back has its bytes in the
                                  store, nothing is left unchecked  <- else it refuses
                               3. stage: copy those bytes out of the store into a     and
                                  staging folder inside the workspace, checking each  changes
                                  sha256                                              nothing
                               4. commit: move what the turn made aside, create folders,
                                  rename each staged file into place

It never writes through a link: every folder is opened one name at a time with
O_NOFOLLOW, and a file is put back by renaming a new file over the entry (a link in
its place is replaced, never followed). A file that was turned into a link to another
file gets its own bytes back; the other file is not touched.

What a checkpoint does not cover, on purpose: the folders workspace.IGNORED_DIRS names
(.git, __pycache__, .pytest_cache), and the project's own `.vibe_agent/` folder at the
top (the person's permission rules: a rule written by answering "A" during a turn is
not a change of that turn, and /undo leaves it): they are neither saved nor restored. Owners and
modification times are not restored (permission bits are).

Trade-off: correctness first. The first checkpoint copies every file into the store
(on disk, never all in memory: 1 MB at a time), and every checkpoint stats every
entry, like `git status`. As root, a sandboxed command changes every file's owner
and back, so every file is hashed again after a command (its content is stored only
once). A file that could not be saved (the store is full, it could not be read, it
kept changing) is recorded as such: /undo refuses when that file changed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .tree import Found, remove_tree, walk_tree
from .workspace import IGNORED_DIRS, MAX_DEPTH

SETTINGS_DIR = ".vibe_agent"  # the project's rules (permissions.py): the person's, not undone

MAX_STORE_BYTES = 2_000_000_000  # bytes of new content one session's store may keep
CHUNK = 1 << 20  # bytes read at a time: memory stays small, however large a file
STAGING_PREFIX = ".vibe-undo-"  # the staging folder /undo makes in the workspace root

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # NONBLOCK: a FIFO must not hang us


class UndoError(Exception):
    """/undo could not finish; the message says what happened, in Chinese, for the person."""


class UndoRefused(UndoError):
    """/undo cannot put the workspace back exactly, so it changed nothing."""


@dataclass(frozen=True)
class Entry:
    """One thing in the workspace at a checkpoint: a file, a folder, a link or other."""

    kind: str  # "file", "dir", "link" or "other" (a FIFO, a socket, a device)
    mode: int  # the permission bits
    stamp: tuple[int, ...] = ()  # (size, mtime_ns, ctime_ns, inode, device) of a file
    digest: str | None = None  # a file's sha256; None when it could not be read
    kept: bool = False  # its bytes are in the store
    target: str | None = None  # what a link points to
    problem: str | None = None  # why a file's bytes were not kept (Chinese)


def _stamp(info: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file's bytes change (ctime cannot be set back by a command)."""
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


def _kind(info: os.stat_result) -> str:
    if stat.S_ISREG(info.st_mode):
        return "file"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    return "link" if stat.S_ISLNK(info.st_mode) else "other"


def _read_chunks(fd: int) -> Iterator[bytes]:
    """The bytes behind an open file, CHUNK at a time."""
    while chunk := os.read(fd, CHUNK):
        yield chunk


def walk(root_fd: int) -> Iterator[Found]:
    """Everything under the open folder `root_fd` (`vibe_agent.tree.walk_tree`), parents
    before children. Links are never entered, ignored folders and the staging folder
    are skipped, and a folder MAX_DEPTH levels down is yielded as deep (its contents
    are not walked)."""
    return walk_tree(root_fd, skip=_not_covered, max_depth=MAX_DEPTH)


def _not_covered(path: str, info: os.stat_result) -> bool:
    """Whether a checkpoint leaves this entry out (and, for a folder, all it holds)."""
    name = path.rpartition("/")[2]
    return name in IGNORED_DIRS or path == SETTINGS_DIR or (
        name == path and name.startswith(STAGING_PREFIX))


class UndoStore:
    """Copies of file contents, by sha256, in a folder of their own (objects/ab/abcd…).

    Args:
        folder: where the copies go (the session's state folder; created when needed).
        max_bytes: the most bytes of new content it keeps; a file past that is not kept.
    """

    def __init__(self, folder: str | Path, max_bytes: int = MAX_STORE_BYTES) -> None:
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self.used = 0  # bytes of content written so far
        self.known: dict[str, Entry] = {}  # path -> its entry when last seen (not read again)

    def object(self, digest: str) -> Path:
        return self.folder / "objects" / digest[:2] / digest

    def checkpoint(self, root: str | Path) -> Checkpoint:
        """The state of `root` now, with the bytes of every file kept in the store."""
        root = Path(root).resolve()
        entries, deep = self.scan(root, keep=True)
        return Checkpoint(root, entries, deep, self)

    def scan(self, root: Path, keep: bool) -> tuple[dict[str, Entry], list[str]]:
        """Every entry under `root` (see `walk`), and the folders too deep to walk.

        A file whose stamp is what it was when last seen is not read again; another
        is hashed, and with `keep` its bytes are copied into the store as well.
        """
        entries: dict[str, Entry] = {}
        deep: list[str] = []
        root_fd = os.open(root, _DIR)
        try:
            for path, info, folder, name, too_deep in walk(root_fd):
                if too_deep:
                    deep.append(path)
                entries[path] = self._entry(path, info, folder, name, keep)
        finally:
            os.close(root_fd)
        self.known = {path: entry for path, entry in entries.items() if entry.kind == "file"}
        return entries, deep

    def _entry(self, path: str, info: os.stat_result, folder: int, name: str,
               keep: bool) -> Entry:
        mode, kind = stat.S_IMODE(info.st_mode), _kind(info)
        if kind == "link":
            return Entry("link", mode, target=os.readlink(name, dir_fd=folder))
        if kind != "file":
            return Entry(kind, mode)
        seen = self.known.get(path)
        if seen is not None and seen.stamp == _stamp(info) and (seen.kept or not keep):
            return Entry("file", mode, seen.stamp, seen.digest, seen.kept, problem=seen.problem)
        if keep and self.used + info.st_size > self.max_bytes:
            return Entry("file", mode, _stamp(info), problem=(
                f"撤销用的存储已满（{self.max_bytes:,} 字节），没有存下它"))
        for _ in range(2):  # a file that changes while it is read is read once more
            try:
                digest, stamp = self._read(folder, name, keep)
            except OSError as exc:
                return Entry("file", mode, _stamp(info), problem=(
                    f"读不了它（{exc.strerror or exc}）"))
            if stamp is not None:
                return Entry("file", mode, stamp, digest, kept=keep or self.has(digest))
        return Entry("file", mode, _stamp(info), problem="它一直在变，没能存下一个完整的版本")

    def has(self, digest: str) -> bool:
        return self.object(digest).is_file()

    def _read(self, folder: int, name: str, keep: bool) -> tuple[str, tuple[int, ...] | None]:
        """Hash one file (and copy it into the store when `keep`), in one pass.

        Returns the sha256 and the file's stamp, or a None stamp when the file
        changed while it was being read (the copy is then thrown away).
        """
        fd = os.open(name, _FILE, dir_fd=folder)
        temp = None
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                raise OSError(errno.EINVAL, "不是普通文件了")
            digest = hashlib.sha256()
            if keep:
                (self.folder / "tmp").mkdir(parents=True, exist_ok=True)
                temp = self.folder / "tmp" / uuid.uuid4().hex
                with open(temp, "xb") as copy:
                    for chunk in _read_chunks(fd):
                        digest.update(chunk)
                        copy.write(chunk)
            else:
                for chunk in _read_chunks(fd):
                    digest.update(chunk)
            after = os.fstat(fd)
            if _stamp(after) != _stamp(before):
                return digest.hexdigest(), None
            if temp is not None:
                target = self.object(digest.hexdigest())
                if not target.is_file():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(temp, target)
                    self.used += after.st_size
            return digest.hexdigest(), _stamp(after)
        finally:
            os.close(fd)
            if temp is not None:
                temp.unlink(missing_ok=True)


@dataclass
class Checkpoint:
    """The workspace as it was before one turn; `restore()` puts it back."""

    root: Path
    entries: dict[str, Entry]
    deep: list[str]  # folders too deep to walk (MAX_DEPTH): /undo refuses while there are any
    store: UndoStore = field(repr=False)

    def changes(self) -> list[str]:
        """The paths that differ now from this checkpoint (new, changed or gone), sorted."""
        now, _ = self.store.scan(self.root, keep=False)
        return sorted(path for path in self.entries.keys() | now.keys()
                      if _differs(self.entries.get(path), now.get(path)))

    def restore(self) -> list[str]:
        """Put the workspace back as it was at this checkpoint, or change nothing.

        Returns:
            The paths that were put back or removed, sorted ([] when nothing differed).

        Raises:
            UndoRefused: something cannot be put back exactly (its bytes were not kept,
                a folder is too deep to check, a file changed during /undo ...);
                nothing was changed.
            UndoError: a rename failed half-way (a full disk, a read-only folder).
        """
        now, deep_now = self.store.scan(self.root, keep=False)
        changed = sorted(path for path in self.entries.keys() | now.keys()
                         if _differs(self.entries.get(path), now.get(path)))
        if not changed:
            return []
        # 1. compare: what goes away (new, or of another kind: a file that became a link)
        #    and what comes back; sorted, so a folder comes before what is inside it
        gone = [path for path in changed if path in now and (
            path not in self.entries or self.entries[path].kind != now[path].kind)]
        remove = [path for path in gone if not _inside_any(path, gone)]
        put_back = [path for path in changed if path in self.entries]
        # 2. check everything before anything is written
        problems = self._problems(put_back, [*self.deep, *(p for p in deep_now
                                                            if p in self.entries)])
        if problems:
            raise UndoRefused("没有撤销，工作区一点也没改：" + "；".join(problems[:10])
                              + (f"；还有 {len(problems) - 10} 处" if len(problems) > 10 else ""))
        root_fd = os.open(self.root, _DIR)
        stage = f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
        try:
            # 3. stage: every file and link to put back, made in full inside the workspace
            try:
                os.mkdir(stage, 0o700, dir_fd=root_fd)
                staged = {path: self._stage(path, root_fd, stage, number)
                          for number, path in enumerate(put_back)
                          if self.entries[path].kind in ("file", "link")}
            except OSError as exc:
                raise UndoRefused(f"没有撤销，工作区一点也没改：准备恢复的文件时出错"
                                  f"（{exc.strerror or exc}）") from None
            self._still(now, changed)  # nothing moved while we staged (a race)
            # 4. commit: renames and new folders only, from the top down
            try:
                self._commit(root_fd, stage, remove, put_back, staged)
            except (OSError, UndoRefused) as exc:
                raise UndoError(f"撤销到一半出错了（{exc}）：工作区可能只恢复了一部分，"
                                "请用 /diff 看看现在的样子") from None
        finally:
            with contextlib.suppress(OSError):
                remove_tree(self.root / stage)
            os.close(root_fd)
        return changed

    def _problems(self, put_back: list[str], deep: list[str]) -> list[str]:
        """Why some of `put_back` cannot be put back exactly (Chinese, one per path)."""
        problems = []
        for path in put_back:
            entry = self.entries[path]
            if entry.kind == "file" and not entry.kept:
                problems.append(f"{path}：{entry.problem or '没有存下它的内容'}")
            elif entry.kind == "other":
                problems.append(f"{path}：是特殊文件（管道、设备……），没法重建")
        return problems + [f"{path}：文件夹嵌套超过 {MAX_DEPTH} 层，没法检查里面"
                           for path in deep]

    def _commit(self, root_fd: int, stage: str, remove: list[str], put_back: list[str],
                staged: dict[str, str]) -> None:
        """Move what goes away into the staging folder, then put each entry back."""
        trash = os.open(stage, _DIR, dir_fd=root_fd)
        with _closing(trash):
            for number, path in enumerate(remove):
                parent, name = _open_parent(root_fd, path)
                with _closing(parent):
                    os.rename(name, f"removed-{number}", src_dir_fd=parent, dst_dir_fd=trash)
            for path in put_back:
                self._put(path, root_fd, trash, staged.get(path))

    def _stage(self, path: str, root_fd: int, stage: str, number: int) -> str:
        """A copy of the file (or link) at `path` as it was, in the staging folder."""
        entry, name = self.entries[path], f"staged-{number}"
        folder = os.open(stage, _DIR, dir_fd=root_fd)
        with _closing(folder):
            if entry.kind == "link":
                os.symlink(entry.target or "", name, dir_fd=folder)
                return name
            try:
                source = open(self.store.object(entry.digest or ""), "rb")
            except OSError:
                raise UndoRefused(f"没有撤销，工作区一点也没改：{path} 存下的内容不见了") from None
            digest = hashlib.sha256()
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o600, dir_fd=folder)
            with source, os.fdopen(fd, "wb") as copy:
                while chunk := source.read(CHUNK):
                    digest.update(chunk)
                    copy.write(chunk)
                os.fchmod(copy.fileno(), entry.mode)
            if digest.hexdigest() != entry.digest:
                raise UndoRefused(f"没有撤销，工作区一点也没改：{path} 存下的内容被改过了")
            return name

    def _still(self, before: dict[str, Entry], changed: list[str]) -> None:
        """Refuse if something /undo is about to touch changed since it looked."""
        for path in changed:
            try:
                parent, name = _open_parent(self.root, path)
            except UndoRefused:  # its folder is gone or a link: then so is the entry
                info = None
            else:
                with _closing(parent):
                    try:
                        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
                    except FileNotFoundError:
                        info = None
            seen = before.get(path)
            moved = (info is None) != (seen is None) or (
                info is not None and seen is not None and seen.kind == "file"
                and _stamp(info) != seen.stamp)
            if moved:
                raise UndoRefused(f"没有撤销，工作区一点也没改：{path} 在撤销的同时被改动了，"
                                  "请再试一次")

    def _put(self, path: str, root_fd: int, trash: int, staged: str | None) -> None:
        """Put one entry back: a folder is made (or its mode set), a file or link renamed in."""
        entry = self.entries[path]
        parent, name = _open_parent(root_fd, path)
        with _closing(parent):
            if staged is not None:
                os.rename(staged, name, src_dir_fd=trash, dst_dir_fd=parent)
                return
            with contextlib.suppress(FileExistsError):  # a folder whose mode changed is kept
                os.mkdir(name, dir_fd=parent)
            folder = os.open(name, _DIR, dir_fd=parent)
            with _closing(folder):
                os.fchmod(folder, entry.mode)


def _differs(before: Entry | None, now: Entry | None) -> bool:
    """Whether an entry is not what it was (a file: its bytes or its mode)."""
    if before is None or now is None:
        return before is not now
    if before.kind != now.kind or before.mode != now.mode or before.target != now.target:
        return True
    if before.kind != "file" or before.stamp == now.stamp:
        return False
    return before.digest is None or now.digest != before.digest


def _inside_any(path: str, others: list[str]) -> bool:
    """Whether a parent folder of `path` is among `others` (then it moves with it)."""
    return any(path.startswith(other + "/") for other in others)


def _open_parent(root: int | Path, path: str) -> tuple[int, str]:
    """The open folder that holds `path` (walked without following any link) and the
    last name. The caller closes the folder.

    Raises:
        UndoRefused: a folder on the way is missing, or is a link or not a folder.
    """
    *folders, name = path.split("/")
    fd = os.open(root, _DIR) if isinstance(root, Path) else os.dup(root)
    for part in folders:
        try:
            child = os.open(part, _DIR, dir_fd=fd)
        except OSError:
            os.close(fd)
            raise UndoRefused(f"没有撤销：{path} 所在的文件夹不见了，或者换成了链接") from None
        os.close(fd)
        fd = child
    return fd, name


@contextlib.contextmanager
def _closing(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def session_store(folder: str | Path | None = None) -> UndoStore:
    """A store for one session, removed when the store is garbage-collected or the
    program ends (call `remove_store` to remove it earlier).

    Args:
        folder: the session's state folder (the store goes into a new folder inside);
            None: a new temporary folder.
    """
    if folder is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="vibe-undo-", dir=folder))
    store = UndoStore(home)
    weakref.finalize(store, shutil.rmtree, home, ignore_errors=True)
    return store


def remove_store(store: UndoStore) -> None:
    """Delete a store's folder (the session is over: nothing can be undone any more)."""
    shutil.rmtree(store.folder, ignore_errors=True)
