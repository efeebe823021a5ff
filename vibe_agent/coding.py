"""The coding agent's tools: read, search, write and edit files, and run commands.

A coding agent works inside one folder, its workspace. Each public method of
`Workspace` is one tool; `coding_registry(root)` registers all six:

    list_files(path)                  what is there                        read_tools.py
    read_file(path, start, end)       numbered lines, so an edit can point at them
    search_code(pattern, path)        file:line: text for every regex match
    write_file(path, content)         create or replace a whole file        edit_tools.py
    edit_file(path, old, new)         replace one exact, unique piece of text
    run_command(command)              a shell command in the sandbox        here
                                      (vibe_agent.sandbox)

`Workspace` is put together from one file per idea: workspace.py walks every path
inside the folder and holds the guards all tools pass (`WorkspaceFolder`);
read_tools.py and edit_tools.py hold the tools that look and the tools that change;
the command tool and the registry are here. Every guard answers with text starting
with "Error:" that tells the model what to do next; nothing raises for the model's
mistakes. A command never outlives the call's time limit.

`snapshot(root)` before a run and `workspace_diff(before, root)` after it show what the
agent changed (changes.py). Give the agent its own folder: it may read everything
inside it (a `.env` file too).

The names of those files are imported here too, so `from vibe_agent.coding import
Workspace, WorkspaceError, snapshot, remove_tree, MAX_DEPTH, ...` keeps working.
"""

from __future__ import annotations

from pathlib import Path

from .changes import MAX_DIFF_CHARS, MAX_SNAPSHOT_BYTES, snapshot, workspace_diff
from .edit_tools import EditTools, _not_unique, _occurrences
from .read_tools import (
    MAX_HIT_CHARS,
    MAX_HITS,
    MAX_LINE_CHARS,
    MAX_LIST_ENTRIES,
    MAX_READ_CHARS,
    SEARCH_SECONDS,
    ReadTools,
)
from .registry import CallAbandoned, ToolRegistry, current_deadline
from .sandbox import (
    DEFAULT_POLICY,
    NOT_ISOLATED_NOTE,
    Action,
    Policy,
    Rule,
    run_in_sandbox,
    why_not_isolated,
)
from .tree import remove_tree
from .workspace import (
    COMMAND_TIMEOUT,
    IGNORED_DIRS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_LINKS,
    NoSuchFolder,
    WorkspaceError,
    hidden_characters,
)

__all__ = [
    "CODING_SYSTEM_PROMPT", "COMMAND_GRACE", "COMMAND_TIMEOUT", "IGNORED_DIRS", "MAX_DEPTH",
    "MAX_DIFF_CHARS", "MAX_FILE_BYTES", "MAX_HITS", "MAX_HIT_CHARS", "MAX_LINE_CHARS",
    "MAX_LINKS", "MAX_LIST_ENTRIES", "MAX_READ_CHARS", "MAX_SNAPSHOT_BYTES", "SEARCH_SECONDS",
    "TOOL_NAMES", "NoSuchFolder", "Workspace", "WorkspaceError", "_not_unique", "_occurrences",
    "coding_registry", "hidden_characters", "remove_tree", "snapshot", "workspace_diff",
]

COMMAND_GRACE = 5.0  # the registry waits this much longer than a command's own limit

TOOL_NAMES = ("list_files", "read_file", "search_code", "write_file", "edit_file", "run_command")

# Lesson 09's rules for a bug-fixing agent (`vibe_agent.memory.coding_system_prompt` adds
# the project's AGENTS.md and the agent's notes after them).
CODING_SYSTEM_PROMPT = (
    "你是一个修 bug 的编程助手，在一个项目文件夹（工作区）里工作。\n"
    "- 只能用工具读写文件、运行命令；路径都相对工作区根目录，例如 sales/report.py。\n"
    "- 先运行测试 `python -m pytest -q`，看清哪些测试失败、错在哪里。\n"
    "- 动手前先找、先读：用 search_code 找相关的函数，用 read_file 读它的上下文，不要凭猜测改。\n"
    "- 用 edit_file 做最小的修改：old 要从文件里逐字复制（连同缩进），只改修 bug 需要的地方。\n"
    "- 不许修改或删除测试来让它们通过。\n"
    "- 改完再运行一次测试：测试通过才算修好。\n"
    "- 最后的回答说明改了哪个文件、为什么；测试没有通过就如实说，不要声称已经修好。"
)

class Workspace(ReadTools, EditTools):
    """The tools of a coding agent, confined to one folder.

    Args:
        root: the workspace folder.
        policy: approves writes and commands ("allow-all", "ask", a list of allowed
            command prefixes, a function, or a `Policy`).
        command_timeout: seconds before `run_command` kills a command.
    """

    def run_command(self, command: str) -> str:
        """Run a shell command in the workspace folder and return its exit code and output.

        Args:
            command: the command line, e.g. "python -m pytest -q" or "ls tests".
        """
        try:
            self._approve(Action("command", command))
        except WorkspaceError as exc:
            return f"Error: {exc}"
        why_not_isolated()  # checked once per process, before the clock starts
        try:
            with self._acting():
                limit = self._time_for_command()
                if limit <= 0:
                    return ("Error: this call's time limit was used up before the command "
                            "could start (waiting for approval?), so it did not run.")
                result = run_in_sandbox(command, self.root, timeout=limit)
        except CallAbandoned:
            return "Error: the time limit of this call had passed, so the command did not run."
        notice = [] if result.isolated else [NOT_ISOLATED_NOTE]
        output = result.output.rstrip("\n") or "(no output)"
        if result.timed_out:
            return "\n".join([
                f"Error: the command did not finish within {limit:.3g} s and was "
                "stopped, with every process it started. Run something faster or smaller.",
                *notice, "output so far:", output])
        return "\n".join([*notice, f"exit code: {result.exit_code}", output])

    def _time_for_command(self) -> float:
        """Seconds the command may run: its own limit, but never beyond the tool call's
        (with a margin to stop it and report), so it never outlives the call."""
        deadline = current_deadline()
        if deadline is None:
            return self.command_timeout
        left = deadline.remaining()
        return min(self.command_timeout, left - min(1.0, left / 4))


def coding_registry(root: str | Path, *, policy: Policy | Rule = DEFAULT_POLICY,
                    command_timeout: float = COMMAND_TIMEOUT) -> ToolRegistry:
    """A registry with the six coding tools, all working in `root`.

    `run_command`'s time limit in the registry is the command's own plus
    COMMAND_GRACE, so the command is stopped (and reported) before the registry
    would give up on it.

    Args:
        root: the workspace folder.
        policy: approves writes and commands; the default allows a few safe commands.
        command_timeout: seconds before `run_command` kills a command.
    """
    workspace = Workspace(root, policy, command_timeout)
    registry = ToolRegistry()
    for name in TOOL_NAMES:
        if name == "run_command":  # the command's own limit, plus time to be stopped
            registry.register(workspace.run_command, timeout=command_timeout + COMMAND_GRACE)
        else:
            registry.register(getattr(workspace, name))
    return registry

