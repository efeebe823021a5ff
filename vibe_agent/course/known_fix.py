"""The known-fix replayer: a scripted model that replays a bug-fix task's known fix; it
does not reason.

A scripted responder (not an LLM) for the coding lessons and the bench. Given a task that
ships `fix.patch`, it walks the path a careful engineer would take, one round at a time,
reading only what the request holds (the history decides the next step):

    1. run the task's test command          -> reads the output (passing already: stop)
    2. search for the function the fix changes (named in the patch's hunk header)
    3. read every file the fix touches (a task's `explore` list first, one file a
       round: the path from the failing test to the bug, for the long tasks)
    4. one edit_file call per hunk of the known fix (exact old/new text)
    5. run the tests again
    6. answer: what its tool results show it changed (an edit refused or failed is
       reported as such), and that the tests decide whether it worked

The task is the last user message that is a task's prompt, wherever it is in the
conversation (a terminal session may say other things first, or send it again after
/undo); the plan starts there. The next step is the one after the plan step the
history's last assistant message made, so a compacted history (lesson 11) goes on
where it was. A turn that asks something after the plan is done gets no claim: it
says that it changed nothing. It proves that the
harness, the tools and the loop work end to end; it proves nothing about any model's
ability. Every place a learner sees its output says so.
"""

from __future__ import annotations

import builtins
import json
import keyword
import re
from collections.abc import Iterable
from typing import Any

from unidiff import PatchSet

from ..compact import is_summary
from . import scripted
from .scripted import Reply, Responder, ScriptedModel, answer, call, calls
from .tasks import BugFixTask, FileEdit, fix_edits, read_patch_text

KNOWN_FIX_MODEL_NAME = "scripted-known-fix"
KNOWN_FIX_LABEL = "已知修复模型重放任务自带的修复（fix.patch），它不推理，也不是 LLM"
CODING_TOOLS = ("search_code", "read_file", "edit_file", "run_command")


def known_fix_plan(task: BugFixTask) -> list[Reply]:
    """The replies the known-fix model sends for `task`, in order (one per round)."""
    edits = fix_edits(task)
    touched = list(dict.fromkeys(edit.path for edit in edits))
    plan = [calls(call("run_command", {"command": task.test_command}),
                  content="先运行测试，看看哪里失败。")]
    name = search_name(task)
    if name is not None:
        plan.append(calls(call("search_code", {"pattern": name}),
                          content=f"搜一搜 {name} 在哪里定义、在哪里用到。"))
    explore = [str(path) for path in task.metadata.get("explore") or []]
    plan.extend(calls(call("read_file", {"path": path}), content=f"读一读 {path}。")
                for path in explore)
    unread = [path for path in touched if path not in explore]
    if unread:
        plan.append(calls(*(call("read_file", {"path": path}) for path in unread),
                          content="读一读相关的文件。"))
    plan.extend(calls(_edit_call(edit), content=f"修改 {edit.path}。") for edit in edits)
    plan.append(calls(call("run_command", {"command": task.test_command}),
                      content="再运行一次测试。"))
    plan.append(answer(_summary(touched)))
    return plan


def search_name(task: BugFixTask) -> str | None:
    """The name the known-fix model searches for before reading.

    The function or class around the fix's first removed line: the last `def` or
    `class` above it inside its hunk, else the one git names in the hunk header
    (`@@ -19,4 +20,4 @@ def parse_cents(text: str) -> int:`), else the longest name on
    that line that is not a keyword or a builtin. Dunder methods are skipped. None
    when the fix only adds lines.
    """
    if task.fix_patch is None:
        return None
    for patched_file in PatchSet(read_patch_text(task.fix_patch)):
        for hunk in patched_file:
            lines = [line.value for line in hunk]
            first_removed = next((i for i, line in enumerate(hunk) if line.is_removed), None)
            if first_removed is None:
                continue
            above = [*_definitions(hunk.section_header or ""),
                     *(name for line in lines[:first_removed] for name in _definitions(line))]
            if above:
                return above[-1]
            names = [name for name in re.findall(r"[A-Za-z_]\w*", lines[first_removed])
                     if not keyword.iskeyword(name) and not hasattr(builtins, name)]
            return max(names, key=len) if names else None
    return None


