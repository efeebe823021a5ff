"""Checkers for lesson 08, the coding tools and their guards.

    check_replace_once(fn)      fn(text, old, new) -> str: the text with `old` replaced, or
                                an "Error: ..." text when `old` occurs 0 or several times
                                (saying how many times, and on which lines)
    check_inside_workspace(fn)  fn(root, path) -> Path | str: where `path` really is, or an
                                "Error: ..." text when it is absolute, starts with "~" or
                                leads out of the workspace (through ".." or a link)
    check_my_policy(fn)         fn(action) -> True | False | reason: allows writes,
                                `python -m pytest ...` and `ls ...`, refuses everything else
    check_my_decide(fn)         fn(rules, call, default) -> "deny" | "ask" | "allow": the
                                order of permission rules (deny beats ask beats allow), the
                                approval mode's `default` when no rule matches

Each checker runs the learner's function on a table of cases; a failing case names the
typical mistake it reveals. One or two cases of each table are made up afresh on every
run (random names and places), so an answer that only knows the fixed cases fails them.
`check_inside_workspace` builds a small folder tree with links in a temporary directory.

8.1 and 8.2 rebuild what `Workspace.edit_file` and `Workspace.resolve` do, so an answer
that calls `Workspace` (or `coding_registry`) is refused. 8.3 is a policy of the
learner's choosing: building it on the package's `Policy` is allowed. 8.4 hands out the
matching (`vibe_agent.permissions.matches`, `Call`) and asks for the order only, so the
package's `decide`, `Rules` and `ORDER` are refused.
"""

from __future__ import annotations

import random
import re
import string
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Any

from ...coding import Workspace, coding_registry
from ...permissions import ORDER, Call, Rules, decide, matches
from ...sandbox import Action
from . import Problem, Report, attempt, checker, fail, short


def _word(rng: random.Random) -> str:
    """A fresh lowercase name without digits (digits would blur line numbers in messages)."""
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(8))


FRESH = "（每次运行都不一样）"  # ends the name of a case made up afresh on each run
HARD_CODED_HINT = ("这一项的输入每次运行都不一样：不要照着检查器的例子写死答案，"
                   "要让函数对任何输入都按规则算出结果。")


def _fail_with(report: Report, name: str, problem: Problem, hint: str) -> None:
    """Fail the current case with `problem` and its own hint, else the case's hint.

    A fresh case that fails after every fixed case passed points at an answer written
    for the fixed cases: then that is the hint.
    """
    if problem is None:
        return
    message, specific = problem
    if name.endswith(FRESH) and report.failed == 0:
        specific = HARD_CODED_HINT
    fail(message, specific or hint)


# ---------------------------------------------------------------------------
# Exercise 1: replace_once, edit_file's uniqueness rule
# ---------------------------------------------------------------------------

CART = '''\
def price(item):
    return item["price"]


def total(items):
    total = 0
    for item in items:
        total += price(item)
    return total
'''

LOOPS = '''\
"""Two loops that look alike."""


def first(items):
    for item in items:
        return item


def last(items):
    for item in items:
        pass
    return item
'''

NOT_FOUND_HINT = ("old 一次都没出现时要返回以 Error: 开头的文字，说没有找到："
                  "原样返回原文，模型会以为改好了。")
REPLACE_ALL_HINT = ("str.replace(old, new) 会替换所有匹配：模型只想改一处，却可能改掉了好几处。"
                    "先数一数 old 出现几次（用 text.find(old, start + 1) 一处一处地找），"
                    "恰好 1 次才替换。")
FIRST_ONLY_HINT = ("出现好几次时，不能替模型挑第一处来改：它想改的可能是另一处。返回 Error 文字，"
                   "说出现了几次、在哪几行，让模型在 old 里多带几行上下文。")
SAME_LINE_HINT = ("同一行里也可能出现好几次：数的是 old 出现的次数（一处一处地 text.find），"
                  "不是含有 old 的行数。")
MANY_HINT = "出现不止 1 次时要返回以 Error: 开头的文字，说出现了几次、在哪几行。"
COUNT_HINT = "错误文字里要写出 old 出现了几次，例如“出现了 3 次”：模型要知道自己的 old 不够独特。"
LINES_HINT = ("错误文字里还要写出每一处在第几行，例如“第 1、5、9 行”：模型才知道该去哪里补上下文。"
              "行号可以这样算：start = text.find(old)，行号 = text.count('\\n', 0, start) + 1，"
              "再从 start + 1 接着找下一处（重叠的几处也要数到）。")
EXTRA_LINES_HINT = ("只写 old 出现的那几行，不要把文件的每一行都列出来：模型要靠这几个行号"
                    "找到该补上下文的地方，多列的行号只会把它带到别处。")
ZERO_BASED_HINT = ("行号差了 1：行号从 1 开始（read_file 显示的就是从 1 开始的行号）。"
                   "text.count('\\n', 0, start) 数的是 start 前面有几个换行，还要 + 1。")
