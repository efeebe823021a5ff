"""Held-out judging, the way SWE-bench does it: per-test verdicts on a pristine copy.

The agent works in its own copy of a task's project and may change anything there,
tests included. The judge never trusts that folder:

    1. a FRESH pristine copy of repo/                     <- tests, test data, conftest.py,
                                                             pytest.ini ... as shipped
    2. + the agent's changes to the task's SOURCE only    <- everything else is discarded,
                                                             and the record says so
    3. pytest in the sandbox, with a per-test time limit  <- one hanging test fails alone
       and its own JUnit XML report                       <- a verdict per test id
    4. resolved = every FAIL_TO_PASS test passes and every PASS_TO_PASS test still passes

FAIL_TO_PASS and PASS_TO_PASS (SWE-bench's names) come from two runs of the same
judge: the pristine project, and the project with the task's known fix. They
depend only on the task folder, so they are computed once and cached on disk under a
hash of that folder (`test_ids`); changing any file of the task makes a new entry.

What counts as source: the `source` patterns of task.json if it has them (fnmatch on
the path relative to repo/, e.g. "*.py"), else the files fix.patch touches, every
Python module that already exists outside the tests, and new modules inside an
existing package (a folder with `__init__.py`). Never source, whatever the patterns
say: tests (`tests/`, `test_*.py`, `*_test.py`, `conftest.py`, anything beside them in
a test folder), pytest's configuration files, and new top-level modules (a `pytest.py`
or `sitecustomize.py` would replace the real one).

The agent's workspace is read without recursion, at most MAX_DEPTH folders deep and
MAX_ENTRIES entries. A workspace past that, or partly unreadable, is not judged
(`WorkspaceUnjudgeable`): the agent made it so, and its run is not resolved.

Python runs in the judge with `-P` (safe path): pytest and its timeout plugin are
imported before the project's folder is put on `sys.path`, so no file of the project can
stand in for them or for the standard library modules they load.

What held-out tests cannot catch: source code written to fool the tests themselves
(patching pytest at import time, special-casing the tests' inputs). The diff is on the
record for a person to read.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shlex
import shutil
import stat
import tempfile
import threading
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..sandbox import run_in_sandbox
from ..trace import shorten
from ..tree import OPEN_FOLDER, raise_error, remove_tree, walk_tree
from .tasks import BugFixTask, TaskError, apply_fix, copy_repo, fix_edits, pytest_args

JUDGE_VERSION = 1  # part of the cache key: bump it when the judging changes
DEFAULT_TEST_TIMEOUT_S = 10.0  # per test, unless task.json says "test_timeout_s"
OUTPUT_CHARS = 2_000  # of the judging run's output kept (its end)
TEST_DIRS = frozenset({"tests", "test", "testing"})
CONFIG_FILES = frozenset({"pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "conftest.py"})
IGNORED = frozenset({"__pycache__", ".pytest_cache", ".git"})
SETTINGS_DIR = ".vibe_agent"  # vibe_agent.permissions: the project's rules, the person's
MAX_DEPTH = 64  # folders nested deeper: the workspace is not judged (the coding tools stop there)
MAX_ENTRIES = 20_000  # files, folders and links in a workspace; more: it is not judged
# Imports pytest and the timeout plugin from the installation first, then puts the
# project's folder in front, as `python -m pytest` would, and runs pytest with the plugin
# handed over as an object. (Named with `-p`, pytest would rewrite the plugin's asserts:
# it compiles the module from source, ~15 ms per run, since -B writes no cache.)
BOOTSTRAP = ("import os, sys, pytest, pytest_timeout; sys.path.insert(0, os.getcwd()); "
             "sys.exit(pytest.main(plugins=[pytest_timeout]))")


# --- what the agent changed, and what the judge keeps ---------------------------------


class WorkspaceUnjudgeable(Exception):
    """The agent left its workspace past the judge's bounds (MAX_DEPTH, MAX_ENTRIES) or
    partly unreadable. It is the agent's doing, not the harness's: the run is not
    resolved, and the message (Chinese, for the record) says why."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"agent 留下的工作区{problem}，超出了判定能读的范围，"
                         "所以没有判定，算作没有修好。")


