"""Lesson 08's checkers: a right answer passes, each typical mistake gets its own hint.

Every wrong answer below is one a clever beginner would write; each must fail (a wrong
answer that passes is a bug in the checker) and hear the hint for its very mistake.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from pathlib import Path

import pytest

from vibe_agent import coding
from vibe_agent.coding import Workspace, WorkspaceError
from vibe_agent.course.checks.lesson_08 import (
    META_CASES,
    check_inside_workspace,
    check_my_policy,
    check_replace_once,
)
from vibe_agent.sandbox import DEFAULT_POLICY, Action, Policy

REPLACE_CASES, PATH_CASES, POLICY_CASES = 10, 22, 23


def run_check(check, fn, capsys) -> tuple[bool, str]:
    verdict = check(fn)
    return bool(verdict), capsys.readouterr().out


# --- exercise 8.1: replace_once -----------------------------------------------------------


def starts_of(text, old, step=lambda old: 1):
    """Where each occurrence of `old` starts, overlapping ones too (step 1)."""
    starts, index = [], text.find(old)
    while index != -1:
        starts.append(index)
        index = text.find(old, index + step(old))
    return starts


def replace_right(text, old, new):
    starts = starts_of(text, old)
    if not starts:
        return "Error: 没有找到 old。先用 read_file 看清原文，连空格一起复制。"
    if len(starts) > 1:
        lines = "、".join(str(text.count("\n", 0, s) + 1) for s in starts)
        return f"Error: old 出现了 {len(starts)} 次（第 {lines} 行），请多带几行上下文。"
    return text.replace(old, new, 1)


def replace_right_in_english(text, old, new):
    count = len(starts_of(text, old))
    if count == 0:
        return "Error: 'old' not found"
    if count > 1:
        lines = [text.count("\n", 0, s) + 1 for s in starts_of(text, old)]
        return f"Error: 'old' occurs {count} times (lines {lines})"
    return text.replace(old, new)


def replace_without_overlaps(text, old, new):
    """Goes on after each match (start + len(old)), as str.count does: overlaps missed."""
    starts = starts_of(text, old, step=len)
    if not starts:
        return "Error: 没有找到 old"
    if len(starts) > 1:
        lines = "、".join(str(text.count("\n", 0, s) + 1) for s in starts)
        return f"Error: old 出现了 {len(starts)} 次（第 {lines} 行）"
    return text.replace(old, new, 1)


def replace_unsolved(text, old, new):
    raise NotImplementedError("练习还没完成")


def replace_all(text, old, new):
    if old not in text:
        return "Error: 没有找到 old"
    return text.replace(old, new)


def replace_first(text, old, new):
    if old not in text:
        return "Error: 没有找到 old"
    return text.replace(old, new, 1)


def replace_count_only(text, old, new):
    count = text.count(old)
    if count != 1:
        return f"Error: old 出现了 {count} 次"
    return text.replace(old, new)


def replace_zero_based(text, old, new):
    starts = starts_of(text, old)
    if len(starts) != 1:
        lines = ", ".join(str(text.count("\n", 0, s)) for s in starts)
        return f"Error: old 出现了 {len(starts)} 次（行 {lines}）"
    return text.replace(old, new)


def replace_line_scan(text, old, new):
    """Counts with text.count, but finds the lines one line at a time."""
    count = text.count(old)
    if count == 0:
        return "Error: 没有找到 old"
    if count > 1:
        lines = [n for n, line in enumerate(text.splitlines(), 1) if old in line]
        return f"Error: old 出现了 {count} 次，在第 {lines} 行"
    return text.replace(old, new)


def replace_counts_lines(text, old, new):
    """Counts the lines that contain old: two matches on one line look like one."""
    lines = [n for n, line in enumerate(text.splitlines(), 1) if old in line]
    if not lines and old not in text:
        return "Error: 没有找到 old"
    if len(lines) > 1:
        return f"Error: old 出现了 {len(lines)} 次（第 {lines} 行）"
    return text.replace(old, new, 1)


def replace_unchanged_when_missing(text, old, new):
    if text.count(old) > 1:
        return replace_right(text, old, new)
    return text.replace(old, new)  # no match: the text comes back as it was


def replace_raises(text, old, new):
    if text.count(old) != 1:
        raise ValueError(f"old 出现了 {text.count(old)} 次")
    return text.replace(old, new)


def replace_without_error_prefix(text, old, new):
    result = replace_right(text, old, new)
    return result.removeprefix("Error: ")


FIXED_ANSWERS = {  # the checker's fixed cases, answered by hand
    "total": "Error: old 出现了 4 次（第 5、6、8、9 行）",
    "price": "Error: old 出现了 2 次（第 1 行）",
    "ab\nab\n": "Error: old 出现了 2 次（第 1、2 行）",
    "    for item in items:\n        ": "Error: old 出现了 2 次（第 5、10 行）",
    "return  total": "Error: 没有找到 old",
    "   9|     return total": "Error: 没有找到 old",
}


def replace_hard_coded(text, old, new):
    return FIXED_ANSWERS.get(old, text.replace(old, new))


def replace_through_the_workspace(text, old, new):
    """The package's edit_file on a scratch file: right answers, not the learner's code."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "f.txt").write_text(text, encoding="utf-8")
        done = Workspace(folder, policy="allow-all").edit_file("f.txt", old, new)
        return done if done.startswith("Error") else (Path(folder) / "f.txt").read_text()


