"""Tests for the bug-fix task suite and its loader.

Every shipped task fails as shipped and passes once its reference fix is applied (run
for real, in a fresh copy, by the judge: pytest's own report, a per-test time limit);
its prompt does not give the fix away; its fix is a list of exact, unique edits.
Malformed task folders give a `TaskError` that names the file at fault. The judge
keeps only the agent's changes to the task's source (a table of paths below).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from vibe_agent.course import judge
from vibe_agent.course.tasks import (
    SUITE_DIR,
    BugFixTask,
    FileEdit,
    TaskError,
    apply_edits,
    apply_fix,
    command_argv,
    command_env,
    copy_repo,
    fix_edits,
    load_suite,
    load_task,
    patch_edits,
)

TASKS, LOAD_ERRORS = load_suite()
# Lesson 11's long task (16 files, many reads), part of the suite like the others.
LONG_TASK = "bulk_discount_threshold"


def by_name(tasks: list[BugFixTask]) -> list:
    """Parameters for `parametrize`, each with the task's name as its id."""
    return [pytest.param(task, id=task.name) for task in tasks]


# --- the shipped suite ---------------------------------------------------------------


def test_the_suite_loads_without_errors():
    assert LOAD_ERRORS == []
    assert len(TASKS) == 21


def test_the_long_task_is_in_the_suite_and_is_long():
    (task,) = [task for task in TASKS if task.name == LONG_TASK]
    assert 10 <= sum(1 for path in task.repo.rglob("*") if path.is_file()) <= 20
    assert len(task.metadata["explore"]) >= 8  # the files between the symptom and the bug


def test_the_suite_is_small():
    size = sum(path.stat().st_size for path in SUITE_DIR.rglob("*") if path.is_file())
    assert size < 200_000


@pytest.mark.parametrize("task", by_name(TASKS))
def test_fails_as_shipped_and_passes_with_its_fix(task: BugFixTask):
    pristine, fixed = judge.test_runs(task)
    # Exit code 1: the tests ran and some failed (2 would be a collection error).
    assert pristine.exit_code == 1, pristine.output
    assert not all(map(pristine.passed, pristine.outcomes)), pristine.output
    assert fixed.exit_code == 0, fixed.output
    assert len(fixed.outcomes) >= 2 and all(map(fixed.passed, fixed.outcomes)), fixed.output
    assert fixed.outcomes.keys() == pristine.outcomes.keys(), "the fix must not add or drop tests"
    assert not pristine.timed_out and pristine.isolated
    # the shipped FAIL_TO_PASS / PASS_TO_PASS are exactly what these two runs give
    shipped = json.loads((task.folder / judge.SHIPPED_IDS).read_text(encoding="utf-8"))
    assert shipped["task_hash"] == judge.task_hash(task), (
        "the task changed: run python -m vibe_agent.course.judge")
    ids = judge.ids_from_runs(task, pristine, fixed)
    assert shipped["FAIL_TO_PASS"] == list(ids.fail_to_pass)
    assert shipped["PASS_TO_PASS"] == list(ids.pass_to_pass)


def test_a_stale_test_ids_file_is_not_believed(tmp_path: Path):
    folder = tmp_path / "weather"
    shutil.copytree(next(t for t in TASKS if t.name == "weather_fahrenheit").folder, folder)
    with (folder / "repo" / "tests" / "test_units.py").open("a", encoding="utf-8") as tests:
        tests.write("\n\ndef test_added_later():\n    assert True\n")
    task = load_task(folder)
    shipped = json.loads((folder / judge.SHIPPED_IDS).read_text(encoding="utf-8"))
    assert shipped["task_hash"] != judge.task_hash(task)
    ids = judge.test_ids(task)  # computed again, from two real runs
    assert "tests/test_units.py::test_added_later" in ids.pass_to_pass
    assert "tests/test_units.py::test_added_later" not in shipped["PASS_TO_PASS"]