def test_file_kind(path: str) -> str | None:
    """Why `path` (relative, "/"-separated) is never the agent's to change, or None.

    Returns "测试", "测试数据" or "pytest 配置"; the judge always uses the pristine file.
    """
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if name in CONFIG_FILES:
        return "pytest 配置" if name != "conftest.py" else "测试"
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return "测试"
    if any(part in TEST_DIRS for part in parts[:-1]):
        return "测试" if name.endswith(".py") else "测试数据"
    return None


def source_files(task: BugFixTask) -> set[str]:
    """The task's source files in its pristine project (paths relative to repo/)."""
    pristine = set(_files(task.repo))
    touched = {edit.path for edit in fix_edits(task)} if task.fix_patch else set()
    if task.source:
        chosen = {path for path in pristine | touched if _matches(path, task.source)}
    else:
        chosen = touched | {path for path in pristine if path.endswith(".py")}
    return {path for path in chosen if test_file_kind(path) is None}


def is_source(task: BugFixTask, path: str, sources: set[str]) -> bool:
    """Whether the judge takes the agent's version of `path` (existing, new or deleted)."""
    if test_file_kind(path) is not None:
        return False
    if path in sources:
        return True
    parts = PurePosixPath(path).parts
    if len(parts) == 1 or not (task.repo / parts[0]).is_dir():
        return False  # a new top-level module or folder could shadow the real ones
    if task.source:
        return _matches(path, task.source)
    package = task.repo / PurePosixPath(path).parent / "__init__.py"
    return path.endswith(".py") and package.is_file()


def _why_discarded(path: str, state: str) -> str:
    """The record's note for a change the judge did not take (Chinese, for the table)."""
    kind = test_file_kind(path)
    verb = {"added": "新建了", "modified": "改了", "deleted": "删了"}[state]
    undone = "已丢弃" if state == "added" else "已还原"
    if kind is not None:
        return f"{verb}{' ' if kind[0].isascii() else ''}{kind}，{undone}"  # 改了 pytest 配置
    if state == "added" and len(PurePosixPath(path).parts) == 1 and path.endswith(".py"):
        return "新建了顶层模块（会遮蔽标准库或 pytest），已丢弃"
    return f"{verb}任务源码以外的文件，{undone}"


def agent_changes(task: BugFixTask, workspace: Path) -> tuple[dict[str, str], dict[str, str]]:
    """What the agent changed in `workspace`, split into kept and discarded.

    Returns:
        (kept, discarded): each maps a relative path to its state ("added",
        "modified", "deleted") or, for discarded ones, to the reason in Chinese.
        A link the agent made is never kept.
    """
    before, after = _files(task.repo), _files(workspace)
    sources = source_files(task)
    kept: dict[str, str] = {}
    discarded: dict[str, str] = {}
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        state = "added" if old is None else "deleted" if new is None else "modified"
        if new == "link":
            discarded[path] = "换成了符号链接，已还原" if old else "新建了符号链接，已丢弃"
        elif is_source(task, path, sources):
            kept[path] = state
        else:
            discarded[path] = _why_discarded(path, state)
    return kept, discarded


def _files(root: Path) -> dict[str, str]:
    """Every file under `root` (links not followed) -> a digest of its bytes, or "link".

    The walk keeps its own list of folders still to read (os.walk recurses, and a
    1,100-level tree raises RecursionError) and goes no deeper than MAX_DEPTH folders
    and no further than MAX_ENTRIES entries.

    Raises:
        WorkspaceUnjudgeable: `root` is past a bound, or part of it cannot be read.
    """
    found: dict[str, str] = {}
    entries = 0
    try:
        top = os.open(root, OPEN_FOLDER)
        try:
            for path, info, folder, name, deep in walk_tree(
                    top, skip=_ignored, max_depth=MAX_DEPTH + 1, onerror=raise_error):
                entries += 1
                if entries > MAX_ENTRIES:
                    raise WorkspaceUnjudgeable(f"有超过 {MAX_ENTRIES} 个文件和文件夹")
                if deep:
                    raise WorkspaceUnjudgeable(
                        f"的文件夹套了超过 {MAX_DEPTH} 层（{shorten(path, 80)!r}）")
                if stat.S_ISLNK(info.st_mode):
                    found[path] = "link"
                elif stat.S_ISREG(info.st_mode):
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder)
                    with os.fdopen(fd, "rb") as file:  # read in pieces: any size
                        found[path] = hashlib.file_digest(file, "sha256").hexdigest()
        finally:
            os.close(top)
    except OSError as exc:  # e.g. a folder without read permission, a path too long
        raise WorkspaceUnjudgeable(f"有读不出的地方（{exc.strerror or exc}）") from exc
    return found