OVERLAP_HINT = ("几处 old 可以互相重叠：'ab\\nab\\n' 在 'ab\\nab\\nab\\n' 里出现 2 次"
                "（从第 1 行和第 2 行开始），text.count(old) 和从 start + len(old) 接着找"
                "都只数到 1 次，于是替换了其中一处——可模型想改的也许是另一处。"
                "找下一处时从 start + 1 接着找：text.find(old, start + 1)。")
MULTILINE_HINT = ("old 可以跨好几行，逐行检查 old in line 找不到它：在整段文字里用 "
                  "text.find(old, start) 找每一处的位置，"
                  "再用 text.count('\\n', 0, 位置) + 1 算行号。")
ONE_HINT = "old 恰好出现 1 次就该替换：text.replace(old, new, 1)，返回替换后的全文。"
STR_HINT = "成功时返回改好的全文，失败时返回以 Error: 开头的一段文字：两种都是 str。"
RAISE_TEXT_HINT = ("不要抛异常：old 不对是模型的错，返回一段 Error: 开头的文字，"
                   "模型读到后才能改正。")
BORROWED_EDIT_HINT = ("这道题要你自己写出 edit_file 的唯一性规则，不要借用包里的 Workspace 或 "
                      "coding_registry：用 text.find(old, start) 找出每一处，恰好 1 次才替换，"
                      "否则返回 Error: 开头的文字，说出现了几次、在哪几行。")


def _lines_of(text: str, old: str) -> list[int]:
    """The 1-based line where each occurrence of `old` starts, overlapping ones too."""
    lines: list[int] = []
    start = text.find(old)
    while start != -1:
        lines.append(text.count("\n", 0, start) + 1)
        start = text.find(old, start + 1)
    return lines


def _replace_cases(rng: random.Random) -> list[tuple[str, str, str, str, str]]:
    """(case, text, old, new, hint when no typical mistake explains a failure)."""
    name, filler = _word(rng), [f"step = '{_word(rng)}'" for _ in range(12)]
    unique = filler[:]
    unique.insert(rng.randrange(len(unique) + 1), f"{name} = 1")
    many = filler[:]
    for _ in range(rng.randint(2, 5)):
        many.insert(rng.randrange(len(many) + 1), f"{name} = 1")
    return [
        ("只出现 1 次：改一行", CART, '    return item["price"]',
         '    return item["price"] * item["count"]', ONE_HINT),
        ("只出现 1 次：old 跨两行", CART, "    total = 0\n    for item in items:",
         "    total = 0.0\n    for item in items:", ONE_HINT),
        ("出现 0 次：模型多打了一个空格", CART, "return  total", "return round(total, 2)",
         NOT_FOUND_HINT),
        ("出现 0 次：模型把 read_file 的行号也抄了进来", CART, "   9|     return total",
         "    return round(total, 2)", NOT_FOUND_HINT),
        ("出现 4 次（第 5、6、8、9 行）", CART, "total", "grand_total", MANY_HINT),
        ("同一行里出现 2 次", "cost = price + price\n", "price", "unit_price", SAME_LINE_HINT),
        ("出现 2 次，每次都跨两行", LOOPS, "    for item in items:\n        ",
         "    for item in reversed(items):\n        ", MULTILINE_HINT),
        ("出现 2 次，两处重叠（第 1、2 行）", "ab\nab\nab\n", "ab\nab\n", "x\n", OVERLAP_HINT),
        (f"随机生成的文件，只出现 1 次{FRESH}", "\n".join(unique) + "\n", f"{name} = 1",
         f"{name} = 2", ONE_HINT),
        (f"随机生成的文件，出现好几次{FRESH}", "\n".join(many) + "\n", f"{name} = 1",
         f"{name} = 2", MANY_HINT),
    ]


