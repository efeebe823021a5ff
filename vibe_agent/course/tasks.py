"""The bug-fix task suite: load tasks, copy their projects, replay their known fixes.

A task is a folder (the format is described in `vibe_agent/data/tasks/README.md`):

    <name>/
        task.json   {"prompt": ..., "test_command": ..., "timeout_s": ..., other keys = metadata}
        repo/       a small project whose tests fail as shipped
        fix.patch   optional: the known fix, a unified diff as `git diff` writes it

The judging itself (held-out tests, FAIL_TO_PASS / PASS_TO_PASS) is in
`vibe_agent/course/judge.py`; this module only knows what a task is.

`load_task` checks one folder and raises `TaskError` naming the file that is wrong and
what to do; `load_suite` loads every task of a folder and collects the errors instead,
so one broken task never hides the others.

`patch_edits` turns a patch into exact replacements (path, old_text, new_text): the
arguments an `edit_file(path, old, new)` tool takes. The scripted known-fix model
(`known_fix.py`) sends them through the agent's own tools; `apply_fix` applies them in
plain Python, without the `patch` or `git` programs.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from unidiff import (
    LINE_TYPE_ADDED,
    LINE_TYPE_CONTEXT,
    LINE_TYPE_REMOVED,
    Hunk,
    PatchedFile,
    PatchSet,
    UnidiffParseError,
)
from unidiff.constants import LINE_TYPE_NO_NEWLINE

SUITE_DIR = Path(__file__).resolve().parent.parent / "data" / "tasks"
COPY_IGNORE = shutil.ignore_patterns("__pycache__", ".pytest_cache")

# The required task.json fields and what each must hold (shown to learners in errors).
FIELDS = {
    "prompt": "非空字符串（交给 agent 的问题描述）",
    "test_command": '非空字符串（判定成败的测试命令，例如 "python -m pytest -q"）',
    "timeout_s": "有限的正数（测试命令的时限，单位：秒）",
}
# Optional task.json fields the harness reads (the rest is metadata for reports).
OPTIONAL_FIELDS = {
    "source": '非空字符串组成的数组（任务的源码：fnmatch 模式，例如 ["*.py"] 或 ["src/*"]）',
    "test_timeout_s": "有限的正数（判定时每个测试的时限，单位：秒）",
}

# Python types as learners know them from JSON; bool first, since a bool is an int too.
JSON_KINDS = [
    (bool, "布尔值"),
    (int | float, "数字"),
    (str, "字符串"),
    (list, "数组"),
    (dict, "对象"),
]


class TaskError(ValueError):
    """A task folder or patch that cannot be used; the message names the file and the fix."""


@dataclass(frozen=True)
class BugFixTask:
    """One bug-fix task: the issue text, the project, and how its success is judged."""

    name: str
    folder: Path
    prompt: str
    test_command: str
    timeout_s: float
    fix_patch: Path | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    source: tuple[str, ...] = ()  # fnmatch patterns of the agent's files; () = the default
    test_timeout_s: float | None = None  # each test's limit when judged; None = the default

    @property
    def repo(self) -> Path:
        """The pristine project; work on a copy (`copy_repo`), never on this folder."""
        return self.folder / "repo"


@dataclass(frozen=True)
class FileEdit:
    """Replace `old_text`, found exactly once in the file, by `new_text`.

    `path` is relative to the project, with "/" separators. An empty `old_text`
    creates the file with `new_text` as its whole content.
    """

    path: str
    old_text: str
    new_text: str


# --- loading -------------------------------------------------------------------------


def load_task(folder: str | Path) -> BugFixTask:
    """Read and check one task folder.

    Args:
        folder: the task's folder; its name is the task's name.

    Raises:
        TaskError: task.json, repo/ or fix.patch is missing or malformed.
    """
    folder = Path(folder)
    fields = _read_task_json(folder / "task.json")
    repo = folder / "repo"
    if not repo.is_dir():
        raise TaskError(
            f"{repo}：找不到 repo/ 文件夹。任务的项目代码（连同它的测试）要放在 "
            f"{folder.name}/repo/ 里。"
        )
    check_links(repo)
    patch = folder / "fix.patch"
    if patch.exists():
        _read_patch(patch, repo)  # raises TaskError unless the fix applies cleanly
    return BugFixTask(
        name=folder.name,
        folder=folder,
        prompt=fields["prompt"],
        test_command=fields["test_command"],
        timeout_s=float(fields["timeout_s"]),
        fix_patch=patch if patch.exists() else None,
        metadata={key: value for key, value in fields.items()
                  if key not in FIELDS and key not in OPTIONAL_FIELDS},
        source=tuple(fields.get("source", ())),
        test_timeout_s=None if "test_timeout_s" not in fields else float(fields["test_timeout_s"]),
    )


def load_suite_folders(folder: str | Path | None = None
                       ) -> tuple[list[BugFixTask], dict[str, TaskError]]:
    """Load every task folder of a suite, in name order: the tasks, and for each folder
    that is broken its name and the error (README.md, __pycache__ … are not task folders).

    Args:
        folder: the suite's folder; by default the course's suite shipped in the package.
    """
    root = SUITE_DIR if folder is None else Path(folder)
    if not root.is_dir():
        raise TaskError(f"{root}：任务集文件夹不存在，请检查路径。")
    tasks: list[BugFixTask] = []
    broken: dict[str, TaskError] = {}
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith((".", "_")):
            continue  # README.md, __pycache__, .ipynb_checkpoints …
        try:
            tasks.append(load_task(child))
        except TaskError as error:
            broken[child.name] = error
    return tasks, broken


def load_suite(folder: str | Path | None = None) -> tuple[list[BugFixTask], list[TaskError]]:
    """Load every task folder of a suite, in name order; broken tasks become errors.

    Args:
        folder: the suite's folder; by default the course's suite shipped in the package.
    """
    tasks, broken = load_suite_folders(folder)
    return tasks, list(broken.values())


def _read_task_json(path: Path) -> dict[str, Any]:
    """The fields of task.json, with the required ones checked."""
    if not path.is_file():
        raise TaskError(
            f"{path}：找不到 task.json。每个任务文件夹都需要它，至少写明 "
            "prompt、test_command 和 timeout_s。"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise TaskError(f"{path}：读不出这个文件（{error}）。请把它存成 UTF-8 文本。") from error
    except json.JSONDecodeError as error:
        raise TaskError(
            f"{path}：不是合法的 JSON（第 {error.lineno} 行第 {error.colno} 列：{error.msg}）。"
            "请检查多余或缺少的逗号、引号和括号。"
        ) from error
    if not isinstance(data, dict):
        raise TaskError(f"{path}：最外层应当是一个 JSON 对象 {{…}}，现在是{_json_kind(data)}。")
    for name in FIELDS:
        _check_field(path, data, name)
    for name in OPTIONAL_FIELDS:
        if name in data:
            _check_optional(path, data[name], name)
    return data


def _positive(value: object) -> bool:
    """A finite positive JSON number (JSON's Infinity and NaN are refused; bools too)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _check_optional(path: Path, value: object, name: str) -> None:
    """Raise TaskError if the optional field `name` is ill-typed."""
    if name == "source":
        ok = (isinstance(value, list) and value != []
              and all(isinstance(item, str) and item.strip() for item in value))
    else:
        ok = _positive(value)
    if not ok:
        raise TaskError(f'{path}：字段 "{name}" 应当是{OPTIONAL_FIELDS[name]}，'
                        f"现在是{_json_kind(value)} {value!r}。")


def _check_field(path: Path, data: dict[str, Any], name: str) -> None:
    """Raise TaskError if the required field `name` is missing or ill-typed."""
    if name not in data:
        raise TaskError(f'{path}：缺少字段 "{name}"，它应当是{FIELDS[name]}。')
    value = data[name]
    if name == "timeout_s":
        ok = _positive(value)
    else:
        ok = isinstance(value, str) and value.strip() != ""
    if not ok:
        raise TaskError(
            f'{path}：字段 "{name}" 应当是{FIELDS[name]}，现在是{_json_kind(value)} {value!r}。'
        )
    if name == "test_command":
        if "\0" in value:
            raise TaskError(f'{path}：字段 "test_command" 里有 NUL 字符（\\u0000），'
                            "命令行里不能有它，请删掉。")
        try:
            shlex.split(value)
        except ValueError as error:
            raise TaskError(
                f'{path}：字段 "test_command" 无法拆成参数（{error}），请检查引号是否成对。'
            ) from error


def pytest_args(words: list[str]) -> list[str] | None:
    """The arguments after `python -m pytest` / `python3 -m pytest` / `pytest`, else None."""
    if words[:1] == ["pytest"]:
        return words[1:]
    if words[:1] in (["python"], ["python3"]) and words[1:3] == ["-m", "pytest"]:
        return words[3:]
    return None


def _json_kind(value: object) -> str:
    """The JSON name of a value's type, in Chinese."""
    for kind, name in JSON_KINDS:
        if isinstance(value, kind):
            return name
    return "null"


def read_patch_text(patch: Path) -> str:
    """A patch file's text, byte for byte: a "\r" in a line stays (no newline translation)."""
    return patch.read_bytes().decode("utf-8")


def _read_patch(patch: Path, repo: Path) -> list[FileEdit]:
    """The edits of a patch file, checked against `repo`; errors name the patch file."""
    try:
        text = read_patch_text(patch)
    except (OSError, UnicodeDecodeError) as error:
        raise TaskError(
            f"{patch}：读不出这个补丁（{error}）。fix.patch 应当是 UTF-8 文本，"
            "可以在项目里用 git diff > fix.patch 生成。"
        ) from error
    try:
        return patch_edits(text, repo)
    except TaskError as error:
        raise TaskError(f"{patch}：{error}") from error


# --- copies and commands -------------------------------------------------------------


def copy_repo(task: BugFixTask, dest: str | Path) -> Path:
    """A fresh copy of the task's project at `dest` (which must not exist yet).

    Caches (`__pycache__`, `.pytest_cache`) are left behind. Symbolic links are copied
    as links (never the file they point to); a link that leads outside the project is
    a `TaskError` naming it.
    """
    dest = Path(dest)
    check_links(task.repo)
    shutil.copytree(task.repo, dest, symlinks=True, ignore=COPY_IGNORE)
    return dest


def check_links(repo: Path) -> None:
    """Raise TaskError for a symbolic link under `repo` that is absolute or leads out.

    An absolute link would still point at the task's folder from a copy; one that
    climbs out would show the model (and the tests) a file of the host.
    """
    root = repo.resolve()
    for folder, dirs, files in os.walk(repo):  # os.walk does not enter linked folders
        for name in [*dirs, *files]:
            link = Path(folder, name)
            if not link.is_symlink():
                continue
            target = os.readlink(link)
            try:
                inside = (not os.path.isabs(target)
                          and link.resolve().is_relative_to(root))
            except (OSError, RuntimeError):  # a link loop
                inside = False
            if not inside:
                raise TaskError(
                    f"{link}：这个符号链接指向 {target!r}，在任务的 repo/ 之外（或是绝对路径、"
                    "或是循环链接）。任务里的链接只能用相对路径指向 repo/ 里的文件；"
                    "需要的文件请直接放进 repo/。"
                )


def command_argv(task: BugFixTask, python: str = sys.executable) -> list[str]:
    """The test command as arguments; a leading `python` becomes `python` given here.

    So `python -m pytest -q` runs with the interpreter (and the pytest) of this
    environment rather than whichever `python` comes first on PATH.
    """
    argv = shlex.split(task.test_command)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = python
    return argv


def command_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a task's test command: `base` (default os.environ), cleaned.

    The task projects use the standard library and plain pytest only, so pytest does
    not load the plugins installed beside the course (starting them takes seconds), no
    `.pyc` files are left in the copy, and nothing from this repository leaks in
    through PYTHONPATH or PYTEST_ADDOPTS.
    """
    env = dict(os.environ if base is None else base)
    for name in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        env.pop(name, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


# --- patches -------------------------------------------------------------------------


def patch_edits(patch_text: str, repo: Path | None = None) -> list[FileEdit]:
    """The exact replacements a unified diff makes, one per hunk, in order.

    Each hunk's context and removed lines are `old_text`, its context and added lines
    `new_text`. With `repo`, every edit is checked the way `edit_file` checks it:
    applied in order, each `old_text` must occur exactly once in its file.

    Args:
        patch_text: a unified diff, as `git diff` writes it.
        repo: the project the patch is for; None skips the check.

    Raises:
        TaskError: the text is not a diff, deletes or renames a file, or (with `repo`)
            an edit does not match exactly once.
    """
    try:
        patch = PatchSet(patch_text)
    except UnidiffParseError as error:
        raise TaskError(
            f"不是有效的统一 diff（unidiff：{error}）。请在项目里用 git diff 重新生成补丁。"
        ) from error
    if not patch:
        raise TaskError("补丁里没有任何文件改动。请在项目里用 git diff 重新生成补丁。")
    edits = [edit for patched_file in patch for edit in _file_edits(patched_file)]
    if repo is not None:
        _edited_texts(edits, Path(repo))
    return edits


def fix_edits(task: BugFixTask) -> list[FileEdit]:
    """The edits of the task's known fix (fix.patch), checked against its pristine project."""
    if task.fix_patch is None:
        raise TaskError(f"{task.folder}：这个任务没有 fix.patch（已知修复），无法回放。")
    return _read_patch(task.fix_patch, task.repo)


def apply_edits(edits: list[FileEdit], root: str | Path) -> None:
    """Apply `edits` in order to the files under `root`; nothing is written if one fails."""
    root = Path(root)
    for path, text in _edited_texts(edits, root).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))


