"""A plan the model keeps, and a finish line the harness keeps.

Two mechanisms that help an agent stay on a task longer than a few rounds (lesson 12):

- `TodoList`: the model writes its own plan with the tool `todo_write(items)`. Every
  call sends the WHOLE list, each item `{"content": ..., "status": ...}`; the rules
  (one item in progress at most, known statuses, no empty item) are checked here, and a
  call that breaks one gets error text and changes nothing. `todos.prepare` adds one
  short reminder to what is sent when the list has not been touched for a few rounds.

      model:  todo_write([{"content": "run the tests", "status": "completed"},
                          {"content": "fix parsing.py", "status": "in_progress"}, ...])
      tool:   Todo list updated (1/3 completed):
              [x] run the tests
              [>] fix parsing.py
              [ ] run the tests again

- `tests_gate(root, command)`: a finish check, plugged into the loop as a layer:
  `run_agent(..., layers=[FinishCheck(lambda answer: tests_gate(root))])`.
  When the model answers without tool calls, the check runs the tests in the sandbox;
  while they fail, their output goes back to the model as the next user message and
  the run goes on (up to `max_refusals` times). The model's exit is still an empty
  `tool_calls`; the harness only decides whether to ask again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .layers import Layer
from .registry import ToolRegistry
from .sandbox import run_in_sandbox
from .trace import shorten

STATUSES = ("pending", "in_progress", "completed")
MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}
MAX_ITEMS = 30  # a plan longer than this is not a plan
MAX_CONTENT_CHARS = 200  # of one item
REMINDER = ("<reminder>You have not updated your todo list for {rounds} rounds. "
            "Call todo_write with the whole list: mark finished items completed and "
            "the one you are working on in_progress.</reminder>")

Item = dict[str, str]


def todo_problems(items: Any) -> list[str]:
    """What is wrong with a whole todo list the model sent (empty when it is valid).

    Args:
        items: the decoded `items` argument: a list of {"content", "status"} objects.
    """
    if not isinstance(items, list):
        return [f"'items' must be a list of todo items, got {type(items).__name__}"]
    if len(items) > MAX_ITEMS:
        return [f"the list has {len(items)} items; keep it to {MAX_ITEMS} or fewer"]
    problems: list[str] = []
    for i, item in enumerate(items):
        where = f"item {i + 1}"
        if not isinstance(item, dict):
            problems.append(f"{where} must be an object like "
                            '{"content": "...", "status": "pending"}')
            continue
        extra = sorted(set(item) - {"content", "status"})
        if extra:
            problems.append(f"{where} has unknown fields {extra}; use only content and status")
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            problems.append(f"{where} has an empty content; say what the step is")
        elif len(content) > MAX_CONTENT_CHARS:
            problems.append(f"{where} is longer than {MAX_CONTENT_CHARS} characters; "
                            "make it one short step")
        status = item.get("status")
        if status not in STATUSES:
            problems.append(f"{where} has the unknown status {shorten(repr(status), 40)}; "
                            f"use one of {', '.join(STATUSES)}")
    in_progress = [i + 1 for i, item in enumerate(items)
                   if isinstance(item, dict) and item.get("status") == "in_progress"]
    if len(in_progress) > 1:
        problems.append(f"items {', '.join(map(str, in_progress))} are all in_progress; "
                        "only one item may be in_progress at a time")
    return problems


def render_todos(items: list[Item]) -> str:
    """The list as the model and the person read it, one item per line."""
    if not items:
        return "(the todo list is empty)"
    return "\n".join(f"{MARKS[item['status']]} {item['content']}" for item in items)


class TodoList:
    """The model's plan: a list it rewrites whole with the tool `todo_write`.

    Args:
        remind_after: rounds without a `todo_write` call after which `prepare` adds a
            reminder to what is sent (0: never remind; lesson 12 switches it on).
    """

    def __init__(self, remind_after: int = 0) -> None:
        if remind_after < 0:
            raise ValueError("remind_after must be 0 (off) or a number of rounds")
        self.remind_after = remind_after
        self._items: list[Item] = []
        self.history: list[list[Item]] = []  # every accepted list, oldest first

    @property
    def items(self) -> list[Item]:
        """The current list (a copy: change it with `todo_write`)."""
        return copy.deepcopy(self._items)

    def register(self, registry: ToolRegistry) -> ToolRegistry:
        """Add the tool `todo_write` to `registry` and return the registry."""
        registry.register(self.todo_write)
        return registry

    def todo_write(self, items: list) -> str:
        """Write your plan for a multi-step task as a todo list; send the WHOLE list
        each time. Mark the step you start in_progress (only one at a time) and the
        steps you finish completed.

        Args:
            items: every item of the list, in order, each an object
                {"content": "what to do", "status": "pending" | "in_progress" | "completed"}.
        """
        problems = todo_problems(items)
        if problems:
            return (f"Error: the todo list was not changed: {'; '.join(problems)}. "
                    "Send the whole list again with these fixed.")
        # one line per item: a newline in a content cannot fake another item in the output
        self._items = [{"content": " ".join(item["content"].split()), "status": item["status"]}
                       for item in items]
        self.history.append(self.items)
        done = sum(item["status"] == "completed" for item in self._items)
        return (f"Todo list updated ({done}/{len(self._items)} completed):\n"
                f"{render_todos(self._items)}")

    def prepare(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What to send this round: `messages`, plus one reminder when the list is stale.

        For `run_agent(..., prepare=todos.prepare)`. Stale means `remind_after` or more
        assistant turns since the last `todo_write` call (or since the start, when there
        was none). The reminder is only sent, never kept in the history.

        Args:
            messages: the full history (not modified).
        """
        rounds = rounds_since_todo_write(messages)
        if not self.remind_after or rounds < self.remind_after:
            return messages
        return [*messages, {"role": "user", "content": REMINDER.format(rounds=rounds)}]