def _ignored(path: str, info: os.stat_result) -> bool:
    """Caches and .git anywhere, and the terminal's project settings at the top (the
    person's permission rules, `.vibe_agent/`: never part of a fix, nor a discarded one)."""
    name = path.rpartition("/")[2]
    return (name in IGNORED or path == SETTINGS_DIR) and stat.S_ISDIR(info.st_mode)


def _matches(path: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def held_out_copy(task: BugFixTask, workspace: Path, dest: Path) -> dict[str, str]:
    """A pristine copy of the task at `dest` with the agent's source changes applied.

    Returns:
        The discarded changes (path -> reason).
    """
    kept, discarded = agent_changes(task, workspace)
    copy_repo(task, dest)
    for path, state in kept.items():
        target = dest / path
        if state == "deleted":
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)  # a pristine link is replaced, never written through
        shutil.copyfile(workspace / path, target, follow_symlinks=False)
    return discarded


# --- one run of the tests, with a verdict per test ------------------------------------


@dataclass
class TestRun:
    """One judging run: each test id's outcome ("passed", "failed", "error", "skipped")."""

    outcomes: dict[str, str]
    exit_code: int | None
    output: str
    timed_out: bool
    isolated: bool

    def passed(self, test_id: str) -> bool:
        return self.outcomes.get(test_id) == "passed"


def judge_command(task: BugFixTask, report: str) -> str:
    """The shell command the judge runs: the task's pytest arguments, made safe.

    Args:
        task: the task (its `test_command` must run pytest; `load_task` checks that).
        report: where pytest writes its JUnit XML report, relative to the project.
    """
    args = pytest_args(shlex.split(task.test_command))
    if args is None:
        raise TaskError(
            f'{task.folder / "task.json"}：字段 "test_command" 必须运行 pytest'
            f'（"python -m pytest …" 或 "pytest …"），现在是 {task.test_command!r}。'
            "判定要从 pytest 的报告里读出每个测试的结果。")
    per_test = min(task.test_timeout_s or DEFAULT_TEST_TIMEOUT_S, task.timeout_s)
    argv = ["python", "-P", "-B", "-c", BOOTSTRAP,
            f"--timeout={per_test:g}", "--timeout-method=signal",
            f"--session-timeout={task.timeout_s * 0.9:g}",  # ends cleanly: the report is written
            "-p", "no:cacheprovider", f"--junitxml={report}", "-o", "junit_family=xunit1",
            *args]
    return shlex.join(argv)


def run_tests(task: BugFixTask, project: Path) -> TestRun:
    """Run the task's tests in `project` (in the sandbox) and read pytest's own report."""
    report = f".judge-{uuid.uuid4().hex}.xml"  # a name the project cannot know in advance
    done = run_in_sandbox(judge_command(task, report), project, timeout=task.timeout_s)
    outcomes = read_junit(project / report)
    return TestRun(outcomes, done.exit_code, done.output[-OUTPUT_CHARS:], done.timed_out,
                   done.isolated)


WORST = ("passed", "skipped", "failed", "error")  # a test reported twice keeps the worse


def read_junit(path: Path) -> dict[str, str]:
    """Test id -> outcome from a JUnit XML report; {} when there is none (killed run).

    The id is pytest's node id when the report names the file ("tests/test_a.py::test_x"),
    else "classname::name".
    """
    if not path.is_file() or path.is_symlink():
        return {}
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError:
        return {}
    outcomes: dict[str, str] = {}
    for case in root.iter("testcase"):
        test_id = _test_id(case)
        children = {child.tag for child in case}
        outcome = ("error" if "error" in children else "failed" if "failure" in children
                   else "skipped" if "skipped" in children else "passed")
        if outcome != "passed" or test_id not in outcomes:
            previous = outcomes.get(test_id, "passed")
            outcomes[test_id] = max(previous, outcome, key=WORST.index)
    return outcomes