def replace_through_the_registry(text, old, new):
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "f.txt").write_text(text, encoding="utf-8")
        tools = coding.coding_registry(folder, policy="allow-all")
        done = tools.call("edit_file", {"path": "f.txt", "old": old, "new": new}).output
        return done if done.startswith("Error") else (Path(folder) / "f.txt").read_text()


def replace_lists_every_line(text, old, new):
    """Names every line of the file: the right line numbers are in there somewhere."""
    count = text.count(old)
    if count == 0:
        return "Error: 没有找到 old"
    if count > 1:
        every = "、".join(str(n) for n in range(1, text.count("\n") + 2))
        return f"Error: old 出现了 {count} 次，可能在这些行：{every}"
    return text.replace(old, new, 1)


def replace_with_the_package_helper(text, old, new):
    from vibe_agent.coding import _occurrences

    starts = _occurrences(text, old)
    if len(starts) != 1:
        lines = "、".join(str(text.count("\n", 0, s) + 1) for s in starts)
        return f"Error: old 出现了 {len(starts)} 次（第 {lines} 行）"
    return text.replace(old, new, 1)


def replace_with_the_checkers_helper(text, old, new):
    from vibe_agent.course.checks.lesson_08 import _lines_of

    lines = _lines_of(text, old)
    if len(lines) != 1:
        return f"Error: old 出现了 {len(lines)} 次（第 {lines} 行）"
    return text.replace(old, new, 1)