def apply_fix(task: BugFixTask, workspace: str | Path) -> list[FileEdit]:
    """Apply the task's known fix (fix.patch) to `workspace`, a copy of its project.

    Returns:
        The edits that were applied.
    """
    edits = fix_edits(task)
    apply_edits(edits, workspace)
    return edits


def _file_edits(patched_file: PatchedFile) -> list[FileEdit]:
    """One edit per hunk of one file's part of the patch."""
    path = _safe_path(patched_file.path)
    if patched_file.is_removed_file:
        raise TaskError(f"{path}：补丁删除了这个文件，edit_file 做不到；请改成修改文件内容。")
    if patched_file.is_rename or not len(patched_file):
        raise TaskError(f"{path}：这项改动是改名、二进制文件或只改权限，不支持；只能修改文本内容。")
    edits = []
    for hunk in patched_file:
        old_text, new_text = _hunk_texts(hunk)
        if not old_text and not patched_file.is_added_file:
            raise TaskError(
                f"{path}：有一处改动不带上下文，无法定位；请用默认的 3 行上下文重新生成补丁。"
            )
        edits.append(FileEdit(path, old_text, new_text))
    return edits


def _safe_path(path: str) -> str:
    """`path` if it stays inside the project, else TaskError."""
    parts = PurePosixPath(path)
    if parts.is_absolute() or ".." in parts.parts or path.startswith('"') or "\\" in path:
        raise TaskError(f"{path}：补丁里的路径必须是项目内的相对路径（不能是绝对路径或含 ..）。")
    return path