def _test_id(case: ElementTree.Element) -> str:
    name, classname, file = (case.get("name", ""), case.get("classname", ""),
                             case.get("file", ""))
    if not file:
        return f"{classname}::{name}"
    module = file.removesuffix(".py").replace("/", ".")
    rest = classname[len(module):].lstrip(".") if classname.startswith(module) else ""
    return "::".join(part for part in (file, *rest.split("."), name) if part)


# --- FAIL_TO_PASS and PASS_TO_PASS ------------------------------------------------------


@dataclass(frozen=True)
class TestIds:
    """SWE-bench's two lists for one task, computed from the pristine and the fixed runs."""

    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]


SHIPPED_IDS = "test_ids.json"  # beside task.json: the lists as computed, with the task's hash
_cache: dict[str, TestIds] = {}
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def cache_dir() -> Path:
    """Where computed test ids are kept: $XDG_CACHE_HOME/vibe_agent/test_ids."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vibe_agent" / "test_ids"


def task_hash(task: BugFixTask) -> str:
    """A hash of everything in the task folder that can change a verdict.

    The shipped `test_ids.json` is left out: it records this hash.
    """
    digest = hashlib.sha256(f"judge {JUDGE_VERSION}\n".encode())
    for folder, dirs, files in os.walk(task.folder):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED)
        for name in sorted(files):
            full = Path(folder, name)
            if full == task.folder / SHIPPED_IDS:
                continue
            data = os.readlink(full).encode() if full.is_symlink() else full.read_bytes()
            digest.update(f"{full.relative_to(task.folder).as_posix()}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


def test_ids(task: BugFixTask) -> TestIds:
    """FAIL_TO_PASS and PASS_TO_PASS of a task: from memory, from the task's own
    `test_ids.json` (if made from exactly this task), from the disk cache, or from two
    real runs (then cached).

    Raises:
        TaskError: no fix.patch; the fix makes no failing test pass; or it breaks a test
            that passed (the task, not the agent, would be wrong).
    """
    key = task_hash(task)
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _cache:
            _cache[key] = (_read_ids(task.folder / SHIPPED_IDS, key)
                           or _read_ids(cache_dir() / f"{key}.json", key)
                           or _compute(task, key))
        return _cache[key]


def test_runs(task: BugFixTask) -> tuple[TestRun, TestRun]:
    """The pristine and the fixed run of a task's tests (what `test_ids` is made from)."""
    if task.fix_patch is None:
        raise TaskError(f"{task.folder}：没有 fix.patch（已知修复），算不出 FAIL_TO_PASS。")
    with tempfile.TemporaryDirectory(prefix="vibe-ids-") as temp:
        pristine = run_tests(task, copy_repo(task, Path(temp) / "pristine"))
        fixed_dir = copy_repo(task, Path(temp) / "fixed")
        apply_fix(task, fixed_dir)
        fixed = run_tests(task, fixed_dir)
    return pristine, fixed


def ids_from_runs(task: BugFixTask, pristine: TestRun, fixed: TestRun) -> TestIds:
    """SWE-bench's lists from the pristine and the fixed run; TaskError if they are unusable."""
    for which, run in (("出厂的项目", pristine), ("应用已知修复后", fixed)):
        if run.timed_out or run.exit_code is None or run.exit_code < 0:  # nothing is cached
            raise TaskError(f"{task.folder / 'task.json'}：{which}，判定命令超过了 timeout_s "
                            f"或被终止（输出结尾：{run.output[-300:]!r}）。请加大 timeout_s，"
                            "或用 test_timeout_s 限制每个测试。")
    broken = sorted(t for t in pristine.outcomes if pristine.passed(t) and not fixed.passed(t))
    if broken:
        raise TaskError(f"{task.fix_patch}：已知修复让原本通过的测试失败了：{', '.join(broken)}。"
                        "请修正 fix.patch 或测试。")
    ids = TestIds(tuple(sorted(t for t in fixed.outcomes if fixed.passed(t)
                               and not pristine.passed(t))),
                  tuple(sorted(t for t in pristine.outcomes if pristine.passed(t)
                               and fixed.passed(t))))
    if not ids.fail_to_pass:
        raise TaskError(f"{task.fix_patch}：应用已知修复后，没有任何测试从失败变成通过"
                        f"（判定命令的输出结尾：{fixed.output[-300:]!r}）。")
    return ids