def rounds_since_todo_write(messages: list[dict[str, Any]]) -> int:
    """Assistant turns since the last one that called `todo_write` (all of them if none)."""
    rounds = 0
    for message in reversed(messages):
        if message.get("role") != "assistant":
            continue
        names = [(call.get("function") or {}).get("name")
                 for call in message.get("tool_calls") or []]
        if "todo_write" in names:
            break
        rounds += 1
    return rounds


# ---------------------------------------------------------------------------
# The finish line
# ---------------------------------------------------------------------------

GATE_OUTPUT_CHARS = 4_000  # of the failing tests' output sent back (its end)


def tests_gate(root: str | Path, command: str = "python -m pytest -q", *,
               timeout: float = 60.0) -> str | None:
    """Run the tests in the sandbox: None when they pass, else a message for the model.

    It never reads what the model said: only the exit code of `command` in `root`.
    Use it as `FinishCheck(lambda answer: tests_gate(workspace))`.

    Args:
        root: the workspace folder.
        command: the test command.
        timeout: seconds before the tests are stopped (a time-out is a failure).
    """
    result = run_in_sandbox(command, Path(root), timeout=timeout)
    if result.exit_code == 0 and not result.timed_out:
        return None
    output = result.output.rstrip() or "(no output)"
    if len(output) > GATE_OUTPUT_CHARS:
        output = f"[… the first {len(output) - GATE_OUTPUT_CHARS} characters cut]\n" + \
            output[-GATE_OUTPUT_CHARS:]
    why = (f"did not finish within {timeout:g} s" if result.timed_out
           else f"failed (exit code {result.exit_code})")
    return (f"The task is not finished: `{command}` {why}. Keep working until the tests "
            f"pass; do not change the tests.\n\n{output}")


tests_gate.__test__ = False  # type: ignore[attr-defined]  # pytest must not collect it


class FinishCheck(Layer):
    """The loop's finish line (event `on_stop`): `check(answer)` returns None to accept
    the answer, or a message that goes back to the model as the next user turn (e.g.
    `FinishCheck(lambda answer: tests_gate(workspace))`); `max_refusals` bounds it."""

    def __init__(self, check: Callable[[str], str | None]) -> None:
        if not callable(check):
            raise TypeError(f"FinishCheck takes a function answer -> None | message, "
                            f"not {check!r}")
        self.check = check

    def on_stop(self, answer: str) -> str | None:
        return self.check(answer)
