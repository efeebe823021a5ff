"""MCP tools in the terminal agent, in a real pseudo-terminal (pexpect): the session's
approval rule decides, its prompt asks.

The model is a scripted endpoint on 127.0.0.1 (a test double, not an LLM: the
`endpoint` fixture serves tests/terminal_helpers.ScriptedEndpoint) that the
session reaches in live mode: each prompt line is a JSON instruction
{"tool": NAME, "arguments": {...}}, which it sends back as one tool call; after the tool
result it answers "done: " and the result (ASCII-escaped). The MCP server is the test
server of tests/fixtures/mcp_test_server.py: `add` has no annotations, `count_notes` is
marked read-only, `add_note` is not read-only but not destructive.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect
import pytest
from forkserver import forked_run
from terminal_helpers import MCP, PROMPT, clean_env, end, spawn_code

QUESTION = r"允许调用吗？\[y/N\] "


def session(tmp_path: Path, endpoint: str, approve: str) -> pexpect.spawn:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    child = spawn_code(str(folder), "--mode", "live", "--no-stream", "--no-delegate",
                       "--approve", approve, "--mcp", MCP, tmp_path=tmp_path,
                       OPENAI_BASE_URL=endpoint, OPENAI_API_KEY="test",
                       VIBE_AGENT_MODEL="scripted-endpoint")
    child.expect_exact(PROMPT)
    return child


def ask_for(child: pexpect.spawn, tool: str, **arguments: object) -> None:
    child.sendline(json.dumps({"tool": f"mcp__t__{tool}", "arguments": arguments}))


def turn_ends(child: pexpect.spawn) -> str:
    """The screen up to the end of the turn (its model-call line), then the prompt."""
    child.expect(r"次模型调用")
    screen = child.before
    child.expect_exact(PROMPT)
    return screen


@pytest.mark.parametrize("approve", ["ask", "auto-edit"])
def test_an_unannotated_tool_is_asked_and_a_read_only_one_is_not(tmp_path, endpoint, approve):
    """In ask and auto-edit: asked, with the server, tool, arguments (escaped) and, the
    first time, the description; a tool marked read-only runs unasked."""
    child = session(tmp_path, endpoint, approve)
    ask_for(child, "add", a=2, b=3)
    child.expect(QUESTION)
    question = child.before
    assert "agent 想调用 MCP 工具：服务器 t 的 add" in question
    assert "没有标注它只读" in question  # the spec's defaults: possibly destructive
    assert '参数：{"a": 2, "b": 3}' in question
    assert "工具的描述（服务器写的，模型读到的就是这段）：Add two integers." in question
    child.sendline("y")
    assert 'done: "5"' in turn_ends(child)

    ask_for(child, "add", a=1, b=1)  # asked again; the description only the first time
    child.expect(QUESTION)
    assert '参数：{"a": 1, "b": 1}' in child.before and "工具的描述" not in child.before
    child.sendline("n")
    assert "the user said no" in turn_ends(child)

    ask_for(child, "count_notes")  # marked read-only: runs unasked
    screen = turn_ends(child)
    assert 'done: "3"' in screen and "允许调用吗" not in screen

    ask_for(child, "add_note", text="abc\u202edcba \x9b31m 你好")  # hidden characters
    child.expect(QUESTION)
    question = child.before
    assert "不删除、不覆盖" in question  # destructiveHint: false, said as the server's claim
    assert r"abc\u202edcba \x9b31m 你好" in question
    assert "\u202e" not in question and "\x9b" not in question
    child.sendline("y")
    turn_ends(child)
    end(child)


def test_yolo_asks_nothing(tmp_path, endpoint):
    child = session(tmp_path, endpoint, "yolo")
    for tool, arguments, shown in [("add", {"a": 2, "b": 3}, 'done: "5"'),
                                   ("delete_note", {"note_id": 7}, "deleted note 7")]:
        ask_for(child, tool, **arguments)
        screen = turn_ends(child)
        assert shown in screen and "允许" not in screen
    end(child)


@pytest.mark.parametrize(("options", "words"), [
    pytest.param(["a__b=python server.py"], "不能有 __", id="double-underscore"),
    pytest.param(["x=/no/such/program --flag"], "MCP 服务器 x 没有启动起来", id="does-not-start"),
    pytest.param([MCP, MCP], "用了两次", id="same-name-twice"),
    pytest.param(["t='unclosed"], "引号要成对", id="unclosed-quote"),
])
def test_bad_mcp_options_are_chinese_errors_without_traceback(tmp_path, options, words):
    folder = tmp_path / "project"
    folder.mkdir()
    given = [part for option in options for part in ("--mcp", option)]
    done = forked_run([sys.executable, "-m", "vibe_agent", "code", str(folder), "--mode",
                       "offline", *given], env=clean_env(tmp_path, COLUMNS="200"), cwd=tmp_path,
                      capture_output=True, text=True, timeout=90, input="")
    assert "Traceback" not in done.stderr + done.stdout
    assert done.returncode == 2
    assert words in done.stderr
