"""The reference model on coding tasks: it replays a task's known fix; it does not reason.

A scripted policy (not an LLM) for the coding lessons and the bench. Given a task that
ships `fix.patch`, it walks the path a careful engineer would take, one round at a time,
reading only what the request holds (the history decides the next step):

    1. run the task's test command          -> reads the output (passing already: stop)
    2. read every file the fix touches
    3. one edit_file call per hunk of the known fix (exact old/new text)
    4. run the tests again
    5. answer: what it changed, and that the tests decide whether it worked

It proves that the harness, the tools and the loop work end to end; it proves nothing
about any model's ability. Every place a learner sees its output says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .scripted import Policy, Reply, ScriptedModel, answer, call, calls, results_this_turn
from .tasks import FileEdit, Task, fix_edits

KNOWN_FIX_MODEL_NAME = "scripted-known-fix"
KNOWN_FIX_LABEL = "参考模型重放任务自带的已知修复（fix.patch），它不推理，也不是 LLM"
CODING_TOOLS = ("read_file", "edit_file", "run_command")


def known_fix_plan(task: Task) -> list[Reply]:
    """The replies the reference model sends for `task`, in order (one per round)."""
    edits = fix_edits(task)
    touched = list(dict.fromkeys(edit.path for edit in edits))
    plan = [calls(call("run_command", {"command": task.test_command}),
                  content="先运行测试，看看哪里失败。")]
    plan.append(calls(*(call("read_file", {"path": path}) for path in touched),
                      content="读一读相关的文件。"))
    plan.extend(calls(_edit_call(edit), content=f"修改 {edit.path}。") for edit in edits)
    plan.append(calls(call("run_command", {"command": task.test_command}),
                      content="再运行一次测试。"))
    plan.append(answer(_summary(touched)))
    return plan


def _edit_call(edit: FileEdit) -> Any:
    if not edit.old_text:  # the fix creates this file
        return call("write_file", {"path": edit.path, "content": edit.new_text})
    return call("edit_file", {"path": edit.path, "old": edit.old_text, "new": edit.new_text})


def _summary(paths: list[str]) -> str:
    files = "、".join(paths)
    return (f"我按任务自带的已知修复改了 {files}，然后重新运行了测试。"
            "（我是脚本参考模型：只会重放 fix.patch，不会推理；改得对不对，由测试说了算。）")


def known_fix_policy(tasks: Iterable[Task]) -> Policy:
    """A policy that recognises each task by its prompt and replays that task's fix.

    The round is the number of tool results already in the request, so the same
    request always gets the same reply (replay and record agree).
    """
    plans = {task.prompt.strip(): task for task in tasks if task.fix_patch is not None}

    def policy(body: dict[str, Any]) -> Reply:
        missing = [name for name in CODING_TOOLS if name not in _offered(body)]
        if missing:
            return answer(f"参考模型需要编程工具 {', '.join(missing)}，这次请求里没有。")
        task = plans.get(_first_user_message(body).strip())
        if task is None:
            return answer("参考模型只会重放课程任务自带的已知修复；这个问题不是其中之一，"
                          "我不知道该怎么改。")
        results = results_this_turn(body)
        if len(results) == 1 and _passed(results[0][1]):  # nothing to fix
            return answer("测试本来就全部通过，没有需要修的地方。（脚本参考模型，不是 LLM）")
        plan = known_fix_plan(task)
        return plan[min(_rounds_done(body), len(plan) - 1)]

    return policy


def known_fix_model(tasks: Task | Iterable[Task]) -> ScriptedModel:
    """A scripted model (labelled `scripted-known-fix`) that replays the tasks' fixes."""
    tasks = [tasks] if isinstance(tasks, Task) else list(tasks)
    return ScriptedModel(known_fix_policy(tasks), name=KNOWN_FIX_MODEL_NAME)


def _offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def _first_user_message(body: dict[str, Any]) -> str:
    return next((str(m.get("content") or "") for m in body.get("messages", [])
                 if m.get("role") == "user"), "")


def _rounds_done(body: dict[str, Any]) -> int:
    """How many assistant turns with tool calls the history already holds."""
    return sum(1 for m in body.get("messages", [])
               if m.get("role") == "assistant" and m.get("tool_calls"))


def _passed(run_command_result: str) -> bool:
    return "exit code: 0\n" in run_command_result + "\n"
