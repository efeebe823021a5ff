"""Permission rules: which calls of the terminal agent run unasked, are asked, or refused.

A project keeps its rules in `.vibe_agent/settings.json` (JSON, read once at start-up):

    {"permissions": {
        "allow": ["run_command(python -m pytest *)", "edit_file(src/**)", "mcp__git__status"],
        "ask":   ["write_file(**/*.toml)"],
        "deny":  ["run_command(git push *)", "mcp__git__*"]
    }}

Each list is optional. A rule is a tool name, alone or with a pattern in parentheses:

    run_command            every command
    run_command(PATTERN)   a command line that matches PATTERN (see below)
    write_file(GLOB)       write_file to a path that matches GLOB
    edit_file(GLOB)        edit_file on a path that matches GLOB
    mcp__SERVER__TOOL      one tool of an MCP server (the name the model sees, lesson 14);
                           `*` in the name: `mcp__git__*` is every tool of the server git

The order: **deny beats ask beats allow.** A call that a deny rule matches is refused
(the model reads why, in English; the person sees a line in Chinese); else one that an
ask rule matches is asked; else one that an allow rule matches runs unasked. A call that
no rule matches is decided by the approval mode (`mode_default`: ask, auto-edit, yolo),
which is the default below the rules.

Command patterns. `*` stands for any characters (it is the only wildcard); runs of
blanks count as one space. A trailing ` *` also matches nothing more: `git diff *` is
`git diff` and `git diff HEAD`, not `git difftool`; `python -m pytest*` (no space) is
also `python -m pytest_evil`. A pattern without `*` matches that exact command line.
Shell syntax cannot ride on a pattern: an allow (or ask) rule with `*` matches only a
command without any of ; & | ` $ ( ) < > or a newline, so `python -m pytest; rm -rf ~`
never matches `python -m pytest *` and is asked. A deny or ask rule matches the whole
line and also each piece of it cut at those characters, so `ls && git push` is refused
by `git push *`. A deny rule is a guard against the obvious, not a wall: `sh -c 'git
push'` has no piece `git push`; the sandbox is what limits the damage.

Path globs are matched against the path inside the workspace, as the tools show it
(relative, `/` between folders, `..` and `.` folded away); a path that leads outside is
never matched (the workspace refuses it anyway). `*` and `?` stay inside one name
(fnmatch); `**` is any number of folders: `src/**` is everything under src/, `*.py` the
Python files at the top, `**/*.py` every Python file. A glob may not start with `/` or
`~`, nor contain `..`.

Rules decide only whether to ask. None of them reaches the sandbox or the workspace
guards: an allowed command still runs in the sandbox, and a path outside the workspace
stays refused whatever a rule says. Writes into `.vibe_agent/` (where the rules are) are
always asked unless denied, in every mode: a model must not write its own permissions.

The approval question offers "always allow" (answer `A`): `narrowest_rule` is the rule
that matches just that call, `add_rule` writes it to the file (atomically, other keys
kept; a broken file is reported and never overwritten). A malformed file, a wrong type
or an unknown key is a `SettingsError` naming the file and the field, in Chinese: the
session does not start with half-read rules.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Decision = Literal["allow", "ask", "deny"]
ORDER: tuple[Decision, ...] = ("deny", "ask", "allow")  # the first list that matches decides
SETTINGS = Path(".vibe_agent") / "settings.json"  # inside the project
PROTECTED = ".vibe_agent"  # writes in here are asked in every mode
COMMAND_TOOLS = ("run_command",)
PATH_TOOLS = ("write_file", "edit_file")
SHELL_SYNTAX = re.compile(r"[;&|`$()<>\n\r]")  # what may join, nest or redirect commands
TOOL_NAME = re.compile(r"mcp__[A-Za-z0-9_*-]+")  # an MCP tool's name, `*` allowed
RULE = re.compile(r"(?P<tool>[A-Za-z0-9_*-]+)(?:\((?P<pattern>.*)\))?", re.DOTALL)
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_SETTINGS_BYTES = 1_000_000  # a settings file is small; a huge one is refused, not read
ALWAYS = "A"  # the answer to an approval question that also writes the rule for next time
DENIED = ("a permission rule of this project denies this ({rule}). Do not try it again; "
          "do it another way, or tell the user which permission you need and why.")


class SettingsError(ValueError):
    """The settings file cannot be used; the message (Chinese) names the file and field."""


@dataclass(frozen=True)
class Call:
    """A call as the rules see it: the tool's name (as the model sees it) and its target,
    the command line or the path inside the workspace (None for an MCP tool)."""

    tool: str
    target: str | None = None


@dataclass
class Rules:
    """The three lists of a project's rules, and the file they came from (None: none)."""

    allow: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    path: Path | None = None

    def decide(self, call: Call, default: Decision) -> tuple[Decision, str | None]:
        """What happens to `call` and the rule that decided it (None: the mode did)."""
        for decision in ORDER:
            for rule in getattr(self, decision):
                if matches(rule, call, decision):
                    return protect(call, decision), rule
        return protect(call, default), None

    def summary(self) -> str:
        """One line for the banner, in Chinese."""
        return (f"权限规则：{SETTINGS}（allow {len(self.allow)} 条，ask {len(self.ask)} 条，"
                f"deny {len(self.deny)} 条；deny 先于 ask 先于 allow）")