def _replace_problem(text: str, old: str, new: str, got: Any) -> Problem:
    """What is wrong with `got` as replace_once(text, old, new); None when it is right."""
    lines = _lines_of(text, old)
    if not isinstance(got, str):
        return f"应该返回 str，得到 {short(got)}", STR_HINT
    if len(lines) == 1:
        wanted = text.replace(old, new, 1)
        if got == wanted:
            return None
        if got.startswith("Error"):
            return f"old 恰好出现 1 次，你却返回了错误：{short(got)}", ONE_HINT
        return f"替换后的全文不对：期望 {short(wanted)}，得到 {short(got)}", ""
    if not got.startswith("Error"):
        if not lines:
            return (f"old 一次都没出现，应该返回 Error: 开头的文字，得到 {short(got)}",
                    NOT_FOUND_HINT)
        if got == text.replace(old, new, 1) and text.count(old) == 1:
            return f"old 出现了 {len(lines)} 次（两处互相重叠），你却当成 1 次替换了", OVERLAP_HINT
        if got == text.replace(old, new):
            return f"old 出现了 {len(lines)} 次，你把每一处都换掉了", REPLACE_ALL_HINT
        if got == text.replace(old, new, 1):
            hint = SAME_LINE_HINT if len(set(lines)) == 1 else FIRST_ONLY_HINT
            return f"old 出现了 {len(lines)} 次，你只换掉了第一处", hint
        return (f"old 出现了 {len(lines)} 次，应该返回 Error: 开头的文字，得到 {short(got)}",
                MANY_HINT)
    if not lines:
        return None  # any error text will do: the model learns its old is not there
    numbers = {int(n) for n in re.findall(r"\d+", got)}
    shown = short(got, 160)
    if len(lines) not in numbers:
        return f"错误文字里没有说出现了几次（{len(lines)} 次）：{shown}", COUNT_HINT
    missing = sorted(set(lines) - numbers)
    named = {int(n) for n in re.findall(r"\d+", old)}  # echoing old back is fine
    others = sorted(n for n in numbers - set(lines) - {len(lines)} - named
                    if 1 <= n <= text.count("\n") + 1)
    if not missing and len(others) >= len(lines):  # a stray "2" ("add 2 lines") is fine
        return (f"错误文字里还有 old 没出现的行 {others}（它在第 {lines} 行）：{shown}",
                EXTRA_LINES_HINT)
    if not missing:
        return None
    if all(line - 1 in numbers for line in lines):
        return f"行号应该是 {lines}，你的文字里是：{shown}", ZERO_BASED_HINT
    if "\n" in old and not numbers & set(lines):
        return f"错误文字里找不到这几处的行号 {lines}：{shown}", MULTILINE_HINT
    return f"错误文字里少了这几处的行号 {missing}：{shown}", LINES_HINT


@checker("练习 8.1：replace_once —— 只替换唯一的一处，否则说出现了几次、在哪几行",
         Workspace, coding_registry, hint=BORROWED_EDIT_HINT)
def check_replace_once(fn: Callable[[str, str, str], Any], report: Report) -> None:
    """Exercise 8.1: replace `old` only when it occurs exactly once; otherwise say why not."""
    for name, text, old, new, hint in _replace_cases(random.Random()):
        with report.case(name):
            got = attempt(fn, text, old, new).get(RAISE_TEXT_HINT)
            _fail_with(report, name, _replace_problem(text, old, new, got), hint)


# ---------------------------------------------------------------------------
# Exercise 2: inside_workspace, the path check
# ---------------------------------------------------------------------------

BASIC_HINT = ("工作区里的普通路径要放行：返回 (root / path).resolve()，"
              "也就是解析之后的真实位置。")
NEW_FILE_HINT = ("write_file 要写的新文件还不存在：resolve() 默认不要求文件存在（strict=False），"
                 "不要因为文件不存在就拒绝，也不要用 resolve(strict=True)。")
DOT_HINT = "'.' 就是工作区本身（list_files 默认就列它）：它在工作区里，要放行。"
DOTDOT_STRING_HINT = ("不要在字符串里找 '..'：src/../app.py 还在工作区里，"
                      "a..b.txt 只是名字里有两个点。先 (root / path).resolve() 算出真实位置，"
                      "再用 is_relative_to 判断它在不在工作区里。")
LINK_IN_HINT = "指向工作区里面的链接没问题：resolve() 跟到底以后还在工作区里，就放行。"
ROOT_RESOLVE_HINT = ("工作区本身也可能是通过链接打开的（macOS 的 /tmp 就是 /private/tmp 的链接）："
                     "root 也要 resolve()，再和 resolve() 之后的路径比较。")
ESCAPE_HINT = ("'..' 能爬出工作区：先用 (root / path).resolve() 把 '..' 折叠掉，"
               "再用 .is_relative_to(root.resolve()) 判断结果还在不在工作区里。")
MIDDLE_HINT = ("'..' 不一定在开头：src/../../secret.txt 先进 src 再爬出两层。"
               "别只看 path.startswith('..')，用 resolve() 算出真实位置再判断。")
SIBLING_HINT = ("隔壁文件夹 ws-evil 的路径也以 .../ws 开头：str(...).startswith(str(root)) "
                "会放它过去。用 Path 的 is_relative_to(root) 按路径的每一段比较，"
                "而不是按字符串比较。")
ABSOLUTE_HINT = ("绝对路径一律拒绝：先判断 Path(path).is_absolute()。"
                 "注意 root / '/etc/passwd' 得到的就是 /etc/passwd，root 被丢掉了。")
ABSOLUTE_INSIDE_HINT = ("绝对路径一律拒绝，哪怕它恰好指向工作区里面：沙箱里的命令看到的工作区是 "
                        "/workspace，主机上的绝对路径对模型没有意义。只接受相对于工作区的路径。")
TILDE_HINT = ("以 ~ 开头的路径一律拒绝：Path 不会展开 ~，可模型写 ~ 指的是家目录，"
              "shell 也会把它展开成家目录。")
LINK_HINT = ("链接要跟到底再判断：Path.resolve() 会跟随符号链接，os.path.abspath、"
             "os.path.normpath 不会，它们只在字符串上折叠 '..'。")