@pytest.mark.parametrize(("fn", "expected"), [
    pytest.param(replace_right, f"全部 {REPLACE_CASES} 项通过", id="right"),
    pytest.param(replace_right_in_english, f"全部 {REPLACE_CASES} 项通过", id="right-in-english"),
    pytest.param(replace_unsolved, "还没完成", id="unsolved"),
    pytest.param(replace_all, "str.replace(old, new) 会替换所有匹配", id="str-replace-all"),
    pytest.param(replace_first, "不能替模型挑第一处来改", id="replaces-the-first"),
    pytest.param(replace_count_only, "还要写出每一处在第几行", id="count-without-lines"),
    pytest.param(replace_zero_based, "行号差了 1", id="zero-based-lines"),
    pytest.param(replace_line_scan, "逐行检查 old in line 找不到它",
                 id="line-scan-misses-multiline"),
    pytest.param(replace_counts_lines, "数的是 old 出现的次数", id="counts-lines-not-matches"),
    pytest.param(replace_unchanged_when_missing, "原样返回原文，模型会以为改好了",
                 id="no-error-when-missing"),
    pytest.param(replace_without_overlaps, "几处 old 可以互相重叠", id="misses-overlaps"),
    pytest.param(replace_raises, "不要抛异常", id="raises"),
    pytest.param(replace_without_error_prefix, "应该返回 Error: 开头的文字", id="no-error-prefix"),
    pytest.param(replace_hard_coded, "不要照着检查器的例子写死答案", id="hard-coded"),
    pytest.param(replace_through_the_workspace, "你的函数用了包里现成的 Workspace",
                 id="borrows-workspace-edit-file"),
    pytest.param(replace_through_the_registry, "你的函数用了包里现成的 coding_registry",
                 id="borrows-coding-registry"),
    pytest.param(replace_lists_every_line, "只写 old 出现的那几行", id="lists-every-line"),
    pytest.param(replace_with_the_package_helper, "你的函数用了包的内部实现 _occurrences",
                 id="calls-the-package-private-helper"),
    pytest.param(replace_with_the_checkers_helper, "你的函数用了检查器自己的 _lines_of",
                 id="calls-the-checkers-helper"),
])
def test_check_replace_once(fn, expected, capsys):
    passed, out = run_check(check_replace_once, fn, capsys)
    assert expected in out, out
    assert passed == expected.startswith("全部"), out


def test_check_replace_once_reports_each_case(capsys):
    _, out = run_check(check_replace_once, replace_right, capsys)
    assert out.splitlines()[0].startswith("练习 8.1")
    assert len(re.findall("✅", out)) == REPLACE_CASES


# --- exercise 8.2: inside_workspace ---------------------------------------------------------


def path_right(root, path):
    """The lesson's recipe, with what resolve() may raise turned into an error text."""
    root = Path(root).resolve()
    if path.startswith("~") or Path(path).is_absolute():
        return f"Error: 只接受相对于工作区的路径，不能用 {path!r}"
    try:
        full = (root / path).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a link loop, a NUL byte, ...
        return f"Error: 无法解析路径 {path!r}：{exc}"
    if not full.is_relative_to(root):
        return f"Error: {path!r} 通向工作区外面"
    return full


def path_lesson_solution(root, path):
    """The lesson's first solution: right on ordinary paths, raises on a loop or a NUL."""
    if path.startswith("~"):
        return f"Error: '{path}' starts with '~' (a home folder)."
    if Path(path).is_absolute():
        return f"Error: '{path}' is an absolute path."
    real_root = Path(root).resolve()
    full = (real_root / path).resolve()
    if not full.is_relative_to(real_root):
        return f"Error: '{path}' leads outside the workspace."
    return full


def path_unresolved_result(root, path):
    """Checks the resolved path, but hands back root / path as it was written."""
    got = path_right(root, path)
    return Path(root) / path if isinstance(got, Path) else got


def path_tilde_anywhere(root, path):
    if "~" in path:
        return "Error: 不允许 ~"
    return path_right(root, path)


def path_looks_at_links_itself(root, path):
    """Asks is_symlink() first: lstat on a 300-character name raises OSError."""
    if (Path(root) / path).is_symlink():
        target = (Path(root) / path).resolve()
        if not target.is_relative_to(Path(root).resolve()):
            return "Error: 链接指向工作区外面"
    return path_right(root, path)


def path_unsolved(root, path):
    raise NotImplementedError("练习还没完成")


def path_dotdot_string(root, path):
    if ".." in path or path.startswith("~") or Path(path).is_absolute():
        return "Error: 不允许的路径"
    return (Path(root).resolve() / path).resolve()


def path_startswith_dotdot(root, path):
    if path.startswith(("..", "~", "/")):
        return "Error: 不允许的路径"
    return (Path(root).resolve() / path).resolve()


def path_startswith_root(root, path):
    if path.startswith("~") or Path(path).is_absolute():
        return "Error: 不允许的路径"
    full = (Path(root).resolve() / path).resolve()
    if not str(full).startswith(str(Path(root).resolve())):
        return "Error: 通向工作区外面"
    return full


