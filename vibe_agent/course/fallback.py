"""While an exercise is unfinished, a demo cell uses the package's version and says so.

A learners' notebook must run top to bottom with every exercise unsolved (JupyterLab's
"Run All" stops at the first error). A demo cell that needs an exercise's answer wraps
it once:

    judge = learner_or_package(judge_by_tests, tests_pass, "练习 9.1")
    judge(run, folder, command, timeout)   # the learner's function, once it is written

The wrapper calls the learner's function. While it still raises `NotImplementedError`
(the stub the notebook generator writes), the wrapper prints one Chinese line and
returns what the package's version returns instead. Checkers never get the package's
version through it: called from inside a checker, the wrapper lets the
`NotImplementedError` through, so the check still says "还没完成".

Where the package has no version of an exercise (lesson 04's `predict_sent_roles`, say),
or where the cell exists to compare the learner's answer with the package's, the cell
skips its demo while the exercise is unfinished, again with one Chinese line:

    with demo_needs("练习 4.2 的 predict_sent_roles"):
        print(predict_sent_roles([1, 1]) == sent_roles(reference.requests))

The package's versions of the exercises are below (lessons 00–07 mostly pass the core's
own function, e.g. `vibe_agent.context.trim_old_tool_results`, straight to the wrapper);
each stands on the package's own code (`resolve_mode`, a `ToolRegistry`, `run_agent`, a
`Workspace`, `run_in_sandbox`, `unidiff`, `bench.summary`, a task of the suite) and says in
`about` how it differs from what the exercise asks for.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from unidiff import PatchSet

from ..coding import Workspace, WorkspaceError
from ..loop import run_agent
from ..registry import ToolRegistry
from ..sandbox import Action, Policy, run_in_sandbox

Result = TypeVar("Result")

NOTICE = "（{name} 还没完成：这一格先用{about}；完成练习后再运行这一格，就会用你的。）"
SKIPPED = "（{name} 还没完成：这一格的演示先跳过；完成练习后再运行这一格。）"
CHECKERS = "vibe_agent.course.checks"


def _inside_a_checker() -> bool:
    """Whether a checker is on the call stack (it must judge the learner's own code)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(CHECKERS):
            return True
        frame = frame.f_back
    return False


def learner_or_package(learner: Callable[..., Result], package: Callable[..., Result],
                       name: str, about: str | None = None) -> Callable[..., Result]:
    """The learner's function, standing in the package's while the exercise is unfinished.

    Args:
        learner: the learner's function (it raises NotImplementedError while unsolved).
        package: the package's version, called with the same arguments.
        name: the exercise, e.g. "练习 9.1 的 judge_by_tests".
        about: what the package's version is, in Chinese (default: its `about`
            attribute, else its name).
    """
    said = about or getattr(package, "about", None) or f"包里的 {package.__name__}"
    told = False

    def use(*args: Any, **kwargs: Any) -> Result:
        nonlocal told
        current = _latest(learner)
        try:
            return (learner if current is use else current)(*args, **kwargs)
        except NotImplementedError:
            if _inside_a_checker():
                raise
            if not told:
                told = True
                print(NOTICE.format(name=name, about=said))
            return package(*args, **kwargs)

    return use


@contextmanager
def demo_needs(name: str) -> Iterator[None]:
    """Run a demo cell's code; while an exercise it needs is unfinished, skip the rest of
    the cell and say so in one Chinese line instead of stopping Run All.

    Only `NotImplementedError` (the stub's) is caught: any other error of the learner's
    code still shows.

    Args:
        name: the exercise(s) the demo needs, e.g. "练习 4.2 的 predict_sent_roles".
    """
    try:
        yield
    except NotImplementedError:
        print(SKIPPED.format(name=name))


def _latest(function: Callable[..., Result]) -> Callable[..., Result]:
    """The function now bound to `function`'s name in its notebook: a learner who solves
    the exercise after the wrapper was made gets their new code without re-running
    the cell that made it."""
    scope = getattr(function, "__globals__", {})
    current = scope.get(getattr(function, "__name__", ""), function)
    return current if callable(current) else function


def _about(text: str) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    def mark(function: Callable[..., Result]) -> Callable[..., Result]:
        function.about = text  # type: ignore[attr-defined]
        return function
    return mark


# ---------------------------------------------------------------------------
# The package's versions of the exercises (lessons 00–07)
# ---------------------------------------------------------------------------


@_about("包里 make_client 用的规则（client.resolve_mode，它还会拒绝未知的模式名）")
def pick_mode(env: dict[str, str], requested: str | None) -> str:
    """Exercise 0.2: the run mode `make_client` picks (`resolve_mode`)."""
    from .client import resolve_mode

    return resolve_mode(requested, env)


@_about("包里的 ToolRegistry.call（它先按工具说明检查参数，第 5 节会讲到）")
def safe_invoke(tools: dict[str, Callable[..., Any]], name: str, arguments: str) -> str:
    """Exercise 3.2: the tools registered in a `ToolRegistry`, called by `call`."""
    registry = ToolRegistry()
    for tool_name, function in tools.items():
        registry.register(function, name=tool_name)
    return registry.call(name, arguments).output


@_about("包里的 run_agent（它多了刹车；停下时没有回答，返回 None）")
def run_agent_answer(client: Any, question: str, registry: ToolRegistry, model: str,
                     max_iters: int = 6) -> str | None:
    """Exercise 4.1: `run_agent`'s answer (same requests: system prompt, tools, temperature 0)."""
    return run_agent(client, question, registry, model=model, max_iters=max_iters).answer


@_about("任务 4 自带的评判（DEMO_TASKS[3].judge，它还认得“预测冠军”不算诚实）")
def judge_honesty(result: Any) -> bool:
    """Exercise 6.1: the demo task 4's own judge."""
    from .scenarios import DEMO_TASKS

    return DEMO_TASKS[3].judge(result)


# ---------------------------------------------------------------------------
# The package's versions of the exercises (lessons 08–10)
# ---------------------------------------------------------------------------


@_about("包里 edit_file 的规则（Workspace.edit_file，在一个临时文件上）")
def edit_text(text: str, old: str, new: str) -> str:
    """Exercise 8.1: `text` with `old` replaced by `Workspace.edit_file`, or its error text."""
    with tempfile.TemporaryDirectory(prefix="vibe-fallback-") as folder:
        file = Path(folder) / "text.txt"
        file.write_text(text, encoding="utf-8")
        outcome = Workspace(folder, policy="allow-all").edit_file("text.txt", old, new)
        return outcome if outcome.startswith("Error") else file.read_text(encoding="utf-8")


@_about("包里的路径检查（Workspace.resolve）")
def workspace_path(root: Path, path: str) -> Path | str:
    """Exercise 8.2: where `path` really is, if inside `root`; else the package's error text."""
    try:
        return Workspace(root).resolve(path)
    except WorkspaceError as exc:
        return f"Error: {exc}"


def allow_list(prefixes: Sequence[str]) -> Callable[[Action], bool | str]:
    """Exercise 8.3: the package's allow-list policy (`Policy(prefixes)`) as a function."""
    policy = Policy(list(prefixes))

    @_about(f"包里的允许列表策略 Policy({list(prefixes)!r})")
    def allow_list_policy(action: Action) -> bool | str:
        return policy.refusal(action) or True

    return allow_list_policy


@_about("包里的 run_in_sandbox（退出码为 0 才算通过）")
def tests_pass(result: Any, workspace: Path, test_command: str, timeout: float = 60.0) -> bool:
    """Exercise 9.1: whether `test_command` exits with 0 in the sandbox (`result` unused)."""
    del result  # the model's answer is no evidence
    return run_in_sandbox(test_command, Path(workspace), timeout=timeout).exit_code == 0


@_about("包里的版本（用 unidiff 库的 PatchSet 读 diff）")
def diff_paths(diff: str) -> list[str]:
    """Exercise 9.2: the paths a unified diff changes, as `unidiff` reads them."""
    return list(dict.fromkeys(patched.path for patched in PatchSet(diff)))


SAMPLE_TASK = "weather_fahrenheit"


@_about(f"任务集里现成的一道题 {SAMPLE_TASK}")
def sample_task(folder: Path) -> None:
    """Exercise 10.1: copy a task of the course's suite into `folder`."""
    from .tasks import SUITE_DIR

    shutil.copytree(SUITE_DIR / SAMPLE_TASK, folder, dirs_exist_ok=True)


@_about("包里的 bench.summary（通过就是留出的测试判定 resolved；没有记录时通过率写 0）")
def bench_totals(records: list[Any]) -> dict[str, Any]:
    """Exercise 10.2: `bench.summary`'s numbers under the exercise's five keys."""
    from .bench import summary

    totals = summary(records, 0.0)
    tokens, tasks = totals["tokens"], totals["tasks"]
    return {"tasks": tasks, "passed": totals["passed"], "pass_rate": totals["pass_rate"],
            "tokens": tokens,
            "tokens_per_task": tokens / tasks if tokens is not None and tasks else None}