REFUSE_TEXT_HINT = ("拒绝时返回一段以 Error: 开头的文字，说明为什么、该怎么写："
                    "这段文字会原样交给模型。")
RAISE_PATH_HINT = ("不要抛异常：路径不对是模型的错，返回一段以 Error: 开头的文字，让模型改正。"
                   "（Path.relative_to 在路径不在里面时会抛 ValueError；"
                   "is_relative_to 只返回 True/False。）")
TYPE_PATH_HINT = ("放行时返回一个 Path（解析之后的真实位置），"
                  "拒绝时返回一段以 Error: 开头的文字（str）。")
UNRESOLVED_HINT = ("返回的是没有解析过的路径：它和真实位置是同一个地方，可工具拿到的路径里还留着 "
                   "'..' 或链接。返回 (root / path).resolve() 的结果：'..' 折叠掉、链接跟到底。")
TILDE_ANYWHERE_HINT = ("只拒绝以 ~ 开头的路径：cart.py~ 是编辑器留下的备份文件，名字中间或结尾的 ~ "
                       "只是一个普通字符。用 path.startswith('~')，不要用 '~' in path。")
LOOP_HINT = ("链接绕成了一个圈（loop → loop）：resolve() 跟不到底，Python 3.12 及以前会抛 "
             "RuntimeError。把 resolve() 放进 try，接住 OSError、RuntimeError 和 ValueError，"
             "返回一段 Error: 开头的文字——不要抛异常。")
NUL_HINT = ("路径里有 NUL 字符（\\0）：resolve() 会抛 ValueError，这样的名字也不可能是文件。"
            "把 resolve() 放进 try，接住 ValueError（还有 OSError、RuntimeError），"
            "返回 Error: 文字。")
LONG_HINT = ("名字太长（300 个字符，超过了文件系统的上限 255）：lstat、is_symlink、exists 这类"
             "要问文件系统的调用会抛 OSError。用不着它们：resolve() 之后用 is_relative_to 判断；"
             "万一要问，也放进 try，出错就返回 Error: 文字。放行或拒绝都可以，只是不要抛异常。")
BORROWED_PATH_HINT = ("这道题要你自己写出路径检查，不要借用包里的 Workspace.resolve："
                      "先拒绝绝对路径和以 ~ 开头的路径，再用 (root / path).resolve() 算出真实位置，"
                      "用 is_relative_to(root.resolve()) 判断它还在不在工作区里。")


def _tree(base: Path) -> None:
    """The checker's little world: a workspace `ws`, its neighbours, and links."""
    root = base / "ws"
    (root / "src").mkdir(parents=True)
    (root / "app.py").write_text("print('hello')\n", encoding="utf-8")
    (root / "a..b.txt").write_text("two dots in a name\n", encoding="utf-8")
    (root / "src" / "util.py").write_text("", encoding="utf-8")
    (base / "secret.txt").write_text("SECRET\n", encoding="utf-8")
    (base / "ws-evil").mkdir()
    (base / "ws-evil" / "secret.txt").write_text("SECRET\n", encoding="utf-8")
    (root / "link_in").symlink_to("app.py")
    (root / "link_out").symlink_to(Path("..") / "secret.txt")
    (root / "link_dir").symlink_to(base / "ws-evil", target_is_directory=True)
    (base / "alias").symlink_to(root, target_is_directory=True)  # the workspace, via a link
    (root / "cart.py~").write_text("", encoding="utf-8")  # an editor's backup file
    (root / "loop").symlink_to("loop")  # a link to itself: resolve() cannot follow it


EITHER = "either"  # where a path may be refused or allowed: only raising is wrong
RAISING_HINTS = (LOOP_HINT, NUL_HINT, LONG_HINT)  # the hint when the learner's code raises