def path_abspath(root, path):
    """Folds '..' in the string, never looks at links."""
    if path.startswith("~") or os.path.isabs(path):
        return "Error: 不允许的路径"
    real_root = os.path.realpath(root)
    full = os.path.abspath(os.path.join(real_root, path))
    if os.path.commonpath([full, real_root]) != real_root:
        return "Error: 通向工作区外面"
    return Path(full)


def path_no_tilde(root, path):
    root = Path(root).resolve()
    if Path(path).is_absolute():
        return "Error: 不允许绝对路径"
    full = (root / path).resolve()
    return full if full.is_relative_to(root) else "Error: 通向工作区外面"


def path_no_absolute_check(root, path):
    if path.startswith("~"):
        return "Error: 不允许 ~"
    full = (Path(root).resolve() / path).resolve()
    return full if full.is_relative_to(Path(root).resolve()) else "Error: 通向工作区外面"


def path_strict(root, path):
    root = Path(root).resolve()
    if path.startswith("~") or Path(path).is_absolute():
        return "Error: 不允许的路径"
    full = (root / path).resolve(strict=True)
    return full if full.is_relative_to(root) else "Error: 通向工作区外面"


def path_unresolved_root(root, path):
    if path.startswith("~") or Path(path).is_absolute():
        return "Error: 不允许的路径"
    full = (Path(root) / path).resolve()
    return full if full.is_relative_to(Path(root)) else "Error: 通向工作区外面"


def path_relative_to_raises(root, path):
    root = Path(root).resolve()
    if path.startswith("~") or Path(path).is_absolute():
        return "Error: 不允许的路径"
    full = (root / path).resolve()
    full.relative_to(root)  # raises ValueError outside
    return full


def path_returns_bool(root, path):
    return isinstance(path_right(root, path), Path)


def path_error_without_prefix(root, path):
    got = path_right(root, path)
    return got.removeprefix("Error: ") if isinstance(got, str) else got


def path_returns_relative(root, path):
    got = path_right(root, path)
    return got.relative_to(Path(root).resolve()) if isinstance(got, Path) else got


FIXED_PATHS = {"app.py", "src/util.py", "src/new.py", ".", "src/../app.py", "a..b.txt", "link_in",
               "cart.py~"}


def path_hard_coded(root, path):
    if path in FIXED_PATHS:
        return path_right(root, path)
    return "Error: 不允许的路径"


def path_through_the_workspace(root, path):
    """The package's own check, its error turned into a text: right, but not written."""
    try:
        return Workspace(root).resolve(path)
    except WorkspaceError as exc:
        return f"Error: {exc}"


@pytest.mark.parametrize(("fn", "expected"), [
    pytest.param(path_right, f"全部 {PATH_CASES} 项通过", id="right"),
    pytest.param(path_lesson_solution, "链接绕成了一个圈", id="raises-on-a-loop"),
    pytest.param(path_lesson_solution, "路径里有 NUL 字符", id="raises-on-a-nul-byte"),
    pytest.param(path_unresolved_result, "返回的路径没有解析",
                 id="returns-root-slash-path-unresolved"),
    pytest.param(path_tilde_anywhere, "只拒绝以 ~ 开头的路径", id="tilde-anywhere-refused"),
    pytest.param(path_looks_at_links_itself, "名字太长", id="raises-on-a-long-name"),
    pytest.param(path_unsolved, "还没完成", id="unsolved"),
    pytest.param(path_dotdot_string, "不要在字符串里找 '..'", id="dotdot-in-string"),
    pytest.param(path_startswith_dotdot, "'..' 不一定在开头", id="startswith-dotdot"),
    pytest.param(path_startswith_root, "startswith(str(root)) 会放它过去", id="startswith-root"),
    pytest.param(path_abspath, "os.path.abspath、os.path.normpath 不会", id="abspath-no-resolve"),
    pytest.param(path_no_tilde, "以 ~ 开头的路径一律拒绝", id="tilde-allowed"),
    pytest.param(path_no_absolute_check, "哪怕它恰好指向工作区里面", id="absolute-inside-allowed"),
    pytest.param(path_strict, "resolve() 默认不要求文件存在", id="resolve-strict"),
    pytest.param(path_unresolved_root, "root 也要 resolve()", id="root-not-resolved"),
    pytest.param(path_relative_to_raises, "is_relative_to 只返回 True/False", id="raises"),
    pytest.param(path_returns_bool, "放行时返回一个 Path", id="returns-bool"),
    pytest.param(path_error_without_prefix, "说明为什么、该怎么写", id="no-error-prefix"),
    pytest.param(path_returns_relative, "工具接下来读写的就是它", id="returns-relative-path"),
    pytest.param(path_hard_coded, "不要照着检查器的例子写死答案", id="hard-coded"),
    pytest.param(path_through_the_workspace, "不要借用包里的 Workspace.resolve",
                 id="borrows-workspace-resolve"),
])
def test_check_inside_workspace(fn, expected, capsys):
    passed, out = run_check(check_inside_workspace, fn, capsys)
    assert expected in out, out
    assert passed == expected.startswith("全部"), out


