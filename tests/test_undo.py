"""vibe_agent.undo: a checkpoint before a turn, and /undo that restores byte for byte or
refuses and changes nothing — against the shapes a command can leave behind."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest

from vibe_agent import undo
from vibe_agent.undo import UndoRefused, UndoStore


def state(root: Path) -> dict[str, tuple[str, str]]:
    """Everything under `root`, links not followed: path -> (kind, content or target)."""
    found: dict[str, tuple[str, str]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            full = Path(folder, name)
            path = full.relative_to(root).as_posix()
            if full.is_symlink():
                found[path] = ("link", os.readlink(full))
            elif full.is_dir():
                found[path] = ("dir", oct(full.stat().st_mode & 0o7777))
            elif not full.is_file():  # a FIFO: never opened (it would block)
                found[path] = ("other", "")
            else:
                digest = hashlib.sha256(full.read_bytes()).hexdigest()
                found[path] = ("file", f"{digest} {oct(full.stat().st_mode & 0o7777)}")
    return found


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "app.py").write_text("print('hi')\n")
    (ws / "pkg" / "util.py").write_text("X = 1\n")
    (ws / "logo.png").write_bytes(bytes(range(256)) * 40)
    (ws / "b.txt").write_text("B\n")
    return ws


@pytest.fixture
def store(tmp_path: Path) -> UndoStore:
    return UndoStore(tmp_path / "store")


def rewrite_in_place(path: Path, data: bytes) -> None:
    with open(path, "r+b") as file:  # the same inode, as `echo x > file` does
        file.truncate(0)
        file.write(data)


CHANGES = [
    pytest.param(lambda ws: (ws / "app.py").write_text("broken\n"), id="text-edited"),
    pytest.param(lambda ws: rewrite_in_place(ws / "logo.png", b"\x00not a png"), id="binary"),
    pytest.param(lambda ws: (ws / "app.py").unlink(), id="file-deleted"),
    pytest.param(lambda ws: (ws / "new.txt").write_text("new\n"), id="file-created"),
    pytest.param(lambda ws: ((ws / "made" / "deeper").mkdir(parents=True),
                             (ws / "made" / "deeper" / "x.py").write_text("x")), id="tree-created"),
    pytest.param(lambda ws: [p.unlink() for p in (ws / "pkg").iterdir()] and
                 (ws / "pkg").rmdir(), id="folder-deleted"),
    pytest.param(lambda ws: (ws / "app.py").chmod(0o755), id="mode-changed"),
    pytest.param(lambda ws: ((ws / "app.py").unlink(), (ws / "app.py").mkdir()),
                 id="file-became-folder"),
    pytest.param(lambda ws: ([p.unlink() for p in (ws / "pkg").iterdir()], (ws / "pkg").rmdir(),
                             (ws / "pkg").write_text("a file now")), id="folder-became-file"),
    pytest.param(lambda ws: os.mkfifo(ws / "pipe"), id="fifo-created"),
    pytest.param(lambda ws: os.symlink("/etc/passwd", ws / "out"), id="link-out-created"),
]


@pytest.mark.parametrize("change", CHANGES)
def test_restore_puts_back_every_shape_byte_for_byte(root, store, change):
    before = state(root)
    checkpoint = store.checkpoint(root)
    change(root)
    assert state(root) != before
    assert checkpoint.changes()
    restored = checkpoint.restore()
    assert restored and state(root) == before
    assert checkpoint.changes() == []
    assert not [p for p in root.iterdir() if p.name.startswith(undo.STAGING_PREFIX)]


def test_nothing_changed_restores_nothing(root, store):
    checkpoint = store.checkpoint(root)
    assert checkpoint.changes() == [] and checkpoint.restore() == []


def test_a_file_turned_into_a_link_gets_its_bytes_back_and_the_target_is_untouched(root, store):
    (root / "a.txt").write_text("A\n")
    checkpoint = store.checkpoint(root)
    target_before = os.stat(root / "b.txt")
    (root / "a.txt").unlink()
    (root / "a.txt").symlink_to("b.txt")
    assert checkpoint.restore() == ["a.txt"]
    assert not (root / "a.txt").is_symlink() and (root / "a.txt").read_text() == "A\n"
    after = os.stat(root / "b.txt")
    assert (root / "b.txt").read_text() == "B\n"
    assert (after.st_ino, after.st_mtime_ns) == (target_before.st_ino, target_before.st_mtime_ns)


def test_a_folder_swapped_for_a_link_outside_writes_nothing_outside(root, store, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "util.py").write_text("OUTSIDE\n")
    before, outside_before = state(root), state(outside)
    checkpoint = store.checkpoint(root)
    (root / "pkg" / "util.py").unlink()
    (root / "pkg").rmdir()
    (root / "pkg").symlink_to(outside)
    checkpoint.restore()
    assert state(root) == before and state(outside) == outside_before


def test_a_retargeted_link_inside_is_put_back(root, store):
    (root / "link").symlink_to("app.py")
    before = state(root)
    checkpoint = store.checkpoint(root)
    (root / "link").unlink()
    (root / "link").symlink_to("b.txt")
    checkpoint.restore()
    assert state(root) == before


def test_a_link_out_is_not_followed_when_saving(root, store, tmp_path):
    (tmp_path / "secret").write_bytes(b"outside bytes")
    (root / "leak").symlink_to(tmp_path / "secret")
    store.checkpoint(root)
    digest = hashlib.sha256(b"outside bytes").hexdigest()
    assert not store.has(digest)


def test_a_30_mb_file_is_restored_with_little_memory(root, store):
    big = (b"0123456789abcdef" * 64 + b"\n") * 30_000  # 30.7 MB
    (root / "data.csv").write_bytes(big)
    tracemalloc.start()
    try:
        checkpoint = store.checkpoint(root)
        rewrite_in_place(root / "data.csv", b"changed\n")
        assert checkpoint.restore() == ["data.csv"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (root / "data.csv").read_bytes() == big
    assert peak < 5 * undo.CHUNK, f"{peak:,} bytes at the peak"


def test_unchanged_files_are_read_once_and_kept_once(root, store, monkeypatch):
    reads: list[str] = []
    original = UndoStore._read

    def counting(self, folder, name, keep):
        reads.append(name)
        return original(self, folder, name, keep)

    monkeypatch.setattr(UndoStore, "_read", counting)
    store.checkpoint(root)
    first = len(reads)
    (root / "app.py").write_text("changed\n")
    store.checkpoint(root)
    assert first == 4 and reads[first:] == ["app.py"]
    objects = list((store.folder / "objects").rglob("*"))
    assert len([p for p in objects if p.is_file()]) == 5  # four files, then one new content


def test_two_checkpoints_undo_two_turns(root, store):
    first = state(root)
    one = store.checkpoint(root)
    (root / "app.py").write_text("turn 1\n")
    two = store.checkpoint(root)
    (root / "app.py").write_text("turn 2\n")
    (root / "new.py").write_text("")
    two.restore()
    assert (root / "app.py").read_text() == "turn 1\n" and not (root / "new.py").exists()
    one.restore()
    assert state(root) == first


def test_a_file_not_saved_refuses_only_when_it_changed(root, tmp_path):
    small = UndoStore(tmp_path / "small", max_bytes=100)  # app.py fits, logo.png does not
    before = state(root)
    checkpoint = small.checkpoint(root)
    assert checkpoint.entries["logo.png"].problem and not checkpoint.entries["logo.png"].kept
    (root / "app.py").write_text("edited\n")
    assert checkpoint.restore() == ["app.py"] and state(root) == before  # logo.png unchanged
    checkpoint = small.checkpoint(root)
    (root / "app.py").write_text("edited again\n")
    rewrite_in_place(root / "logo.png", b"gone")
    changed = state(root)
    with pytest.raises(UndoRefused, match="logo.png.*存储已满"):
        checkpoint.restore()
    assert state(root) == changed  # refused: not even app.py was put back


def test_an_unreadable_file_is_reported_and_refused_if_changed(root, store, monkeypatch):
    original = UndoStore._read

    def unreadable(self, folder, name, keep):
        if name == "app.py":
            raise PermissionError(13, "Permission denied")
        return original(self, folder, name, keep)

    monkeypatch.setattr(UndoStore, "_read", unreadable)
    checkpoint = store.checkpoint(root)
    assert "读不了" in (checkpoint.entries["app.py"].problem or "")
    monkeypatch.setattr(UndoStore, "_read", original)
    (root / "app.py").write_text("changed\n")
    (root / "b.txt").write_text("changed too\n")
    changed = state(root)
    with pytest.raises(UndoRefused, match="app.py"):
        checkpoint.restore()
    assert state(root) == changed


def test_a_tampered_store_refuses_and_changes_nothing(root, store):
    checkpoint = store.checkpoint(root)
    store.object(checkpoint.entries["app.py"].digest or "").write_text("not what was saved")
    (root / "app.py").write_text("changed\n")
    (root / "new.txt").write_text("new")
    changed = state(root)
    with pytest.raises(UndoRefused, match="被改过"):
        checkpoint.restore()
    assert state(root) == changed


def test_a_store_that_vanished_refuses_and_changes_nothing(root, store):
    import shutil

    checkpoint = store.checkpoint(root)
    shutil.rmtree(store.folder)
    (root / "app.py").write_text("changed\n")
    changed = state(root)
    with pytest.raises(UndoRefused, match="不见了"):
        checkpoint.restore()
    assert state(root) == changed


def test_a_file_changing_while_it_is_saved_is_read_again(root, store, monkeypatch):
    chunks = undo._read_chunks
    calls = []

    def racing(fd):
        calls.append(fd)
        if len(calls) == 1:  # the first read of app.py: the file grows meanwhile
            with open(root / "app.py", "a") as file:
                file.write("# appended during the copy\n")
        yield from chunks(fd)

    monkeypatch.setattr(undo, "_read_chunks", racing)
    checkpoint = store.checkpoint(root)
    entry = checkpoint.entries["app.py"]
    data = (root / "app.py").read_bytes()
    assert entry.kept and entry.digest == hashlib.sha256(data).hexdigest()


def test_a_file_that_never_stops_changing_is_not_kept(root, store, monkeypatch):
    chunks = undo._read_chunks

    def always(fd):
        with open(root / "app.py", "a") as file:
            file.write("#")
        yield from chunks(fd)

    monkeypatch.setattr(undo, "_read_chunks", always)
    checkpoint = store.checkpoint(root)
    assert not checkpoint.entries["app.py"].kept
    assert "一直在变" in (checkpoint.entries["app.py"].problem or "")


def test_a_change_during_undo_refuses_and_changes_nothing(root, store, monkeypatch):
    checkpoint = store.checkpoint(root)
    (root / "app.py").write_text("turn\n")
    (root / "b.txt").write_text("turn\n")
    stage = undo.Checkpoint._stage

    def meddling(self, path, root_fd, folder, number):
        (root / "b.txt").write_text("someone else, meanwhile\n")
        return stage(self, path, root_fd, folder, number)

    monkeypatch.setattr(undo.Checkpoint, "_stage", meddling)
    with pytest.raises(UndoRefused, match="同时被改动"):
        checkpoint.restore()
    assert (root / "app.py").read_text() == "turn\n"
    assert not [p for p in root.iterdir() if p.name.startswith(undo.STAGING_PREFIX)]


def test_a_folder_too_deep_to_check_refuses(root, store):
    deep = root.joinpath(*["d"] * (undo.MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    checkpoint = store.checkpoint(root)
    assert checkpoint.deep
    (root / "app.py").write_text("changed\n")
    with pytest.raises(UndoRefused, match="嵌套"):
        checkpoint.restore()


def test_a_deep_tree_made_by_the_turn_is_removed(root, store):
    before = state(root)
    checkpoint = store.checkpoint(root)
    root.joinpath("made", *["d"] * (undo.MAX_DEPTH + 5)).mkdir(parents=True)
    checkpoint.restore()
    assert state(root) == before


def test_ignored_folders_are_neither_saved_nor_restored(root, store):
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    checkpoint = store.checkpoint(root)
    assert not any(path.startswith(".git") for path in checkpoint.entries)
    (root / ".git" / "HEAD").write_text("changed by git\n")
    assert checkpoint.restore() == []
    assert (root / ".git" / "HEAD").read_text() == "changed by git\n"


def test_the_projects_rules_are_neither_saved_nor_restored(root, store):
    """A rule the person wrote mid-turn (answer A) is not that turn's change to undo."""
    checkpoint = store.checkpoint(root)
    (root / ".vibe_agent").mkdir()
    (root / ".vibe_agent" / "settings.json").write_text('{"permissions": {}}\n')
    (root / "sub" / ".vibe_agent").mkdir(parents=True)  # only the top folder's is the rules'
    assert checkpoint.changes() == ["sub", "sub/.vibe_agent"]
    checkpoint.restore()
    assert (root / ".vibe_agent" / "settings.json").read_text() == '{"permissions": {}}\n'
    assert not (root / "sub").exists()


def test_the_session_store_is_removed(tmp_path):
    store = undo.session_store(tmp_path / "state")
    store.checkpoint(tmp_path / "state")
    assert store.folder.is_dir() and store.folder.parent == tmp_path / "state"
    undo.remove_store(store)
    assert not store.folder.exists()
