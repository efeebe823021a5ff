"""Feedback while the terminal agent works (issue 28): the spinner, answers as Markdown,
the bell, tool lines and the banner in Chinese.

The pty tests run the real `python -m vibe_agent code` in a pseudo-terminal (pexpect) with
a scripted model (not an LLM) that waits before each reply, as a slow model would. Only a
terminal that can redraw a line (TERM=xterm) gets the spinner; TERM=dumb gets the rest.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest
from forkserver import ForkServerSpawn, forked_run
from rich.console import Console
from terminal_helpers import PROMPT, clean_env, step

from vibe_agent.screen import Answer, Screen, finished_blocks, line_breaks, step_line
from vibe_agent.trace import TraceStep

WIDTH, HEIGHT = 80, 30
THINKING = "等模型回复"
ERASE = "\x1b[2K"  # rich's erase-line: how a transient display leaves the screen

DRIVER = """
import json, sys, time
from vibe_agent.course import code_command
from vibe_agent.course.cli import main
from vibe_agent.course.scripted import Reply, ToolCallSpec, ScriptedModel

with open(sys.argv[1], encoding="utf-8") as file:
    delay, label, script = json.load(file)

class Slow(ScriptedModel):
    def handle_request(self, request):
        time.sleep(delay)
        return super().handle_request(request)

model = Slow([Reply(content=step["content"], tool_calls=[
    ToolCallSpec(name, json.dumps(arguments), f"call_{i}_{j}")
    for j, (name, arguments) in enumerate(step["calls"])]) for i, step in enumerate(script)])
code_command._client = lambda mode, task: (model.client(), "slow-scripted", label)
sys.exit(main(sys.argv[2:]))
"""
LABEL = "（脚本模型：测试用，不是 LLM）"


def spawn(tmp_path: Path, script: list[dict[str, Any]], *args: str, delay: float = 0.0,
          term: str = "xterm", label: str = LABEL) -> pexpect.spawn:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    # pexpect never answers prompt_toolkit's cursor-position request (ESC[6n), and
    # prompt_toolkit waits 1 s for the answer when a line is entered; a real terminal
    # answers at once (tests/test_terminal_input.py answers it too): PROMPT_TOOLKIT_NO_CPR
    env = clean_env(tmp_path, TERM=term, COLUMNS=str(WIDTH), LINES=str(HEIGHT),
                    PROMPT_TOOLKIT_NO_CPR="1")
    played = tmp_path / "script.json"  # a file: a 10,000-line answer is too long for argv
    played.write_text(json.dumps([delay, label, script]), encoding="utf-8")
    return ForkServerSpawn(sys.executable, ["-c", DRIVER, str(played), "code", str(folder), *args],
                           env=env, cwd=str(tmp_path), encoding="utf-8", timeout=60,
                           dimensions=(HEIGHT, WIDTH))


def turn(child: pexpect.spawn, line: str = "你好") -> str:
    """Send one request and return everything shown until the turn's closing line."""
    child.expect_exact(PROMPT)
    child.send(line + "\r")
    child.expect("次模型调用")
    return str(child.before)


def finish(child: pexpect.spawn) -> None:
    child.expect_exact(PROMPT)
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()


# --- the spinner -------------------------------------------------------------------

def test_the_spinner_shows_within_a_fifth_of_a_second_and_is_gone_before_the_answer(
        tmp_path):
    child = spawn(tmp_path, [step("答案是 **42**。")], delay=1.5)
    child.expect_exact(PROMPT)
    child.send("问一个问题\r")
    sent = time.perf_counter()
    child.expect(THINKING)
    waited = time.perf_counter() - sent
    child.expect(r"1\.\d 秒")  # the seconds count up while the model is silent
    child.expect("次模型调用")
    shown = str(child.before)
    finish(child)
    assert waited <= 0.2, f"{waited:.2f} s from Enter to the spinner"
    last_frame = shown.rfind(THINKING)
    answer = shown.find("答案是")
    assert last_frame < answer and ERASE in shown[last_frame:answer]  # cleared first
    printed = shown[shown.rfind(ERASE):]  # what stays once the raw preview is erased
    assert "**" not in printed and "\x1b[1m42" in printed  # Markdown: bold, not stars


def test_the_spinner_runs_while_a_command_runs_and_not_under_a_question(tmp_path):
    child = spawn(tmp_path, [step(None, ("run_command", {"command": "sleep 1.5; echo done"})),
                             step("好了。")], delay=0.3)
    child.expect_exact(PROMPT)
    child.send("跑一下\r")
    child.expect(r"允许运行吗？\[y/N\] ")
    asked = str(child.before)
    child.send("y\r")
    child.expect(r"运行 sleep 1\.5; echo done… 1\.\d 秒")  # while it runs, with seconds
    child.expect_exact("运行了 sleep 1.5; echo done → 退出码 0")
    before_line = str(child.before)
    finish(child)
    # the spinner was cleared (erased) before the question and before the tool's line
    assert ERASE in asked[asked.rfind("运行工具"):]
    assert ERASE in before_line[before_line.rfind("echo done…"):]