def _path_cases(base: Path, rng: random.Random) -> list[tuple[str, str, str, str | None, str]]:
    """(case, root folder name, path, where it leads inside `ws`, None: refuse, or EITHER,
    hint)."""
    name, other = _word(rng), _word(rng)
    return [
        ("app.py", "ws", "app.py", "app.py", BASIC_HINT),
        ("src/util.py", "ws", "src/util.py", "src/util.py", BASIC_HINT),
        ("还不存在的新文件 src/new.py", "ws", "src/new.py", "src/new.py", NEW_FILE_HINT),
        ("'.'：工作区本身", "ws", ".", ".", DOT_HINT),
        ("src/../app.py：绕一下，还在里面", "ws", "src/../app.py", "app.py", DOTDOT_STRING_HINT),
        ("a..b.txt：名字里带两个点", "ws", "a..b.txt", "a..b.txt", DOTDOT_STRING_HINT),
        ("link_in：指向工作区里面的链接", "ws", "link_in", "app.py", LINK_IN_HINT),
        ("工作区本身是通过链接打开的", "alias", "app.py", "app.py", ROOT_RESOLVE_HINT),
        ("../secret.txt", "ws", "../secret.txt", None, ESCAPE_HINT),
        ("src/../../secret.txt", "ws", "src/../../secret.txt", None, MIDDLE_HINT),
        ("../ws-evil/secret.txt：名字也以 ws 开头的隔壁文件夹", "ws", "../ws-evil/secret.txt",
         None, SIBLING_HINT),
        ("绝对路径，指向工作区外面", "ws", str(base / "secret.txt"), None, ABSOLUTE_HINT),
        ("绝对路径，恰好指向工作区里面", "ws", str(base / "ws" / "app.py"), None,
         ABSOLUTE_INSIDE_HINT),
        ("~/.bashrc", "ws", "~/.bashrc", None, TILDE_HINT),
        ("link_out：指向外面的链接", "ws", "link_out", None, LINK_HINT),
        ("link_dir/secret.txt：指向外面的文件夹链接", "ws", "link_dir/secret.txt", None, LINK_HINT),
        ("cart.py~：名字结尾的 ~（备份文件）", "ws", "cart.py~", "cart.py~", TILDE_ANYWHERE_HINT),
        ("loop：指向自己的链接（绕成一个圈）", "ws", "loop", EITHER, LOOP_HINT),
        ("名字里有 NUL 字符", "ws", "app\0.py", None, NUL_HINT),
        ("300 个字符的名字", "ws", "x" * 300 + ".py", EITHER, LONG_HINT),
        (f"随机的新文件{FRESH}", "ws", f"src/{name}/{other}.py", f"src/{name}/{other}.py",
         NEW_FILE_HINT),
        (f"随机的逃逸路径{FRESH}", "ws", f"src/{name}/../../../secret.txt", None, MIDDLE_HINT),
    ]


def _hide(text: str, base: Path) -> str:
    """`text` without the checker's temporary folder (not worth showing)."""
    return text.replace(str(base.resolve()), "…").replace(str(base), "…")


def _path_problem(got: Any, wanted: Path | str | None, base: Path) -> Problem:
    """What is wrong with `got` as inside_workspace's answer; None when it is right."""
    def shown(value: Any) -> str:
        return _hide(short(value), base)

    if wanted == EITHER:  # refusing is fine; a Path must be absolute, clean and inside
        inside = (base / "ws").resolve()
        if isinstance(got, str) and got.startswith("Error") or isinstance(got, PurePath) \
                and Path(got).is_absolute() and ".." not in Path(got).parts \
                and Path(got).is_relative_to(inside):
            return None
        return (f"应该返回工作区里的真实位置（Path），或者一段 Error: 开头的文字，"
                f"得到 {shown(got)}", "")
    if wanted is None:
        if isinstance(got, str) and got.startswith("Error"):
            return None
        if isinstance(got, str):
            return f"拒绝时要返回以 Error: 开头的文字，得到 {shown(got)}", REFUSE_TEXT_HINT
        if not isinstance(got, PurePath):
            return f"应该返回 Path 或 str，得到 {shown(got)}", TYPE_PATH_HINT
        return f"这个路径通向工作区外面，应该拒绝，你却放行了：{shown(got)}", ""
    if isinstance(got, str):
        return f"这个路径在工作区里面，应该放行，你却拒绝了：{shown(got)}", ""
    if not isinstance(got, PurePath):
        return f"应该返回 Path 或 str，得到 {shown(got)}", TYPE_PATH_HINT
    if Path(got) == wanted:
        return None
    if Path(got).is_absolute() and Path(got).resolve() == wanted:
        return f"放行了，但返回的路径没有解析：期望 {shown(wanted)}，得到 {shown(got)}", \
            UNRESOLVED_HINT
    return (f"放行了，但返回的位置不对：期望 {shown(wanted)}，得到 {shown(got)}",
            "返回 (root / path).resolve()：解析之后的真实位置，工具接下来读写的就是它。")


@checker("练习 8.2：inside_workspace —— 路径必须留在工作区里",
         Workspace, coding_registry, hint=BORROWED_PATH_HINT)
def check_inside_workspace(fn: Callable[[Path, str], Any], report: Report) -> None:
    """Exercise 8.2: the real location inside the workspace, or an error text."""
    with tempfile.TemporaryDirectory(prefix="vibe-check-") as folder:
        base = Path(folder)
        _tree(base)
        for name, root_name, path, inside, hint in _path_cases(base, random.Random()):
            wanted = inside if inside in (None, EITHER) else (base / "ws" / inside).resolve()
            with report.case(name):
                outcome = attempt(fn, base / root_name, path)
                if outcome.error is not None:  # its message may name the temporary folder
                    fail(_hide(outcome.raised(), base), hint if wanted is not None
                         or hint in RAISING_HINTS else RAISE_PATH_HINT)
                got = outcome.value
                _fail_with(report, name, _path_problem(got, wanted, base), hint)


# ---------------------------------------------------------------------------
# Exercise 3: my_policy, an approval policy
# ---------------------------------------------------------------------------

