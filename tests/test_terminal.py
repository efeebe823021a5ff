"""The terminal agent end to end, in a real pseudo-terminal (pexpect), as a person uses it."""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import pexpect
import pytest
from forkserver import forked_run
from terminal_helpers import PROMPT, finish, spawn_code, workspace_of

from vibe_agent.coding import snapshot
from vibe_agent.course.tasks import SUITE_DIR, load_task
from vibe_agent.terminal import COMMANDS, Session, visible
from vibe_agent.trace import Trace

TASK = "weather_fahrenheit"


def judged_by_us(workspace: Path) -> int:
    """Our verdict: the task's tests run on the workspace's source in a pristine copy."""
    task = load_task(SUITE_DIR / TASK)
    from vibe_agent.sandbox import run_in_sandbox

    return run_in_sandbox(task.test_command, workspace, timeout=task.timeout_s).exit_code


def test_a_task_fixed_in_offline_mode_with_yolo(tmp_path):
    child = spawn_code("--task", TASK, "--mode", "offline", "--approve", "yolo", "--keep",
                  tmp_path=tmp_path)
    workspace = workspace_of(child)
    child.expect("已知修复模型|不是 LLM")
    child.expect_exact(PROMPT)
    assert judged_by_us(workspace) != 0  # broken as shipped
    child.sendline("/task")
    child.expect(r"▸ 改了 units\.py")
    child.expect(r"次模型调用")
    child.expect_exact(PROMPT)
    child.sendline("/diff")
    child.expect_exact("+    return celsius * 9 / 5 + 32")
    finish(child)
    assert judged_by_us(workspace) == 0
    trajectory = Trace.from_json((workspace.parent / "trajectory.json").read_text("utf-8"))
    assert any(step.tool == "edit_file" for step in trajectory)


def test_ask_answered_no_to_everything_leaves_the_workspace_unchanged(tmp_path):
    child = spawn_code("--task", TASK, "--mode", "offline", "--approve", "ask", "--keep",
                  tmp_path=tmp_path)
    workspace = workspace_of(child)
    before = snapshot(workspace)
    child.expect_exact(PROMPT)
    child.sendline("/task")
    refused, shown = 0, []
    while True:
        index = child.expect([r"允许.*?吗？\[y/N\] ", r"次模型调用"])
        if index == 1:
            break
        refused += 1
        shown.append(child.before + child.after)
        child.sendline("n")
    write = next(text for text in shown if "允许写入" in text)
    assert "-    return celsius * 9 / 5 - 32" in write  # the diff of the write, before asking
    assert "+    return celsius * 9 / 5 + 32" in write
    child.expect_exact(PROMPT)
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert refused >= 2  # the test command and the edit were both asked
    assert snapshot(workspace) == before


def test_ctrl_c_mid_turn_returns_to_the_prompt(tmp_path):
    child = spawn_code("--task", TASK, "--mode", "offline", "--approve", "ask", tmp_path=tmp_path)
    workspace_of(child)
    child.expect_exact(PROMPT)
    child.sendline("/task")
    child.expect(r"允许运行吗？\[y/N\] ")  # the turn is waiting on us: interrupt it here
    child.sendintr()
    child.expect("已中断这一轮")
    child.expect_exact(PROMPT)
    child.sendline("/tokens")  # the session is alive and its history valid
    child.expect("次模型调用")
    finish(child)


