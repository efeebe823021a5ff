"""Help texts a newcomer reads first: `code` listed, the course tasks listed, Chinese
headings, and columns that line up with Chinese text in them (issue 28)."""

from __future__ import annotations

import os
import re
import sys

import pytest
from forkserver import forked_run

from vibe_agent.course import cli
from vibe_agent.course.chinese_argparse import ChineseArgumentParser, wrap
from vibe_agent.course.code_command import task_names
from vibe_agent.course.text import width

SUBCOMMANDS = ("demo", "ask", "record", "info", "bench", "code")


def help_of(capsys, monkeypatch, *argv: str, columns: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_lists_code(capsys, monkeypatch):
    text = help_of(capsys, monkeypatch)
    summary = next(line for line in text.splitlines() if "demo、ask" in line)
    assert "code" in summary  # the line that names the commands, not only the list below
    assert re.search(r"^\s+code\s+在终端里打开 coding agent", text, re.M)


def test_code_help_lists_every_course_task(capsys, monkeypatch):
    text = help_of(capsys, monkeypatch, "code")
    names = task_names()
    assert len(names) > 10
    words = set(re.findall(r"[a-z_]+", text))
    assert set(names) <= words  # each whole, never split over two lines


@pytest.mark.parametrize("argv", [(), *[(name,) for name in SUBCOMMANDS]])
def test_headings_are_chinese_with_the_chinese_colon(capsys, monkeypatch, argv):
    text = help_of(capsys, monkeypatch, *argv)
    assert text.startswith("用法：")
    assert "选项：" in text
    assert not re.search(r"^\S.*[^\s:]:$", text, re.M), text  # no "选项:" / "位置参数:"
    if argv in (("code",), ("ask",)):
        assert "位置参数：" in text


@pytest.mark.parametrize("argv", [(), *[(name,) for name in SUBCOMMANDS]])
def test_help_lines_fit_the_width_in_columns(capsys, monkeypatch, argv):
    text = help_of(capsys, monkeypatch, *argv, columns=80)
    for line in text.splitlines():
        # argparse keeps one long word (a path, a {choice,list}) whole; nothing else is over
        if width(line) > 80:
            assert " " not in line.strip()[-20:] or "{" in line or "[" in line, line


def help_columns(text: str) -> dict[str, int]:
    """Option -> the terminal column its help starts at (for one-line entries)."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"^(  \S.*?\S)  +(\S)", line)
        if match and match.group(1).lstrip().startswith("-"):
            found[match.group(1).strip()] = width(line[:match.start(2)])
    return found


def test_chinese_metavars_keep_the_help_column(capsys, monkeypatch):
    text = help_of(capsys, monkeypatch, "code")
    columns = help_columns(text)
    assert {"--task 名字", "--model 名字", "-h, --help", "--no-delegate"} <= set(columns)
    assert len(set(columns.values())) == 1, columns  # one column, whatever the metavar


def test_a_chinese_parser_lines_up_and_wraps_between_words(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    parser = ChineseArgumentParser(prog="demo")
    parser.add_argument("--名字很长的选项", metavar="值", help="中文说明" * 12)
    parser.add_argument("--short", help="mixed 中文 and English words like configuration " * 3)
    text = parser.format_help()
    lines = text.splitlines()
    starts = [width(line[:len(line) - len(line.lstrip())]) for line in lines
              if line.startswith(" " * 10) and line.strip()]
    assert starts and len(set(starts)) == 1  # continuation lines under one column
    assert all(width(line) <= 60 for line in lines), text
    for word in ("configuration", "English", "mixed"):
        assert text.count(word) == 3  # never split
    usage = parser.format_usage().splitlines()
    assert usage[0].startswith("用法：demo")


def test_usage_continuation_lines_line_up_under_the_first_option(capsys, monkeypatch):
    text = help_of(capsys, monkeypatch, "code")
    first, second = text.splitlines()[:2]
    assert width(first[:first.index("[-h]")]) == width(second[:second.index("[")])


@pytest.mark.parametrize("text, columns", [
    ("审批：ask（写文件和运行命令前都问，默认）、auto-edit（只问命令）、yolo（什么都不问）", 20),
    ("运行记录保存到这里（默认：~/.local/state/vibe_agent/sessions/；--task 加 --keep 时）", 24),
    ("中文中文中abcdefgh中文，中文中文", 10),
])
def test_wrap_breaks_chinese_anywhere_but_no_word(text, columns):
    lines = wrap(text, columns)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    words = set(re.findall(r"[!-~]+", text))
    for line in lines:
        assert width(line) <= columns or re.fullmatch(r"[!-~]+[，；）]?", line.split()[-1])
        assert line[0] not in "，。、；：）" and line[-1] not in "（"
    assert words <= {w for line in lines for w in re.findall(r"[!-~]+", line)}


def test_wrap_of_hostile_input_is_bounded():
    assert wrap("", 10) == []
    assert wrap("  \n\t ", 10) == []
    lines = wrap("字" * 10_000, 7)
    assert all(width(line) <= 7 for line in lines) and sum(map(len, lines)) == 10_000


def test_an_unknown_task_lists_the_tasks_on_one_line_when_piped(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k != "COLUMNS" and not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    run = forked_run([sys.executable, "-m", "vibe_agent", "code", "--task", "nosuch"],
                     capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr  # the terminal wraps it, at its own width
    assert set(task_names()) <= set(re.findall(r"[a-z_]+", lines[0]))
