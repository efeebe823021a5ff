"""Checkers for lesson 10, evaluating a coding agent.

    check_my_task(fn)     fn(folder) writes a bug-fix task into `folder` (task.json,
                          repo/, fix.patch); the checker loads it with `load_task` and
                          runs it: the tests fail on the pristine project, pass after the
                          fix, and do so every time; the prompt does not give the fix away
    check_summarise(fn)   fn(records) -> dict: tasks, passed, pass_rate, tokens,
                          tokens_per_task of a bench run, None where there is no number;
                          `passed` counts `r.passed`, the held-out verdict (a record whose
                          test edits the judge discarded still counts when resolved)

`check_my_task` runs the learner's task the way the bench checks a task before judging
with it: a fresh copy of `repo/`, the task's own `test_command` in the sandbox, red on the
pristine copy and green with the fix (the bench's FAIL_TO_PASS needs both).
Each case is one property a usable task must have and names the typical mistake that
breaks it (a test that already passes, `test_command: "true"`, a prompt that leaks the
fix, a patch made against another version of the file, a test that fails for the wrong
reason, a test that gives a different answer the second time).
"""

from __future__ import annotations

import copy
import math
import re
import shlex
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from unidiff import PatchSet

from ...sandbox import run_in_sandbox
from ..bench import TaskRecord, summary
from ..tasks import SUITE_DIR, BugFixTask, TaskError, apply_fix, copy_repo, load_task
from . import Report, attempt, checker, fail, short

# ---------------------------------------------------------------------------
# Exercise 1: a task of your own
# ---------------------------------------------------------------------------

MAX_TEST_SECONDS = 60.0  # the checker's cap on one run of the learner's test command
LEAK_MIN_CHARS = 6  # an added line this long found in the prompt gives the fix away
# Commands that "succeed" or fail without running any test.
NOT_A_RUNNER = {"true", "false", ":", "exit", "echo", "printf", "pass", "sleep", "yes"}
# Shell tails that turn any failure into success.
SWALLOWS = ("|| true", "||true", "|| exit 0", "; exit 0", ";exit 0", "|| :", "; true")

WRITE_HINT = ("write_my_task(folder) 要把任务写进参数 folder：folder / \"task.json\"、"
              "folder / \"repo\" / …、folder / \"fix.patch\"。文件夹 folder 已经建好了，"
              "子文件夹用 path.parent.mkdir(parents=True, exist_ok=True) 建。")
JSON_HINT = ("task.json 用 json.dumps({...}, ensure_ascii=False) 生成，不要手拼字符串；"
             "三个字段都要有：prompt（字符串）、test_command（字符串）、timeout_s（正数）。")
PATCH_HINT = ("fix.patch 要能原样套在 repo/ 上：用上面的 make_patch(path, before, after) 生成，"
              "before 必须和你写进 repo/ 的文本一字不差（同一个变量最稳），路径相对 repo/。")
REPO_HINT = "项目代码和它的测试都放在 folder / \"repo\" 里，fix.patch 里的路径相对 repo/。"
RUNNER_HINT = ("test_command 必须真的运行测试，例如 \"python -m pytest -q\"。"
               "true、exit 0、echo ok 或 “… || true” 不管代码对不对都成功（或者都失败），"
               "这样的任务给哪个模型打的分都没有意义。")
NO_TESTS_HINT = ("repo/ 里要有测试文件：例如 repo/tests/test_xxx.py，里面的 test_ 函数用 assert "
                 "检查有 bug 的那个函数。没有测试，判定命令就没有东西可判。")
FAILS_HINT = ("出厂的 repo/ 里测试必须失败：bug 要真的在代码里，测试要真的测到它。"
              "先在 repo/ 外面确认：不打补丁时运行 test_command，退出码不是 0。")
COLLECT_HINT = ("测试失败的原因不对：pytest 退出码 {code} 表示{meaning}，测试根本没跑起来。"
                "任务的测试要能导入、能运行，只是断言失败（退出码 1）："
                "检查 import 的模块名、文件名和 repo/ 里的 pytest.ini。")
PASSES_HINT = ("应用 fix.patch 以后测试必须通过（退出码 0）：补丁要修的就是测试测到的那个 bug。"
               "在一份副本里先按补丁改好，运行 test_command 确认通过，再用 make_patch 生成补丁。")