def test_eof_at_once_exits_zero(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    child = spawn_code(str(folder), "--mode", "offline", tmp_path=tmp_path)
    finish(child)
    assert list((tmp_path / "state" / "vibe_agent" / "sessions").glob("project-*.json"))


@pytest.mark.parametrize("args", [
    pytest.param(["--task", "no_such_task"], id="unknown-task"),
    pytest.param([], id="neither-folder-nor-task"),
    pytest.param(["/no/such/folder"], id="missing-folder"),
    pytest.param(["--task", TASK, "--approve", "maybe"], id="unknown-approval"),
])
def test_bad_command_lines_are_chinese_errors_without_traceback(args, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    done = forked_run([sys.executable, "-m", "vibe_agent", "code", *args], env=env,
                      cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    assert re.search(r"[\u4e00-\u9fff]", done.stderr)


@pytest.mark.parametrize(("text", "shown"), [
    ("python -m pytest -q\r rm -rf .", "python -m pytest -q\\r rm -rf ."),
    ("ls\x1b[2K\x1b[1Gpython -m pytest", "ls\\x1b[2K\\x1b[1Gpython -m pytest"),
    ("echo a\necho b", "echo a\\necho b"),
    ("abc\u202edcba", "abc\\u202edcba"),  # a right-to-left override
    ("修复 bug", "修复 bug"),
])
def test_approvals_show_control_characters_escaped(text, shown):
    assert visible(text) == shown


def test_interrupted_turn_leaves_a_valid_history(tmp_path):
    from rich.console import Console

    from vibe_agent.course.scripted import ScriptedModel

    quiet = Console(file=io.StringIO())
    session = Session(ScriptedModel([]).client(), "m", tmp_path, quiet)
    session.messages = [
        {"role": "system", "content": "s"}, {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "y", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "done"},
    ]
    session.close_interrupted_turn()
    assert [m.get("tool_call_id") for m in session.messages[3:]] == ["a", "b"]
    session.messages.append({"role": "user", "content": "again"})
    session.close_interrupted_turn()
    assert session.messages[-1]["role"] == "assistant"


def test_slash_commands_have_help():
    assert {"/compact", "/todo", "/diff", "/undo", "/tokens", "/exit", "/help",
            "/task"} <= set(COMMANDS)
    assert all(entry.help for entry in COMMANDS.values())


def played_session(tmp_path, lines, **options):
    from rich.console import Console

    from vibe_agent.course.known_fix import KNOWN_FIX_MODEL_NAME, known_fix_model
    from vibe_agent.course.tasks import copy_repo

    task = load_task(SUITE_DIR / TASK)
    console = Console(record=True, width=200, file=io.StringIO(), color_system=None)
    session = Session(known_fix_model(task).client(), KNOWN_FIX_MODEL_NAME,
                      copy_repo(task, tmp_path / "ws"), console, approve="yolo",
                      suggested=task.prompt, **options)
    session.run(lines=lines)
    return session, console.export_text()


def test_compact_keeps_a_valid_shorter_history(tmp_path):
    session, screen = played_session(tmp_path, ["/task", "/compact"])
    roles = [m["role"] for m in session.messages]
    assert "压缩成" in screen and roles[:2] == ["system", "user"] and len(roles) < 13
    answered = {m["tool_call_id"] for m in session.messages if m["role"] == "tool"}
    asked = {c["id"] for m in session.messages for c in m.get("tool_calls") or []}
    assert asked == answered


def test_the_session_reads_agents_md_and_keeps_notes(tmp_path):
    from vibe_agent.memory import MemoryFile

    notes = MemoryFile(tmp_path / "notes.md")
    notes.remember("tests run with python -m pytest -q")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "AGENTS.md").write_text("金额一律用分（整数）。", encoding="utf-8")
    from rich.console import Console

    from vibe_agent.course.scripted import ScriptedModel

    console = Console(record=True, width=200, file=io.StringIO(), color_system=None)
    session = Session(ScriptedModel([]).client(), "m", tmp_path / "ws", console, memory=notes)
    session.banner()
    screen = console.export_text()
    assert "金额一律用分" in screen and "python -m pytest -q" in screen
    assert "金额一律用分" in session.system_prompt and "remember" in session.registry
    assert {"todo_write", "delegate"} <= set(session.registry.names)


def test_a_bad_mcp_option_is_a_chinese_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    done = forked_run([sys.executable, "-m", "vibe_agent", "code", "--task", TASK,
                       "--mcp", "no-equals-sign"], env=env, cwd=tmp_path,
                      capture_output=True, text=True, timeout=60, input="")
    assert done.returncode == 2 and "名字=命令" in done.stderr
