"""Checkers for lesson 09, the coding agent.

    check_judge_by_tests(fn)   fn(result, workspace, test_command, timeout) -> bool:
                               was the bug fixed? Decided by the test command's exit
                               code in the sandbox, never by what the model said
    check_changed_files(fn)    fn(diff) -> list[str]: the files a unified diff (as
                               `workspace_diff` writes it) changes, in order

`check_judge_by_tests` builds a small project per case in a temporary folder and hands
the learner's function a run result whose answer, stop reason and earlier tool results
may lie. Each case targets one typical mistake (trusting the answer, looking for "passed"
in the output, reusing the model's own test run, running a fixed command, ignoring the
time limit, running outside the sandbox) and carries the hint for it; two projects are
judged again in folders with random names, so an answer keyed on folder names fails.
"Outside the sandbox" is told by a test that must not see a file next to the workspace:
where bubblewrap cannot isolate commands, that case is skipped with a note. Running the
command with the package's `run_in_sandbox` (or the agent's own `run_command` tool) is
what the exercise asks for, so nothing public of the package is refused.
`check_changed_files` feeds diffs made by `workspace_diff` from small before/after
folders; reading them with the unidiff library is allowed.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest.mock import patch

from ...coding import workspace_diff
from ...loop import AgentResult, StopReason
from ...sandbox import why_not_isolated
from ...trace import Trace
from . import Report, attempt, checker, fail, short

# ---------------------------------------------------------------------------
# Exercise 1: judge a run by its tests
# ---------------------------------------------------------------------------

PYTEST = "python -m pytest -q"
INI = {"pytest.ini": "[pytest]\n"}  # pytest stops looking for configuration here
CALC_RIGHT = {"calc.py": "def add(a, b):\n    return a + b\n"}
CALC_WRONG = {"calc.py": "def add(a, b):\n    return a - b\n"}
TEST_ADD = {"test_calc.py": "from calc import add\n\n\ndef test_add():\n"
                            "    assert add(2, 3) == 5\n"}
TEST_NAMED_PASSED = {"test_calc.py": "from calc import add\n\n\ndef test_passed():\n"
                                     "    assert add(2, 3) == 5\n"}
TEST_NO_SECRET = {"test_env.py": "import os\n\n\ndef test_no_key_in_the_environment():\n"
                                 "    assert 'OPENAI_API_KEY' not in os.environ\n"}
CHECK_FAILS = {"check.py": "import sys\n\nprint('校验失败：2 条规则不满足')\nsys.exit(1)\n"}
OWN_RUNNER = {"run_tests.py": "import sys\n\nprint('0 passed, 3 failed')\nsys.exit(1)\n"}
SLOW = {"slow_test.py": "import time\n\ntime.sleep(2)\nprint('all 12 tests passed')\n"}
TEST_WITH_ERROR = {"test_calc.py": "import pytest\n\nfrom calc import add\n\n\n"
                                   "@pytest.fixture\ndef database():\n"
                                   "    raise ConnectionError('连不上测试数据库')\n\n\n"
                                   "def test_add():\n    assert add(2, 3) == 5\n\n\n"
                                   "def test_saved(database):\n    assert database\n"}
OUTSIDE = "{outside}"  # replaced by a file the checker leaves next to the project
TEST_CANNOT_SEE_OUTSIDE = {"test_outside.py": "from pathlib import Path\n\n\n"
                                              "def test_the_host_is_out_of_sight():\n"
                                              f"    assert not Path({OUTSIDE!r}).exists()\n"}
FAKE_KEY = "sk-checker-fake-key-not-real"

SAYS_FIXED = "已修复，测试全部通过。"
SAYS_NOT_FIXED = "抱歉，我没能修好，测试仍然失败。"

ERROR_HINT = ("“1 passed, 1 error” 里有 passed、没有 failed，可测试并没有全过：fixture 出错的测试"
              "算 error，不算 failed。不要在输出里找字，看退出码：exit_code == 0 才算通过。")
SANDBOX_HINT = ("测试看到了工作区外面的文件：命令没有在沙箱里运行。只删掉几个环境变量不够，"
                "subprocess.run 运行的命令能读写你能读写的一切。"
                "用 vibe_agent.sandbox.run_in_sandbox。")
TOOL_RESULT_HINT = ("不要从 result.messages 里找模型自己跑测试的结果（“exit code: 0”）：那是运行中"
                    "某一次的结果，之后模型可能又改了代码（这里就改坏了）。判定时在 workspace 里"
                    "重新运行 test_command。")
HARD_CODED_HINT = ("这一项的项目和前面某一项一模一样，只是换了一个随机的文件夹名，结果却不对了："
                   "不要按文件夹名字（或检查器的用例顺序）写死答案，要在 workspace 里真的运行 "
                   "test_command。")
FRESH = "（每次运行都不一样）"  # ends the name of a case made up afresh on each run
WORKSPACE_HINT = ("用参数 workspace 指定的文件夹运行测试：不要用笔记本里的全局变量，"
                  "也不要用任务的原始项目（task.repo）。")


@dataclass
class JudgeCase:
    """A project, the command that judges it, a run that says something, and the verdict."""

    name: str
    files: dict[str, str]
    expected: bool
    hint: str
    command: str = PYTEST
    answer: str = SAYS_FIXED
    stop_reason: StopReason = StopReason.ANSWERED
    timeout: float = 30.0
    env: dict[str, str] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)  # the run's, before the answer
    isolated_only: bool = False  # only decidable where bubblewrap isolates commands


JUDGE_CASES = [
    JudgeCase("模型说修好了，测试也确实通过", INI | CALC_RIGHT | TEST_ADD, True,
              "测试命令退出码为 0 时返回 True。" + WORKSPACE_HINT),
    JudgeCase("模型说修好了，测试却失败", INI | CALC_WRONG | TEST_ADD, False,
              "模型说“已修复”不算数，停止原因是 answered 也不算数：只看测试命令的退出码。"
              + WORKSPACE_HINT),
    JudgeCase("模型说没修好（还跑满了轮次），测试却通过了", INI | CALC_RIGHT | TEST_ADD, True,
              "判定时不看模型的回答，也不看停止原因（result.stop_reason）：测试通过就是 True。",
              answer=SAYS_NOT_FIXED, stop_reason=StopReason.MAX_ITERS),
    JudgeCase("失败的测试名叫 test_passed", INI | CALC_WRONG | TEST_NAMED_PASSED, False,
              "输出里出现 passed 不代表通过（这里是失败的测试 test_passed 的名字）。"
              "不要在输出里找字，看退出码：exit_code == 0 才算通过。"),
    JudgeCase("测试被删光了（pytest 一个测试也没跑）", INI | CALC_WRONG, False,
              "pytest 没收集到测试时退出码是 5，输出里也没有 failed。"
              "只有退出码 0 算通过：不要写 exit_code != 1，也不要找 “failed” 这个词。"),
    JudgeCase("判定命令不是 pytest：python check.py", INI | CALC_RIGHT | TEST_ADD | CHECK_FAILS,
              False,
              "运行参数 test_command 给的命令，不要写死 python -m pytest：这个项目的 pytest "
              "测试是通过的，可判定命令 check.py 失败了。", command="python check.py"),
    JudgeCase("自带的测试脚本打印 “0 passed, 3 failed”", INI | OWN_RUNNER, False,
              "“0 passed, 3 failed” 里也有 passed：不要在输出里找字，看退出码。",
              command="python run_tests.py"),
    JudgeCase("测试超时（timeout=1 秒，测试要跑 2 秒）", INI | SLOW, False,
              "把 timeout 传给 run_in_sandbox(..., timeout=timeout)。超时被杀掉时 exit_code 是 "
              "None，`not exit_code` 会把它当成通过：写 exit_code == 0。",
              command="python slow_test.py", timeout=1.0),
    JudgeCase("环境里有 OPENAI_API_KEY：测试必须在沙箱里跑", INI | CALC_RIGHT | TEST_NO_SECRET,
              True,
              "测试看到了 OPENAI_API_KEY：命令没有在沙箱里运行（subprocess.run 会把你的环境变量，"
              "连同 key，一起交给测试）。用 vibe_agent.sandbox.run_in_sandbox。",
              env={"OPENAI_API_KEY": FAKE_KEY}),
    JudgeCase("“1 passed, 1 error”：一个测试的 fixture 出错了", INI | CALC_RIGHT | TEST_WITH_ERROR,
              False, ERROR_HINT),
    JudgeCase("测试不能看到工作区外面的文件：必须在沙箱里跑", INI | TEST_CANNOT_SEE_OUTSIDE, True,
              SANDBOX_HINT, isolated_only=True),
    JudgeCase("模型中途跑过测试（exit code: 0），之后又把代码改坏了", INI | CALC_WRONG | TEST_ADD,
              False, TOOL_RESULT_HINT, messages=[
                  {"role": "user", "content": "修好 calc.py 里的 add。"},
                  {"role": "assistant", "content": None, "tool_calls": [{
                      "id": "call_1", "type": "function", "function": {
                          "name": "run_command",
                          "arguments": '{"command": "python -m pytest -q"}'}}]},
                  {"role": "tool", "tool_call_id": "call_1",
                   "content": "exit code: 0\n.                                  [100%]\n"
                              "1 passed in 0.01s\n"},
                  {"role": "assistant", "content": None, "tool_calls": [{
                      "id": "call_2", "type": "function", "function": {
                          "name": "edit_file", "arguments": '{"path": "calc.py", '
                          '"old": "a + b", "new": "a - b"}'}}]},
                  {"role": "tool", "tool_call_id": "call_2", "content": "Edited calc.py."}]),
]
# Cases run again in a folder with a random name: the same project must get the same verdict.
FRESH_AGAIN = (0, 1)


def _run_result(case: JudgeCase) -> AgentResult:
    """A finished run as `run_agent` returns it: its messages, an answer, a stop reason."""
    return AgentResult(answer=case.answer, stop_reason=case.stop_reason,
                       message="（检查器构造的运行结果）", trace=Trace(),
                       messages=[*case.messages, {"role": "assistant", "content": case.answer}])


def _write(root: Path, files: dict[str, str], outside: Path | None = None) -> Path:
    """A new folder holding `files` (relative path -> text; OUTSIDE names `outside`)."""
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if outside is not None:
            text = text.replace(OUTSIDE, str(outside))
        (root / name).write_text(text, encoding="utf-8")
    return root


def _judge_problem(got: Any, case: JudgeCase, seconds: float) -> str | None:
    """What is wrong with the verdict `got` (the case's hint goes with it)."""
    if not isinstance(got, bool):
        return (f"应该返回 True 或 False，得到 {short(got)}"
                "（result.exit_code == 0 本身就是一个布尔值）")
    if got == case.expected:
        return None
    verdict = "通过了" if case.expected else "没有通过"
    message = f"测试{verdict}，应该返回 {case.expected}，得到 {got}"
    if seconds > case.timeout:
        message += f"（用了 {seconds:.0f} 秒，超过了 timeout={case.timeout:g} 秒）"
    return message


@checker("练习 9.1：judge_by_tests —— 修好没有，由测试说了算")
def check_judge_by_tests(fn: Callable[..., Any], report: Report) -> None:
    """Exercise 9.1: decide by the test command's exit code in the sandbox, nothing else."""
    unisolated = why_not_isolated()
    with tempfile.TemporaryDirectory(prefix="vibe-judge-") as folder:
        outside = Path(folder) / "outside.txt"
        outside.write_text("工作区外面的文件\n", encoding="utf-8")
        runs = [(case.name, case, f"project-{number}")
                for number, case in enumerate(JUDGE_CASES, 1)]
        runs += [(f"{JUDGE_CASES[i].name}，换一个随机的文件夹名{FRESH}", JUDGE_CASES[i],
                  f"project-{secrets.token_hex(4)}") for i in FRESH_AGAIN]
        for name, case, folder_name in runs:
            if case.isolated_only and unisolated is not None:
                report.note(f"{name}：跳过——这台机器不能隔离命令（{unisolated}），"
                            "在沙箱里和不在沙箱里运行看不出区别。")
                continue
            with report.case(name):
                workspace = _write(Path(folder) / folder_name, case.files, outside)
                started = time.monotonic()
                with patch.dict(os.environ, case.env):
                    outcome = attempt(fn, _run_result(case), workspace, case.command,
                                      case.timeout)
                got = outcome.get(case.hint)
                if problem := _judge_problem(got, case, time.monotonic() - started):
                    fresh = name.endswith(FRESH) and report.failed == 0
                    fail(problem, HARD_CODED_HINT if fresh else case.hint)


# ---------------------------------------------------------------------------
# Exercise 2: which files did the agent change?
# ---------------------------------------------------------------------------

PARSING_OLD = ('def parse_cents(text: str) -> int:\n    cleaned = text.strip()\n'
               '    return int(float(cleaned) * 100)\n')
PARSING_NEW = ('def parse_cents(text: str) -> int:\n    cleaned = text.strip()\n'
               '    return int(Decimal(cleaned) * 100)\n')
SQL_OLD = "-- 按地区汇总（旧）\nSELECT region, SUM(cents) FROM sales GROUP BY region;\n"
SQL_NEW = "SELECT region, SUM(cents) AS total FROM sales GROUP BY region;\n"
AB_OLD = ("-- a/b 测试：新版结账页\nSELECT variant, COUNT(*) FROM orders GROUP BY variant;\n"
          "-- a/b 测试结束\n")
AB_NEW = "SELECT variant, COUNT(*) AS orders FROM orders GROUP BY variant;\n"


@dataclass
class DiffCase:
    name: str
    before: dict[str, str]
    after: dict[str, str]
    expected: list[str]
    hint: str


DIFF_CASES = [
    DiffCase("改了一个文件", {"sales/parsing.py": PARSING_OLD, "README.md": "# sales\n"},
             {"sales/parsing.py": PARSING_NEW, "README.md": "# sales\n"}, ["sales/parsing.py"],
             "每个文件的改动以 “--- a/路径” 和 “+++ b/路径” 两行开头；去掉 a/ 或 b/，"
             "每个文件只算一次。"),
    DiffCase("改了两个文件，按出现的顺序", {"auth.py": "x = 1\n", "accounts.py": "y = 1\n"},
             {"auth.py": "x = 2\n", "accounts.py": "y = 2\n"}, ["accounts.py", "auth.py"],
             "按文件在 diff 里出现的顺序返回一个列表，每个文件只出现一次。"),
    DiffCase("新建了一个文件", {"calc.py": "x = 1\n"},
             {"calc.py": "x = 1\n", "tests/test_calc.py": "def test_x():\n    pass\n"},
             ["tests/test_calc.py"],
             "新建的文件，“---” 那一行是 /dev/null：路径要从 “+++ b/” 那一行取。"
             "/dev/null 不是文件名，不要放进结果。"),
    DiffCase("删掉了一个文件", {"calc.py": "x = 1\n", "tests/test_calc.py": "def test_x():\n"
                                "    assert False\n"},
             {"calc.py": "x = 1\n"}, ["tests/test_calc.py"],
             "删掉的文件，“+++” 那一行是 /dev/null：路径要从 “--- a/” 那一行取。"
             "只看 +++ 行会漏掉被删的文件——比如 agent 删掉了失败的测试。"),
    DiffCase("文件名里有空格", {"my notes.md": "待办\n"}, {"my notes.md": "已办\n"},
             ["my notes.md"],
             "文件名里可以有空格：不要用 split() 切，取 “--- a/” 或 “+++ b/” 后面的整行。"),
    DiffCase("删掉的一行内容本身以 “-- ” 开头（SQL 注释）", {"report.sql": SQL_OLD},
             {"report.sql": SQL_NEW}, ["report.sql"],
             "删掉的一行 “-- 注释” 在 diff 里成了 “--- 注释”：以 --- 开头的不一定是文件头。"
             "文件头是紧挨着的两行 “--- …” 和 “+++ …”，而且在 @@ 块之外；"
             "也可以直接用已经装好的 unidiff 库：[f.path for f in PatchSet(diff)]。"),
    DiffCase("删掉的一行是 SQL 注释 “-- a/b 测试”", {"ab_test.sql": AB_OLD},
             {"ab_test.sql": AB_NEW}, ["ab_test.sql"],
             "删掉的一行 “-- a/b 测试” 在 diff 里成了 “--- a/b 测试”，和文件头长得一模一样："
             "不是每一行 “--- a/” 都是文件头。文件头是紧挨着的两行 “--- …” 和 “+++ …”，"
             "而且在 @@ 块之外（块里有几行，@@ 那一行写着）；"
             "最稳的是用已经装好的 unidiff 库：[f.path for f in PatchSet(diff)]。"),
    DiffCase("什么也没改（空 diff）", {"calc.py": "x = 1\n"}, {"calc.py": "x = 1\n"}, [],
             "空字符串里没有文件：返回空列表。"),
]


def _diff_problem(got: Any, expected: list[str]) -> str | None:
    """What is wrong with the paths `got` (the case's hint goes with it)."""
    if not isinstance(got, list):
        return f"应该返回列表，得到 {short(got)}（要按出现的顺序，set 没有顺序）"
    if any(path in ("/dev/null", "dev/null") for path in got):
        return (f"结果里有 /dev/null：{short(got)}。/dev/null 不是文件名，它表示"
                "“这一边没有这个文件”（新建的文件在 --- 那一行，删掉的在 +++ 那一行）")
    if got != expected:
        return f"期望 {expected}，得到 {short(got)}"
    return None


@checker("练习 9.2：changed_files —— agent 改了哪些文件")
def check_changed_files(fn: Callable[[str], Any], report: Report) -> None:
    """Exercise 9.2: the paths a unified diff changes, in order, each once."""
    with tempfile.TemporaryDirectory(prefix="vibe-diff-") as folder:
        for number, case in enumerate(DIFF_CASES, 1):
            with report.case(case.name):
                diff = workspace_diff(case.before, _write(Path(folder) / str(number), case.after))
                got = attempt(fn, diff).get(case.hint)
                if problem := _diff_problem(got, case.expected):
                    fail(problem, case.hint)
