"""`/init`: an AGENTS.md proposed from what the folder holds, written on a yes.

No model is asked: the test command (`verdict.find_test_command`), the top-level
layout and the languages are found by walking the folder (never through a link,
bounded in entries and depth). The proposal is shown whole and written only after a
yes; an existing AGENTS.md shows its diff first, and a link is never touched. The
model reads the new file after /clear or in the next session (`memory.py`, lesson 12).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from .approval import diff_texts, print_diff
from .memory import AGENTS_FILE
from .sandbox import YES
from .screen import visible
from .verdict import find_test_command

if TYPE_CHECKING:
    from .terminal import Session

MAX_INIT_ENTRIES = 5_000  # entries looked at, at most
MAX_INIT_DEPTH = 8
MAX_LAYOUT_LINES = 30
SKIPPED = frozenset({".git", "__pycache__", ".pytest_cache", ".venv", "venv", "node_modules",
                     ".tox", ".mypy_cache", ".ruff_cache", ".vibe_agent", ".tool_results"})
LANGUAGES = {".py": "Python", ".js": "JavaScript", ".ts": "TypeScript", ".go": "Go",
             ".rs": "Rust", ".java": "Java", ".c": "C", ".h": "C", ".cpp": "C++",
             ".rb": "Ruby", ".sh": "Shell", ".ipynb": "Jupyter notebooks", ".md": "Markdown"}


def _names(name: str) -> str:
    """A file name as AGENTS.md may hold it: escaped, and no backticks (no code spans)."""
    return visible(name).replace("`", "'")


def _walk(root: Path) -> tuple[dict[str, int], dict[str, int], bool]:
    """(files per top-level entry, files per language, whether the walk stopped early);
    never follows a link, skips SKIPPED folders, bounded in entries and depth."""
    top: dict[str, int] = {}
    languages: dict[str, int] = {}
    stack: list[tuple[Path, str | None, int]] = [(root, None, 0)]
    seen = 0
    while stack:
        folder, first, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_INIT_ENTRIES:
                return top, languages, True
            name = first or entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED and depth < MAX_INIT_DEPTH:
                    top.setdefault(name, 0)
                    stack.append((Path(entry.path), name, depth + 1))
            elif entry.is_file(follow_symlinks=False):
                top[name] = top.get(name, 0) + 1
                language = LANGUAGES.get(os.path.splitext(entry.name)[1].lower())
                if language:
                    languages[language] = languages.get(language, 0) + 1
    return top, languages, False


def propose_agents_md(root: Path, test_command: str | None = None) -> str:
    """An AGENTS.md for the project at `root`, from what is found there (no model)."""
    found = find_test_command(root, test_command)
    top, languages, cut = _walk(root)
    top.pop(AGENTS_FILE, None)
    lines = ["# AGENTS.md", "",
             "Notes for coding agents (and people) working on this project. Proposed by "
             "`/init` from what it found in the folder, without asking a model: correct "
             "anything that is wrong.", "", "## Tests"]
    if found:
        lines.append(f"- Run the tests: `{found[0]}`")
    else:
        lines.append("- No test command was found: write the one that runs this project's "
                     "tests here, in backticks.")
    lines += ["", "## Layout"]
    folders = sorted(name for name in top if name.endswith("/"))
    files = sorted(name for name in top if not name.endswith("/"))
    for name in (folders + files)[:MAX_LAYOUT_LINES]:
        count = f": {top[name]} files" if name.endswith("/") else ""
        lines.append(f"- {_names(name)}{count}")
    if len(top) > MAX_LAYOUT_LINES:
        lines.append(f"- ... and {len(top) - MAX_LAYOUT_LINES} more entries")
    if not top:
        lines.append("- (the folder is empty)")
    lines += ["", "## Languages"]
    ranked = sorted(languages.items(), key=lambda item: (-item[1], item[0]))
    lines.append("- " + ", ".join(f"{name} ({count} files)" for name, count in ranked)
                 if ranked else "- none recognised")
    if cut:
        lines.append(f"- (counted in the first {MAX_INIT_ENTRIES:,} entries only)")
    return "\n".join(lines) + "\n"


def init_command(session: Session) -> None:
    """/init: show the proposal whole, and write it only when the person says y."""
    console, path = session.console, session.root / AGENTS_FILE
    proposal = propose_agents_md(session.root, session.test_command)
    if path.is_symlink() or path.exists() and not path.is_file():
        console.print(f"{AGENTS_FILE} 是链接或者不是普通文件：/init 不会动它。")
        return
    old = path.read_text("utf-8", "replace") if path.exists() else None
    console.print(f"根据文件夹里找到的内容（测试命令、目录结构、语言）拟了一份 {AGENTS_FILE}，"
                  "没有问模型：", markup=False)
    console.print(visible(proposal, multiline=True), markup=False, highlight=False)
    if old == proposal:
        console.print(f"现有的 {AGENTS_FILE} 已经是这样了，不用改。")
        return
    if old is None:
        question = f"写入 {AGENTS_FILE} 吗？[y/N] "
    else:
        console.print(f"[bold]工作区里已经有 {AGENTS_FILE}。换成上面这份，会这样改：[/]")
        print_diff(console, diff_texts({AGENTS_FILE: old}, {AGENTS_FILE: proposal}), rows=None)
        question = f"用上面这份替换现有的 {AGENTS_FILE} 吗？[y/N] "
    ask = session.ask or (lambda text: console.input(text, markup=False))
    try:
        reply = ask(question)
    except (EOFError, KeyboardInterrupt):
        reply = ""
        console.print()
    if reply.strip().lower() not in YES:
        console.print(f"没有写 {AGENTS_FILE}。")
        return
    try:
        _write_new(session.root, proposal)
    except OSError as exc:
        console.print(f"[red]没能写入 {AGENTS_FILE}（{exc.strerror or exc}）。[/]")
        return
    if session.judge is None:  # the person chose it: the verdict may use its test command
        session.tests = find_test_command(session.root, session.test_command)
    console.print(f"已写入 {AGENTS_FILE}。模型在 /clear 之后或者下次会话里会读到它。")


def _write_new(root: Path, text: str) -> None:
    """Write AGENTS.md in the workspace: a new file (never through a link), renamed over."""
    temp = root / f".{AGENTS_FILE}.{uuid.uuid4().hex}.partial"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temp, root / AGENTS_FILE)
    finally:
        temp.unlink(missing_ok=True)