@pytest.mark.parametrize("task", by_name(TASKS))
def test_the_prompt_does_not_give_the_fix_away(task: BugFixTask):
    patch = task.fix_patch.read_bytes().decode("utf-8")
    added = [
        line[1:].strip()
        for line in patch.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert [line for line in added if len(line) >= 6 and line in task.prompt] == []


def occurrences(text: str, part: str) -> int:
    """How often `part` occurs in `text`, overlaps included."""
    return sum(1 for start in range(len(text)) if text.startswith(part, start))


@pytest.mark.parametrize("task", by_name(TASKS))
def test_fix_edits_are_unique_in_the_pristine_files(task: BugFixTask):
    edits = fix_edits(task)
    assert edits
    for edit in edits:
        if edit.old_text:  # an empty old_text creates a file
            text = (task.repo / edit.path).read_text(encoding="utf-8")
            assert occurrences(text, edit.old_text) == 1, edit


@pytest.mark.parametrize("task", by_name(TASKS))
def test_task_metadata_and_project_layout(task: BugFixTask):
    assert task.metadata["difficulty"] in ("easy", "medium", "hard")
    assert task.metadata["kind"]
    # A pytest.ini of its own keeps pytest from reading the configuration of a project
    # the copy happens to sit in (this repository's addopts, for one).
    assert (task.repo / "pytest.ini").is_file()
    assert list(task.repo.rglob("test_*.py"))


def test_the_suite_has_the_layouts_of_outside_suites():
    """Test data as JSON beside the tests, a root conftest.py adding an option, a program
    that never ends while buggy (its own test time limit)."""
    assert any(task.repo.glob("tests/*.json") for task in TASKS)
    assert any("addoption" in path.read_text(encoding="utf-8")
               for task in TASKS for path in task.repo.glob("conftest.py"))
    assert any(task.test_timeout_s for task in TASKS)


def test_the_suite_varies_in_difficulty():
    levels = {task.metadata["difficulty"] for task in TASKS}
    assert levels == {"easy", "medium", "hard"}


# --- the loader: malformed task folders -----------------------------------------------

CALC = "def double(x):\n    return x + 2\n"
CALC_PATCH = """\
diff --git a/calc.py b/calc.py
index 0f2c9a1..5d0e8b3 100644
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def double(x):
-    return x + 2
+    return x * 2
"""
CUT_PATCH = "".join(CALC_PATCH.splitlines(keepends=True)[:-1])  # the hunk misses a line
ESCAPING_PATCH = CALC_PATCH.replace("/calc.py", "/../calc.py")
DELETING_PATCH = """\
--- a/calc.py
+++ /dev/null
@@ -1,2 +0,0 @@
-def double(x):
-    return x + 2
"""
TASK_JSON = {"prompt": "double(3) 返回 5", "test_command": "python -m pytest -q", "timeout_s": 30}


def make_task(folder: Path, **fields: object) -> Path:
    """A small valid task folder; `fields` change task.json."""
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "calc.py").write_text(CALC, encoding="utf-8")
    (folder / "task.json").write_text(json.dumps({**TASK_JSON, **fields}), encoding="utf-8")
    (folder / "fix.patch").write_text(CALC_PATCH, encoding="utf-8")
    return folder


def write(name: str, content: str | bytes) -> Callable[[Path], object]:
    def change(folder: Path) -> object:
        path = folder / name
        return path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)

    return change


def set_field(name: str, value: object) -> Callable[[Path], object]:
    return write("task.json", json.dumps({**TASK_JSON, name: value}))


def drop_field(name: str) -> Callable[[Path], object]:
    return write("task.json", json.dumps({k: v for k, v in TASK_JSON.items() if k != name}))


