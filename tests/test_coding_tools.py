"""Tests for vibe_agent.coding: the six workspace tools, their guards, and workspace_diff.

Every guard is a row: each way of spelling a path outside the workspace, tried on each
tool that takes a path; edits that match 0, 1 or many times; policies that refuse.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from vibe_agent import coding
from vibe_agent.coding import (
    MAX_HITS,
    TOOL_NAMES,
    Workspace,
    coding_registry,
    snapshot,
    workspace_diff,
)
from vibe_agent.registry import DEFAULT_TIMEOUT, ToolRegistry
from vibe_agent.sandbox import NOT_ISOLATED_NOTE, SANDBOX_ENV, Policy

pytestmark = pytest.mark.filterwarnings("ignore::vibe_agent.sandbox.SandboxWarning")

APP = """\
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A small project, with secrets and links leading out of it next door."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET = 'do not read'\n")
    root = tmp_path / "workspace"
    (root / "pkg").mkdir(parents=True)
    (root / "app.py").write_text(APP)
    (root / "pkg" / "util.py").write_text("SECRET_SAUCE = 1\n# TODO: more\n")
    (root / "notes.txt").write_text("notes\n")
    for ignored in (".git", "__pycache__", ".pytest_cache"):
        (root / ignored).mkdir()
        (root / ignored / "hidden.txt").write_text("SECRET in an ignored folder\n")
    (root / "link_to_secret").symlink_to(outside / "secret.txt")
    (root / "link_to_etc").symlink_to("/etc")
    (root / "linked_dir").symlink_to(outside)  # a linked folder leading out
    (root / "pkg" / "alias.py").symlink_to(root / "app.py")  # a link that stays inside
    return root


@pytest.fixture
def tools(root: Path) -> Workspace:
    return Workspace(root, "allow-all", command_timeout=5.0)


# --- the registry the model sees --------------------------------------------------------


def test_registry_has_exactly_the_six_tools(root):
    registry = coding_registry(root)
    assert registry.names == list(TOOL_NAMES)
    parameters = {name: list(registry[name].parameters["properties"]) for name in registry.names}
    assert parameters == {
        "list_files": ["path"],
        "read_file": ["path", "start_line", "end_line"],
        "search_code": ["pattern", "path"],
        "write_file": ["path", "content"],
        "edit_file": ["path", "old", "new"],
        "run_command": ["command"],
    }


def test_a_refusal_counts_as_a_failed_call(root):
    result = coding_registry(root).call("read_file", {"path": "../outside/secret.txt"})
    assert result.error_kind == "tool_error" and result.output.startswith("Error:")


# --- paths must stay inside the workspace -----------------------------------------------

OUT = "it leads outside the workspace"
ESCAPES = [
    # (path, reason in the error, id)
    ("../outside/secret.txt", OUT, "dot-dot"),
    ("pkg/../../outside/secret.txt", OUT, "dot-dot-after-a-folder"),
    ("/etc/passwd", "absolute paths are not allowed", "absolute"),
    ("~/.bashrc", "'~' (a home folder) is outside the workspace", "home"),
    ("link_to_secret", OUT, "symlink-to-a-file-outside"),
    ("link_to_etc/passwd", OUT, "symlink-to-etc"),
    ("linked_dir", OUT, "symlinked-folder"),
    ("linked_dir/secret.txt", OUT, "file-in-a-symlinked-folder"),
]

CALLS = {
    "read_file": lambda tools, path: tools.read_file(path),
    "write_file": lambda tools, path: tools.write_file(path, "pwned\n"),
    "edit_file": lambda tools, path: tools.edit_file(path, "SECRET", "PWNED"),
    "list_files": lambda tools, path: tools.list_files(path),
    "search_code": lambda tools, path: tools.search_code("SECRET", path),
}


@pytest.mark.parametrize("tool", CALLS)
@pytest.mark.parametrize(("path", "reason"), [row[:2] for row in ESCAPES],
                         ids=[row[2] for row in ESCAPES])
def test_paths_leading_out_are_refused(tools, root, tool, path, reason):
    output = CALLS[tool](tools, path)
    assert output == (f"Error: cannot use the path '{path}': {reason}. Use a path relative to "
                      "the workspace root, such as 'app.py' or 'tests/'.")
    assert (root.parent / "outside" / "secret.txt").read_text() == "SECRET = 'do not read'\n"