def decide(rules: Rules, call: Call, default: Decision) -> Decision:
    """deny beats ask beats allow; `default` (the approval mode's) when no rule matches."""
    return rules.decide(call, default)[0]


def protect(call: Call, decision: Decision) -> Decision:
    """Writes into .vibe_agent/ are at least asked: no rule or mode lets them run unasked."""
    target = normal_path(call.target) if call.tool in PATH_TOOLS and call.target else None
    if decision == "allow" and target is not None and target.split("/")[0] == PROTECTED:
        return "ask"
    return decision


def mode_default(mode: str, kind: str, read_only: bool = False) -> Decision:
    """The approval mode's decision for a call no rule matches.

    Args:
        mode: "ask", "auto-edit" or "yolo".
        kind: the action's kind: "command", "write" or "tool" (an MCP tool).
        read_only: an MCP tool the server marks read-only (a hint: lesson 14).
    """
    if mode == "yolo" or (mode == "auto-edit" and kind == "write"):
        return "allow"
    if kind == "tool" and read_only:
        return "allow"
    return "ask"


# ---------------------------------------------------------------------------
# Matching
# ---------------------------------------------------------------------------


def matches(rule: str, call: Call, decision: Decision = "allow") -> bool:
    """Whether `rule` covers `call`; a deny or ask rule also matches a piece of a command."""
    found = RULE.fullmatch(rule.strip())
    if found is None:
        return False
    tool, pattern = found["tool"], found["pattern"]
    if not fnmatch.fnmatchcase(call.tool, tool):  # only `*` can be in a rule's tool name
        return False
    if pattern is None:
        return True
    if call.target is None:
        return False
    if call.tool in COMMAND_TOOLS:
        return command_matches(pattern, call.target, restricts=decision != "allow")
    return path_matches(pattern, call.target)


def _blanks(text: str) -> str:
    """Runs of spaces and tabs as one space (a newline stays: it ends a command)."""
    return re.sub(r"[ \t]+", " ", text).strip(" \t")


def command_matches(pattern: str, command: str, restricts: bool = False) -> bool:
    """Whether the command line `command` matches `pattern` (see the module docstring).

    Args:
        restricts: a deny or ask rule: the whole line or any piece of it between shell
            symbols may match. Otherwise (allow) a pattern with `*` never matches a line
            with shell syntax in it.
    """
    pattern, command = _blanks(pattern), _blanks(command)
    if restricts:
        pieces = [command, *(_blanks(piece) for piece in SHELL_SYNTAX.split(command))]
        return any(piece and _glob(pattern, piece) for piece in pieces)
    if "*" in pattern and SHELL_SYNTAX.search(command):
        return False
    return _glob(pattern, command)


def _glob(pattern: str, command: str) -> bool:
    """`*` is any characters; a trailing ` *` also matches nothing more. Linear: each
    piece between stars is found with str.find, leftmost first (no backtracking)."""
    if pattern.endswith(" *") and command == pattern[:-2]:  # `git diff *` is `git diff` too
        return True
    first, *middle, last = pattern.split("*") if "*" in pattern else (pattern, None)
    if last is None:
        return command == pattern
    if not command.startswith(first) or len(command) < len(first) + len(last):
        return False
    at, end = len(first), len(command) - len(last)
    for piece in middle:
        at = command.find(piece, at, end)
        if at == -1:
            return False
        at += len(piece)
    return command.endswith(last)