ALLOW_HINT = ("python -m pytest 和 ls 要放行：用 words(command)（也就是 shlex.split）拆成词，"
              "开头的词是 ['python', '-m', 'pytest'] 或 ['ls'] 就允许。")
ARGS_HINT = "后面跟参数也要放行：比较的是开头几个词，不是整条命令相等。"
WRITE_HINT = ("action.kind == 'write' 时 action.detail 是文件路径，不是命令：本练习里写入一律允许"
              "（路径检查已经把写入限制在工作区里）。先看 action.kind，再决定怎么判断。")
PYTHON_HINT = ("只允许 python -m pytest：只看第一个词是不是 python 不够，"
               "python app.py、python -m pip 什么都能做。比较开头的三个词。")
WORDS_HINT = ("按整词比较，不要用 startswith：lsblk 以 ls 开头，python -m pytest_evil 以 "
              "python -m pytest 开头，却都是另一个程序。用 words(command)（也就是 shlex.split）"
              "拆成词再比较。")
LIST_HINT = "允许列表的意思是：不在列表里的命令一律拒绝（不是列一份黑名单）。"
SUBSTRING_HINT = "看的是命令开头的程序，不是命令里有没有 pytest 这个词：echo pytest 运行的是 echo。"
META_HINT = ("有 shell 符号就拒绝：; & | ` $ < > 和换行都能在允许的命令后面再接一条任意命令"
             "（python -m pytest; rm -rf .），或者改写文件。先检查这些符号，再看开头的词。")
AMPERSAND_HINT = ("单独一个 & 也要拒绝：它把前面的命令放到后台，接着就运行后面那条"
                  "（ls & rm -rf .）。要找的是字符 &，不是 &&。")
SPLIT_HINT = ("拆不开的命令一律拒绝：引号不成对时 shlex.split 拆不出词，也就不知道要运行什么。"
              "不要退回 str.split() 去猜，返回一段拒绝理由。")
SPLIT_RAISES_HINT = ("shlex.split 遇到不成对的引号会抛 ValueError："
                     "用 try/except ValueError 接住它，返回一段拒绝理由（不要让策略抛异常）。")
WRITE_SYMBOL_HINT = ("写入的 detail 是文件路径，不是命令：R&D.md 里的 & 只是文件名的一部分。"
                     "先看 action.kind，是 write 就放行，只对命令检查 shell 符号。")
TYPE_POLICY_HINT = ("允许时返回 True；拒绝时返回 False，或者一段说明原因的文字（str）。"
                    "返回了 None？多半是某个分支忘了 return。")

# The characters the package's allow-list refuses (vibe_agent.sandbox.SHELL_METACHARACTERS).
META_CASES = [
    ("python -m pytest; rm -rf .", "分号接上第二条命令"),
    ("ls && rm -rf .", "&& 接上第二条命令"),
    ("ls & rm -rf .", "单独一个 & 把 ls 放到后台，再运行第二条"),
    ("ls | sh", "管道"),
    ("ls $(rm -rf .)", "$( ) 先运行括号里的命令"),
    ("ls `rm -rf .`", "反引号先运行里面的命令"),
    ("ls > app.py", "> 把 app.py 清空"),
    ("ls\nrm -rf .", "换行接上第二条命令"),
]


def _policy_cases(rng: random.Random) -> list[tuple[str, Action, bool, str]]:
    """(case, action, allowed?, hint)."""
    def command(text: str) -> Action:
        return Action("command", text)

    folder, program = _word(rng), _word(rng)
    return [
        ("python -m pytest → 允许", command("python -m pytest"), True, ALLOW_HINT),
        ("python -m pytest -q tests/test_cart.py → 允许", command("python -m pytest -q "
                                                                "tests/test_cart.py"), True,
         ARGS_HINT),
        ("ls → 允许", command("ls"), True, ALLOW_HINT),
        ("ls -la shop → 允许", command("ls -la shop"), True, ARGS_HINT),
        ("写入 shop/cart.py → 允许", Action("write", "shop/cart.py"), True, WRITE_HINT),
        ("python app.py → 拒绝", command("python app.py"), False, PYTHON_HINT),
        ("python -m pip install requests → 拒绝", command("python -m pip install requests"), False,
         PYTHON_HINT),
        ("python -m pytest_evil → 拒绝", command("python -m pytest_evil"), False, WORDS_HINT),
        ("lsblk → 拒绝", command("lsblk"), False, WORDS_HINT),
        ("rm -rf . → 拒绝", command("rm -rf ."), False, LIST_HINT),
        ("echo pytest → 拒绝", command("echo pytest"), False, SUBSTRING_HINT),
        *[(f"{text!r}（{label}）→ 拒绝", command(text), False,
           AMPERSAND_HINT if text == "ls & rm -rf ." else META_HINT)
          for text, label in META_CASES],
        ("ls 'shop（引号不成对，拆不开）→ 拒绝", command("ls 'shop"), False, SPLIT_HINT),
        ("写入 docs/R&D.md → 允许", Action("write", "docs/R&D.md"), True, WRITE_SYMBOL_HINT),
        (f"ls 一个随机的文件夹 → 允许{FRESH}", command(f"ls {folder}"), True, ARGS_HINT),
        (f"一个随机的程序 → 拒绝{FRESH}", command(f"{program} -rf ."), False, LIST_HINT),
    ]


