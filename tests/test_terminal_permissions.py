"""Permission rules in the terminal agent, in a real pseudo-terminal (pexpect).

The model is the scripted endpoint of tests/terminal_helpers.py (a test double on
127.0.0.1, not an LLM): each prompt line is a JSON instruction {"tool", "arguments"} it
sends back as one tool call, then it answers "done: " and the tool's result. The rules
are the project's `.vibe_agent/settings.json` (vibe_agent.permissions).
"""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest
from terminal_helpers import MCP, PROMPT, end, spawn_code, squeezed

RUN = r"允许运行吗？\[y/N\] "
CALL = r"允许调用吗？\[y/N\] "
DONE = r"次模型调用"


def project(tmp_path: Path, settings: object | None) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    if settings is not None:
        (folder / ".vibe_agent").mkdir()
        text = settings if isinstance(settings, str) else json.dumps(settings)
        (folder / ".vibe_agent" / "settings.json").write_text(text, encoding="utf-8")
    return folder


def spawn(tmp_path: Path, endpoint: str, folder: Path, *options: str) -> pexpect.spawn:
    return spawn_code(str(folder), "--mode", "live", "--no-stream", "--no-delegate", *options,
                      tmp_path=tmp_path, OPENAI_BASE_URL=endpoint, OPENAI_API_KEY="test",
                      VIBE_AGENT_MODEL="scripted-endpoint")


def started(tmp_path, endpoint, settings, *options) -> tuple[pexpect.spawn, Path]:
    folder = project(tmp_path, settings)
    child = spawn(tmp_path, endpoint, folder, *options)
    child.expect_exact(PROMPT)
    return child, folder


def order(child: pexpect.spawn, tool: str, **arguments: object) -> None:
    child.sendline(json.dumps({"tool": tool, "arguments": arguments}))


def turn(child: pexpect.spawn) -> str:
    """The screen until the turn's closing figures, then the prompt."""
    child.expect(DONE)
    screen = str(child.before)
    child.expect_exact(PROMPT)
    return screen


def test_an_allow_rule_runs_python_m_pytest_without_a_question(tmp_path, endpoint):
    child, _ = started(tmp_path, endpoint, {"permissions": {
        "allow": ["run_command(python -m pytest *)"]}}, "--approve", "ask")
    assert "权限规则：.vibe_agent/settings.json（allow 1 条，ask 0 条，deny 0 条" in child.before
    order(child, "run_command", command="python -m pytest -q")
    screen = turn(child)
    assert "允许运行吗" not in screen and "exit code: 5" in screen  # ran: no tests found
    order(child, "run_command", command="ls")  # no rule: the mode (ask) decides
    child.expect(RUN)
    child.sendline("n")
    assert "the user said no" in turn(child)
    end(child)


def test_deny_beats_allow_even_in_yolo(tmp_path, endpoint):
    child, folder = started(tmp_path, endpoint, {"permissions": {
        "allow": ["run_command(touch *)"], "deny": ["run_command(touch secret*)"]}},
        "--approve", "yolo")
    order(child, "run_command", command="touch secret.txt")
    screen = turn(child)
    assert "✗ 项目的权限规则 run_command(touch secret*) 不允许：touch secret.txt" in screen
    # what the model read:
    assert squeezed("a permission rule of this project denies this") in squeezed(screen)
    assert not (folder / "secret.txt").exists()
    order(child, "run_command", command="touch fine.txt")  # allowed: runs unasked
    assert "exit code: 0" in turn(child) and (folder / "fine.txt").exists()
    end(child)


def test_ask_beats_allow(tmp_path, endpoint):
    child, folder = started(tmp_path, endpoint, {"permissions": {
        "allow": ["run_command(touch *)"], "ask": ["run_command(touch loud*)"]}},
        "--approve", "yolo")
    order(child, "run_command", command="touch loud.txt")
    child.expect(RUN)
    child.sendline("n")
    turn(child)
    assert not (folder / "loud.txt").exists()
    end(child)