@pytest.mark.parametrize("tool", CALLS)
def test_absolute_paths_are_refused_even_inside(tools, root, tool):
    assert "absolute paths are not allowed" in CALLS[tool](tools, str(root / "app.py"))
    assert (root / "app.py").read_text() == APP


def test_listing_and_search_do_not_follow_links_out_or_enter_ignored_folders(tools):
    assert tools.list_files() == "\n".join([
        "app.py", "notes.txt", "pkg/", "pkg/alias.py", "pkg/util.py"])
    assert tools.search_code("SECRET") == "pkg/util.py:1: SECRET_SAUCE = 1"


def test_a_link_that_stays_inside_is_fine(tools):
    assert tools.read_file("pkg/alias.py", 1, 1) == "   1| def add(a, b):"


# --- read_file ------------------------------------------------------------------------

READS = [
    # (start_line, end_line, first line shown, last line shown, id)
    (None, None, "   1| def add(a, b):", "  10|     return a * b", "whole-file"),
    (5, 6, "   5| def sub(a, b):", "   6|     return a - b", "a-range"),
    (9, None, "   9| def mul(a, b):", "  10|     return a * b", "to-the-end"),
    (None, 2, "   1| def add(a, b):", "   2|     return a + b", "from-the-start"),
    (9, 99, "   9| def mul(a, b):", "  10|     return a * b", "end-past-the-end"),
]


@pytest.mark.parametrize(("start", "end", "first", "last"), [row[:4] for row in READS],
                         ids=[row[4] for row in READS])
def test_read_file_numbers_lines(tools, start, end, first, last):
    lines = tools.read_file("app.py", start, end).splitlines()
    assert (lines[0], lines[-1]) == (first, last)


def test_read_file_caps_long_files_and_says_how_to_go_on(tools, root):
    (root / "long.txt").write_text("".join(f"line {n} " + "x" * 90 + "\n" for n in range(1, 501)))
    output = tools.read_file("long.txt")
    assert len(output) < coding.MAX_READ_CHARS + 200
    last_shown = int(output.splitlines()[-2].split("|")[0])
    assert output.splitlines()[-1] == (
        f"[stopped at line {last_shown} of 500 to keep the output short; "
        f"call read_file with start_line={last_shown + 1} to go on]")
    assert tools.read_file("long.txt", last_shown + 1).startswith(f"{last_shown + 1:>4}| line")


READ_ERRORS = [
    # (path, start_line, end_line, text in the error, id)
    ("missing.py", None, None, "there is no file 'missing.py'. Call list_files", "missing"),
    ("pkg", None, None, "'pkg' is a folder", "folder"),
    ("app.py", 11, None, "'app.py' has 10 lines", "start-past-the-end"),
    ("app.py", 5, 2, "Choose 1 <= start_line <= end_line", "start-after-end"),
    ("app.py", 0, None, "Choose 1 <= start_line", "start-zero"),
    ("image.png", None, None, "binary file", "binary"),
]


@pytest.mark.parametrize(("path", "start", "end", "error"), [row[:4] for row in READ_ERRORS],
                         ids=[row[4] for row in READ_ERRORS])
def test_read_file_errors(tools, root, path, start, end, error):
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    output = tools.read_file(path, start, end)
    assert output.startswith("Error:") and error in output, output


# --- search_code -----------------------------------------------------------------------


SEARCHES = [
    # (pattern, path, expected output, id)
    (r"def \w+\(a", "app.py",
     "app.py:1: def add(a, b):\napp.py:5: def sub(a, b):\napp.py:9: def mul(a, b):", "regex"),
    ("TODO", ".", "pkg/util.py:2: # TODO: more", "in-a-subfolder"),
    ("return a / b", "pkg", "No matches for 'return a / b' in 'pkg'.", "no-match-is-no-error"),
    ("return a \\* b", "pkg", "pkg/alias.py:10: return a * b", "through-a-link-inside"),
    ("(unclosed", ".", "Error: invalid regular expression '(unclosed': missing ), "
     "unterminated subpattern at position 0. Fix it and try again.", "invalid-regex"),
    ("x", "nowhere", "Error: there is no 'nowhere'. Call list_files to see what exists.",
     "missing-path"),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), [row[:3] for row in SEARCHES],
                         ids=[row[3] for row in SEARCHES])