TIMEOUT_HINT = "测试超时了：任务的测试应当几秒内跑完，不要 sleep，也不要访问网络。"
TOUCHES_TESTS_HINT = ("已知修复只能改被测的代码，不能改测试：改了测试的“修复”，"
                      "任何模型照做都能通过。把补丁限制在代码文件里。")
LEAK_PART_HINT = ("prompt 里有补丁改动的那一小段代码：哪怕不是整行，模型照着改也能通过，"
                  "分数就虚高了。prompt 只写用户看到的现象（输入什么、期望什么、实际得到什么），"
                  "不写判断条件、变量名怎么改。")
CONFIG_HINT = ("fix.patch 改了测试的配置或测试的钩子：在 pytest.ini 里 --deselect 掉失败的测试、"
               "在 conftest.py 里把结果改成通过，任何模型照做都能“通过”，测的就不是修 bug 了。"
               "已知修复只改被测的代码，pytest.ini、conftest.py 这些文件留在 repo/ 里不动。")
BUNDLED_HINT = ("这是包里自带的评测任务的拷贝：它已经在评测集里了，再出一遍测不到新东西。"
                "自己想一个 bug（可以来自你自己的项目），写出它的代码、测试和修复。")
LEAK_HINT = ("prompt 只写症状（看到了什么、期望什么），不写修法：补丁新加的代码行出现在 prompt 里，"
             "模型只要照抄就能通过，分数就虚高了。把这句从 prompt 里删掉，换成用户看到的现象。")
FLAKY_HINT = ("同一个项目跑两次，结果不一样：这是不稳定（flaky）的测试，分数会忽高忽低。"
              "测试里不要依赖随机数、当前时间、文件里残留的状态或运行顺序；"
              "非用随机数不可，就固定种子（random.seed(0) 或传入 random.Random(0)）。")
PYTEST_EXIT = {2: "收集测试时出错（例如 import 失败）", 3: "pytest 内部出错",
               4: "命令行用法错误", 5: "一个测试也没收集到"}


def _runs_pytest(command: str) -> bool:
    return "pytest" in command


def _command_words(command: str) -> list[str]:
    """The words of the command, without leading VAR=value assignments."""
    words = shlex.split(command)
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]
    return words


def _runner_problem(command: str) -> str | None:
    """Why `command` runs no tests, or None."""
    words = _command_words(command)
    if not words or words[0] in NOT_A_RUNNER:
        first = words[0] if words else "（空）"
        return f"test_command 是 {command!r}：{first} 不运行任何测试"
    squeezed = " ".join(command.split())
    for tail in SWALLOWS:
        if tail in squeezed:
            return f"test_command 是 {command!r}：{tail.strip()} 把失败也变成了成功"
    return None


# Files that decide how tests run (or that shadow the test runner): a fix must not touch them.
TEST_MACHINERY = {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml",
                  "pytest.py", "sitecustomize.py", "usercustomize.py"}


def _is_test_file(path: PurePosixPath) -> bool:
    return path.suffix == ".py" and (path.name.startswith("test_")
                                     or path.name.endswith("_test.py"))


def _test_files(repo: Path) -> list[str]:
    return sorted(str(p.relative_to(repo)) for p in repo.rglob("*.py")
                  if _is_test_file(PurePosixPath(p.name)) and "__pycache__" not in p.parts)


def _patched_paths(task: BugFixTask) -> list[str]:
    assert task.fix_patch is not None
    return [f.path for f in PatchSet(task.fix_patch.read_text(encoding="utf-8"))]


def leaked_lines(prompt: str, patch_text: str) -> list[str]:
    """The lines a patch adds (stripped, at least LEAK_MIN_CHARS long) that the prompt holds.

    Args:
        prompt: the task's prompt.
        patch_text: the task's fix, a unified diff.
    """
    added = [line.value.strip() for f in PatchSet(patch_text) for hunk in f for line in hunk
             if line.is_added]
    return [line for line in added if len(line) >= LEAK_MIN_CHARS and line in prompt]


TOKEN = re.compile(r"\w+|[^\w\s]+")