def test_answer_A_writes_the_rule_and_the_next_identical_call_runs_unasked(tmp_path, endpoint):
    child, folder = started(tmp_path, endpoint, None, "--approve", "ask")
    order(child, "run_command", command="python -m pytest -q")
    child.expect(RUN)
    assert ("（回答 A：允许，以后在这个项目里也不再问——把规则 run_command(python -m pytest -q) "
            "写进 .vibe_agent/settings.json）") in child.before
    child.sendline("A")
    child.expect(r"✓ 已写入 \.vibe_agent/settings\.json，allow 加了一条："
                 r"run_command\(python -m pytest -q\)")
    assert "exit code: 5" in turn(child)
    saved = json.loads((folder / ".vibe_agent" / "settings.json").read_text(encoding="utf-8"))
    assert saved == {"permissions": {"allow": ["run_command(python -m pytest -q)"]}}
    order(child, "run_command", command="python -m pytest -q")
    screen = turn(child)
    assert "允许运行吗" not in screen and "exit code: 5" in screen
    order(child, "run_command", command="python -m pytest -q -x")  # the narrowest rule
    child.expect(RUN)
    child.sendline("n")
    turn(child)
    end(child)


def test_a_hostile_command_with_a_shell_symbol_is_asked_despite_an_allow_rule(tmp_path,
                                                                              endpoint):
    child, folder = started(tmp_path, endpoint, {"permissions": {
        "allow": ["run_command(python -m pytest *)"]}}, "--approve", "auto-edit")
    order(child, "run_command", command="python -m pytest -q")  # the rule allows this one
    assert "允许运行吗" not in turn(child)
    order(child, "run_command", command="python -m pytest -q; touch pwned")
    child.expect(RUN)
    assert "agent 想运行命令：python -m pytest -q; touch pwned" in child.before
    child.sendline("n")
    turn(child)
    assert not (folder / "pwned").exists()
    end(child)


@pytest.mark.parametrize("text, named", [
    ('{"permissions": {"allow": [', "不是合法的 JSON"),
    ('{"permissions": {"allow": "run_command"}}', "permissions.allow 应该是一个列表"),
    ('{"permissions": {"alow": []}}', "不认识的键 'alow'"),
])
def test_a_broken_settings_file_stops_the_start_in_chinese(tmp_path, endpoint, text, named):
    folder = project(tmp_path, text)
    child = spawn(tmp_path, endpoint, folder)
    child.expect(pexpect.EOF)
    child.close()
    screen = " ".join(str(child.before).split())
    assert child.exitstatus == 2
    assert "设置文件有误，会话没有开始" in screen and named in screen
    assert str(folder / ".vibe_agent" / "settings.json") in screen.replace(" ", "")
    assert "Traceback" not in screen
    assert (folder / ".vibe_agent" / "settings.json").read_text(encoding="utf-8") == text


def test_rules_for_mcp_tools(tmp_path, endpoint):
    child, _ = started(tmp_path, endpoint, {"permissions": {
        "allow": ["mcp__t__*"], "deny": ["mcp__t__add_note"]}}, "--approve", "ask",
        "--mcp", MCP)
    order(child, "mcp__t__add", a=2, b=3)  # unannotated, asked by default: allowed by a rule
    screen = turn(child)
    assert "允许调用吗" not in screen and 'done: "5"' in screen
    order(child, "mcp__t__add_note", text="x")
    screen = turn(child)
    assert "✗ 项目的权限规则 mcp__t__add_note 不允许" in screen
    assert squeezed("a permission rule of this project denies this") in squeezed(screen)
    end(child)


def test_answer_A_for_an_mcp_tool_names_the_tool(tmp_path, endpoint):
    child, folder = started(tmp_path, endpoint, None, "--approve", "ask", "--mcp", MCP)
    order(child, "mcp__t__add", a=1, b=1)
    child.expect(CALL)
    assert "把规则 mcp__t__add 写进" in child.before
    child.sendline("A")
    assert 'done: "2"' in turn(child)
    order(child, "mcp__t__add", a=2, b=2)
    screen = turn(child)
    assert "允许调用吗" not in screen and 'done: "4"' in screen
    saved = json.loads((folder / ".vibe_agent" / "settings.json").read_text(encoding="utf-8"))
    assert saved["permissions"]["allow"] == ["mcp__t__add"]
    end(child)


def test_a_model_cannot_write_its_own_rules_unasked(tmp_path, endpoint):
    child, folder = started(tmp_path, endpoint, {"permissions": {"allow": ["write_file"]}},
                            "--approve", "yolo")
    order(child, "write_file", path=".vibe_agent/settings.json",
          content='{"permissions": {"allow": ["run_command"]}}')
    child.expect(r"允许写入 \.vibe_agent/settings\.json 吗？\[y/N\] ")
    assert "回答 A" not in child.before  # no rule could allow it: none is offered
    child.sendline("n")
    turn(child)
    saved = json.loads((folder / ".vibe_agent" / "settings.json").read_text(encoding="utf-8"))
    assert saved == {"permissions": {"allow": ["write_file"]}}
    end(child)