def test_search_code(tools, pattern, path, expected):
    assert tools.search_code(pattern, path) == expected


def test_search_code_stops_after_enough_hits(tools, root):
    (root / "many.py").write_text("hit = 1\n" * (MAX_HITS + 10))
    lines = tools.search_code("hit", "many.py").splitlines()
    assert len(lines) == MAX_HITS + 1
    assert lines[-2] == f"many.py:{MAX_HITS}: hit = 1"
    assert lines[-1] == f"[stopped after {MAX_HITS} matches; use a more specific pattern or path]"


def test_list_files_stops_after_enough_entries(tools, root):
    (root / "many").mkdir()
    for n in range(coding.MAX_LIST_ENTRIES + 5):
        (root / "many" / f"file{n:03}.txt").write_text("")
    lines = tools.list_files("many").splitlines()
    assert len(lines) == coding.MAX_LIST_ENTRIES + 1
    assert lines[-2] == f"many/file{coding.MAX_LIST_ENTRIES - 1:03}.txt"
    assert lines[-1] == (f"[stopped after {coding.MAX_LIST_ENTRIES} entries; list a subfolder "
                         "to see the rest]")


@pytest.mark.parametrize("tool", CALLS)
def test_a_name_too_long_is_refused_as_text(tools, tool):
    output = CALLS[tool](tools, "x" * 300)
    assert output == (f"Error: cannot use the path '{'x' * 300}': file name too long. Use a "
                      "path relative to the workspace root, such as 'app.py' or 'tests/'.")


def test_a_link_loop_is_refused_not_a_crash(tools, root):
    (root / "loop").symlink_to(root / "loop")
    assert tools.read_file("loop").startswith("Error: cannot use the path 'loop'")
    assert "loop" not in tools.list_files()


# --- write_file -----------------------------------------------------------------------


def test_write_file_creates_folders_and_writes_exactly(tools, root):
    content = "print('你好')\r\nno newline at the end"
    assert tools.write_file("new/deep/hello.py", content) == \
        f"Wrote {len(content)} characters (2 lines) to new/deep/hello.py."
    assert (root / "new" / "deep" / "hello.py").read_bytes() == content.encode()


def test_write_file_is_atomic(tools, root, monkeypatch):
    """The new content goes to a temporary file in the target's folder, then os.replace."""
    replaced = []
    real_replace = os.replace

    def spy(source, target, *, src_dir_fd, dst_dir_fd):
        assert src_dir_fd == dst_dir_fd  # one folder, opened once by the walk
        assert os.path.samefile(f"/proc/self/fd/{src_dir_fd}", root)
        replaced.append((source, target))
        assert (root / target).read_text() == APP  # the old content is whole until the swap
        assert (root / source).read_text() == "new content\n"
        real_replace(source, target, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(os, "replace", spy)
    tools.write_file("app.py", "new content\n")
    [(source, target)] = replaced
    assert target == "app.py" and source.endswith(".tmp") and "/" not in source
    assert (root / "app.py").read_text() == "new content\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tools, root, monkeypatch):
    def broken_replace(source, target, **dir_fds):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    result = coding_registry(root, policy="allow-all").call(
        "write_file", {"path": "app.py", "content": "half"})
    assert result.output.startswith("Error:") and "disk full" in result.output
    assert (root / "app.py").read_text() == APP
    assert not list(root.glob(".*.tmp"))


def test_write_file_keeps_the_mode_of_an_executable(tools, root):
    script = root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o755)
    tools.write_file("run.sh", "echo new\n")
    assert script.stat().st_mode & 0o777 == 0o755


def test_write_file_into_a_folder_is_an_error(tools):
    assert tools.write_file("pkg", "x").startswith("Error: 'pkg' is a folder")


# --- edit_file --------------------------------------------------------------------------

