"""Exercise checkers: run the learner's code and say, in Chinese, what passed and why not.

Every lesson's checkers live in `lesson_NN.py` beside this file and speak one dialect:

    @checker("练习 N.M：thing —— 一句话说明")             # one report per exercise
    def check_thing(fn, report):                         # callers pass fn only
        for name, given, wanted, hint in CASES:
            with report.case(name):                      # one case per row of a table
                got = attempt(fn, given).get(hint)       # the ONLY way to call the learner
                if got != wanted:
                    fail(f"期望 {short(wanted)}，得到 {short(got)}", hint)  # the ONLY way to fail

`check_thing(fn)` returns a Verdict: `@checker` makes the `Report`, refuses borrowed code,
runs the body and prints `report.verdict()`.

How to write a checker for a new lesson (copy `lesson_07.check_prompt_growth`, the smallest):

1. A table of cases: `(name, input, wanted, hint)`, one row per thing the exercise
   asks for. The hint says what to do about the mistake that case catches.
2. Call the learner's code only through `attempt(fn, *args)`. Their exception becomes
   a kind report naming their line (`.get(hint)` ends the case with it, or read
   `.error` to judge it yourself); `raise NotImplementedError` in an unsolved
   exercise becomes "还没完成". Anything else that raises in a case is a bug of the
   checker and is NOT blamed on the learner.
3. End a failing case with `fail(message, hint)`: the message says what came back,
   the hint what to change. Recognise each typical mistake by what the learner's
   function returned and give it its own hint (see `lesson_07._growth_problem`).
4. Decorate the body with `@checker(title)`: the checker returns a `Verdict`, truthy
   when every case passed and silent as a notebook cell's last value (the printed
   report already says everything). When the exercise rebuilds something the package
   has, name it: `@checker(title, package_function, hint=...)` refuses an answer that
   uses it. `return` ends the body early; the report is printed all the same.
5. Tests in `tests/test_checks_NN.py`: the right answer passes; every typical mistake,
   and every way to game the check, is a row asserting its own hint.

Checkers that run a loop against scripted models share `MODEL`, `checker_world()`,
`checker_registry()` and the request cap `MAX_REQUESTS` below.
"""

from __future__ import annotations

import functools
import inspect
import sys
import sysconfig
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn

import httpx2

from ...registry import ToolRegistry
from ...tools import DEMO_TOOL_NAMES, demo_registry
from ...world import World
from ..pages import BundledPages


class CaseFailed(Exception):
    """Ends the current case: what is wrong, and the hint for this very mistake."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class Unsolved(Exception):
    """The learner's function still raises NotImplementedError."""


# What a problem-finder found wrong in the learner's answer: (message, hint), or None.
# Use it as `if problem := find_problem(...): fail(*problem)`.
Problem = tuple[str, str] | None


def fail(message: str, hint: str = "") -> NoReturn:
    """End the current case as failed.

    Args:
        message: what came back, in Chinese.
        hint: what to change, in Chinese (empty: no hint line).
    """
    raise CaseFailed(message, hint)


def fail_unless_a(kind: type, got: Any, hint: str = "") -> None:
    """End the current case as failed unless the learner's function returned a `kind`.

    Args:
        kind: the type the exercise asks for (str, list, dict ...).
        got: what the function returned.
        hint: what to change, in Chinese.
    """
    if not isinstance(got, kind):
        fail(f"应该返回 {kind.__name__}，得到 {type(got).__name__}：{short(got)}", hint)


@dataclass
class Attempt:
    """What one call of the learner's function did: its value, or the exception it raised."""

    value: Any = None
    error: Exception | None = None

    def raised(self) -> str:
        """The learner's exception in one kind line, with their line of code if we can see it."""
        error = self.error
        return f"你的代码抛出了 {type(error).__name__}: {error}{_where(error)}" if error else ""

    def get(self, hint: str = "") -> Any:
        """The value; if the learner's code raised, end the case with that and `hint`."""
        if self.error is not None:
            fail(self.raised(), hint)
        return self.value


