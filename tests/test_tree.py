"""The one folder walker (vibe_agent.tree.walk_tree) that the coding tools, undo, the
sandbox's hand-over and the bench's judge share, and remove_tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from vibe_agent.tree import OPEN_FOLDER, raise_error, remove_tree, walk_tree


def walked(root: Path, **options) -> list[tuple[str, bool]]:
    top = os.open(root, OPEN_FOLDER)
    try:
        return [(found.path, found.deep) for found in walk_tree(top, **options)]
    finally:
        os.close(top)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "b" / "inner").mkdir(parents=True)
    (tmp_path / "b" / "inner" / "z.txt").write_text("z")
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    return tmp_path


def test_it_walks_parents_before_children_sorted_by_name(tree):
    assert walked(tree) == [(".git", False), (".git/HEAD", False), ("a.txt", False),
                            ("b", False), ("b/inner", False), ("b/inner/z.txt", False)]
    assert walked(tree, base="x")[0] == ("x/.git", False)


def test_a_skipped_folder_is_not_entered(tree):
    paths = [path for path, _ in walked(tree, skip=lambda path, info: path == ".git")]
    assert paths == ["a.txt", "b", "b/inner", "b/inner/z.txt"]


def test_a_link_is_yielded_never_entered_even_a_loop(tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("s")
    (tree / "out").symlink_to(outside)
    (tree / "b" / "loop").symlink_to(tree / "b")
    paths = [path for path, _ in walked(tree)]
    assert "out" in paths and "b/loop" in paths
    assert not any(path.startswith(("out/", "b/loop/")) for path in paths)


def test_a_folder_at_max_depth_is_yielded_as_deep_and_not_entered(tmp_path):
    (tmp_path / "1" / "2" / "3").mkdir(parents=True)
    assert walked(tmp_path, max_depth=2) == [("1", False), ("1/2", True)]
    assert walked(tmp_path, max_depth=None)[-1] == ("1/2/3", False)


def test_1100_nested_folders_are_walked_without_recursion_or_leaked_handles(tmp_path):
    """Deeper than Python's recursion limit; every handle is closed, also when the
    caller stops early."""
    top = os.open(tmp_path, OPEN_FOLDER)
    folder = os.dup(top)
    for _ in range(1100):
        os.mkdir("d", dir_fd=folder)
        child = os.open("d", OPEN_FOLDER, dir_fd=folder)
        os.close(folder)
        folder = child
    os.close(folder)
    before = open_fds()
    assert 1100 > sys.getrecursionlimit()
    assert len(list(walk_tree(top))) == 1100
    assert len(list(walk_tree(top, max_depth=64))) == 64
    walker = walk_tree(top)
    for _ in range(500):
        next(walker)
    walker.close()  # the caller stops halfway (a cap was reached)
    assert open_fds() == before
    os.close(top)
    remove_tree(tmp_path)
    assert not tmp_path.exists()


def test_a_folder_that_vanishes_before_it_is_opened_goes_to_onerror(tree):
    """skip() runs between the stat and the open: removing the folder there is the
    race of a command deleting it while the walk is on its way."""
    def vanish(path, info):
        if path == "b/inner":
            remove_tree(tree / "b" / "inner")
        return False

    errors: list[OSError] = []
    assert [path for path, _ in walked(tree, skip=vanish, onerror=errors.append)] == [
        ".git", ".git/HEAD", "a.txt", "b", "b/inner"]
    assert len(errors) == 1 and isinstance(errors[0], FileNotFoundError)


def test_raise_error_ends_the_walk(tree):
    def vanish(path, info):
        if path == "b":
            remove_tree(tree / "b")
        return False

    with pytest.raises(FileNotFoundError):
        walked(tree, skip=vanish, onerror=raise_error)
    assert walked(tree, skip=lambda path, info: False)  # the default passes over it


def test_remove_tree_never_follows_a_link(tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "keep.txt").write_text("k")
    (tree / "b" / "out").symlink_to(outside)
    remove_tree(tree)
    assert not tree.exists() and (outside / "keep.txt").read_text() == "k"