def leaked_fragments(prompt: str, patch_text: str) -> list[str]:
    """Pieces of changed code the prompt holds: two or three neighbouring tokens of an added
    line, one of them new in its hunk (and not a number), at least 4 characters without
    spaces and holding a letter (spaces in the prompt do not count either).
    "判断条件应该是 total >= FREE_FROM" leaks `total >=` of the added line
    `if total >= FREE_FROM:`.

    Args:
        prompt: the task's prompt.
        patch_text: the task's fix, a unified diff.
    """
    squeezed = "".join(prompt.split())
    found: list[str] = []
    for patched in PatchSet(patch_text):
        for hunk in patched:
            removed = [t for line in hunk if line.is_removed for t in TOKEN.findall(line.value)]
            for line in (line for line in hunk if line.is_added):
                tokens = TOKEN.findall(line.value)
                for i, token in enumerate(tokens):
                    if token in removed or token.isdigit():
                        continue
                    for window in (tokens[i - 1:i + 1] if i else [], tokens[i:i + 2],
                                   tokens[max(i - 1, 0):i + 2]):
                        text = " ".join(window)
                        joined = "".join(window)
                        if len(joined) >= 4 and re.search(r"[A-Za-z_]", joined) \
                                and joined in squeezed and text not in found:
                            found.append(text)
    return found


def _bundled_copy(task: BugFixTask) -> str | None:
    """The name of the bundled task `task` is a copy of (same fix, or same project), or None."""
    assert task.fix_patch is not None
    patch = task.fix_patch.read_bytes()
    files = _files(task.repo)
    for bundled in sorted(p for p in SUITE_DIR.iterdir() if (p / "fix.patch").is_file()):
        if (bundled / "fix.patch").read_bytes() == patch or _files(bundled / "repo") == files:
            return bundled.name
    return None


def _files(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".pytest_cache" not in p.parts}


def _tail(output: str, lines: int = 2) -> str:
    """The last lines of a test run's output, without pytest's rules of = and !."""
    kept = [line.strip("=! ")[:100] for line in output.splitlines()]
    kept = [line for line in kept if line and "short test summary" not in line][-lines:]
    return " ⏎ ".join(kept) or "（命令没有任何输出）"


def _run(task: BugFixTask, project: Path) -> tuple[int | None, str]:
    """The test command's exit code in the sandbox (None: timed out) and its output."""
    done = run_in_sandbox(task.test_command, project,
                          timeout=min(task.timeout_s, MAX_TEST_SECONDS))
    return done.exit_code, done.output


def _load_hint(error: TaskError) -> str:
    text = str(error)
    if "fix.patch" in text:
        return PATCH_HINT
    if "task.json" in text:
        return JSON_HINT
    return REPO_HINT


