"""The prompt of the terminal agent (issue 28, "Input"), in a real pseudo-terminal.

`python -m vibe_agent code` runs in a pty (pexpect) with TERM=xterm-256color, and what
it prints is drawn by pyte, a terminal emulator, so a test reads the screen a person
would see (a half-erased Chinese character, a stray ^[[D). pyte also answers
prompt_toolkit's cursor-position request (CPR, ESC[6n) as a real terminal does.
The model is a scripted model (not an LLM) that answers every request with the same
words and keeps the requests it got, so a test checks what the model was sent.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import pyte
import pytest
from forkserver import ForkServerSpawn
from rich.console import Console
from terminal_helpers import clean_env

from vibe_agent.coding import Workspace
from vibe_agent.prompt_input import (
    MAX_COMPLETIONS,
    MAX_HISTORY_BYTES,
    MAX_HISTORY_ENTRIES,
    MAX_HISTORY_ENTRY,
    MAX_MESSAGE_CHARS,
    InputCompleter,
    ProjectHistory,
    project_history,
)
from vibe_agent.sandbox import why_not_isolated
from vibe_agent.terminal import COMMANDS

ROWS, COLS = 30, 100
ANSWER = "好的，收到。"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
ESC_ENTER = "\x1b\r"  # what Esc then Enter sends, and what a terminal sends for Alt-Enter
LEFT, UP, DOWN, BACKSPACE, CTRL_R = "\x1b[D", "\x1b[A", "\x1b[B", "\x7f", "\x12"

# The driver: the real command line, with the client replaced by a scripted model that
# answers ANSWER to everything; the requests it got are written to argv[1] at the end.
DRIVER = """
import json, sys
from vibe_agent.course import code_command
from vibe_agent.course.cli import main
from vibe_agent.course.scripted import ScriptedModel, answer

model = ScriptedModel(lambda body: answer("好的，收到。"))  # ANSWER
code_command._client = lambda mode, task: (
    model.client(), "input-scripted", "（脚本模型：测试用，不是 LLM）")
try:
    status = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w", encoding="utf-8") as file:
        json.dump(model.requests, file)
sys.exit(status)
"""


def environment(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path, COLUMNS=str(COLS), LINES=str(ROWS), TERM="xterm-256color")


class Terminal:
    """`code FOLDER` in a pty, drawn on a pyte screen; CPR requests are answered."""

    def __init__(self, folder: Path, tmp_path: Path) -> None:
        self.requests_file = tmp_path / f"requests-{time.monotonic_ns()}.json"
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.replies: list[str] = []
        self.screen.write_process_input = self.replies.append  # the terminal's answers
        self.child = ForkServerSpawn(sys.executable, ["-c", DRIVER, str(self.requests_file),
                                                      "code", str(folder), "--approve", "yolo"],
                                     env=environment(tmp_path), cwd=str(tmp_path), timeout=60,
                                     dimensions=(ROWS, COLS))
        self.wait_for_prompt()

    def pump(self, seconds: float = 0.05) -> bool:
        """Draw what the program printed in the next `seconds`; False once it ended."""
        try:
            data = self.child.read_nonblocking(65536, timeout=seconds)
        except pexpect.TIMEOUT:
            return True
        except pexpect.EOF:
            return False
        self.stream.feed(data)
        while self.replies:
            self.child.send(self.replies.pop(0))
        return True

    def rows(self) -> list[str]:
        return [row.rstrip() for row in self.screen.display]

    def text(self) -> str:
        return "\n".join(self.rows())

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.text():
            if not self.pump() or time.monotonic() > deadline:
                raise AssertionError(f"never shown: {text!r}; the screen:\n{self.text()}")

    def prompt_row(self) -> str:
        """The last row that starts with the prompt."""
        return next((row for row in reversed(self.rows()) if row.startswith("›")), "")

    def expect_prompt_row(self, expected: str, timeout: float = 20) -> None:
        """Wait until the prompt row is `expected` (a loaded machine draws late)."""
        deadline = time.monotonic() + timeout
        while self.prompt_row() != expected:
            if not self.pump() or time.monotonic() > deadline:
                raise AssertionError(f"the prompt row is {self.prompt_row()!r}, not "
                                     f"{expected!r}; the screen:\n{self.text()}")

    def wait_for_prompt(self, timeout: float = 60) -> None:
        """Wait until an empty prompt is the last row written, the cursor on it, and
        nothing more is arriving."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump(0.2)
            rows = self.rows()
            last = max((at for at, row in enumerate(rows) if row), default=-1)
            if rows[last] == "›" and self.screen.cursor.y == last and not self.child_busy():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no empty prompt; the screen:\n{self.text()}")

    def child_busy(self) -> bool:
        """Whether output is still arriving (drawn meanwhile)."""
        before = self.text()
        self.pump(0.1)
        return self.text() != before

    def type(self, keys: str, pause: float = 0.15) -> None:
        self.child.send(keys)
        end = time.monotonic() + pause
        while time.monotonic() < end:
            self.pump()

    def send(self, line: str) -> None:
        """Type a line and Enter; wait for the next prompt."""
        self.type(line + "\r")
        self.wait_for_prompt()

    def finish(self) -> list[dict[str, Any]]:
        """Ctrl-D, the exit status 0, and the requests the model got."""
        self.child.sendeof()
        deadline = time.monotonic() + 60
        while self.pump():
            assert time.monotonic() < deadline, self.text()
        self.child.close()
        assert self.child.exitstatus == 0, self.text()
        return json.loads(self.requests_file.read_text("utf-8"))