EDITS = [
    # (old, new, tool output, id)
    ("    return a - b\n", "    return b - a\n", "Edited app.py at line 6.", "unique"),
    ("def mul(a, b):\n    return a * b", "def mul(a, b):\n    return b * a",
     "Edited app.py at line 9.", "several-lines"),
    ("return a / b", "x", "Error: the text in 'old' does not occur in 'app.py'. Call read_file "
     "and copy the exact text, spaces and indentation included.", "zero-matches"),
    ("def ", "async def ", "Error: the text in 'old' occurs 3 times in 'app.py' (lines 1, 5, "
     "9). Add surrounding lines to 'old' so that it matches exactly once.", "three-matches"),
    ("(a, b):\n    return a", "(x, y):\n    return x", "Error: the text in 'old' occurs 3 times "
     "in 'app.py' (lines 1, 5, 9). Add surrounding lines to 'old' so that it matches exactly "
     "once.", "matches-spanning-lines"),
    ("", "x", "Error: 'old' is empty. Copy the exact text to replace.", "empty-old"),
]


@pytest.mark.parametrize(("old", "new", "output"), [row[:3] for row in EDITS],
                         ids=[row[3] for row in EDITS])
def test_edit_file(tools, root, old, new, output):
    assert tools.edit_file("app.py", old, new) == output
    expected = APP.replace(old, new) if output.startswith("Edited") else APP
    assert (root / "app.py").read_text() == expected


def test_edit_file_refuses_a_file_that_is_not_utf8(tools, root):
    (root / "latin.txt").write_bytes("café\n".encode("latin-1"))
    assert "not UTF-8 text" in tools.edit_file("latin.txt", "caf", "CAF")
    assert (root / "latin.txt").read_bytes() == "café\n".encode("latin-1")


# --- the policy covers writes and commands ------------------------------------------------

READ_ONLY = Policy(lambda action: action.kind != "write" or "这次只允许读，不允许改文件")

REFUSED = [
    # (tool, arguments, start of the error, id)
    ("write_file", {"path": "app.py", "content": "x"},
     "Error: the write was not approved: 这次只允许读", "write"),
    ("edit_file", {"path": "app.py", "old": "a + b", "new": "b + a"},
     "Error: the write was not approved: 这次只允许读", "edit"),
    ("run_command", {"command": "touch made.txt"},
     "Error: the command was not approved: touch is not on the allow list", "command"),
]


@pytest.mark.parametrize(("tool", "arguments", "error"), [row[:3] for row in REFUSED],
                         ids=[row[3] for row in REFUSED])
def test_refused_actions_do_not_happen(root, tool, arguments, error):
    before = snapshot(root)
    policy = READ_ONLY if tool != "run_command" else coding.DEFAULT_POLICY
    result = coding_registry(root, policy=policy).call(tool, arguments)
    assert result.output.startswith(error) and result.error_kind == "tool_error"
    assert workspace_diff(before, root) == ""


def test_ask_without_a_person_refuses(root, monkeypatch):
    def no_stdin(prompt: str) -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", no_stdin)
    output = coding_registry(root, policy="ask").call("write_file", {"path": "x.py",
                                                                     "content": "x"}).output
    assert output.startswith("Error: the write was not approved: a person has to confirm "
                             "this, but nobody can answer")
    assert not (root / "x.py").exists()


# --- run_command ------------------------------------------------------------------------

COMMANDS = [
    # (command, tool output without the notice, id)
    ("echo hello", "exit code: 0\nhello", "ok"),
    ("python -c 'import sys; print(\"bad\"); sys.exit(1)'", "exit code: 1\nbad", "failing"),
    ("true", "exit code: 0\n(no output)", "no-output"),
]


@pytest.mark.parametrize(("command", "expected"), [row[:2] for row in COMMANDS],
                         ids=[row[2] for row in COMMANDS])
def test_run_command(tools, command, expected):
    output = tools.run_command(command)
    assert output.removeprefix(NOT_ISOLATED_NOTE + "\n") == expected


def test_run_command_time_limit_is_an_error(root):
    tools = Workspace(root, "allow-all", command_timeout=0.5)
    output = tools.run_command("echo before; sleep 30")
    assert output.startswith("Error: the command did not finish within 0.5 s and was stopped")
    assert output.endswith("output so far:\nbefore")


def test_run_command_without_isolation_says_so_first(tools, monkeypatch):
    monkeypatch.setenv(SANDBOX_ENV, "none")
    assert tools.run_command("echo hi") == f"{NOT_ISOLATED_NOTE}\nexit code: 0\nhi"