def _policy_problem(got: Any, allowed: bool) -> Problem:
    """What is wrong with the policy's answer; None when it is right."""
    if got is True:
        decided = True
    elif got is False or isinstance(got, str):
        decided = False  # a string is the reason for refusing
    else:
        return f"应该返回 True、False 或一段拒绝理由（str），得到 {short(got)}", TYPE_POLICY_HINT
    if decided == allowed:
        return None
    if allowed:
        return f"应该允许，你的策略拒绝了（{short(got)}）", ""
    return "应该拒绝，你的策略允许了", ""


@checker("练习 8.3：my_policy —— 只允许 python -m pytest 和 ls")
def check_my_policy(fn: Callable[[Action], Any], report: Report) -> None:
    """Exercise 8.3: allow python -m pytest, ls and writes; refuse the rest and shell syntax."""
    for name, action, allowed, hint in _policy_cases(random.Random()):
        with report.case(name):
            got = attempt(fn, action).get(SPLIT_RAISES_HINT if hint == SPLIT_HINT else hint)
            _fail_with(report, name, _policy_problem(got, allowed), hint)


# ---------------------------------------------------------------------------
# Exercise 4: my_decide, the order of permission rules
# ---------------------------------------------------------------------------

DENY_FIRST_HINT = ("deny 要最先看：一条 deny 规则匹配了，不管 allow 和 ask 里有什么，"
                   "结果都是 deny。按 deny、ask、allow 的顺序，一个列表一个列表地找，"
                   "第一个有规则匹配的列表说了算。")
ASK_OVER_DENY_HINT = ("ask 也不能压过 deny：deny 和 ask 都匹配时是 deny（拒绝），"
                      "不是再问一次人——人已经在设置文件里说了不行。先看 deny，再看 ask。")
ASK_FIRST_HINT = ("ask 要先于 allow：ask 和 allow 都匹配时要问人。ask 规则就是为这种时候写的："
                  "“python -m pytest 都放行，"
                  "可 python -m pytest --update-snapshots 要问我”。")
DEFAULT_HINT = ("没有一条规则匹配时，返回 default："
                "它是审批模式（ask、auto-edit、yolo）给出的默认结果，"
                "规则之下才轮到它。不要写死 \"ask\"。")
KIND_HINT = ("调用 matches(rule, call, kind) 时要传上这条规则所在的列表名 kind："
             "deny 和 ask 规则会把命令按 ; && | 这些符号切开，一段一段地比，"
             "ls && git push 才会被 deny 里的 run_command(git push *) 拦住。")
RESULT_HINT = "返回 \"allow\"、\"ask\" 或 \"deny\" 三个字符串之一。"
KEYWORD_HINT = ("结果只由规则决定：不要自己看命令里有没有 rm、push 这样的词。"
                "项目的规则允许 rm -rf build，就是允许；规则里没有说的，交给 default。")
BORROWED_DECIDE_HINT = ("这道题要你自己写出规则的先后顺序，"
                        "不要借用包里的 decide、Rules 或 ORDER："
                        "按 deny、ask、allow 的顺序，"
                        "用 matches(rule, call, kind) 一个列表一个列表地找，"
                        "都不匹配就返回 default。")
VERDICTS = ("deny", "ask", "allow")


def _decision(rules: dict[str, list[str]], call: Any, default: str, kinds: bool = True) -> str:
    """The right answer, from the package's matching (the order written out here);
    `kinds=False`: what an answer gets that never tells `matches` the rule's list."""
    for kind in VERDICTS:
        if any(matches(rule, call, kind if kinds else "allow")  # type: ignore[arg-type]
               for rule in rules.get(kind, [])):
            return kind
    return default


def _matching_lists(rules: dict[str, list[str]], call: Any) -> set[str]:
    return {kind for kind in VERDICTS if any(
        matches(rule, call, kind) for rule in rules.get(kind, []))}  # type: ignore[arg-type]