def test_check_inside_workspace_hides_its_temporary_folder(capsys):
    _, out = run_check(check_inside_workspace, path_no_absolute_check, capsys)
    assert "vibe-check-" not in out and "…/ws/app.py" in out


# --- exercise 8.3: my_policy ------------------------------------------------------------------

ALLOWED = (["python", "-m", "pytest"], ["ls"])
SHELL = (";", "&", "|", "`", "$", "<", ">", "\n", "\r")


def policy_right(action):
    if action.kind == "write":
        return True
    if any(char in action.detail for char in SHELL):
        return "命令里有 shell 符号，一次只能运行一条简单命令。"
    try:
        words = shlex.split(action.detail)
    except ValueError:
        return "无法解析这条命令：检查引号是否成对。"
    if any(words[: len(prefix)] == prefix for prefix in ALLOWED):
        return True
    return f"只允许 python -m pytest 和 ls，不允许 {action.detail!r}"


def policy_double_ampersand(action):
    """Refuses "&&" but not a single "&": `ls & rm -rf .` runs rm in the background."""
    if action.kind == "write":
        return True
    if any(symbol in action.detail for symbol in (";", "&&", "||", "|", "`", "$", "<", ">", "\n")):
        return "命令里有 shell 符号"
    words = shlex.split(action.detail)
    return any(words[: len(prefix)] == prefix for prefix in ALLOWED)


def policy_split_fallback(action):
    """When shlex cannot split the command, falls back to str.split."""
    if action.kind == "write":
        return True
    if any(char in action.detail for char in SHELL):
        return False
    try:
        words = shlex.split(action.detail)
    except ValueError:
        words = action.detail.split()
    return any(words[: len(prefix)] == prefix for prefix in ALLOWED)


def policy_split_raises(action):
    if action.kind == "write":
        return True
    if any(char in action.detail for char in SHELL):
        return False
    words = shlex.split(action.detail)  # raises ValueError on an unclosed quote
    return any(words[: len(prefix)] == prefix for prefix in ALLOWED)


def policy_symbols_before_kind(action):
    """Looks for shell symbols before it looks at the kind: a write to R&D.md is refused."""
    if any(char in action.detail for char in SHELL):
        return "有 shell 符号"
    if action.kind == "write":
        return True
    return policy_right(action)


def policy_packaged(action):
    """The package's own allow-list, with this exercise's two prefixes."""
    reason = Policy(["python -m pytest", "ls"]).refusal(action)
    return True if reason is None else reason


def policy_unsolved(action):
    raise NotImplementedError("练习还没完成")


def policy_startswith_python(action):
    if action.kind == "write":
        return True
    return action.detail.startswith(("python", "ls"))


def policy_no_metacharacters(action):
    if action.kind == "write":
        return True
    return action.detail.startswith(("python -m pytest", "ls ")) or action.detail == "ls"