def test_run_command_runs_pytest_in_the_sandbox(root, monkeypatch):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; CI installs it")
    monkeypatch.delenv(SANDBOX_ENV, raising=False)
    (root / "test_app.py").write_text("from app import add\n\n\ndef test_add():\n"
                                      "    assert add(2, 2) == 5\n")
    # the venv's plugins (nbval, hypothesis ...) take seconds to load; this test needs none
    command = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q"
    registry = coding_registry(root, policy="allow-all")
    output = registry.call("run_command", {"command": command}).output
    assert output.startswith("exit code: 1\n")
    assert "FAILED test_app.py::test_add - assert 4 == 5" in output
    assert "1 failed" in output


# --- workspace_diff --------------------------------------------------------------------


def test_workspace_diff_shows_added_changed_and_deleted_files(tools, root):
    before = snapshot(root)
    tools.edit_file("app.py", "    return a - b\n", "    return b - a\n")
    tools.write_file("new.py", "x = 1\n")
    (root / "notes.txt").unlink()
    (root / "__pycache__" / "junk.txt").write_text("ignored\n")
    assert workspace_diff(before, root) == "".join(line + "\n" for line in [
        "--- a/app.py",
        "+++ b/app.py",
        "@@ -3,7 +3,7 @@",
        " ",
        " ",
        " def sub(a, b):",
        "-    return a - b",
        "+    return b - a",
        " ",
        " ",
        " def mul(a, b):",
        "--- /dev/null",
        "+++ b/new.py",
        "@@ -0,0 +1 @@",
        "+x = 1",
        "--- a/notes.txt",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-notes",
    ])


def test_workspace_diff_against_a_folder(tools, root, tmp_path):
    original = tmp_path / "original"
    shutil.copytree(root, original, symlinks=True)
    tools.write_file("notes.txt", "notes\nmore")
    assert workspace_diff(original, root) == (
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1,2 @@\n notes\n+more\n"
        "\\ No newline at end of file\n")


def test_workspace_diff_is_empty_without_changes(root):
    assert workspace_diff(snapshot(root), root) == ""


def test_snapshot_skips_binary_files_ignored_folders_and_links(root):
    (root / "image.png").write_bytes(b"\x89PNG\0\0")
    assert sorted(snapshot(root)) == ["app.py", "notes.txt", "pkg/util.py"]


# ---------------------------------------------------------------------------------------
# A hostile model: every call goes through the registry by name, with a JSON string, the
# way a model sends it. Races, links, control characters, hangs.
# ---------------------------------------------------------------------------------------


def output_of(registry: ToolRegistry, name: str, **arguments: object) -> str:
    return registry.call(name, json.dumps(arguments)).output


# --- a folder swapped for a link while the tools work (finding 3) -----------------------

RACER = Path(__file__).resolve().parents[1] / "benchmarks" / "swap_racer.py"
RACE_CALLS = 1000


@pytest.fixture
def race(tmp_path: Path):
    """A workspace whose folder d/ a background process keeps swapping for a link out."""
    outside, root = tmp_path / "outside", tmp_path / "ws"
    outside.mkdir()
    (root / "d").mkdir(parents=True)
    for folder, text in ((outside, "OUTSIDE-SECRET\n"), (root / "d", "value = 1\n")):
        (folder / "f.txt").write_text(text)
    racer = subprocess.Popen([sys.executable, RACER, str(root), str(outside)],
                             stdout=subprocess.PIPE, text=True)
    assert racer.stdout is not None and racer.stdout.readline() == "racing\n"
    yield root, outside
    racer.kill()
    racer.wait()


def escapes(tool: str, registry: ToolRegistry, outside: Path, i: int) -> bool:
    """One call of `tool` on d/...; True when it read or changed a file outside."""
    if tool == "read_file":
        return "OUTSIDE-SECRET" in output_of(registry, "read_file", path="d/f.txt")
    if tool == "write_file":
        output_of(registry, "write_file", path=f"d/new{i}.txt", content="pwned\n")
        return (outside / f"new{i}.txt").exists()
    if tool == "search_code":
        return "OUTSIDE-SECRET" in output_of(registry, "search_code", pattern="SECRET", path="d")
    output_of(registry, "edit_file", path="d/f.txt", old="OUTSIDE", new="PWNED")
    return (outside / "f.txt").read_text() != "OUTSIDE-SECRET\n"


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file", "search_code"])
def test_a_folder_swapped_for_a_link_never_lets_a_call_out(race, tool):
    root, outside = race
    registry = coding_registry(root, policy="allow-all")
    escaped = sum(escapes(tool, registry, outside, i) for i in range(RACE_CALLS))
    assert escaped == 0, f"{escaped} of {RACE_CALLS} calls of {tool} escaped"
    assert sorted(path.name for path in outside.iterdir()) == ["f.txt"]