def test_compact_shows_a_spinner_while_the_summary_is_written(tmp_path):
    script = [step("第一轮。"), step("第二轮。"), step("第三轮。"), step("第四轮。"),
              step("摘要：说了四轮。")]
    child = spawn(tmp_path, script, delay=0.8)
    for number in range(4):
        turn(child, f"第 {number + 1} 句")
    child.expect_exact(PROMPT)
    child.send("/compact\r")
    child.expect("正在压缩历史")
    child.expect("压缩成")
    finish(child)


def test_no_spinner_on_a_dumb_terminal(tmp_path):
    child = spawn(tmp_path, [step("好。")], delay=0.3, term="dumb")
    shown = turn(child)
    finish(child)
    assert THINKING not in shown and "\x1b" not in shown


def test_no_spinner_in_a_recorded_console_even_when_force_color_is_set(monkeypatch, tmp_path):
    # A Jupyter kernel sets FORCE_COLOR=1, and rich then calls any file a terminal: the
    # lesson's recorded screen (a StringIO) got spinner frames and its text twice
    import io

    from vibe_agent.course.scripted import ScriptedModel, answer
    from vibe_agent.terminal import Session

    monkeypatch.setenv("FORCE_COLOR", "1")
    console = Console(record=True, width=80, file=io.StringIO(), color_system=None)
    session = Session(ScriptedModel([answer("先运行测试，看看哪里失败。")]).client(), "m",
                      tmp_path, console, approve="yolo", timings=False)
    session.run(lines=["你好"])
    shown = console.export_text()
    assert THINKING not in shown and shown.count("先运行测试") == 1


# --- answers as Markdown -------------------------------------------------------------

def test_a_code_block_is_rendered_and_an_escape_inside_it_stays_escaped(tmp_path):
    said = "看这段：\n\n```python\nprint('\x1b[2J清屏')\n```\n\n完。"
    child = spawn(tmp_path, [step(said)], term="dumb")
    shown = turn(child)
    finish(child)
    assert "```" not in shown and "\x1b" not in shown
    assert r"print('\x1b[2J清屏')" in shown and "完。" in shown


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_an_open_fence_of_10000_lines_neither_hangs_nor_is_cropped(stream, tmp_path):
    said = "开头\n```python\n" + "".join(f"x_{n} = {n}\n" for n in range(10_000))
    child = spawn(tmp_path, [step(said)], *([] if stream else ["--no-stream"]), term="dumb")
    started = time.perf_counter()
    shown = turn(child)
    seconds = time.perf_counter() - started
    finish(child)
    assert "x_0 = 0" in shown and "x_9999 = 9999" in shown and "x_5000 = 5000" in shown
    assert seconds < 30, f"{seconds:.1f} s"