def attempt(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Attempt:
    """Call the learner's function (or anything that runs it) and keep what happened.

    `NotImplementedError` (an exercise not solved yet) ends the whole check as "还没完成".
    """
    try:
        return Attempt(value=fn(*args, **kwargs))
    except NotImplementedError as exc:
        raise Unsolved from exc
    except Exception as exc:  # noqa: BLE001 - the learner's mistake, explained in the case
        return Attempt(error=exc)


class Verdict:
    """Whether a check passed: truthy or falsy, and silent as a notebook cell's last value
    (the printed report already says everything; a bare `True` below it would not)."""

    def __init__(self, passed: bool) -> None:
        self.passed = passed

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:
        pass


@dataclass
class Report:
    """The verdicts of one exercise's cases."""

    title: str
    lines: list[str] = field(default_factory=list)
    passed: int = 0
    failed: int = 0
    unsolved: bool = False

    @contextmanager
    def case(self, name: str) -> Iterator[None]:
        """One case: it passes unless `fail` is called in it."""
        try:
            yield
        except Unsolved:
            self.unsolved = True
        except CaseFailed as failure:
            if not self.unsolved:
                self._fail(name, failure.message, failure.hint)
        else:
            if not self.unsolved:
                self.passed += 1
                self.lines.append(f"  ✅ {name}")

    def borrows(self, fn: Any, *package_parts: Any, hint: str = "",
                allowed: tuple[Any, ...] = ()) -> bool:
        """One failing case when the learner hands in code that is not theirs.

        `@checker` calls it before the cases. Always refused: the package's own function
        or class (or a subclass of it) handed in, anything private of the package (a name
        starting with "_", e.g. `vibe_agent.coding._occurrences`) and anything of the
        checkers (`vibe_agent.course.checks`). Refused too, for an exercise that rebuilds
        something the package has: `package_parts`, with `hint`. `allowed` names package
        objects the exercise hands out even though the rule would refuse them.
        """
        found = _borrowed(fn, package_parts, allowed)
        if found is not None:
            name, own_hint = found
            with self.case("自己写出来"):
                fail(f"你的函数用了{name}。", own_hint or hint)
        return found is not None

    def note(self, line: str) -> None:
        """A line of the report that is neither a pass nor a failure (e.g. a case skipped)."""
        self.lines.append(f"  ⚠️ {line}")

    def _fail(self, name: str, message: str, hint: str) -> None:
        self.failed += 1
        self.lines.append(f"  ❌ {name}：{message}")
        if hint:
            self.lines.append(f"     提示：{hint}")

    def verdict(self) -> Verdict:
        """Print the report; the Verdict is truthy when every case passed."""
        print(self.title)
        if self.unsolved:
            print("  ⏳ 还没完成：函数里还是 raise NotImplementedError，"
                  "把它换成你的实现后再运行这个检查。")
            return Verdict(False)
        print("\n".join(self.lines))
        if self.failed:
            print(f"还有 {self.failed} 项没通过（通过 {self.passed} 项）。"
                  "改好后再运行一次这个单元格。")
            return Verdict(False)
        print(f"全部 {self.passed} 项通过！🎉")
        return Verdict(True)


def checker(title: str, *package_parts: Any, hint: str = "", allowed: tuple[Any, ...] = ()
            ) -> Callable[[Callable[..., None]], Callable[..., Verdict]]:
    """Turn an exercise's cases into its checker: the opening every checker shares.

        @checker("练习 4.1：……", run_agent, hint="自己写出这个循环……")
        def check_my_run_agent(fn, report):
            ...  # the cases, added to `report`

    The learner calls `check_my_run_agent(fn)`. That makes `Report(title)`, refuses code
    that is not the learner's (`report.borrows(fn, *package_parts, hint=hint,
    allowed=allowed)`: then the cases do not run), runs the body, and returns
    `report.verdict()`.

    Args:
        title: the report's first line, "练习 N.M：……".
        package_parts: what the exercise rebuilds (the package's own function or class).
        hint: what to do instead of calling them, in Chinese.
        allowed: package objects the exercise hands out although the rule would refuse them.
    """
    def decorate(body: Callable[..., None]) -> Callable[..., Verdict]:
        whole = inspect.signature(body)
        learner = next(iter(whole.parameters))  # the parameter the learner's code comes in
        shown = whole.replace(parameters=[whole.parameters[learner]],
                              return_annotation=Verdict.__name__)

        @functools.wraps(body)
        def check(*args: Any, **kwargs: Any) -> Verdict:
            fn = shown.bind(*args, **kwargs).arguments[learner]
            report = Report(title)
            if not report.borrows(fn, *package_parts, hint=hint, allowed=allowed):
                body(fn, report)
            return report.verdict()

        check.__signature__ = shown  # type: ignore[attr-defined]  # help(): check_x(fn)
        return check

    return decorate


def short(value: Any, width: int = 100) -> str:
    """A value as Python would print it, on one line, shortened to `width` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


PRIVATE_HINT = ("以下划线开头的名字是包的内部实现，不是练习发给你的工具："
                "不要调用它（也不要换个名字、通过模块或 getattr 去拿），自己写出这几行。")
CHECKER_HINT = ("检查器的代码（vibe_agent.course.checks）是用来判你的答案的，不是答案的一部分："
                "不要调用它的函数，也不要读它的用例和期望值，自己写出来。")
PACKAGE = "vibe_agent"
CHECKS = __name__  # "vibe_agent.course.checks"


def _in(module_name: str, package: str) -> bool:
    return module_name == package or module_name.startswith(package + ".")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_of(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return value.__name__
    module = getattr(value, "__module__", None)
    return module if isinstance(module, str) else ""


def _borrowed(fn: Any, package_parts: tuple[Any, ...],
              allowed: tuple[Any, ...] = ()) -> tuple[str, str] | None:
    """What the learner hands in that is not theirs: (what, in Chinese, and its own hint;
    the hint is empty for one of `package_parts`), or None."""
    for given in (fn, *getattr(fn, "__mro__", ())[1:]):
        if callable(given) and _in(_module_of(given), PACKAGE):
            return f"包里现成的 {getattr(given, '__name__', short(given))}", ""
    kept = {id(value) for value in allowed}
    parts = {id(value) for value in package_parts}
    for name, value, private in _reached(fn):
        if id(value) in kept:
            continue
        module = _module_of(value)
        if id(value) in parts:
            return f"包里现成的 {name}", ""
        if _in(module, CHECKS) or _checker_data(value):
            return f"检查器自己的 {name}", CHECKER_HINT
        if private or (_in(module, PACKAGE) and _private(getattr(value, "__name__", "") or "")):
            return f"包的内部实现 {name}", PRIVATE_HINT
    return None


def _checker_data(value: Any) -> bool:
    """A table or value the checkers define (their cases, their expected answers)."""
    if isinstance(value, str | bytes | int | float | complex | bool | type(None) | type
                  | types.ModuleType | types.FunctionType | types.BuiltinFunctionType):
        return False
    modules = [m for name, m in list(sys.modules.items()) if _in(name, PACKAGE) and m]
    in_checks = any(_in(m.__name__, CHECKS) and any(v is value for v in vars(m).values())
                    for m in modules)
    return in_checks and not any(not _in(m.__name__, CHECKS)
                                 and any(v is value for v in vars(m).values()) for m in modules)


def _learner_functions(value: Any) -> list[Any]:
    """The plain functions inside what the learner handed in (a function, a class, a
    partial, a bound method)."""
    if isinstance(value, functools.partial):
        return _learner_functions(value.func)
    if isinstance(value, types.MethodType):
        return _learner_functions(value.__func__)
    if isinstance(value, types.FunctionType):
        return [value]
    if isinstance(value, type):
        found = []
        for member in vars(value).values():
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            if isinstance(member, property):
                found += [f for f in (member.fget, member.fset, member.fdel) if f]
            elif isinstance(member, types.FunctionType):
                found.append(member)
        return found
    return []


def _reached(fn: Any) -> Iterator[tuple[str, Any, bool]]:
    """(name, object, reached under a private name of the package?) for everything the
    learner's code can reach by name: globals, closure cells and default values it uses,
    modules it imports (also inside the function), attributes of the package's modules
    and classes (also through `getattr` with a string constant), and, through the
    learner's own helper functions and classes, what those reach."""
    roots = _learner_functions(fn)
    if isinstance(fn, functools.partial):
        yield from ((f"参数 {short(arg, 40)}", arg, False)
                    for arg in (*fn.args, *fn.keywords.values()))
    own = {id(f.__globals__) for f in roots}
    queue, seen = list(roots), {id(f) for f in roots}
    while queue:
        function = queue.pop()
        names, strings = _names_used(function.__code__)
        scope = {**function.__globals__, **_closure(function)}
        values = [(name, scope[name]) for name in names if name in scope]
        values += [("默认参数", v) for v in (*(function.__defaults__ or ()),
                                              *(function.__kwdefaults__ or {}).values())]
        values += [(text, sys.modules[text]) for text in {*names, *strings}
                   if _in(text, PACKAGE) and text in sys.modules]
        holders = [v for _, v in values if _in(_module_of(v), PACKAGE)
                   and isinstance(v, types.ModuleType | type)]
        attributes = {*names, *(s for s in strings if s.isidentifier())}
        while holders:  # attributes of the package's modules and classes, transitively
            holder = holders.pop()
            for attribute in attributes:
                value = vars(holder).get(attribute) if attribute in vars(holder) else None
                if value is None or any(value is v for _, v in values):
                    continue
                yield attribute, value, _private(attribute)
                values.append((attribute, value))
                if isinstance(value, types.ModuleType | type) and _in(_module_of(value), PACKAGE):
                    holders.append(value)
        for name, value in values:
            yield name, value, False
            for inner in _learner_functions(value):
                if id(inner) not in seen and id(inner.__globals__) in own:
                    seen.add(id(inner))
                    queue.append(inner)


def _closure(function: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=True):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
    return values


def _names_used(code: types.CodeType) -> tuple[list[str], list[str]]:
    """Every global, attribute, imported and free-variable name a code object (and its
    nested functions) refers to, and its string constants."""
    names = [*code.co_names, *code.co_freevars]
    strings = [const for const in code.co_consts if isinstance(const, str)]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            inner_names, inner_strings = _names_used(const)
            names += inner_names
            strings += inner_strings
    return names, strings


# Frames from these places are not the learner's code (e.g. pydantic raising inside the SDK,
# or json.loads raising inside the standard library).
LIBRARY_PATHS = ("vibe_agent", "site-packages", "dist-packages", sysconfig.get_paths()["stdlib"])


def _where(exc: BaseException) -> str:
    """The learner's line that raised, if the traceback reaches notebook code."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not any(part in f.filename for part in LIBRARY_PATHS)]
    if not frames:
        return ""
    return f"（出错的代码：{frames[-1].line}）" if frames[-1].line else ""


# ---------------------------------------------------------------------------
# Shared by the checkers that run a loop against scripted models (lessons 04–07)
# ---------------------------------------------------------------------------

MODEL = "scripted"  # scripted models accept any model name
CLOCK = datetime(2026, 1, 1, 4, 5, 6, tzinfo=UTC)  # 12:05:06 in Asia/Shanghai
MAX_REQUESTS = 20  # the checkers' request cap: no case needs more than 6 model calls


def checker_world() -> World:
    """A fixed clock and the course's bundled stand-in pages: the same everywhere, offline."""
    return World(now=lambda: CLOCK, http=httpx2.Client(transport=BundledPages()))


def checker_registry(names: tuple[str, ...] = DEMO_TOOL_NAMES) -> ToolRegistry:
    """The demo tools on `checker_world()` (no network, no real time)."""
    return demo_registry(checker_world(), names=names)