@checker("练习 10.1：write_my_task —— 自己出一道修 bug 的题")
def check_my_task(fn: Callable[[Path], Any], report: Report) -> None:
    """Exercise 10.1: the learner's task fails as shipped, passes with its fix, every time."""
    with tempfile.TemporaryDirectory(prefix="vibe-my-task-") as temp:
        folder = Path(temp) / "my_task"
        folder.mkdir()
        with report.case("把任务写进 folder"):
            attempt(fn, folder).get(WRITE_HINT)
        if report.unsolved or report.failed:
            return

        task: BugFixTask | None = None
        with report.case("load_task 读得出来（task.json、repo/、fix.patch）"):
            try:
                task = load_task(folder)
            except TaskError as error:
                fail(str(error).replace(temp, "…"), _load_hint(error))
        if task is None:
            return

        with report.case("带着已知修复 fix.patch"):
            if task.fix_patch is None:
                fail("folder 里没有 fix.patch", PATCH_HINT)
        with report.case("自己出的题，不是包里自带任务的拷贝"):
            if task.fix_patch is not None and (name := _bundled_copy(task)):
                fail(f"这道题和包里自带的任务 {name} 一样", BUNDLED_HINT)
        with report.case("test_command 真的运行测试"):
            if problem := _runner_problem(task.test_command):
                fail(problem, RUNNER_HINT)
        with report.case("repo/ 里有测试"):
            if not _test_files(task.repo):
                fail("repo/ 里没有 test_*.py 或 *_test.py 文件", NO_TESTS_HINT)
        if task.fix_patch is None:
            return

        pristine = copy_repo(task, Path(temp) / "pristine")
        fixed = copy_repo(task, Path(temp) / "fixed")
        apply_fix(task, fixed)
        before = _run(task, pristine)
        after = _run(task, fixed)
        with report.case("出厂的 repo/：测试失败"):
            _expect_red(task, *before)
        with report.case("应用 fix.patch 之后：测试通过"):
            if after[0] != 0:
                fail(*_not_green(task, *after))
        with report.case("修复只改代码，不改测试"):
            touched = [p for p in _patched_paths(task) if _is_test_file(PurePosixPath(p))
                       or "tests" in PurePosixPath(p).parts[:-1]]
            if touched:
                fail(f"fix.patch 改了测试文件 {touched}", TOUCHES_TESTS_HINT)
            machinery = [p for p in _patched_paths(task) if PurePosixPath(p).name in TEST_MACHINERY]
            if machinery:
                fail(f"fix.patch 改了决定测试怎么运行的文件 {machinery}", CONFIG_HINT)
        with report.case("prompt 不泄露修复"):
            leaked = leaked_lines(task.prompt, task.fix_patch.read_text(encoding="utf-8"))
            if leaked:
                fail(f"补丁新加的代码行出现在 prompt 里：{short(leaked)}", LEAK_HINT)
            pieces = leaked_fragments(task.prompt, task.fix_patch.read_text(encoding="utf-8"))
            if pieces:
                fail(f"补丁改动的代码片段出现在 prompt 里：{short(pieces)}", LEAK_PART_HINT)
        with report.case("再跑一次，结果不变（不是 flaky 测试）"):
            again_before, again_after = _run(task, pristine), _run(task, fixed)
            changed = [name for name, first, second in [("出厂的 repo/", before, again_before),
                                                        ("打上补丁的副本", after, again_after)]
                       if (first[0] == 0) != (second[0] == 0)]
            if changed:
                fail(f"{'、'.join(changed)}第二次运行的结果和第一次不同", FLAKY_HINT)


def _not_green(task: BugFixTask, code: int | None, output: str) -> tuple[str, str]:
    """Why the fixed project's tests did not pass: (message, hint)."""
    if code is None:
        return "打上补丁后测试超时了", TIMEOUT_HINT
    message = f"打上补丁后测试没有通过（退出码 {code}）：{_tail(output)}"
    if _runs_pytest(task.test_command) and code in PYTEST_EXIT:
        return message, COLLECT_HINT.format(code=code, meaning=PYTEST_EXIT[code])
    return message, PASSES_HINT


def _expect_red(task: BugFixTask, code: int | None, output: str) -> None:
    """Fail the case unless the pristine project's tests ran and failed."""
    if code is None:
        fail("出厂的 repo/ 测试超时了", TIMEOUT_HINT)
    if code == 0:
        fail(f"不打补丁，测试就已经通过了：{_tail(output)}", FAILS_HINT)
    if _runs_pytest(task.test_command) and code != 1:
        meaning = PYTEST_EXIT.get(code, "测试没有正常运行")
        fail(f"pytest 退出码 {code}（{meaning}）：{_tail(output)}",
             COLLECT_HINT.format(code=code, meaning=meaning))


# ---------------------------------------------------------------------------
# Exercise 2: summarise a run honestly
# ---------------------------------------------------------------------------

KEYS = ("tasks", "passed", "pass_rate", "tokens", "tokens_per_task")

ANSWERED_HINT = ("“回答了”（stop_reason == \"answered\"）不等于修好了：只数 record.passed 为 True "
                 "的记录。模型说完话就是 answered，测试照样可能失败。")
CHANGED_HINT = ("r.passed 已经是留出的测试的判定：agent 改过的测试在判定前就还原了，"
                "tests_changed 为 True 只说明判定丢掉了它的一些改动。r.passed 为 True，"
                "就是它对源码的修改让原样的测试全部通过：算通过，不要再扣一次。")
F2P_ONLY_HINT = ("只看 fail_to_pass 不够：修好了失败的测试、却弄坏了原本通过的测试（pass_to_pass 里"
                 "有 False），不算修好。r.passed 已经把两张表都算进去了，直接数它。")