def test_markdown_printed_block_by_block_is_the_markdown_of_the_whole():
    text = ("# 标题\n\n第一段，*强调*。\n第二行\n\n- 一\n- 二\n\n1. 甲\n2. 乙\n\n---\n"
            "接在分隔线后\n\n```python\nx = 1\n\n\ny = 2\n```\n\n> 引用\n\n| a | b |\n|---|---|\n"
            "| 1 | 2 |\n\n最后一段")
    whole = Console(width=60, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    whole.print(Answer(text))
    pieces = Console(width=60, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    screen = Screen(pieces)
    for at in range(0, len(text), 3):
        screen.next_split = 0.0  # look after every piece
        screen.add(text[at:at + 3])
    screen.finish()
    assert pieces.export_text() == whole.export_text()


@pytest.mark.parametrize(("text", "finished"), [
    ("一段\n\n第二段\n", "一段\n\n"),
    ("一段\n\n第二", ""),  # a line not finished yet could still turn into anything
    ("一段\n", ""),  # the next line may still continue it
    ("```\ncode\n\nmore", ""),  # an open fence holds everything after it
    ("```\ncode\n```\n\n下一段\n", "```\ncode\n```\n\n"),
    ("- a\n\n- b\n", ""),  # still one list
], ids=["paragraphs", "unfinished-line", "one-paragraph", "open-fence", "closed-fence", "one-list"])
def test_finished_blocks(text, finished):
    assert text[:finished_blocks(text)] == finished


def test_html_links_and_images_are_shown_not_hidden():
    console = Console(width=80, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(Answer("<!-- 删掉了测试 --> [点这里](http://evil.example/x) "
                         "![图](http://evil.example/i.png)\n\n<div>块</div>"))
    shown = console.export_text()
    assert "<!-- 删掉了测试 -->" in shown and "http://evil.example/x" in shown
    assert "http://evil.example/i.png" in shown and "<div>块</div>" in shown


@pytest.mark.parametrize(("line", "width", "breaks"), [
    ("一二三四五六", 4, [2, 4]),  # between characters
    ("一二三。", 6, [2]),  # 。 never starts a line: it takes the character before along
    ("ab cd", 2, [3]),  # at a space
    ("abcdef", 4, [4]),  # a word longer than the line is folded
    ("对 units.py 的修改", 12, [11]),
], ids=["cjk", "punctuation", "space", "fold", "mixed"])
def test_line_breaks(line, width, breaks):
    assert line_breaks(line, width) == breaks


# --- tool lines, the bell, the banner, the demo -----------------------------------

def tool(name: str, arguments: dict[str, Any], result: str, outcome: str = "ok") -> TraceStep:
    return TraceStep(round=1, kind="tool", tool=name, arguments=json.dumps(arguments),
                     result=result, outcome=outcome)


@pytest.mark.parametrize(("step", "line"), [
    (tool("run_command", {"command": "python -m pytest -q"},
          "exit code: 1\n..F\n1 failed, 2 passed in 0.05s"),
     (True, "运行了 python -m pytest -q → 退出码 1 · 测试：1 failed, 2 passed")),
    (tool("run_command", {"command": "ls"}, "exit code: 0\na.py"), (True, "运行了 ls → 退出码 0")),
    (tool("run_command", {"command": "rm -rf /"}, "Error: the command was not approved: the "
          "user said no. Try another way, or ask the user how they want it done.",
          "tool_error"), (False, "运行 rm -rf /：你没有批准")),
    (tool("edit_file", {"path": "units.py", "old": "-", "new": "+"}, "Edited units.py at line 3."),
     (True, "改了 units.py（第 3 行）")),
    (tool("write_file", {"path": "new.py", "content": "a\nb\n"}, "Wrote 4 characters (2 lines)"
          " to new.py."), (True, "写了 new.py（2 行）")),
    (tool("read_file", {"path": "x.py"}, "Error: there is no 'x.py'.", "tool_error"),
     (False, "读 x.py：出错了，告诉模型的是：there is no 'x.py'.")),
    (tool("calculator", {}, "Error: not run, the loop stopped (max_iters).", "not_run"),
     (False, "调用 calculator：这一轮已经刹车，没有运行")),
    (tool("mcp__git__status", {}, "clean"), (True, "调用了 MCP 服务器 git 的工具 status")),
], ids=["tests", "command", "refused", "edit", "write", "error", "not-run", "mcp"])
def test_a_tool_step_in_chinese(step, line):
    assert step_line(step, timings=False) == line


def test_refused_and_edited_in_chinese_on_screen(tmp_path):
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.py").write_text("x = 1\n", encoding="utf-8")
    child = spawn(tmp_path, [step(None, ("run_command", {"command": "echo hi"})),
                             step(None, ("edit_file", {"path": "a.py", "old": "1", "new": "2"})),
                             step("好。")], term="dumb")
    child.expect_exact(PROMPT)
    child.send("改\r")
    child.expect(r"允许运行吗？\[y/N\] ")
    child.send("n\r")
    child.expect(r"允许写入 a\.py 吗？\[y/N\] ")
    shown = str(child.before)
    child.send("y\r")
    child.expect("次模型调用")
    shown += str(child.before)
    finish(child)
    assert "✗ 运行 echo hi：你没有批准" in shown and "▸ 改了 a.py（第 1 行）" in shown
    assert "Error:" not in shown and "Edited" not in shown


@pytest.mark.parametrize(("args", "rings"), [([], False), (["--notify-after", "5"], False),
                                             (["--notify-after", "0.5"], True)],
                         ids=["off", "not-long-enough", "past-n-seconds"])
def test_the_bell_rings_only_when_asked_and_only_past_n_seconds(args, rings, tmp_path):
    child = spawn(tmp_path, [step("好。")], *args, delay=1.0, term="dumb")
    child.expect_exact(PROMPT)
    child.send("你好\r")
    child.expect("次模型调用")
    child.expect_exact(PROMPT)
    shown = str(child.before)
    child.sendeof()
    child.expect(pexpect.EOF)
    assert ("\a" in shown) is rings


def test_the_local_banner_says_each_thing_once(tmp_path):
    label = ("（运行模式：local\n模型：SmolLM2-360M-Instruct（本机的 SmolLM2）\n"
             "接口：本机 127.0.0.1 上的 llama.cpp 服务）")
    child = spawn(tmp_path, [], term="dumb", label=label)
    child.expect_exact(PROMPT)
    shown = str(child.before)
    child.sendeof()
    child.expect(pexpect.EOF)
    assert shown.count("模型：") == 1 and shown.count("运行模式：local") == 1
    assert "（运行模式" not in shown and "接口：本机 127.0.0.1 上的 llama.cpp 服务\r\n" in shown


def test_the_demo_prints_its_steps_in_chinese():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    done = forked_run([sys.executable, "-m", "vibe_agent", "demo"], capture_output=True,
                      text=True, env=env, timeout=60)
    assert done.returncode == 0
    assert "模型要调用工具" in done.stdout and "结束：模型给出了最终回答。" in done.stdout
    assert "→ tool_calls" not in done.stdout and "answered:" not in done.stdout
    assert re.search(r"工具 calculator\(.*\) → 结果：17 \* 23 = 391", done.stdout)
    assert done.stdout.count("✓") == 4  # the table's verdicts only