def normal_path(path: str) -> str | None:
    """`path` as the workspace shows it (relative, `/`, no `.` or `..`); None when it
    would lead outside the workspace or is not a relative path at all."""
    if not path or path.startswith(("/", "~")) or "\\" in path or CONTROL.search(path):
        return None
    folded = posixpath.normpath(path)
    if folded == ".." or folded.startswith("../"):
        return None
    return folded


def path_matches(glob: str, path: str) -> bool:
    """Whether the workspace path `path` matches `glob` (`*`, `?` in a name; `**` folders)."""
    target = normal_path(path)
    if target is None or target == ".":
        return False
    glob = glob.strip() + ("**" if glob.strip().endswith("/") else "")  # src/ = src/**
    names, parts = target.split("/"), posixpath.normpath(glob).split("/")
    # reach[i]: the first i names are matched by the parts seen so far
    reach = [True] + [False] * len(names)
    for part in parts:
        if part == "**":
            for i in range(1, len(reach)):
                reach[i] = reach[i] or reach[i - 1]
        else:
            reach = [False] + [reach[i - 1] and fnmatch.fnmatchcase(names[i - 1], part)
                               for i in range(1, len(reach))]
    return reach[-1]


# ---------------------------------------------------------------------------
# The settings file
# ---------------------------------------------------------------------------


def check_rule(rule: Any, where: str) -> str:
    """`rule` if it is a well-formed rule, else SettingsError naming `where`."""
    if not isinstance(rule, str):
        raise SettingsError(f"{where} 应该是一条规则（字符串），"
                            f"不是 {type(rule).__name__}：{rule!r}")
    found = RULE.fullmatch(rule.strip())
    if not rule.strip() or CONTROL.search(rule) or found is None:
        raise SettingsError(f"{where} 写得不对：{rule!r}。规则写成 工具名 或 工具名(模式)，"
                            "例如 run_command(python -m pytest *)、edit_file(src/**)、mcp__git__*")
    tool, pattern = found["tool"], found["pattern"]
    builtin = tool in COMMAND_TOOLS + PATH_TOOLS
    if not builtin and not TOOL_NAME.fullmatch(tool):
        raise SettingsError(f"{where} 的工具名 {tool!r} 不认识：规则只管要审批的工具，"
                            "也就是 run_command、write_file、edit_file "
                            "和 MCP 工具 mcp__服务器__工具")
    if pattern is not None and not builtin:
        raise SettingsError(f"{where}：MCP 工具的规则不带括号，写工具名就行（{tool}）")
    if pattern is not None and not pattern.strip():
        raise SettingsError(f"{where}：括号里是空的；要管这个工具的每一次调用，只写 {tool}")
    if pattern is not None and tool in PATH_TOOLS:
        glob = pattern.strip()
        if glob.startswith(("/", "~")) or ".." in glob.split("/") or "\\" in glob:
            raise SettingsError(f"{where}：路径 {glob!r} 要写成相对工作区的样子（不以 / 或 ~ 开头，"
                                "不含 ..，用 / 分隔），例如 src/** 或 **/*.py")
    return rule