def _definitions(line: str) -> list[str]:
    """The function or class a line defines (not a dunder method), as a list of 0 or 1."""
    found = re.match(r"\s*(?:async\s+)?(?:def|class)\s+(\w+)", line)
    return [found.group(1)] if found and not found.group(1).startswith("__") else []


def _edit_call(edit: FileEdit) -> Any:
    if not edit.old_text:  # the fix creates this file
        return call("write_file", {"path": edit.path, "content": edit.new_text})
    return call("edit_file", {"path": edit.path, "old": edit.old_text, "new": edit.new_text})


def _summary(paths: list[str]) -> str:
    files = "、".join(paths)
    return (f"我按任务自带的已知修复改了 {files}，然后重新运行了测试。"
            "（我是脚本已知修复模型：只会重放 fix.patch，不会推理；改得对不对，由测试说了算。）")


NOT_A_TASK = ("已知修复模型只会重放课程任务自带的已知修复；这个问题不是其中之一，"
              "我不知道该怎么改。")
NOTHING_THIS_TURN = ("这一轮我没有调用任何工具，也没有改动任何文件。（我是脚本已知修复模型："
                     "只会重放课程任务自带的 fix.patch，不会推理；改得对不对，由测试说了算。）")


def known_fix_responder(tasks: Iterable[BugFixTask]) -> Responder:
    """A responder that recognises each task by its prompt and replays that task's fix.

    The step is decided by the request alone (the history since the task's prompt),
    so the same request always gets the same reply (replay and record agree).
    """
    plans = {task.prompt.strip(): task for task in tasks if task.fix_patch is not None}

    def respond(body: dict[str, Any]) -> Reply:
        missing = [name for name in CODING_TOOLS if name not in scripted.offered_tools(body)]
        if missing:
            return answer(f"已知修复模型需要编程工具 {', '.join(missing)}，这次请求里没有。")
        messages = body.get("messages") or []
        asked = [(i, plans.get(str(m.get("content") or "").strip()))  # (a summary of
                 for i, m in enumerate(messages)  # lesson 11's compaction is no request)
                 if m.get("role") == "user" and not is_summary(m)]
        start, task = next(((i, task) for i, task in reversed(asked) if task), (0, None))
        if task is None:
            return answer(NOT_A_TASK)
        since = {**body, "messages": messages[start:]}  # the task's turn and what follows
        results = scripted.results_this_turn(since)
        plan = known_fix_plan(task)
        done = _steps_done(since, plan)
        passing = done == 1 and bool(results) and _passed(results[-1][1])  # nothing to fix
        if (passing or done >= len(plan) - 1) and asked[-1][0] > start and not _called_since(
                messages, asked[-1][0]):
            return answer(NOTHING_THIS_TURN)  # asked something after the plan was done
        if passing:
            return answer("测试本来就全部通过，没有需要修的地方。（脚本已知修复模型，不是 LLM）")
        if done < len(plan) - 1:
            return plan[done]
        return answer(final_words(task, since["messages"]))

    return respond