# --- a command never outlives its tool call (finding 2) ---------------------------------


def test_the_registry_waits_longer_than_the_command_may_run(root):
    registry = coding_registry(root, command_timeout=60)
    assert registry["run_command"].timeout == 60 + coding.COMMAND_GRACE
    assert registry["read_file"].timeout == DEFAULT_TIMEOUT


@pytest.mark.timeout(30)
def test_a_command_is_killed_before_the_registry_gives_up(root):
    """The tool's limit (1.5 s here) is shorter than the command's (20 s): the command
    gets only the time the call has left, and nothing happens after the answer."""
    registry = ToolRegistry()
    registry.register(Workspace(root, "allow-all", command_timeout=20).run_command, timeout=1.5)
    started = time.monotonic()
    result = registry.call("run_command", json.dumps(
        {"command": "echo started; sleep 3; echo late > late.txt"}))
    assert time.monotonic() - started < 1.5
    assert result.error_kind == "tool_error" and "did not finish within" in result.output
    assert "started" in result.output
    time.sleep(3)
    assert not (root / "late.txt").exists()


# --- a late approval never acts (finding 5) ---------------------------------------------


def slow_yes(seconds: float) -> Policy:
    """A person who answers "y" after `seconds`."""
    def ask(prompt: str) -> str:
        time.sleep(seconds)
        return "y"
    return Policy("ask", ask=ask)


LATE = [
    # (tool, arguments, what must not appear, id)
    ("write_file", {"path": "late.txt", "content": "x"}, "late.txt", "write"),
    ("edit_file", {"path": "notes.txt", "old": "notes", "new": "late"}, "notes.txt", "edit"),
    ("run_command", {"command": "touch late.txt"}, "late.txt", "command"),
]


@pytest.mark.parametrize(("tool", "arguments", "unchanged"), [row[:3] for row in LATE],
                         ids=[row[3] for row in LATE])
def test_an_approval_after_the_time_limit_does_nothing(root, tool, arguments, unchanged):
    before = snapshot(root)
    workspace = Workspace(root, slow_yes(0.6))
    registry = ToolRegistry()
    registry.register(getattr(workspace, tool), timeout=0.3)
    result = registry.call(tool, json.dumps(arguments))
    assert result.error_kind == "timeout"  # the model is told the call timed out ...
    time.sleep(1.5)  # ... the person says "y" at 0.6 s ...
    assert workspace_diff(before, root) == ""  # ... and nothing happens


def test_an_approval_in_time_still_acts(root):
    registry = ToolRegistry()
    registry.register(Workspace(root, slow_yes(0.1)).write_file, timeout=2)
    assert output_of(registry, "write_file", path="ok.txt", content="x").startswith("Wrote")
    assert (root / "ok.txt").read_text() == "x"


# --- "ask" cannot be spoofed with control characters (finding 4) --------------------------

SPOOFS = [
    # (tool, arguments, the escape named in the error, id)
    ("run_command", {"command": "rm -rf tests\rpython -m pytest -q"}, "\\r", "carriage-return"),
    ("run_command", {"command": "rm -rf tests\x1b[2K\x1b[1Gpython -m pytest -q"}, "\\x1b",
     "ansi-erase-line"),
    ("run_command", {"command": "rm -rf tests #\x1b]0;x\x07"}, "\\x07", "ansi-title"),
    ("run_command", {"command": "rm -rf tests\x9b2K"}, "\\x9b", "c1-csi"),
    ("run_command", {"command": "echo \u202etset-yp m- nohtyp"}, "\\u202e", "bidi-override"),
    ("write_file", {"path": "app.py\r", "content": "x"}, "\\r", "path-carriage-return"),
    ("write_file", {"path": "\x1b[2Kapp.py", "content": "x"}, "\\x1b", "path-ansi"),
    ("edit_file", {"path": "notes.txt\x1b[8m", "old": "notes", "new": "x"}, "\\x1b",
     "edit-path-ansi"),
]


@pytest.mark.parametrize(("tool", "arguments", "named"), [row[:3] for row in SPOOFS],
                         ids=[row[3] for row in SPOOFS])