def _hunk_texts(hunk: Hunk) -> tuple[str, str]:
    """The hunk's text before (context + removed lines) and after (context + added lines)."""
    old: list[str] = []
    new: list[str] = []
    sides: tuple[list[str], ...] = ()
    for line in hunk:
        if line.line_type == LINE_TYPE_NO_NEWLINE:  # the line before has no "\n"
            for side in sides:
                side[-1] = side[-1].removesuffix("\n")
            continue
        # Anything else (a blank line after the hunk) belongs to neither side.
        sides = {
            LINE_TYPE_REMOVED: (old,),
            LINE_TYPE_ADDED: (new,),
            LINE_TYPE_CONTEXT: (old, new),
        }.get(line.line_type, ())
        for side in sides:
            side.append(line.value)
    return "".join(old), "".join(new)


def _edited_texts(edits: list[FileEdit], root: Path) -> dict[str, str]:
    """The new text of every file the edits touch, each edit applied in order."""
    texts: dict[str, str] = {}
    for edit in edits:
        if edit.path not in texts:
            texts[edit.path] = _read_for_edit(root, edit)
        texts[edit.path] = _replace_once(texts[edit.path], edit)
    return texts


def _read_for_edit(root: Path, edit: FileEdit) -> str:
    """The current text of the file `edit` changes ("" for a file still to be created)."""
    path = root / edit.path
    if not path.is_file():
        if edit.old_text:
            raise TaskError(f"{edit.path}：补丁要修改这个文件，可 {root} 里没有它。")
        return ""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise TaskError(f"{edit.path}：不是 UTF-8 文本，无法按文本修改（{error}）。") from error


def _replace_once(text: str, edit: FileEdit) -> str:
    """`text` with `edit.old_text` replaced; TaskError unless it occurs exactly once."""
    if not edit.old_text:
        if text:
            raise TaskError(f"{edit.path}：补丁要新建这个文件，可它已经存在而且不是空的。")
        return edit.new_text
    start = text.find(edit.old_text)
    if start < 0:
        raise TaskError(
            f"{edit.path}：补丁里的一段原文在文件中找不到（补丁是针对别的版本生成的？）。"
            f"这段原文开头是 {edit.old_text[:60]!r}。"
        )
    if text.find(edit.old_text, start + 1) >= 0:
        raise TaskError(
            f"{edit.path}：补丁里的一段原文在文件中出现了不止一次，无法确定改哪一处；"
            "请多带几行上下文重新生成补丁（例如 git diff -U6）。"
        )
    return text[:start] + edit.new_text + text[start + len(edit.old_text) :]