def final_words(task: BugFixTask, messages: list[dict[str, Any]]) -> str:
    """The answer at the end of the plan: only what the tool results in `messages` show.

    When every edit was applied and the tests ran again, it is the plan's own last
    answer; otherwise each refused or failed edit and the test run are said as they went.
    """
    touched = list(dict.fromkeys(edit.path for edit in fix_edits(task)))
    outcomes = _outcomes(messages)
    edits = [(args.get("path", "?"), result) for name, args, result in outcomes
             if name in ("edit_file", "write_file")]
    last_edit = max((i for i, (name, _, _) in enumerate(outcomes)
                     if name in ("edit_file", "write_file")), default=-1)
    reruns = [result for name, args, result in outcomes[last_edit + 1:]
              if name == "run_command" and args.get("command") == task.test_command]
    applied = [path for path, result in edits if result.startswith(("Edited ", "Wrote "))]
    if len(applied) == len(edits) and edits and reruns and _ran(reruns[-1]):
        return _summary(touched)
    said = []
    if applied:
        said.append(f"我按任务自带的已知修复改了 {'、'.join(dict.fromkeys(applied))}。")
    refused = list(dict.fromkeys(path for path, result in edits if "not approved" in result))
    if refused:
        said.append(f"对 {'、'.join(refused)} 的修改没有得到批准，没有改动。")
    for path, result in edits:
        if path not in applied and path not in refused:
            reason = result.removeprefix("Error: ").strip().splitlines()[0][:120]
            said.append(f"修改 {path} 失败了（{reason}）。")
    if not edits:
        said.append("我没有修改任何文件。")
    if not reruns:
        said.append("改完之后没有重新运行测试。")
    elif _ran(reruns[-1]):
        code = re.search(r"^exit code: (-?\d+)", reruns[-1], re.MULTILINE)
        said.append(f"重新运行了测试（退出码 {code.group(1) if code else '?'}）。")
    else:
        said.append("重新运行测试的命令没有得到批准，测试没有运行。" if "not approved" in
                    reruns[-1] else "重新运行测试没有成功（命令没有运行）。")
    return "".join(said) + ("（我是脚本已知修复模型：只会重放 fix.patch，不会推理；"
                            "改得对不对，由测试说了算。）")


def _outcomes(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """(tool name, arguments, result text) of every call answered in `messages`, in order."""
    asked: dict[str, tuple[str, dict[str, Any]]] = {}
    outcomes = []
    for message in messages:
        for tool_call in message.get("tool_calls") or []:
            try:
                arguments = json.loads(tool_call["function"]["arguments"] or "{}")
            except json.JSONDecodeError:
                arguments = {}
            asked[tool_call["id"]] = (tool_call["function"]["name"],
                                      arguments if isinstance(arguments, dict) else {})
        if message.get("role") == "tool" and message.get("tool_call_id") in asked:
            name, arguments = asked[message["tool_call_id"]]
            outcomes.append((name, arguments, str(message.get("content") or "")))
    return outcomes


def _called_since(messages: list[dict[str, Any]], index: int) -> bool:
    """Whether an assistant message after `index` called tools."""
    return any(m.get("role") == "assistant" and m.get("tool_calls") for m in messages[index:])


def _ran(run_command_result: str) -> bool:
    """Whether a run_command result says the command ran (its exit code is there)."""
    return re.search(r"^exit code: -?\d+", run_command_result, re.MULTILINE) is not None


def known_fix_model(tasks: BugFixTask | Iterable[BugFixTask], *,
                    context_window: int | None = None) -> ScriptedModel:
    """A scripted model (labelled `scripted-known-fix`) that replays the tasks' fixes.

    Args:
        tasks: the tasks it knows.
        context_window: a window in tokens it enforces as OpenAI does (None: none).
    """
    tasks = [tasks] if isinstance(tasks, BugFixTask) else list(tasks)
    return ScriptedModel(known_fix_responder(tasks), name=KNOWN_FIX_MODEL_NAME,
                         context_window=context_window)


def _steps_done(body: dict[str, Any], plan: list[Reply]) -> int:
    """How many plan steps are done: one past the step the last assistant message with
    tool calls made (a compacted history has fewer messages than steps); the count of
    such messages when none matches (or when that count already agrees)."""
    made = [m for m in body.get("messages") or [] if m.get("role") == "assistant"
            and m.get("tool_calls")]
    if not made:
        return 0
    count = len(made)
    last = (made[-1].get("content"), [(tc["function"]["name"], tc["function"]["arguments"])
                                      for tc in made[-1]["tool_calls"]])
    steps = [(step.content, [(spec.name, spec.arguments) for spec in step.tool_calls])
             for step in plan]
    if count <= len(steps) and steps[count - 1] == last:
        return count
    return next((i + 1 for i in range(len(steps) - 1, -1, -1) if steps[i] == last), count)


def _passed(run_command_result: str) -> bool:
    return "exit code: 0\n" in run_command_result + "\n"