NONE_AS_ZERO_HINT = ("tokens 是 None 表示接口没报告，不是 0：只要有一条记录的 tokens 是 None，"
                     "合计就不知道，tokens 和 tokens_per_task 都写 None。")
SKIP_NONE_HINT = ("不要先把 tokens 为 None 的记录去掉再算：那样合计少算了一个任务，"
                  "平均数也是另一组任务的平均数。有一条是 None，就写 None。")
EMPTY_HINT = ("一条记录也没有时不能做除法：pass_rate 和 tokens_per_task 写 None"
              "（0 个任务没有通过率，不是 0%），tasks 和 passed 是 0，tokens 是 None。")
PERCENT_HINT = "pass_rate 是 0 到 1 之间的小数（2/3 ≈ 0.667），不是百分数 66.7。"
ERRORS_HINT = ("出错的任务（stop_reason == \"error\"）也是任务：算进 tasks，不算通过。"
               "把它们去掉，通过率就虚高了。")
FLOOR_HINT = ("除法用 /，不用 //：整除把小数部分丢掉了（3002 / 3 ≈ 1000.67，3002 // 3 = 1000）。"
              "通过率和平均 tokens 都是带小数的数。")
KEYS_HINT = ("返回一个字典，正好这五个键：tasks、passed、pass_rate、tokens、tokens_per_task。")


def _record(task: str, passed: bool, tokens: int | None, *, stop: str = "answered",
            tests_changed: bool = False, error: str | None = None,
            broke: int = 0) -> TaskRecord:
    """A record as `run_task` writes it: `passed` is the held-out verdict; `broke` tests
    of PASS_TO_PASS fail (then it is not resolved, though every FAIL_TO_PASS test passes)."""
    judged = error is None
    fixed = judged and (passed or broke > 0)
    return TaskRecord(task=task, passed=passed, stop_reason=stop,
                      model_calls=0 if error else 2, tokens=tokens,
                      fail_to_pass={f"tests/test_{task}.py::test_bug": fixed} if judged else {},
                      pass_to_pass={f"tests/test_{task}.py::test_{k}": k >= broke
                                    for k in range(2)} if judged else {},
                      discarded={f"tests/test_{task}.py": "改了测试，已还原"} if tests_changed
                      else {},
                      tests_changed=tests_changed, error=error,
                      error_source="harness" if error else None)


def _wanted(records: list[TaskRecord]) -> dict[str, Any]:
    n = len(records)
    passed = sum(r.passed for r in records)
    tokens = [r.tokens for r in records]
    total = sum(t for t in tokens if t is not None) if records and None not in tokens else None
    return {"tasks": n, "passed": passed, "pass_rate": passed / n if n else None,
            "tokens": total, "tokens_per_task": total / n if total is not None else None}


# (case, records, hint for a failure no typical mistake explains)
SUMMARY_CASES: list[tuple[str, list[TaskRecord], str]] = [
    ("三个任务，两个通过，tokens 都有", [
        _record("a", True, 1200), _record("b", False, 900), _record("c", True, 1500)],
     "tasks 是记录数，passed 是通过的个数，pass_rate = passed / tasks，"
     "tokens 是合计，tokens_per_task = tokens / tasks。"),
    ("都回答了（answered），只有一个测试通过", [
        _record("a", True, 1600), _record("b", False, 1700), _record("c", False, 1650)],
     ANSWERED_HINT),
    ("agent 改过测试（tests_changed）：一个源码也修好了，一个只改了测试", [
        _record("a", True, 1000), _record("b", True, 1100, tests_changed=True),
        _record("c", False, 1200, tests_changed=True)], CHANGED_HINT),
    ("失败的测试修好了，却弄坏了一个原本通过的测试（PASS_TO_PASS）", [
        _record("a", True, 1000), _record("b", False, 1300, broke=1),
        _record("c", False, 1250)], F2P_ONLY_HINT),
    ("一个任务没报告 tokens（None）", [
        _record("a", True, 1000), _record("b", False, None), _record("c", False, 1400)],
     NONE_AS_ZERO_HINT),
    ("已知修复模型：tokens 全是 None", [
        _record("a", True, None), _record("b", True, None)], NONE_AS_ZERO_HINT),
    ("一个任务出错（stop_reason == \"error\"）", [
        _record("a", True, 800), _record("b", False, 900, stop="max_iters"),
        _record("c", False, None, stop="error", error="ReplayMiss: …")], ERRORS_HINT),
    ("平均 tokens 除不尽", [
        _record("a", True, 1000), _record("b", True, 1001), _record("c", False, 1001)],
     FLOOR_HINT),
    ("一条记录也没有", [], EMPTY_HINT),
]