BROKEN = [
    # (id, how the good task is broken, file named in the error, what the error says)
    ("no-task-json", lambda f: (f / "task.json").unlink(), "task.json", "找不到 task.json"),
    ("invalid-json", write("task.json", '{"prompt": "x",}'), "task.json", "不是合法的 JSON"),
    ("json-list", write("task.json", "[1, 2]"), "task.json", "现在是数组"),
    ("missing-prompt", drop_field("prompt"), "task.json", '缺少字段 "prompt"'),
    ("missing-timeout", drop_field("timeout_s"), "task.json", '缺少字段 "timeout_s"'),
    ("blank-prompt", set_field("prompt", "  "), "task.json", '"prompt" 应当是非空字符串'),
    ("command-is-list", set_field("test_command", ["pytest"]), "task.json", "现在是数组"),
    ("timeout-is-text", set_field("timeout_s", "60"), "task.json", '"timeout_s" 应当是有限的正数'),
    ("timeout-is-bool", set_field("timeout_s", True), "task.json", "现在是布尔值"),
    ("timeout-zero", set_field("timeout_s", 0), "task.json", '"timeout_s" 应当是有限的正数'),
    ("timeout-infinite", write("task.json", '{"prompt": "x", "test_command": "pytest", '
                                            '"timeout_s": Infinity}'), "task.json", "有限的正数"),
    ("timeout-nan", write("task.json", '{"prompt": "x", "test_command": "pytest", '
                                       '"timeout_s": NaN}'), "task.json", "有限的正数"),
    ("command-has-nul", set_field("test_command", "python -m pytest\0 -q"), "task.json", "NUL"),
    ("source-not-a-list", set_field("source", "*.py"), "task.json", '"source" 应当是'),
    ("source-empty", set_field("source", []), "task.json", '"source" 应当是'),
    ("test-timeout-negative", set_field("test_timeout_s", -1), "task.json",
     '"test_timeout_s" 应当是有限的正数'),
    ("link-to-the-host", lambda f: (f / "repo" / "notes.txt").symlink_to("/etc/passwd"),
     "repo/notes.txt", "符号链接"),
    ("link-climbs-out", lambda f: (f / "repo" / "up").symlink_to("../task.json"),
     "repo/up", "符号链接"),
    ("absolute-link-inside", lambda f: (f / "repo" / "abs.py").symlink_to(f / "repo" / "calc.py"),
     "repo/abs.py", "绝对路径"),
    ("link-loop", lambda f: (f / "repo" / "loop").symlink_to("loop"), "repo/loop", "循环"),
    ("unbalanced-quote", set_field("test_command", "pytest -k 'x"), "task.json", "引号"),
    ("no-repo", lambda f: shutil.rmtree(f / "repo"), "repo", "找不到 repo/"),
    ("patch-not-utf8", write("fix.patch", b"\xff\xfe\x00"), "fix.patch", "读不出这个补丁"),
    ("patch-is-prose", write("fix.patch", "把 + 改成 *\n"), "fix.patch", "没有任何文件改动"),
    ("patch-cut-short", write("fix.patch", CUT_PATCH), "fix.patch", "不是有效的统一 diff"),
    ("patch-stale", write("repo/calc.py", "def double(y):\n    return y\n"), "fix.patch", "找不到"),
    ("patch-leaves-repo", write("fix.patch", ESCAPING_PATCH), "fix.patch", "相对路径"),
    ("patch-deletes", write("fix.patch", DELETING_PATCH), "fix.patch", "删除"),
]


@pytest.mark.parametrize(
    ("change", "file", "says"), [pytest.param(*row[1:], id=row[0]) for row in BROKEN]
)
def test_a_broken_task_names_its_file(tmp_path: Path, change, file: str, says: str):
    folder = make_task(tmp_path / "broken")
    change(folder)
    with pytest.raises(TaskError) as caught:
        load_task(folder)
    message = str(caught.value)
    assert str(folder / file) in message
    assert says in message, message
    assert isinstance(caught.value, ValueError)


def test_a_good_task_loads(tmp_path: Path):
    task = load_task(make_task(tmp_path / "calc", timeout_s=5, difficulty="easy"))
    assert task.name == "calc"
    assert task.prompt == "double(3) 返回 5"
    assert task.timeout_s == 5.0
    assert task.fix_patch == tmp_path / "calc" / "fix.patch"
    assert task.metadata == {"difficulty": "easy"}


def test_the_fix_patch_is_optional(tmp_path: Path):
    folder = make_task(tmp_path / "calc")
    (folder / "fix.patch").unlink()
    task = load_task(folder)
    assert task.fix_patch is None
    with pytest.raises(TaskError, match="fix.patch"):
        fix_edits(task)


def test_one_broken_task_does_not_stop_the_suite(tmp_path: Path):
    make_task(tmp_path / "a_good")
    make_task(tmp_path / "b_broken")
    (tmp_path / "b_broken" / "task.json").write_text("{", encoding="utf-8")
    make_task(tmp_path / "c_good")
    (tmp_path / "README.md").write_text("# 任务集\n", encoding="utf-8")
    (tmp_path / "__pycache__").mkdir()
    tasks, errors = load_suite(tmp_path)
    assert [task.name for task in tasks] == ["a_good", "c_good"]
    assert len(errors) == 1
    assert str(tmp_path / "b_broken" / "task.json") in str(errors[0])


# --- patches, copies and commands ----------------------------------------------------

NEW_FILE_PATCH = """\
diff --git a/pkg/util.py b/pkg/util.py
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/pkg/util.py
@@ -0,0 +1,2 @@
+def triple(x):
+    return 3 * x
"""
NO_NEWLINE_PATCH = """\
diff --git a/f.txt b/f.txt
--- a/f.txt
+++ b/f.txt
@@ -1,2 +1,2 @@
 one
-two
\\ No newline at end of file
+three
\\ No newline at end of file
"""