def _compute(task: BugFixTask, key: str) -> TestIds:
    protected = sorted({edit.path for edit in fix_edits(task)} - source_files(task))
    if protected:
        raise TaskError(f"{task.fix_patch}：已知修复改了测试或 pytest 配置"
                        f"（{', '.join(protected)}）。"
                        "判定时这些文件总是用原样的，已知修复只能改源码。")
    ids = ids_from_runs(task, *test_runs(task))
    _write_ids(cache_dir() / f"{key}.json", key, ids)
    return ids


def _read_ids(path: Path, key: str) -> TestIds | None:
    """The lists in `path` if they were made from the task with hash `key`, else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["task_hash"] != key:
            return None  # made from another version of the task
        return TestIds(tuple(data["FAIL_TO_PASS"]), tuple(data["PASS_TO_PASS"]))
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: recompute
        return None


def _write_ids(path: Path, key: str, ids: TestIds) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        temp.write_text(json.dumps({"task_hash": key, "FAIL_TO_PASS": ids.fail_to_pass,
                                    "PASS_TO_PASS": ids.pass_to_pass}, indent=1) + "\n",
                        encoding="utf-8")
        os.replace(temp, path)
    except OSError:  # a read-only home: the in-memory cache still saves the rerun
        pass


def ship_test_ids(task: BugFixTask) -> TestIds:
    """Compute a task's lists from two real runs and write them beside its task.json.

    `python -m vibe_agent.course.judge [SUITE]` does it for every task of a suite.
    """
    key = task_hash(task)
    ids = _compute(task, key)
    _write_ids(task.folder / SHIPPED_IDS, key, ids)
    return ids


# --- the verdict ----------------------------------------------------------------------


@dataclass
class Verdict:
    """The judge's answer for one agent run on one task."""

    resolved: bool
    fail_to_pass: dict[str, bool]  # test id -> passes now
    pass_to_pass: dict[str, bool]
    discarded: dict[str, str]  # path -> why the judge did not take the agent's change
    run: TestRun


def judge(task: BugFixTask, workspace: Path) -> Verdict:
    """Judge the agent's work in `workspace` on a held-out pristine copy of the task.

    Raises:
        WorkspaceUnjudgeable: the agent left `workspace` past the judge's bounds.
    """
    ids = test_ids(task)
    temp = tempfile.mkdtemp(prefix="vibe-judge-")
    try:
        project = Path(temp) / "project"
        discarded = held_out_copy(task, workspace, project)
        run = run_tests(task, project)
    finally:  # not shutil.rmtree: it recurses, and the agent's code may make a deep tree
        remove_tree(temp)
    f2p = {test: run.passed(test) for test in ids.fail_to_pass}
    p2p = {test: run.passed(test) for test in ids.pass_to_pass}
    return Verdict(all(f2p.values()) and all(p2p.values()), f2p, p2p, discarded, run)


def verdict_line(task: BugFixTask) -> Callable[[Path], str]:
    """The terminal's closing line for a course task (`Session(judge=...)`): the held-out
    judge's verdict on a workspace, in Chinese, e.g. `13/13 修好，1/1 未破坏（已解决…）`."""

    def verdict(workspace: Path) -> str:
        result = judge(task, workspace)
        fixed, kept = result.fail_to_pass.values(), result.pass_to_pass.values()
        line = (f"{sum(fixed)}/{len(fixed)} 修好，{sum(kept)}/{len(kept)} 未破坏"
                f"（{'已解决' if result.resolved else '还没解决'}：留出的测试在原样的副本上跑）")
        if result.discarded:
            line += f"；判定没有采用 {len(result.discarded)} 处改动（测试或源码以外的文件）"
        return line

    return verdict


if __name__ == "__main__":  # python -m vibe_agent.course.judge [SUITE]: refresh test_ids.json
    import sys

    from .tasks import load_suite

    found, errors = load_suite(sys.argv[1] if len(sys.argv) > 1 else None)
    for error in errors:
        print(error, file=sys.stderr)
    for each in found:
        made = ship_test_ids(each)
        print(f"{each.name}: {len(made.fail_to_pass)} FAIL_TO_PASS, "
              f"{len(made.pass_to_pass)} PASS_TO_PASS")