def policy_semicolon_only(action):
    if action.kind == "write":
        return True
    if any(char in action.detail for char in ";&|"):
        return False
    words = shlex.split(action.detail)
    return any(words[: len(prefix)] == prefix for prefix in ALLOWED)


def policy_first_word(action):
    if action.kind == "write":
        return True
    if any(char in action.detail for char in SHELL):
        return False
    return shlex.split(action.detail)[0] in ("python", "ls")


def policy_startswith_ls(action):
    """Right about python, but `startswith("ls")` lets every ls... program through."""
    if action.kind == "write":
        return True
    if any(char in action.detail for char in SHELL):
        return False
    words = shlex.split(action.detail)
    return words[:3] == ["python", "-m", "pytest"] or action.detail.startswith("ls")


def policy_substring(action):
    if action.kind == "write":
        return True
    if any(char in action.detail for char in SHELL):
        return False
    return "pytest" in action.detail or action.detail.split()[0] == "ls"


def policy_forgets_true(action):
    if action.kind == "write":
        return True
    if policy_right(action) is not True:
        return "不允许"
    return None


def policy_ignores_kind(action):
    return policy_right(Action("command", action.detail))


def policy_blocklist(action):
    if action.kind == "write":
        return True
    if any(char in action.detail for char in SHELL):
        return False
    return shlex.split(action.detail)[0] not in ("rm", "curl", "sudo")


FIXED_COMMANDS = {"python -m pytest", "python -m pytest -q tests/test_cart.py", "ls", "ls -la shop"}


def policy_hard_coded(action):
    return action.kind == "write" or action.detail in FIXED_COMMANDS


@pytest.mark.parametrize(("fn", "expected"), [
    pytest.param(policy_right, f"全部 {POLICY_CASES} 项通过", id="right"),
    pytest.param(policy_packaged, f"全部 {POLICY_CASES} 项通过", id="the-package-allow-list"),
    pytest.param(policy_double_ampersand, "单独一个 & 也要拒绝", id="misses-a-single-ampersand"),
    pytest.param(policy_split_fallback, "拆不开的命令一律拒绝", id="unsplittable-allowed"),
    pytest.param(policy_split_raises, "shlex.split 遇到不成对的引号会抛 ValueError",
                 id="unsplittable-raises"),
    pytest.param(policy_symbols_before_kind, "R&D.md 里的 & 只是文件名",
                 id="write-refused-for-a-symbol-in-its-path"),
    pytest.param(policy_unsolved, "还没完成", id="unsolved"),
    pytest.param(policy_startswith_python, "只看第一个词是不是 python 不够",
                 id="startswith-python"),
    pytest.param(policy_no_metacharacters, "有 shell 符号就拒绝", id="no-metacharacter-check"),
    pytest.param(policy_semicolon_only,
                 "'ls $(rm -rf .)'（$( ) 先运行括号里的命令）→ 拒绝：应该拒绝",
                 id="some-metacharacters"),
    pytest.param(policy_first_word, "比较开头的三个词", id="first-word-only"),
    pytest.param(policy_startswith_ls, "lsblk 以 ls 开头", id="startswith-ls"),
    pytest.param(policy_substring, "不是命令里有没有 pytest 这个词", id="pytest-substring"),
    pytest.param(policy_forgets_true, "多半是某个分支忘了 return", id="returns-none"),
    pytest.param(policy_ignores_kind, "action.detail 是文件路径，不是命令", id="write-as-command"),
    pytest.param(policy_blocklist, "不在列表里的命令一律拒绝", id="blocklist"),
    pytest.param(policy_hard_coded, "不要照着检查器的例子写死答案", id="hard-coded"),
])
def test_check_my_policy(fn, expected, capsys):
    passed, out = run_check(check_my_policy, fn, capsys)
    assert expected in out, out
    assert passed == expected.startswith("全部"), out


def test_the_package_default_allow_list_agrees_on_shell_syntax():
    """The exercise's metacharacters are the ones the package refuses too."""
    for text, _ in META_CASES:
        assert DEFAULT_POLICY.refusal(Action("command", text)) is not None, text