def test_a_hunk_becomes_one_exact_edit(tmp_path: Path):
    (tmp_path / "calc.py").write_text(CALC, encoding="utf-8")
    edits = patch_edits(CALC_PATCH, tmp_path)
    assert edits == [FileEdit("calc.py", CALC, "def double(x):\n    return x * 2\n")]
    apply_edits(edits, tmp_path)
    assert (tmp_path / "calc.py").read_text(encoding="utf-8") == edits[0].new_text


def test_a_new_file_is_one_edit_from_nothing(tmp_path: Path):
    edits = patch_edits(NEW_FILE_PATCH, tmp_path)
    assert edits == [FileEdit("pkg/util.py", "", "def triple(x):\n    return 3 * x\n")]
    apply_edits(edits, tmp_path)
    assert (tmp_path / "pkg" / "util.py").read_text(encoding="utf-8") == edits[0].new_text
    with pytest.raises(TaskError, match="已经存在"):
        patch_edits(NEW_FILE_PATCH, tmp_path)


def test_no_newline_at_end_of_file(tmp_path: Path):
    (tmp_path / "f.txt").write_bytes(b"one\ntwo")
    edits = patch_edits(NO_NEWLINE_PATCH, tmp_path)
    assert edits == [FileEdit("f.txt", "one\ntwo", "one\nthree")]
    apply_edits(edits, tmp_path)
    assert (tmp_path / "f.txt").read_bytes() == b"one\nthree"


def test_an_edit_that_matches_twice_is_refused(tmp_path: Path):
    (tmp_path / "calc.py").write_text(CALC + "\n" + CALC, encoding="utf-8")
    with pytest.raises(TaskError, match="不止一次"):
        patch_edits(CALC_PATCH, tmp_path)


def test_nothing_is_written_when_an_edit_fails(tmp_path: Path):
    (tmp_path / "calc.py").write_text(CALC, encoding="utf-8")
    edits = [*patch_edits(CALC_PATCH), FileEdit("calc.py", "no such text", "x")]
    with pytest.raises(TaskError, match="找不到"):
        apply_edits(edits, tmp_path)
    assert (tmp_path / "calc.py").read_text(encoding="utf-8") == CALC


def test_copy_repo_leaves_caches_behind(tmp_path: Path):
    task = load_task(make_task(tmp_path / "calc"))
    (task.repo / "__pycache__").mkdir()
    (task.repo / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\0")
    (task.repo / ".pytest_cache").mkdir()
    copy = copy_repo(task, tmp_path / "copy")
    assert sorted(path.name for path in copy.iterdir()) == ["calc.py"]
    assert apply_fix(task, copy) == patch_edits(CALC_PATCH)
    assert (task.repo / "calc.py").read_text(encoding="utf-8") == CALC  # the original is untouched


def test_command_env_is_clean():
    env = command_env({"PATH": "/bin", "PYTHONPATH": "/course", "PYTEST_ADDOPTS": "--nbval"})
    assert env == {
        "PATH": "/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("python -m pytest -q", [sys.executable, "-m", "pytest", "-q"]),
        ("python3 -m pytest", [sys.executable, "-m", "pytest"]),
        ("pytest -k 'not slow'", ["pytest", "-k", "not slow"]),
    ],
    ids=["python", "python3", "other"],
)
def test_command_argv_uses_this_python(tmp_path: Path, command: str, argv: list[str]):
    task = load_task(make_task(tmp_path / "calc", test_command=command))
    assert command_argv(task) == argv


# --- links (a task repo must never show the host's files) -----------------------------


def test_a_link_inside_the_project_is_copied_as_a_link(tmp_path: Path):
    folder = make_task(tmp_path / "calc")
    (folder / "repo" / "alias.py").symlink_to("calc.py")
    task = load_task(folder)
    copy = copy_repo(task, tmp_path / "copy")
    assert (copy / "alias.py").is_symlink() and os.readlink(copy / "alias.py") == "calc.py"


def test_copy_repo_refuses_a_link_added_after_loading(tmp_path: Path):
    task = load_task(make_task(tmp_path / "calc"))
    (task.repo / "secret").symlink_to("/etc/hostname")
    with pytest.raises(TaskError, match="符号链接") as caught:
        copy_repo(task, tmp_path / "copy")
    assert str(task.repo / "secret") in str(caught.value)
    assert not (tmp_path / "copy").exists()


