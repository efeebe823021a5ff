"""Lesson 12's scripted models (programs, not LLMs) and its course project.

All of them walk the known-fix model's path (`known_fix.known_fix_plan`), so
every edit they make is real and replayed through the agent's own tools; what changes
is what they do around it:

    with_todos(plan)          keeps a todo list with todo_write: one wrong list first (two
                              items in progress, to show the rule's error text), then the
                              list updated in the same reply as each step
    claims_early(task)        lesson 09's claimer: answers "已修复" at once, and when the
                              harness sends the failing tests back, does the known fix
    session_model(task)       a new session on a project: without notes in its system
                              prompt it looks around first (list_files, README.md) and
                              remembers README's bullet points; with notes it starts
                              working at once

They prove that the mechanisms work end to end (the list, the finish check, notes
reaching the next session's prompt); they prove nothing about what a real model does
with them. Every place a learner sees them says so.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..memory import NOTES_TAG
from ..sandbox import run_in_sandbox
from . import scripted
from .known_fix import known_fix_plan
from .scripted import Reply, ScriptedModel, answer, call, calls
from .tasks import BugFixTask, copy_repo, load_task

EXTRA_TASKS = Path(__file__).resolve().parent.parent / "data" / "tasks_extra"
PLANNER_NAME = "scripted-known-fix-planner"
CLAIMER_NAME = "scripted-claims-early"
SESSION_NAME = "scripted-known-fix-session"
SCRIPTED_LABEL = "脚本模型（确定性的程序，不是 LLM）：重放任务自带的已知修复"
CLAIM = "已修复，测试全部通过。"


def extra_task(name: str) -> BugFixTask:
    """A course project of lesson 12 (`vibe_agent/data/tasks_extra/NAME`)."""
    return load_task(EXTRA_TASKS / name)


# ---------------------------------------------------------------------------
# A plan: the known fix, with a todo list kept alongside
# ---------------------------------------------------------------------------


def step_names(plan: list[Reply]) -> list[str]:
    """One todo item per working step of a plan: the words the step's reply says."""
    return [(reply.content or "").rstrip("。") or f"step {i}"
            for i, reply in enumerate(plan[:-1], 1)]


def todo_state(names: list[str], current: int, *, two_at_once: bool = False
               ) -> list[dict[str, str]]:
    """The list when step `current` is under way: earlier ones completed, later pending."""
    def status(i: int) -> str:
        if i < current:
            return "completed"
        if i == current or (two_at_once and i == current + 1):
            return "in_progress"
        return "pending"

    return [{"content": name, "status": status(i)} for i, name in enumerate(names)]


def with_todos(plan: list[Reply]) -> list[Reply]:
    """The replies of `plan` with a todo list: first a list that breaks the one-in-progress
    rule (the model reads the error), then each step together with its updated list,
    then the list all completed, then the plan's answer."""
    names = step_names(plan)
    replies = [calls(call("todo_write", {"items": todo_state(names, 0, two_at_once=True)}),
                     content="先列一个计划。")]
    for i, step in enumerate(plan[:-1]):
        replies.append(Reply(content=step.content, tool_calls=[
            call("todo_write", {"items": todo_state(names, i)}), *step.tool_calls]))
    replies.append(calls(call("todo_write", {"items": todo_state(names, len(names))}),
                         content="每一步都做完了，更新计划。"))
    return [*replies, plan[-1]]


def planner_model(task: BugFixTask) -> ScriptedModel:
    """The known-fix model's path on `task`, keeping a todo list (scripted)."""
    return ScriptedModel(with_todos(known_fix_plan(task)), name=PLANNER_NAME)


# ---------------------------------------------------------------------------
# The finish line: a model that says "fixed" before doing anything
# ---------------------------------------------------------------------------


def claims_early(task: BugFixTask) -> ScriptedModel:
    """Answers "已修复" first; asked again, it replays the known fix (scripted)."""
    return ScriptedModel([answer(CLAIM), *known_fix_plan(task)], name=CLAIMER_NAME)


def never_fixes(times: int = 20) -> ScriptedModel:
    """Answers "已修复" every time it is asked, and never calls a tool (scripted)."""
    return ScriptedModel([answer(CLAIM)] * times, name=CLAIMER_NAME, max_requests=times)


TEST_CONFIG = frozenset({"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})


def is_test_file(path: Path) -> bool:
    """Whether a relative path is part of the judging: a test or the test runner's config."""
    return (path.parts[0] in ("tests", "test") or path.name.startswith("test_")
            or path.name.endswith("_test.py") or path.name in TEST_CONFIG)


def pristine_verdict(task: BugFixTask, workspace: str | Path) -> bool:
    """Whether the held-out tests pass on the agent's code, run in the sandbox.

    The workspace is copied; every test file and test configuration in the copy is
    deleted (also those the agent added, e.g. a conftest.py) and the task's pristine ones
    are put back. So editing, adding or deleting tests cannot change this verdict."""
    with tempfile.TemporaryDirectory(prefix="vibe-judge-") as folder:
        judged = Path(folder) / "project"
        shutil.copytree(workspace, judged, symlinks=True)
        for path in sorted(judged.rglob("*"), reverse=True):
            if path.is_file() and is_test_file(path.relative_to(judged)):
                path.unlink()
        for path in task.repo.rglob("*"):
            relative = path.relative_to(task.repo)
            if path.is_file() and is_test_file(relative):
                (judged / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, judged / relative)
        result = run_in_sandbox(task.test_command, judged, timeout=task.timeout_s)
    return result.exit_code == 0


# ---------------------------------------------------------------------------
# Memory: a session that looks around first unless its notes already say how
# ---------------------------------------------------------------------------

_BULLET = re.compile(r"^\s*\d+\| - (.+)$", re.MULTILINE)  # "   3| - 运行测试：…" in read_file


def exploring(body: dict[str, Any]) -> list[Reply]:
    """What a session without notes does first: look, read README.md, keep its rules."""
    steps = [calls(call("list_files", {"path": "."}), content="先看看项目里有什么。"),
             calls(call("read_file", {"path": "README.md"}), content="读一读 README.md。")]
    readme = next((text for name, text in scripted.results_this_turn(body)
                   if name == "read_file"), "")
    bullets = _BULLET.findall(readme)
    # (before README.md is read, this step is not sent yet)
    if "remember" in scripted.offered_tools(body):
        notes = bullets or ["README.md 里没有可记的要点"]
        steps.append(calls(*(call("remember", {"note": note}) for note in notes),
                           content="把以后还用得上的记下来。"))
    return steps


def session_model(task: BugFixTask) -> ScriptedModel:
    """A session on `task`'s project: with earlier notes in the system prompt it starts
    with the known fix; without, it explores first (scripted, not an LLM)."""
    fix = known_fix_plan(task)

    def respond(body: dict[str, Any]) -> Reply:
        plan = fix if f"<{NOTES_TAG}>" in scripted.system_prompt(body) else [*exploring(body), *fix]
        done = scripted.tool_rounds(body)
        return plan[min(done, len(plan) - 1)]

    return ScriptedModel(respond, name=SESSION_NAME)


def fresh_copy(task: BugFixTask) -> Path:
    """A new copy of the task's project in a temporary folder (named `project`)."""
    return copy_repo(task, Path(tempfile.mkdtemp(prefix="vibe-ws-")) / "project")