def parse_settings(text: str, path: Path) -> Rules:
    """The rules in the settings file's `text`; SettingsError when anything is off."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path} 不是合法的 JSON（第 {exc.lineno} 行第 {exc.colno} 列："
                            f"{exc.msg}）") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path} 的最外层应该是一个对象 {{...}}，不是 {type(data).__name__}")
    unknown = sorted(set(data) - {"permissions"})
    if unknown:
        raise SettingsError(f"{path} 里有不认识的键 {', '.join(map(repr, unknown))}"
                            "（只认 \"permissions\"）")
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict):
        raise SettingsError(f"{path} 的 permissions 应该是一个对象，"
                            f"例如 {{\"allow\": [...]}}，不是 {type(permissions).__name__}")
    unknown = sorted(set(permissions) - set(ORDER))
    if unknown:
        raise SettingsError(f"{path} 的 permissions 里有不认识的键 {', '.join(map(repr, unknown))}"
                            "（只认 allow、ask、deny）")
    lists: dict[str, list[str]] = {}
    for key in ORDER:
        rules = permissions.get(key, [])
        if not isinstance(rules, list):
            raise SettingsError(f"{path} 的 permissions.{key} 应该是一个列表 [...]，"
                                f"不是 {type(rules).__name__}")
        lists[key] = [check_rule(rule, f"{path} 的 permissions.{key}[{at}]")
                      for at, rule in enumerate(rules)]
    return Rules(lists["allow"], lists["ask"], lists["deny"], path)


def load_rules(project: Path) -> Rules:
    """The project's rules (none when it has no settings file); SettingsError otherwise."""
    path = Path(project) / SETTINGS
    try:
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            raise SettingsError(f"{path} 太大了（超过 {MAX_SETTINGS_BYTES:,} 字节）："
                                "规则文件用不着这么长")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Rules(path=path)
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"读不了 {path}：{exc}") from None
    return parse_settings(text, path)


def narrowest_rule(call: Call) -> str | None:
    """The rule that matches just this call; None when the rule language cannot say it
    (a command or path with `*` in it, or a line the rules would read otherwise)."""
    if call.tool.startswith("mcp__") and "*" not in call.tool:
        return call.tool  # an MCP rule has no arguments: the tool, every call
    if call.target is None or "*" in call.target or CONTROL.search(call.target):
        return None
    if protect(call, "allow") != "allow":  # .vibe_agent/ is asked whatever the rules say
        return None
    if call.tool in COMMAND_TOOLS:
        command = _blanks(call.target)
        rule = f"run_command({command})"
    elif call.tool in PATH_TOOLS and "?" not in call.target and "[" not in call.target:
        rule = f"{call.tool}({normal_path(call.target)})"
    else:
        return None
    try:
        check_rule(rule, "")
    except SettingsError:
        return None
    return rule if matches(rule, call) else None


def add_rule(rules: Rules, decision: Decision, rule: str) -> Path:
    """Append `rule` to the file's `decision` list (and to `rules`); returns the file.

    The file is read again first (keeping whatever else it holds) and written atomically:
    a temporary file in the same folder, then os.replace. A file that cannot be read as
    rules is reported (SettingsError) and left as it is; so is a link in the way.
    """
    path = rules.path
    if path is None:
        raise SettingsError("这次会话没有设置文件的位置，没法记下规则")
    check_rule(rule, "新规则")
    for place in (path.parent, path):
        if place.is_symlink():
            raise SettingsError(f"{place} 是一个链接：不往链接里写，规则没有记下")
    data: dict[str, Any] = {}
    if path.exists():
        text = path.read_text(encoding="utf-8")
        parse_settings(text, path)  # a broken file raises here: never overwritten
        data = json.loads(text)
    listed = data.setdefault("permissions", {}).setdefault(decision, [])
    if rule not in listed:
        listed.append(rule)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(data, file, ensure_ascii=False, indent=2)
            file.write("\n")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    kept: list[str] = getattr(rules, decision)
    if rule not in kept:
        kept.append(rule)
    return path


def offer(rule: str) -> str:
    """The line before an approval question that offers the answer A, in Chinese."""
    return f"（回答 {ALWAYS}：允许，以后在这个项目里也不再问——把规则 {rule} 写进 {SETTINGS}）"


def remember(rules: Rules, rule: str) -> str:
    """The answer A: write `rule` to the allow list; the line to show, in Chinese."""
    try:
        add_rule(rules, "allow", rule)
    except (SettingsError, OSError, UnicodeDecodeError) as exc:
        return f"✗ 规则没有记下（这一次照样允许）：{exc}"
    return f"✓ 已写入 {SETTINGS}，allow 加了一条：{rule}"


def call_of(kind: str, detail: str, tool: str = "") -> Call:
    """The Call the rules see for an approval `Action` (its kind and detail), asked by
    the tool `tool`. An MCP call's detail starts with the tool's name (`mcp__s__t {...}`)."""
    if kind == "tool":
        return Call(detail.split(" ", 1)[0])
    if kind == "command":
        return Call(tool or "run_command", detail)
    return Call(tool or "write_file", detail)