def decide_cases(rng: random.Random) -> list[tuple[str, dict[str, list[str]], Any, str]]:
    """(case, rules, call, default): the lesson's table, then cases made up afresh."""
    pytest_all, pytest_q = "run_command(python -m pytest *)", "run_command(python -m pytest -q)"
    run = lambda command: Call("run_command", command)  # noqa: E731
    word, other = _word(rng), _word(rng)
    fresh_command = f"{word} --{other}"
    fresh_rule = f"run_command({word} *)"
    mode = rng.choice(["allow", "ask"])
    return [
        ("没有规则：审批模式说了算（ask）", {}, run("python -m pytest -q"), "ask"),
        ("没有规则：审批模式说了算（yolo：allow）", {}, run("python -m pytest -q"), "allow"),
        ("allow 匹配", {"allow": [pytest_all]}, run("python -m pytest -q"), "ask"),
        ("ask 匹配（yolo 下也要问）", {"ask": [pytest_all]}, run("python -m pytest -q"), "allow"),
        ("deny 匹配", {"deny": [pytest_all]}, run("python -m pytest -q"), "allow"),
        ("allow 和 deny 都匹配", {"allow": [pytest_all], "deny": [pytest_q]},
         run("python -m pytest -q"), "allow"),
        ("ask 和 deny 都匹配", {"ask": [pytest_all], "deny": [pytest_q]},
         run("python -m pytest -q"), "ask"),
        ("allow 和 ask 都匹配", {"allow": [pytest_all], "ask": [pytest_q]},
         run("python -m pytest -q"), "allow"),
        ("三个列表都匹配", {"allow": [pytest_all], "ask": [pytest_all], "deny": [pytest_q]},
         run("python -m pytest -q"), "allow"),
        ("规则不匹配：交给 default", {"allow": ["run_command(ls *)"], "deny": ["mcp__git__*"]},
         run("python -m pytest -q"), "ask"),
        ("带 ; 的命令：allow 的 * 不管它", {"allow": [pytest_all]},
         run("python -m pytest -q; rm -rf ~"), "ask"),
        ("deny 规则拦住 && 后面的那一段", {"allow": ["run_command"],
                                        "deny": ["run_command(git push *)"]},
         run("ls && git push"), "allow"),
        ("规则允许 rm -rf build", {"allow": ["run_command(rm -rf build)"]}, run("rm -rf build"),
         "ask"),
        ("规则拒绝 ls", {"deny": ["run_command(ls *)"]}, run("ls -la"), "allow"),
        ("MCP 工具：deny mcp__git__*", {"allow": ["mcp__git__status"], "deny": ["mcp__git__*"]},
         Call("mcp__git__status"), "allow"),
        ("写文件：allow edit_file(src/**)", {"allow": ["edit_file(src/**)"]},
         Call("edit_file", "src/app.py"), "ask"),
        (f"随机的命令，allow 和 deny 都匹配{FRESH}", {"allow": [fresh_rule], "deny": [
            f"run_command({fresh_command})"]}, run(fresh_command), "allow"),
        (f"随机的命令，allow 和 ask 都匹配{FRESH}", {"ask": [fresh_rule], "allow": [
            f"run_command({fresh_command})"]}, run(fresh_command), "allow"),
        (f"随机的命令，没有规则匹配{FRESH}", {"allow": [f"run_command({other} *)"],
                                    "deny": [f"run_command({other})"]}, run(fresh_command), mode),
    ]


def _decide_problem(rules: dict[str, list[str]], call: Any, default: str, got: Any) -> Problem:
    """What is wrong with my_decide's answer; None when it is right."""
    wanted = _decision(rules, call, default)
    if got not in VERDICTS:
        return f"应该返回 \"allow\"、\"ask\" 或 \"deny\"，得到 {short(got)}", RESULT_HINT
    if got == wanted:
        return None
    matched = _matching_lists(rules, call)
    if not matched:
        return f"没有规则匹配，应该是 default（{default}），得到 {got}", DEFAULT_HINT
    if got == _decision(rules, call, default, kinds=False):
        return f"应该是 {wanted}，得到 {got}", KIND_HINT
    if wanted == "deny" and got == "allow":
        return "deny 和 allow 都匹配，应该是 deny，你让 allow 赢了", DENY_FIRST_HINT
    if wanted == "deny" and got == "ask":
        return "deny 和 ask 都匹配，应该是 deny，你让 ask 赢了", ASK_OVER_DENY_HINT
    if wanted == "ask" and got == "allow":
        return "ask 和 allow 都匹配，应该是 ask，你让 allow 赢了", ASK_FIRST_HINT
    if got == default:
        return f"{wanted} 里有一条规则匹配，应该是 {wanted}，你返回了 default（{default}）", ""
    return f"应该是 {wanted}，得到 {got}", KEYWORD_HINT


@checker("练习 8.4：my_decide —— deny 先于 ask 先于 allow，规则之下是审批模式",
         decide, Rules, ORDER, hint=BORROWED_DECIDE_HINT, allowed=(matches, Call))
def check_my_decide(fn: Callable[[dict[str, list[str]], Any, str], Any], report: Report) -> None:
    """Exercise 8.4: deny beats ask beats allow; the mode's default below the rules."""
    for name, rules, call, default in decide_cases(random.Random()):
        with report.case(name):
            given = {kind: list(rules.get(kind, [])) for kind in VERDICTS}  # a fresh copy
            got = attempt(fn, given, call, default).get(RESULT_HINT)
            _fail_with(report, name, _decide_problem(rules, call, default, got), KEYWORD_HINT)
