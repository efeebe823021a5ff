"""Exercise checkers: run the learner's code and say, in Chinese, what passed and why not.

Every lesson's checkers live in `lesson_NN.py` beside this file and are built on
`Report`: a checker runs the learner's function case by case; each case either
passes, or fails with what was expected, what came back and a hint. A learner
never sees a bare AssertionError or traceback from a checker:

    report = Report("练习 2.1：追加 tool 消息")
    with report.case("一个工具调用", hint="tool_call_id 要和 assistant 里的 id 一致"):
        got = learner_fn(...)
        report.expect(got == wanted, f"期望 {wanted!r}，得到 {got!r}")
    report.show()   # prints the verdict; returns a Verdict, truthy when all passed

An exercise left as `raise NotImplementedError` reports plainly "还没完成".
"""

from __future__ import annotations

import sysconfig
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


class CaseFailed(Exception):
    """Raised by `Report.expect` to end a case early."""


@dataclass
class Report:
    """The verdicts of one exercise's cases."""

    title: str
    lines: list[str] = field(default_factory=list)
    passed: int = 0
    failed: int = 0
    unsolved: bool = False

    @contextmanager
    def case(self, name: str, hint: str = "") -> Iterator[None]:
        """One case: passes unless `expect` fails or the learner's code raises."""
        if self.unsolved:  # the exercise is a stub: later cases raise the same error
            try:
                yield
            except Exception:  # noqa: BLE001 - nothing to report beyond "还没完成"
                pass
            return
        try:
            yield
        except CaseFailed as failure:
            self._fail(name, str(failure), hint)
        except NotImplementedError:
            self.unsolved = True
        except Exception as exc:  # noqa: BLE001 - the learner's code raised: explain it
            self._fail(name, f"你的代码抛出了 {type(exc).__name__}: {exc}{_where(exc)}", hint)
        else:
            self.passed += 1
            self.lines.append(f"  ✅ {name}")

    def expect(self, condition: bool, message: str) -> None:
        """End the current case as failed with `message` unless `condition` holds."""
        if not condition:
            raise CaseFailed(message)

    def _fail(self, name: str, message: str, hint: str) -> None:
        self.failed += 1
        self.lines.append(f"  ❌ {name}：{message}")
        if hint:
            self.lines.append(f"     提示：{hint}")

    def show(self) -> Verdict:
        """Print the verdict; it is truthy when every case passed."""
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


# What a learner's answer got wrong: (message, hint for this very mistake), or None.
Problem = tuple[str, str] | None


def fail(report: Report, problem: Problem | str, hint: str = "") -> None:
    """End the current case with a message and the hint for this mistake (None: no-op).

    Args:
        report: the report whose current case fails.
        problem: a (message, hint) pair, a message alone, or None when nothing is wrong.
        hint: the hint, when `problem` is a message alone.
    """
    if problem is None:
        return
    message, hint = problem if isinstance(problem, tuple) else (problem, hint)
    report.expect(False, f"{message}\n     提示：{hint}" if hint else message)


def short(value: Any, width: int = 100) -> str:
    """A repr that fits on one line of feedback."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


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
