"""The checkers' one dialect: how the learner is called, how a case fails, what a check returns."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest

import vibe_agent.course.checks as checks
from vibe_agent import brakes, coding
from vibe_agent.brakes import call_key
from vibe_agent.brakes import call_key as package_key
from vibe_agent.coding import _occurrences
from vibe_agent.coding import _occurrences as find_all
from vibe_agent.course.checks import Report, Verdict, attempt, fail, lesson_08
from vibe_agent.course.checks.lesson_10 import _wanted
from vibe_agent.registry import ToolRegistry

# Checkers that take a file the learner wrote, not functions: the borrowing rule reads
# code objects, so these are tested in their own lesson's tests (tests/test_checks_14.py).
FILE_CHECKERS = {"lesson_14.check_my_server"}


def every_checker(*, files: bool = True):
    for info in pkgutil.iter_modules(checks.__path__):
        module = importlib.import_module(f"{checks.__name__}.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("check_") and fn.__module__ == module.__name__:
                if files or f"{info.name}.{name}" not in FILE_CHECKERS:
                    yield pytest.param(fn, id=f"{info.name}.{name}")


def given(check, fn):
    """Call `check` with `fn` as every function it asks for (12.3 takes two)."""
    needed = [p for p in inspect.signature(check).parameters.values()
              if p.default is inspect.Parameter.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return check(*[fn] * len(needed))


def unsolved(*args, **kwargs):
    raise NotImplementedError("练习还没完成")


@pytest.mark.parametrize("check", list(every_checker(files=False)))
def test_every_check_returns_a_verdict(check, capsys):
    verdict = given(check, unsolved)
    assert type(verdict) is Verdict and not verdict
    out = capsys.readouterr().out
    assert "还没完成" in out and "❌" not in out and "Traceback" not in out


def test_every_checker_a_solution_notebook_calls_is_covered_here():
    solutions = Path(__file__).resolve().parents[1] / "solutions"
    imported = re.compile(r"from vibe_agent\.course\.checks\.(lesson_\d\d) import ([\w, ]+)")
    called = {(lesson, name.strip())
              for nb in solutions.glob("[0-9][0-9]_*.ipynb")
              for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]
              if cell["cell_type"] == "code"
              for lesson, names in imported.findall("".join(cell["source"]))
              for name in names.split(",") if name.strip().startswith("check_")}
    covered = {tuple(param.id.split(".")) for param in every_checker()}
    assert called and called <= covered


def test_a_learners_exception_is_a_kind_report_with_the_hint(capsys):
    def learner(x):
        return 1 / x

    report = Report("练习")
    with report.case("除以零"):
        attempt(learner, 0).get("先判断 x 是不是 0。")
    assert not report.verdict()
    out = capsys.readouterr().out
    assert "你的代码抛出了 ZeroDivisionError: division by zero" in out
    assert "出错的代码：return 1 / x" in out and "提示：先判断 x 是不是 0。" in out


def test_a_checker_bug_is_not_blamed_on_the_learner():
    report = Report("练习")
    with pytest.raises(KeyError), report.case("坏掉的检查器"):
        {}["missing"]


def test_fail_ends_the_case_and_the_verdict_is_silent(capsys):
    report = Report("练习")
    with report.case("一"):
        fail("期望 1，得到 2", "提示文字")
    with report.case("二"):
        pass
    verdict = report.verdict()
    assert not verdict and repr(verdict) == "Verdict(passed=False)"
    assert verdict._ipython_display_() is None  # a notebook shows nothing below the report
    assert "❌ 一：期望 1，得到 2" in capsys.readouterr().out


def calls_the_package(name, arguments):
    return call_key(name, arguments)


def calls_an_alias(name, arguments):
    return package_key(name, arguments)


def calls_through_the_module(name, arguments):
    return brakes.call_key(name, arguments)


def imports_it_inside(name, arguments):
    from vibe_agent.brakes import call_key as key

    return key(name, arguments)


def call_key_of_my_own(name, arguments):  # the same idea, written by the learner
    return name + arguments


def uses_its_own_helper(name, arguments):
    return call_key_of_my_own(name, arguments)


@pytest.mark.parametrize(("fn", "found"), [
    pytest.param(calls_the_package, "call_key", id="calls-it"),
    pytest.param(calls_an_alias, "package_key", id="calls-an-alias"),
    pytest.param(calls_through_the_module, "call_key", id="calls-it-through-the-module"),
    pytest.param(imports_it_inside, "call_key", id="imports-it-inside-the-function"),
    pytest.param(brakes.call_key, "call_key", id="hands-in-the-package-function"),
    pytest.param(uses_its_own_helper, None, id="own-helper-not-flagged"),
])
def test_borrows_finds_the_package_however_it_is_reached(fn, found, capsys):
    report = Report("练习")
    assert report.borrows(fn, brakes.call_key, hint="自己写") is (found is not None)
    report.verdict()
    out = capsys.readouterr().out
    assert (f"你的函数用了包里现成的 {found}" in out) if found else "❌" not in out


def test_borrows_finds_a_subclass_of_a_package_class(capsys):
    class MyRegistry(ToolRegistry):
        pass

    assert Report("练习").borrows(MyRegistry, hint="自己写")


# --- the rule every checker applies first: no private part of the package, nothing of the checkers

CALLED: list[str] = []


def calls_a_private_helper(*args, **kwargs):
    CALLED.append("direct")
    return _occurrences(*args[:2])


def calls_a_private_helper_by_an_alias(*args, **kwargs):
    CALLED.append("alias")
    return find_all(*args[:2])


def calls_a_private_helper_through_the_module(*args, **kwargs):
    CALLED.append("module")
    return coding._occurrences(*args[:2])


def imports_a_private_helper_inside(*args, **kwargs):
    from vibe_agent.coding import _occurrences as positions

    CALLED.append("inside")
    return positions(*args[:2])


def gets_a_private_helper_by_its_name(*args, **kwargs):
    CALLED.append("getattr")
    return coding._occurrences(*args[:2])


def imports_the_module_by_its_name(*args, **kwargs):
    import importlib

    CALLED.append("import_module")
    return importlib.import_module("vibe_agent.coding")._occurrences(*args[:2])


def keeps_it_as_a_default(*args, _find=_occurrences, **kwargs):
    CALLED.append("default")
    return _find(*args[:2])


def my_own_helper(*args):
    return coding._not_unique("f.py", *args[:2])


def calls_it_through_its_own_helper(*args, **kwargs):
    CALLED.append("helper")
    return my_own_helper(*args)


def calls_the_checkers_helper(*args, **kwargs):
    CALLED.append("checker")
    return _wanted(*args)


def calls_the_checkers_private_function(*args, **kwargs):
    CALLED.append("checker-module")
    return lesson_08._lines_of(*args[:2])


def reads_the_checkers_cases(*args, **kwargs):
    from vibe_agent.course.checks.lesson_09 import JUDGE_CASES

    CALLED.append("checker-data")
    return JUDGE_CASES[0].expected


class BrakeWithAPrivateHelper:
    def __init__(self, limit):
        CALLED.append("class")
        self.limit = limit

    def record(self, ok):
        return bool(coding._occurrences("x", "x"))


PRIVATE = "你的函数用了包的内部实现"
CHECKER = "你的函数用了检查器自己的"
BORROWED = [
    pytest.param(calls_a_private_helper, PRIVATE + " _occurrences", id="direct-call"),
    pytest.param(calls_a_private_helper_by_an_alias, PRIVATE + " find_all", id="alias"),
    pytest.param(calls_a_private_helper_through_the_module, PRIVATE + " _occurrences",
                 id="module-attribute"),
    pytest.param(imports_a_private_helper_inside, PRIVATE + " _occurrences",
                 id="import-inside-the-function"),
    pytest.param(gets_a_private_helper_by_its_name, PRIVATE + " _occurrences",
                 id="getattr-by-string"),
    pytest.param(imports_the_module_by_its_name, PRIVATE + " _occurrences",
                 id="import-module-by-string"),
    pytest.param(keeps_it_as_a_default, PRIVATE, id="default-argument"),
    pytest.param(calls_it_through_its_own_helper, PRIVATE + " _not_unique",
                 id="through-a-helper-of-its-own"),
    pytest.param(calls_the_checkers_helper, CHECKER + " _wanted", id="checker-helper"),
    pytest.param(calls_the_checkers_private_function, CHECKER, id="checker-module-attribute"),
    pytest.param(reads_the_checkers_cases, CHECKER, id="checker-cases"),
    pytest.param(BrakeWithAPrivateHelper, PRIVATE + " _occurrences", id="class-method"),
]


@pytest.mark.parametrize("check", list(every_checker(files=False)))
@pytest.mark.parametrize(("fn", "expected"), BORROWED)
def test_every_checker_refuses_the_package_internals_and_its_own_code(check, fn, expected,
                                                                       capsys):
    CALLED.clear()
    verdict = given(check, fn)
    out = capsys.readouterr().out
    assert not verdict and expected in out, out
    assert "提示：" in out and "Traceback" not in out
    assert CALLED == []  # refused by reading the code, before it ever runs


def uses_the_public_sandbox(command, workspace, timeout):
    from vibe_agent.sandbox import run_in_sandbox

    return run_in_sandbox(command, workspace, timeout=timeout).exit_code == 0


def uses_a_private_helper_of_its_own(text, old):
    return _my_positions(text, old)


def _my_positions(text, old):  # the learner's own private helper is theirs
    return [i for i in range(len(text)) if text.startswith(old, i)]


def uses_the_public_diff(before, root):
    return coding.workspace_diff(before, root)


@pytest.mark.parametrize("fn", [
    pytest.param(uses_the_public_sandbox, id="the-package-public-sandbox"),
    pytest.param(uses_a_private_helper_of_its_own, id="a-private-helper-of-its-own"),
    pytest.param(uses_the_public_diff, id="a-public-function-of-the-package"),
])
def test_the_rule_lets_the_package_public_names_and_own_helpers_through(fn, capsys):
    assert not Report("练习").borrows(fn)
    assert "❌" not in capsys.readouterr().out


def test_an_exercise_can_hand_out_a_private_name(capsys):
    assert not Report("练习").borrows(calls_a_private_helper, allowed=(_occurrences,))