def users(request: dict[str, Any]) -> list[str]:
    """The user messages of one request, in order."""
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "app.py").write_text("def area(r):\n    return 3.14 * r * r\n", "utf-8")
    (folder / "src" / "main.py").write_text("print('main')\n", "utf-8")
    (tmp_path / "secret.txt").write_text("TOP-SECRET-VALUE\n", "utf-8")
    (folder / "leak.txt").symlink_to(tmp_path / "secret.txt")  # a link that leads out
    (folder / "src" / "outside").symlink_to(tmp_path)  # a folder link that leads out
    return folder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return project(tmp_path)


# --- line editing -------------------------------------------------------------------


def test_left_moves_the_cursor_and_up_prints_no_escape(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.type(UP)  # an empty history: nothing to recall, nothing printed
    term.expect_prompt_row("›")
    term.type("ab" + LEFT + "X")
    term.expect_prompt_row("› aXb")
    assert "^[" not in term.text()
    term.send("")
    requests = term.finish()
    assert users(requests[-1])[-1] == "aXb"


def test_backspace_removes_a_whole_chinese_character(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.type("修")
    term.expect_prompt_row("› 修")
    term.type(BACKSPACE + "X")
    term.expect_prompt_row("› X")  # before: "› 修 X" (half the character stayed)
    term.type("修复" + BACKSPACE)
    term.expect_prompt_row("› X修")
    term.send("")
    requests = term.finish()
    assert users(requests[-1])[-1] == "X修"


def test_invalid_utf8_typed_is_sent_as_a_replacement_character(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.child.send(b"ok \xff\xfe end")
    term.type("\r")
    term.wait_for(ANSWER)
    term.wait_for_prompt()
    requests = term.finish()
    assert users(requests[-1])[-1] == "ok \ufffd\ufffd end"
    history = next((tmp_path / "state" / "vibe_agent" / "history").iterdir())
    assert "ok" in history.read_text("utf-8", "replace")  # stored: the store did not fail


# --- history ------------------------------------------------------------------------


def test_up_recalls_and_the_history_survives_a_restart(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.send("first request")
    term.send("/tokens")
    term.type(UP)
    term.expect_prompt_row("› /tokens")
    term.type(UP)
    term.expect_prompt_row("› first request")
    term.type(DOWN)
    term.expect_prompt_row("› /tokens")
    term.type("\x15")  # Ctrl-U: the line is emptied
    term.finish()
    kept = list((tmp_path / "state" / "vibe_agent" / "history").iterdir())
    assert len(kept) == 1 and not any(folder.rglob("*history*"))  # never in the workspace

    again = Terminal(folder, tmp_path)  # a new session in the same project
    again.type(CTRL_R + "first")
    again.expect_prompt_row("› first request")
    assert "I-search backward: first" in again.text()
    again.type("\r")  # Enter in the search sends the line found
    again.wait_for(ANSWER)
    again.wait_for_prompt()
    again.type(UP + UP)
    again.expect_prompt_row("› /tokens")
    again.type("\x15")
    requests = again.finish()
    assert len(requests) == 1 and users(requests[0])[-1] == "first request"


def test_control_characters_in_the_history_are_recalled_as_data(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.send("/tokens")
    term.finish()
    history = next((tmp_path / "state" / "vibe_agent" / "history").iterdir())
    with history.open("ab") as file:  # a line with an escape that would clear the screen
        file.write(b"\n# 2026-01-01\n+say \x1b[2J\x1b]10;#000000\x07hi\r\n")
    again = Terminal(folder, tmp_path)
    again.type(UP)
    assert "Vibe Agent" in again.text()  # the screen was not cleared
    assert again.prompt_row().startswith("› say ^[[2J")
    again.type("\x15")
    again.finish()


def test_the_history_is_bounded_and_keeps_any_character(tmp_path):
    path = tmp_path / "h.txt"
    store = ProjectHistory(str(path))
    for number in range(MAX_HISTORY_ENTRIES + 300):
        store.store_string(f"line {number}")
    store.store_string("two\nlines \x1b[2J\r\x00 \u202e")
    store.store_string("x" * (MAX_HISTORY_ENTRY + 1))  # a huge paste is not kept
    loaded = list(ProjectHistory(str(path)).load_history_strings())
    assert len(loaded) == MAX_HISTORY_ENTRIES
    assert loaded[0] == "two\nlines \x1b[2J\r\x00 \u202e"  # newest first, byte for byte
    assert loaded[-1] == f"line {300 + 1}"
    assert len(list(ProjectHistory(str(path)).load_history_strings())) == MAX_HISTORY_ENTRIES
    assert path.read_text("utf-8").count("\n+") == MAX_HISTORY_ENTRIES + 1  # rewritten

    huge = tmp_path / "huge.txt"  # a file grown past the limit by someone else
    with huge.open("wb") as file:
        file.write(b"\n# old\n+" + b"y" * (3 * MAX_HISTORY_BYTES) + b"\n")
        for number in range(50):
            file.write(b"\n# now\n+recent %d\n" % number)
    loaded = list(ProjectHistory(str(huge)).load_history_strings())
    assert loaded[0] == "recent 49" and len(loaded) == 50  # the cut entry is dropped
    assert huge.stat().st_size < MAX_HISTORY_BYTES


def test_the_history_is_never_kept_inside_the_workspace(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    inside = project_history(root / ".state" / "h.txt", root)
    inside.append_string("hello")
    assert not (root / ".state").exists()
    outside = project_history(tmp_path / "state" / "h.txt", root)
    outside.append_string("hello")
    assert (tmp_path / "state" / "h.txt").read_text("utf-8").endswith("+hello\n")
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700  # others cannot read it


def test_a_history_that_cannot_be_read_or_written_is_only_no_history(tmp_path):
    folder = tmp_path / "h.txt"
    folder.mkdir()  # a folder where the file should be: open() fails
    store = ProjectHistory(str(folder))
    store.append_string("still works")
    assert list(store.load_history_strings()) == []


# --- several lines --------------------------------------------------------------------


def test_a_bracketed_paste_is_one_message(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.type(PASTE_START + "line a\nline b\r\nline c" + PASTE_END)
    assert "line b" in term.text()
    term.type("\r")
    term.wait_for(ANSWER)
    term.wait_for_prompt()
    requests = term.finish()
    assert len(requests) == 1  # one turn, not three
    assert users(requests[0])[-1] == "line a\nline b\nline c"


def test_esc_enter_inserts_a_newline_and_enter_sends(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.type("line one" + ESC_ENTER + "line two")
    rows = term.rows()
    at = rows.index("› line one")
    assert rows[at + 1] == "  line two"  # still typing: nothing was sent
    term.type("\r")
    term.wait_for(ANSWER)
    term.wait_for_prompt()
    requests = term.finish()
    assert len(requests) == 1
    assert users(requests[0])[-1] == "line one\nline two"


def test_a_message_too_long_is_refused_before_it_is_sent(folder, tmp_path):
    stdin = "z" * (MAX_MESSAGE_CHARS + 1) + "\nshort one\n"
    requests = piped(folder, tmp_path, stdin, expect="超过了上限")
    assert [users(request)[-1] for request in requests] == ["short one"]


# --- Tab ------------------------------------------------------------------------------


def test_tab_completes_a_slash_command_and_a_path(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.type("/he\t")
    term.expect_prompt_row("› /help")
    term.send("")
    assert "  /tokens  " in term.text() and "  @路径  " in term.text()  # /help tells of @ and !
    term.type("look at @sr\t")
    term.expect_prompt_row("› look at @src/")
    term.type("ma\t")
    term.expect_prompt_row("› look at @src/main.py")
    term.type("\x15@src/ou\t")  # a link that leads out is not offered
    term.expect_prompt_row("› @src/ou")
    term.type("\x15@../\t")
    term.expect_prompt_row("› @../")
    term.type("\x15")
    term.finish()


def test_path_completion_stays_inside_and_is_bounded(tmp_path):
    root = tmp_path / "work"
    (root / "many").mkdir(parents=True)
    for number in range(MAX_COMPLETIONS + 50):
        (root / "many" / f"f{number:04}.txt").write_text("", "utf-8")
    (root / "to_etc").symlink_to("/etc")
    (root / "inner").symlink_to(root / "many")  # a link that stays inside is fine
    (root / "bad\x1b[2Jname").write_text("", "utf-8")
    completer = InputCompleter(COMMANDS, Workspace(root))

    def offered(word: str) -> list[str]:
        return [c.text for c in completer.paths(word)]

    assert len(offered("many/f")) == MAX_COMPLETIONS
    assert offered("to_etc/") == [] and offered("to_") == []
    assert offered("/etc/") == [] and offered("../") == [] and offered("~/") == []
    assert offered("inner/f000") == [f"f000{d}.txt" for d in range(10)]
    shown = [c.display_text for c in completer.paths("bad")]
    assert shown == ["bad\\x1b[2Jname"]


# --- @path ----------------------------------------------------------------------------


def test_at_path_attaches_the_file(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.send("what does @app.py compute?")
    assert "附上了 app.py（2 行）" in term.text()
    requests = term.finish()
    sent = users(requests[-1])[-1]
    assert sent.startswith("what does @app.py compute?")
    assert "[The user attached the file 'app.py'" in sent
    assert "   2|     return 3.14 * r * r" in sent


def test_at_path_refuses_outside_links_and_missing_files(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.send("see @../secret.txt and @leak.txt, @src/outside/secret.txt and @nosuch.py")
    text = term.text()
    assert text.count("在工作区外面") == 3
    assert "没有附上 nosuch.py：工作区里没有这个文件" in text
    assert "附上了" not in text
    requests = term.finish()
    assert "TOP-SECRET-VALUE" not in json.dumps(requests)
    assert "attached" not in users(requests[-1])[-1]


def test_at_path_caps_a_long_file_and_says_how_much_was_left_out(folder, tmp_path):
    (folder / "big.txt").write_text("".join(f"row {n} " + "x" * 40 + "\n" for n in range(5000)),
                                    "utf-8")
    term = Terminal(folder, tmp_path)
    term.send("summarise @big.txt")
    requests = term.finish()
    sent = users(requests[-1])[-1]
    shown = next(row for row in term.rows() if "附上了 big.txt" in row)
    attached = sum(1 for row in sent.split("\n") if "| row " in row)
    assert f"（5000 行，只附上了前 {attached} 行，后面 {5000 - attached} 行没有附上" in shown
    assert 100 < attached < 5000 and len(sent) < 25_000
    assert f"call read_file with start_line={attached + 1}" in sent


def test_at_path_says_why_a_binary_or_huge_file_or_a_folder_is_not_attached(folder):
    from vibe_agent.prompt_input import with_mentions

    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (folder / "huge.txt").write_text("x" * 1_500_000, "utf-8")
    console = Console(file=io.StringIO(), width=200)
    sent = with_mentions("@logo.png @huge.txt @src @app.py @app.py", Workspace(folder), console)
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "没有附上 logo.png：这是二进制文件" in shown
    assert "没有附上 huge.txt：文件超过 1,000,000 字节" in shown
    assert "没有附上 src：这是一个文件夹" in shown
    assert shown.count("附上了 app.py（2 行）") == 1 and sent.count("attached the file") == 1


def test_at_path_shows_a_hostile_file_name_escaped(folder, tmp_path):
    (folder / "odd\x1b[2J.txt").write_text("hi\n", "utf-8")
    term = Terminal(folder, tmp_path)
    term.type("@odd\t")
    term.expect_prompt_row("› @odd^[[2J.txt")  # completed, shown escaped
    term.send("")
    assert "没有附上 odd\\x1b[2J.txt：路径里有控制字符" in term.text()  # the guards refuse it
    assert "Vibe Agent" in term.text()  # not cleared
    term.finish()


# --- !command ---------------------------------------------------------------------------


needs_sandbox = pytest.mark.skipif(why_not_isolated() is not None,
                                   reason="needs bubblewrap (the agent's sandbox)")


@needs_sandbox
def test_bang_runs_in_the_sandbox_and_the_next_request_carries_it(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.send("!echo hello-$((6*7)); printf 'a\\033[2Jb\\n'")
    text = term.text()
    assert "hello-42" in text and "a\\x1b[2Jb" in text  # shown, escaped
    assert "Vibe Agent" in text  # the escape did not clear the screen
    assert "退出码 0" in text
    term.send("what did it print?")
    requests = term.finish()
    assert len(requests) == 1  # the command was not a model turn
    *before, last = users(requests[0])
    assert last == "what did it print?"
    note = before[-1]
    assert "ran this command in the sandbox themselves" in note
    assert "hello-42" in note and "exit code: 0" in note


@needs_sandbox
def test_bang_keeps_the_sandbox_time_limit_and_refuses_a_nul(folder):
    from vibe_agent.prompt_input import run_shell

    console = Console(file=io.StringIO(), width=80)
    messages: list[dict[str, Any]] = []

    def add_note(note: str) -> None:
        messages.append({"role": "user", "content": note})

    started = time.monotonic()
    run_shell("sleep 20", Workspace(folder, command_timeout=0.5), console, add_note)
    assert time.monotonic() - started < 10
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "0.5 秒内没有结束" in shown
    assert "did not finish within 0.5 s" in messages[-1]["content"]
    run_shell("echo a\0b", Workspace(folder), console, add_note)
    assert "没有运行" in console.file.getvalue()  # type: ignore[attr-defined]
    assert len(messages) == 1  # nothing added for a command that did not run
    run_shell("   ", Workspace(folder), console, add_note)
    assert "! 后面写一条命令" in console.file.getvalue()  # type: ignore[attr-defined]


# --- Ctrl-C, Ctrl-D and pipes -------------------------------------------------------


def test_ctrl_c_at_the_prompt_drops_the_line_and_ctrl_d_exits(folder, tmp_path):
    term = Terminal(folder, tmp_path)
    term.type("half a thought")
    term.child.sendintr()
    term.wait_for_prompt()  # a new, empty prompt: the session goes on
    assert "› half a thought" in term.text()
    requests = term.finish()  # Ctrl-D: status 0
    assert requests == []


def piped(folder: Path, tmp_path: Path, stdin: str, expect: str) -> list[dict[str, Any]]:
    """Run `code FOLDER` with `stdin` from a pipe; the requests the model got."""
    requests_file = tmp_path / "piped-requests.json"
    env = environment(tmp_path) | {"TERM": "dumb"}
    done = subprocess.run([sys.executable, "-c", DRIVER, str(requests_file), "code",
                           str(folder), "--approve", "yolo"], input=stdin, env=env,
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert expect in done.stdout, done.stdout
    return json.loads(requests_file.read_text("utf-8"))


@needs_sandbox
def test_lines_from_a_pipe_are_read_as_plain_lines(folder, tmp_path):
    requests = piped(folder, tmp_path, "!echo from-a-pipe\nread @app.py\n",
                     expect="附上了 app.py（2 行）")
    assert len(requests) == 1
    *before, last = users(requests[0])
    assert "from-a-pipe" in before[-1]
    assert last.startswith("read @app.py") and "3.14" in last