def test_control_characters_are_refused_before_anyone_is_asked(root, tool, arguments, named):
    asked: list[str] = []
    before = snapshot(root)
    registry = coding_registry(root, policy=Policy("ask", ask=lambda q: asked.append(q) or "y"))
    output = output_of(registry, tool, **arguments)
    assert output.startswith("Error:") and named in output and "control characters" in output
    assert asked == []  # nobody was shown a spoofed prompt
    assert workspace_diff(before, root) == ""


@pytest.mark.parametrize("command", ["printf 'a\\tb\\n'", "python -c 'print(1)'\nls",
                                     "echo 你好"], ids=["tab-escape", "two-lines", "chinese"])
def test_ordinary_commands_still_reach_the_person(root, command):
    asked: list[str] = []
    registry = coding_registry(root, policy=Policy("ask", ask=lambda q: asked.append(q) or "n"))
    assert "the user said no" in output_of(registry, "run_command", command=command)
    assert len(asked) == 1 and command in asked[0]


# --- a catastrophic regular expression (finding 6) --------------------------------------

CATASTROPHIC = [
    # (pattern, line in the file, id)
    ("(a+)+$", "a" * 25 + "b", "nested-plus"),
    ("(a|aa)+$", "a" * 36 + "b", "alternation"),
    ("(x+x+)+y", "x" * 26, "two-pluses"),
]


def search_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "tool-search_code"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("pattern", "line"), [row[:2] for row in CATASTROPHIC],
                         ids=[row[2] for row in CATASTROPHIC])
def test_a_catastrophic_pattern_is_bounded_for_real(root, pattern, line):
    """Python's `re` holds the interpreter lock while it backtracks, so the registry's
    1 s limit could not even fire; now the registry answers in time, other threads
    go on, and the search itself stops soon after."""
    (root / "data.txt").write_text(f"{line}\n")
    registry = ToolRegistry()
    registry.register(Workspace(root, "allow-all").search_code, timeout=1.0)
    started = time.monotonic()
    arguments = json.dumps({"pattern": pattern, "path": "data.txt"})
    output = registry.call("search_code", arguments).output
    assert time.monotonic() - started < 1.5  # the registry's limit held: nothing stalled
    assert output == f"No matches for {pattern!r} in 'data.txt'." or (
        "took longer than" in output or "did not finish within 1 seconds" in output)
    ends = time.monotonic() + 10
    while search_threads() and time.monotonic() < ends:
        time.sleep(0.05)
    assert not search_threads()  # the abandoned search stopped by itself


def test_search_looks_at_the_start_of_a_huge_line_only(root):
    (root / "min.js").write_text("x" * (coding.MAX_LINE_CHARS + 10) + "NEEDLE\nNEEDLE2\n")
    assert output_of(coding_registry(root), "search_code", pattern="NEEDLE",
                     path="min.js") == "min.js:2: NEEDLE2"


# --- workspace edge cases (finding 11) ---------------------------------------------------


def test_read_file_caps_a_single_huge_line(root):
    (root / "one.txt").write_text("y" * 300_000)
    output = output_of(coding_registry(root), "read_file", path="one.txt")
    assert len(output) < coding.MAX_READ_CHARS + 200
    assert output.endswith("[line 1 goes on: it has 300000 characters; use search_code to find "
                           "text in it]")


CRLF = "a = 1\r\nb = 2\r\nc = 3\r\n"
TRICKY_EDITS = [
    # (file content, old, new, tool output, content afterwards, id)
    (CRLF, "a = 1\nb = 2", "a = 1\nb = 20", "Edited x.txt at line 1.",
     "a = 1\r\nb = 20\r\nc = 3\r\n", "crlf-multi-line-old-copied-from-read-file"),
    (CRLF, "b = 2\r\nc", "B = 2\r\nc", "Edited x.txt at line 2.", "a = 1\r\nB = 2\r\nc = 3\r\n",
     "crlf-old-with-the-real-endings"),
    (CRLF, "b = 2", "b = 2\nb2 = 4", "Edited x.txt at line 2.",
     "a = 1\r\nb = 2\r\nb2 = 4\r\nc = 3\r\n", "crlf-new-lines-get-the-same-endings"),
    ("ab\nab\nab\n", "ab\nab\n", "X\n", "Error: the text in 'old' occurs 2 times in 'x.txt' "
     "(lines 1, 2). Add surrounding lines to 'old' so that it matches exactly once.",
     "ab\nab\nab\n", "overlapping-occurrences"),
    ("aaa\n", "aa", "b", "Error: the text in 'old' occurs 2 times in 'x.txt' (lines 1, 1). "
     "Add surrounding lines to 'old' so that it matches exactly once.", "aaa\n",
     "overlapping-in-one-line"),
]


