"""Exercise checkers: run the learner's code and say, in Chinese, what passed and why not.

Every lesson's checkers live in `lesson_NN.py` beside this file and speak one dialect:

    report = Report("练习 N.M：thing —— 一句话说明")      # one report per exercise
    with report.case("case name"):                       # one case per row of a table
        got = attempt(fn, given).get(hint)               # the ONLY way to call the learner
        if got != wanted:
            fail(f"期望 {short(wanted)}，得到 {short(got)}", hint)   # the ONLY way to fail
    return report.verdict()                              # every check_* returns a Verdict

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
4. `return report.verdict()`: a `Verdict`, truthy when every case passed and silent as
   a notebook cell's last value (the printed report already says everything).
   When the exercise rebuilds something the package has, start with
   `if report.borrows(fn, package_function, hint=...): return report.verdict()`.
5. Tests in `tests/test_checks_NN.py`: the right answer passes; every typical mistake,
   and every way to game the check, is a row asserting its own hint.

Checkers that run a loop against scripted models share `MODEL`, `checker_world()`,
`checker_registry()` and the request cap `MAX_REQUESTS` below.
"""

from __future__ import annotations

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

    def borrows(self, fn: Any, *package_parts: Any, hint: str) -> bool:
        """For an exercise that rebuilds something the package has: one failing case when
        the learner hands in the package's own code, or calls one of `package_parts`."""
        name = _borrowed(fn, package_parts)
        if name is not None:
            with self.case("自己写出来"):
                fail(f"你的函数用了包里现成的 {name}。", hint)
        return name is not None

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


def short(value: Any, width: int = 100) -> str:
    """A value as Python would print it, on one line, shortened to `width` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _from_package(value: Any) -> bool:
    module = getattr(value, "__module__", None) or ""
    return callable(value) and module.split(".")[0] == "vibe_agent"


def _borrowed(fn: Any, package_parts: tuple[Any, ...]) -> str | None:
    """What of the package the learner hands in instead of their own code: the package's
    function or class itself (or a subclass of it), or a name in their code that resolves
    to one of `package_parts` (an alias and a module attribute count too)."""
    for given in (fn, *getattr(fn, "__mro__", ())[1:]):
        if _from_package(given):
            return given.__name__
    functions = [fn] if hasattr(fn, "__code__") else [
        member for member in vars(fn).values() if hasattr(member, "__code__")]
    for function in functions:
        scope = {**function.__globals__, **_closure(function)}
        used = _names_used(function.__code__)
        modules = [scope[name] for name in used if isinstance(scope.get(name), types.ModuleType)]
        modules += [sys.modules[name] for name in used  # `from vibe_agent.x import y` inside
                    if name.split(".")[0] == "vibe_agent" and name in sys.modules]
        for part in package_parts:
            for name in used:
                if scope.get(name) is part or any(getattr(m, name, None) is part for m in modules):
                    return name
    return None


def _closure(function: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=True):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
    return values


def _names_used(code: types.CodeType) -> list[str]:
    """Every global, attribute and free-variable name a code object (and its nested
    functions) refers to."""
    names = [*code.co_names, *code.co_freevars]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _names_used(const)
    return names


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