# --- fix.patch byte for byte ------------------------------------------------------------


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True).stdout.decode("utf-8")


def test_a_patch_whose_lines_hold_a_carriage_return_applies(tmp_path: Path):
    """git writes a CRLF file's "\\r" into the patch; reading it as text would drop it."""
    folder = make_task(tmp_path / "crlf")
    (folder / "repo" / "calc.py").write_bytes(CALC.replace("\n", "\r\n").encode())
    work = tmp_path / "work"
    shutil.copytree(folder / "repo", work)
    git("init", "-q", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-qm", "pristine", cwd=work)
    (work / "calc.py").write_bytes(b"def double(x):\r\n    return x * 2\r\n")
    (folder / "fix.patch").write_bytes(git("diff", cwd=work).encode())
    assert b"-    return x + 2\r\n" in (folder / "fix.patch").read_bytes()

    task = load_task(folder)  # refused before: "针对别的版本生成的"
    copy = copy_repo(task, tmp_path / "copy")
    apply_fix(task, copy)
    assert (copy / "calc.py").read_bytes() == (work / "calc.py").read_bytes()


# --- what the judge keeps of the agent's changes ------------------------------------------

WEATHER = next(task for task in TASKS if task.name == "weather_fahrenheit")
SALES = next(task for task in TASKS if task.name == "sales_report_total")

# (id, task, path, new content (None: delete it), kept?, the judge's note when discarded)
CHANGES = [
    ("source-module", WEATHER, "units.py", "x = 1\n", True, None),
    ("delete-a-source-module", WEATHER, "weather.py", None, True, None),
    ("new-module-in-a-package", SALES, "sales/rounding.py", "x = 1\n", True, None),
    ("test-file", WEATHER, "tests/test_units.py", "", False, "改了测试，已还原"),
    ("delete-a-test", WEATHER, "tests/test_weather.py", None, False, "删了测试，已还原"),
    ("new-test-data", WEATHER, "tests/expected.json", "{}", False, "新建了测试数据，已丢弃"),
    ("root-conftest", WEATHER, "conftest.py", "", False, "新建了测试，已丢弃"),
    ("nested-conftest", SALES, "sales/conftest.py", "", False, "新建了测试，已丢弃"),
    ("pytest-ini", WEATHER, "pytest.ini", "[pytest]\n", False, "改了 pytest 配置，已还原"),
    ("pyproject", WEATHER, "pyproject.toml", "", False, "新建了 pytest 配置，已丢弃"),
    ("setup-cfg", WEATHER, "setup.cfg", "", False, "新建了 pytest 配置，已丢弃"),
    ("tox-ini", WEATHER, "tox.ini", "", False, "新建了 pytest 配置，已丢弃"),
    ("shadows-pytest", WEATHER, "pytest.py", "", False,
     "新建了顶层模块（会遮蔽标准库或 pytest），已丢弃"),
    ("sitecustomize", WEATHER, "sitecustomize.py", "", False,
     "新建了顶层模块（会遮蔽标准库或 pytest），已丢弃"),
    ("new-folder", WEATHER, "helpers/util.py", "", False, "新建了任务源码以外的文件，已丢弃"),
    ("notes", WEATHER, "NOTES.md", "", False, "新建了任务源码以外的文件，已丢弃"),
]


@pytest.mark.parametrize(("task", "path", "content", "kept", "note"),
                         [pytest.param(*row[1:], id=row[0]) for row in CHANGES])
def test_the_judge_keeps_only_source_changes(tmp_path: Path, task: BugFixTask, path: str,
                                             content: str | None, kept: bool,
                                             note: str | None):
    workspace = copy_repo(task, tmp_path / "ws")
    target = workspace / path
    if content is None:
        target.unlink()
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    discarded = judge.held_out_copy(task, workspace, tmp_path / "judged")
    judged = tmp_path / "judged" / path
    if kept:
        assert discarded == {}
        assert (judged.read_text(encoding="utf-8") if judged.exists() else None) == content
    else:
        assert discarded == {path: note}
        pristine = task.repo / path
        assert (judged.read_bytes() if judged.exists() else None) == (
            pristine.read_bytes() if pristine.exists() else None)


def test_a_source_file_turned_into_a_link_is_restored(tmp_path: Path):
    workspace = copy_repo(WEATHER, tmp_path / "ws")
    (workspace / "units.py").unlink()
    (workspace / "units.py").symlink_to("/etc/hostname")
    discarded = judge.held_out_copy(WEATHER, workspace, tmp_path / "judged")
    assert discarded == {"units.py": "换成了符号链接，已还原"}
    pristine = (WEATHER.repo / "units.py").read_bytes()
    assert (tmp_path / "judged" / "units.py").read_bytes() == pristine


def test_declared_source_patterns_limit_what_is_kept(tmp_path: Path):
    folder = tmp_path / "weather"
    shutil.copytree(WEATHER.folder, folder)
    fields = json.loads((folder / "task.json").read_text(encoding="utf-8"))
    (folder / "task.json").write_text(json.dumps({**fields, "source": ["units.py"]}),
                                      encoding="utf-8")
    task = load_task(folder)
    assert task.source == ("units.py",) and "source" not in task.metadata
    workspace = copy_repo(task, tmp_path / "ws")
    (workspace / "units.py").write_text("x = 1\n", encoding="utf-8")
    (workspace / "weather.py").write_text("x = 2\n", encoding="utf-8")
    assert judge.agent_changes(task, workspace) == (
        {"units.py": "modified"}, {"weather.py": "改了任务源码以外的文件，已还原"})


@pytest.mark.parametrize("command", ["python -m unittest", "true", "sh -c pytest"])
def test_the_judge_needs_a_pytest_command(tmp_path: Path, command: str):
    task = load_task(make_task(tmp_path / "calc", test_command=command))  # loads: it is a task
    with pytest.raises(TaskError, match="必须运行 pytest") as caught:
        judge.test_ids(task)
    assert str(task.folder / "task.json") in str(caught.value)


def test_a_pytest_py_in_the_project_cannot_replace_pytest(tmp_path: Path):
    """Even in a folder the judge did not clean, `-P` keeps the real pytest."""
    project = copy_repo(WEATHER, tmp_path / "project")
    apply_fix(WEATHER, project)
    (project / "pytest.py").write_text("raise SystemExit(0)\n", encoding="utf-8")
    (project / "json.py").write_text("raise SystemExit(0)\n", encoding="utf-8")
    run = judge.run_tests(WEATHER, project)
    assert run.exit_code == 0 and len(run.outcomes) == 14 and all(map(run.passed, run.outcomes))


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py" line="1"/>
<testcase classname="tests.test_a.TestCart" name="test_total[2]" file="tests/test_a.py"/>
<testcase classname="tests.test_a" name="test_bad" file="tests/test_a.py">
  <failure message="assert 1 == 2">assert 1 == 2</failure></testcase>
<testcase classname="tests.test_a" name="test_teardown" file="tests/test_a.py"/>
<testcase classname="tests.test_a" name="test_teardown" file="tests/test_a.py">
  <error message="error at teardown"/></testcase>
<testcase classname="tests.test_a" name="test_later" file="tests/test_a.py">
  <skipped message="later"/></testcase>
<testcase classname="" name="tests.test_b"><error message="collection failure"/></testcase>
</testsuite></testsuites>"""


def test_read_junit_gives_one_outcome_per_test_id(tmp_path: Path):
    (tmp_path / "r.xml").write_text(JUNIT, encoding="utf-8")
    assert judge.read_junit(tmp_path / "r.xml") == {
        "tests/test_a.py::test_ok": "passed",
        "tests/test_a.py::TestCart::test_total[2]": "passed",
        "tests/test_a.py::test_bad": "failed",
        "tests/test_a.py::test_teardown": "error",  # passed, then failed in teardown
        "tests/test_a.py::test_later": "skipped",
        "::tests.test_b": "error",
    }
    (tmp_path / "cut.xml").write_text(JUNIT[:200], encoding="utf-8")
    assert judge.read_junit(tmp_path / "cut.xml") == {}  # a killed run: no verdicts
    assert judge.read_junit(tmp_path / "none.xml") == {}


def test_the_projects_rules_are_neither_judged_nor_discarded(tmp_path: Path):
    """The terminal's `.vibe_agent/settings.json` (answer A) is the person's, not a fix."""
    workspace = copy_repo(WEATHER, tmp_path / "ws")
    (workspace / ".vibe_agent").mkdir()
    (workspace / ".vibe_agent" / "settings.json").write_text("{}\n", encoding="utf-8")
    (workspace / "units.py").write_text("x = 1\n", encoding="utf-8")
    assert judge.agent_changes(WEATHER, workspace) == ({"units.py": "modified"}, {})