@pytest.mark.parametrize(("content", "old", "new", "output", "after"),
                         [row[:5] for row in TRICKY_EDITS], ids=[row[5] for row in TRICKY_EDITS])
def test_edit_file_tricky_texts(root, content, old, new, output, after):
    (root / "x.txt").write_bytes(content.encode())
    registry = coding_registry(root, policy="allow-all")
    assert output_of(registry, "edit_file", path="x.txt", old=old, new=new) == output
    assert (root / "x.txt").read_bytes() == after.encode()


def test_read_file_says_a_file_has_windows_line_endings(root):
    (root / "x.txt").write_bytes(CRLF.encode())
    lines = output_of(coding_registry(root), "read_file", path="x.txt").splitlines()
    assert lines[0].startswith("[this file ends its lines with \\r\\n (Windows)")
    assert lines[1:] == ["   1| a = 1", "   2| b = 2", "   3| c = 3"]


def test_read_file_and_edit_file_count_lines_the_same_way(root):
    """str.splitlines also splits at a form feed or U+2028; edit_file counts "\\n" only."""
    (root / "x.txt").write_text("x = 1\x0cy = 2\u2028z\nlast = 3\n")
    registry = coding_registry(root, policy="allow-all")
    assert output_of(registry, "read_file", path="x.txt").splitlines()[-1] == "   2| last = 3"
    assert output_of(registry, "edit_file", path="x.txt", old="last",
                     new="LAST") == "Edited x.txt at line 2."


DEPTH = 1100


@pytest.fixture
def deep(tmp_path: Path) -> Iterator[Path]:
    """A workspace holding a 1,100-level folder tree (built with dir_fd: paths get long)."""
    root = tmp_path / "deep"
    root.mkdir()
    folder = os.open(root, os.O_RDONLY)
    for _ in range(DEPTH):
        os.mkdir("d", dir_fd=folder)
        child = os.open("d", os.O_RDONLY, dir_fd=folder)
        os.close(folder)
        folder = child
    os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, dir_fd=folder))
    os.close(folder)
    yield root
    if root.exists():  # pytest's own clean-up of tmp_path would hit RecursionError
        coding.remove_tree(root)


def test_a_very_deep_tree_is_walked_without_recursion_errors(deep):
    registry = coding_registry(deep)
    listed = output_of(registry, "list_files").splitlines()
    assert len(listed) == coding.MAX_DEPTH
    assert listed[-1].endswith(f"d/ [not listed: more than {coding.MAX_DEPTH} folders deep]")
    assert output_of(registry, "search_code", pattern="x") == "No matches for 'x' in '.'."
    assert snapshot(deep) == {}


def test_remove_tree_removes_a_very_deep_tree(deep):
    """shutil.rmtree recurses (Python 3.11): a tree this deep raises RecursionError."""
    coding.remove_tree(deep)
    assert not deep.exists()


def test_remove_tree_never_follows_a_link(tmp_path, root):
    coding.remove_tree(root)
    assert not root.exists()
    assert (tmp_path / "outside" / "secret.txt").exists()


@pytest.mark.slow
def test_snapshot_and_diff_stay_bounded_for_big_workspaces(root):
    line = "z" * 99 + "\n"
    for n in range(60):  # 60 files of 900 kB: 54 MB of text
        (root / f"big{n:02}.txt").write_text(line * 9000)
    before = snapshot(root)
    assert sum(map(len, before.values())) < coding.MAX_SNAPSHOT_BYTES + 1000 * 60
    for n in range(60):
        (root / f"big{n:02}.txt").write_text(line.upper() * 9000)
    diff = workspace_diff(before, root)
    assert len(diff) < coding.MAX_DIFF_CHARS + 2000
    assert "more changed files: " in diff.splitlines()[-1]
    assert "big59.txt" in diff  # every changed file is at least named
