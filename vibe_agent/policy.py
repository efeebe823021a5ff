"""May this happen at all? The approval policy in front of every command, write and MCP call.

The first of the three guards between a model's commands and the machine (sandbox.py
has the other two: where a command runs, and with which limits). A policy allows
everything, asks a person, keeps to a list of command prefixes, or asks a function:

    Policy("allow-all")                  everything
    Policy("ask")                        a person answers y/n for each action
    Policy(["python", "git status"])     commands that start with these words; writes
    Policy(lambda action: ...)           True, False, or a reason for refusing

An allow-list only decides which programs may start; it does not make `python` safe
(`python evil.py` passes a `python` prefix). The sandbox is what limits the damage.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Action:
    """Something the agent wants to do: run a command, write a file, call an MCP tool."""

    kind: Literal["command", "write", "tool"]
    detail: str  # the command line, the file's path inside the workspace, or the call
    content: str | None = None  # a write: the file's whole new text (to show its diff)


# A rule: "allow-all", "ask" (a person answers y/n), a list of allowed command prefixes,
# or a function that returns True (allowed), False, or a refusal reason.
Rule = Literal["allow-all", "ask"] | Sequence[str] | Callable[[Action], bool | str]

SHELL_METACHARACTERS = (";", "&", "|", "`", "$", "<", ">", "\n", "\r")
DEFAULT_COMMANDS = ("python", "python3", "pytest", "ls", "cat", "head", "tail", "grep", "wc",
                    "echo", "true", "diff", "pwd")
YES = ("y", "yes", "是", "好", "允许")
# Approvals are decided one at a time: when several calls run at once (run_agent's
# tool_workers > 1), a person never has two questions open, and answers the one shown.
ONE_QUESTION = threading.RLock()


@dataclass
class Policy:
    """Decides whether an action may happen.

    With a list of command prefixes, commands must start with one of them (whole
    words: "git status" allows `git status -s`, not `git push`), and writes inside the
    workspace are allowed. "ask" asks a person for both.

    Args:
        rule: "allow-all", "ask", a list of allowed command prefixes, or a function
            `(Action) -> bool | str` (a string is the reason for refusing).
        ask: how "ask" reaches the person; None means the built-in `input()`, which
            works in a terminal and in Jupyter.
    """

    rule: Rule
    ask: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.rule, str) and self.rule not in ("allow-all", "ask"):
            raise ValueError(f'rule must be "allow-all", "ask", a list of command prefixes '
                             f'or a function, not {self.rule!r} (for one prefix: [{self.rule!r}])')

    def refusal(self, action: Action) -> str | None:
        """None when the action may happen, otherwise the reason it may not.

        Args:
            action: what the agent wants to do.
        """
        if callable(self.rule):
            with ONE_QUESTION:  # a rule function may ask a person (the terminal's does)
                return _verdict(self.rule(action))
        if self.rule == "allow-all":
            return None
        if self.rule == "ask":
            return self.ask_person(action)
        if action.kind == "write":
            return None
        return allow_list_refusal(action.detail, self.rule)

    def ask_person(self, action: Action, warning: str = "") -> str | None:
        """Ask a person y/n about `action` (None: yes), with `warning` after what it is."""
        what = {"command": "运行命令", "write": "写入文件", "tool": "调用 MCP 工具"}[action.kind]
        ask = self.ask or input  # looked up now, so a patched input() is used
        try:
            with ONE_QUESTION:
                answer = ask(f"智能体想{what}{warning}：{action.detail}\n允许吗？[y/N] ")
        except (EOFError, OSError, NotImplementedError):  # no stdin, or a frontend without one
            return ("a person has to confirm this, but nobody can answer (no standard "
                    "input). Do not try it again; tell the user what you want to do and why.")
        if answer.strip().lower() in YES:
            return None
        return "the user said no. Try another way, or ask the user how they want it done."


def _verdict(decision: bool | str) -> str | None:
    """A policy function's answer as a refusal reason (None = allowed)."""
    if decision is True:
        return None
    if decision is False:
        return ("the policy does not allow this. Try another way, or tell the user which "
                "permission you need.")
    if isinstance(decision, str):
        return decision or "the policy does not allow this."
    raise TypeError(f"a policy function must return True, False or a reason (str), "
                    f"not {decision!r}")


def allow_list_refusal(command: str, prefixes: Sequence[str]) -> str | None:
    """None when `command` starts with one of `prefixes`, otherwise why it is refused.

    Shell syntax is refused outright: `python; rm -rf .` starts with "python" too.

    Args:
        command: the command line the model wants to run.
        prefixes: allowed command prefixes, e.g. ["python", "git status"].
    """
    found = [char for char in SHELL_METACHARACTERS if char in command]
    if found:
        shown = " ".join(repr(char) for char in found)
        return (f"the command contains the shell symbol {shown}. With an allow list only one "
                "simple command runs at a time: no ; & | ` $ < > or newlines. To combine steps, "
                "write a Python script with write_file and run it with python.")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"cannot parse this command ({exc}). Check that quotes are paired and try again."
    for prefix in prefixes:
        prefix_words = shlex.split(prefix)
        if prefix_words and words[: len(prefix_words)] == prefix_words:
            return None
    first = words[0] if words else "(an empty command)"
    return (f"{first} is not on the allow list (allowed commands: {', '.join(prefixes)}). "
            "Use only these, or tell the user what you need to run.")


DEFAULT_POLICY = Policy(DEFAULT_COMMANDS)