def _summary_problem(got: Any, records: list[TaskRecord]) -> tuple[str, str] | None:
    """What is wrong with `got` as the summary of `records`: (message, hint), or None."""
    if not isinstance(got, dict) or set(got) != set(KEYS):
        keys = sorted(got) if isinstance(got, dict) else type(got).__name__
        return f"应该返回有这五个键的字典 {list(KEYS)}，得到 {short(keys)}", KEYS_HINT
    wanted = _wanted(records)
    if _same(got, wanted):
        return None
    n = len(records)
    if not n:
        key = next(k for k in KEYS if not _equal(got[k], wanted[k]))
        return f"{key}：期望 {short(wanted[key])}，得到 {short(got[key])}", EMPTY_HINT
    answered = sum(r.stop_reason == "answered" for r in records)
    without_changed = sum(r.passed and not r.tests_changed for r in records)
    f2p_only = sum(bool(r.fail_to_pass) and all(r.fail_to_pass.values()) for r in records)
    ran = [r for r in records if r.error is None]
    known = [r.tokens for r in records if r.tokens is not None]
    mistakes = [
        ("passed", answered, ANSWERED_HINT, "你数的是回答了的任务"),
        ("passed", without_changed, CHANGED_HINT, "你把改过测试、源码也修好了的任务剔掉了"),
        ("passed", f2p_only, F2P_ONLY_HINT, "你只看了 fail_to_pass"),
        ("tasks", len(ran), ERRORS_HINT, "你没把出错的任务算进去"),
        ("tokens", sum(known) if known else 0, NONE_AS_ZERO_HINT, "你把 None 当成了 0"),
        ("tokens_per_task", sum(known) / len(known) if known else None, SKIP_NONE_HINT,
         "你只对报告了 tokens 的任务求了平均"),
        ("pass_rate", 100 * wanted["pass_rate"], PERCENT_HINT, "你写成了百分数"),
        ("pass_rate", wanted["passed"] // n, FLOOR_HINT, "你用了整除 //"),
        ("tokens_per_task", None if wanted["tokens"] is None else wanted["tokens"] // n,
         FLOOR_HINT, "你用了整除 //"),
    ]
    for key, value, hint, said in mistakes:
        if not _equal(wanted[key], value) and _equal(got[key], value):
            return f"{key}：{said}，期望 {short(wanted[key])}，得到 {short(got[key])}", hint
    key = next(k for k in KEYS if not _equal(got[k], wanted[k]))
    return f"{key}：期望 {short(wanted[key])}，得到 {short(got[key])}", ""


def _equal(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float) \
            or not isinstance(b, int | float):
        return False
    return math.isclose(a, b, rel_tol=1e-9)


def _same(got: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(_equal(got[key], wanted[key]) for key in KEYS)


@checker("练习 10.2：summarise —— 一次评测的通过率和 tokens，没有数就写 None", summary, hint=(
        "这道题要你自己数：bench.summary 没有任务时通过率写 0.0，"
        "出错的任务没有 tokens 也照样给出合计。自己遍历 records 算这五个数。"))
def check_summarise(fn: Callable[[list[TaskRecord]], Any], report: Report) -> None:
    """Exercise 10.2: pass rate and tokens of a run, with None where there is no number."""
    for name, records, hint in SUMMARY_CASES:
        with report.case(name):
            given = copy.deepcopy(records)
            got = attempt(fn, given).get(EMPTY_HINT if not records else hint)
            if [r.to_dict() for r in given] != [r.to_dict() for r in records]:
                fail("你的函数改动了传进来的记录：只读它们。", hint)
            if problem := _summary_problem(got, records):
                fail(problem[0], problem[1] or hint)
