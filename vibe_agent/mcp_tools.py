"""Tools from an MCP server: the registry becomes a client of the Model Context Protocol.

A tool server is a separate program, in any language, that speaks MCP on its stdin
and stdout. `mcp_registry(command, name=...)` starts it, asks which tools it has and
yields a `ToolRegistry` holding one tool per server tool, so the loop cannot tell
them from the tools written in Python:

    mcp_registry(["python", "-m", "vibe_agent.course.mcp_server"], name="course")
        start the process -> initialize -> tools/list -> mcp__course__calculator, ...
    registry.call("mcp__course__calculator", '{"expression": "17*23"}')
        the registry's usual checks -> approval policy -> tools/call -> text for the model
    leaving the with-block
        close stdin -> wait -> SIGTERM / SIGKILL the server's whole process tree

The model's mistakes and the server's failures become error text, never an exception
out of `call` and never a hang: a tool error (`isError`), a server that crashed, one
that does not answer within `timeout`, one that writes garbage on stdout (a line is
at most `MAX_LINE_BYTES`: a longer one is skipped, never buffered whole). Results are
capped (`MAX_RESULT_CHARS`, announced); images, audio and binary resources are
described in a line, not dropped silently.

What a server lists is bounded too, before it reaches a request: a description is cut
after `MAX_DESCRIPTION_CHARS` (with a note, recorded in `lost`); a tool whose schema
expands past `MAX_SCHEMA_NODES` nodes, `MAX_SCHEMA_CHARS` characters or
`MAX_SCHEMA_SECONDS`, or has an object of more than `MAX_PROPERTIES` properties, is left
out (`left_out` says why), as is a tool with no name or one that requires tasks
(`execution.taskSupport: "required"`, which this client does not support).

What the server learns and does is limited on our side:
- its environment is an allow-list: the SDK's (HOME, LOGNAME, PATH, SHELL, TERM,
  USER), plus `PASSED_ENV` (locale, PYTHONPATH) and what you pass in `env`; no API
  key reaches it unless you pass it explicitly;
- names are namespaced, `mcp__{server}__{tool}`, so a server cannot shadow
  `read_file` or another server's tool;
- `tools=` is an allow-list of the server's tool names; the rest is not registered;
- every call goes through the same approval `Policy` as the workspace tools
  (`vibe_agent.sandbox`). With "ask" and with a list of command prefixes (the
  default), a tool the server marks `readOnlyHint: true` runs; any other is asked
  first, because the MCP specification's defaults for a tool that says nothing are
  readOnlyHint false, destructiveHint true and openWorldHint true;
- the server runs under vibe_agent/supervise.py, so that closing ends its whole
  process tree, a `setsid` daemon included.

Descriptions and annotations are the server's own words: untrusted text. A server can
put instructions for the model in a description (tool poisoning), call itself
anything, or mark a tool that deletes files read-only; `review()` shows a person
everything a server declared before it is used.

The SDK is asynchronous and the registry is not, so the client session runs on an
event loop in a background thread (an anyio blocking portal) for as long as the
with-block lasts.

One idea per file: mcp_schema.py turns what a server lists into tools the chat API
takes (names, schemas, descriptions, what is left out); mcp_connection.py holds the
server's process, the session and a call's result as text; the approval of a call and
the registry are here. Their public names are imported here too, so
`from vibe_agent.mcp_tools import to_parameters, result_text, ...` keeps working.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mcp.types import Tool as MCPTool
from mcp.types import ToolAnnotations

from .mcp_connection import (
    MAX_LINE_BYTES,
    MAX_PAGES,
    MAX_RESULT_CHARS,
    MAX_TOOLS,
    MIN_START_S,
    MCPServerError,
    _Connection,
    cap,
    describe_content,
    result_text,
)
from .mcp_schema import (
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    MAX_PROPERTIES,
    MAX_SCHEMA_CHARS,
    MAX_SCHEMA_NODES,
    MAX_SCHEMA_SECONDS,
    SchemaTooLarge,
    capped_description,
    leave_out_reason,
    mcp_to_openai_tools,
    mcp_tool_name,
    to_parameters,
)
from .registry import Tool, ToolDefinitionError, ToolRegistry
from .sandbox import DEFAULT_POLICY, Action, Policy, Rule

__all__ = [
    "MAX_DESCRIPTION_CHARS", "MAX_LINE_BYTES", "MAX_NAME_CHARS", "MAX_PAGES", "MAX_PROPERTIES",
    "MAX_RESULT_CHARS", "MAX_SCHEMA_CHARS", "MAX_SCHEMA_NODES", "MAX_SCHEMA_SECONDS",
    "MAX_TOOLS", "MIN_START_S", "PASSED_ENV", "SERVER_NAME", "MCPCall", "MCPRegistry",
    "MCPServerError", "SchemaTooLarge", "cap", "capped_description", "course_server_command",
    "describe_content", "is_destructive", "is_read_only", "leave_out_reason", "mcp_registry",
    "mcp_to_openai_tools", "mcp_tool_name", "result_text", "server_env", "to_parameters",
    "tool_refusal",
]

PASSED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH")  # besides the SDK's allow-list
SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__" inside


# ---------------------------------------------------------------------------
# Approval: the same policy as the workspace tools
# ---------------------------------------------------------------------------


def is_read_only(annotations: ToolAnnotations | None) -> bool:
    """Whether the server marked the tool `readOnlyHint: true` (the spec's default is false).

    Args:
        annotations: the tool's annotations from the listing.
    """
    return annotations is not None and annotations.read_only_hint is True


def is_destructive(annotations: ToolAnnotations | None) -> bool:
    """Whether the tool may destroy data, by the MCP specification's defaults.

    A tool not marked read-only is destructive unless the server says
    `destructiveHint: false`: a tool that says nothing counts as destructive.

    Args:
        annotations: the tool's annotations from the listing.
    """
    if is_read_only(annotations):
        return False
    return annotations is None or annotations.destructive_hint is not False


@dataclass(frozen=True)
class MCPCall(Action):
    """One call of an MCP tool, as an approval rule sees it: kind "tool", `detail` the
    call in one line (e.g. `mcp__notes__delete {"id": 3}`), and what the server said."""

    server: str = ""  # the server's name in our configuration
    tool: str = ""  # the tool's name as the server lists it
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)
    description: str = ""  # what the model reads about the tool: the server's words
    annotations: ToolAnnotations | None = None

    @property
    def read_only(self) -> bool:
        return is_read_only(self.annotations)

    @property
    def warning(self) -> str:
        """What the server's annotations say, for a person (the server's claim, not a fact)."""
        if self.read_only:
            return "（服务器标注：只读）"
        if self.annotations is None or self.annotations.destructive_hint is None:
            return "（服务器没有标注它只读：按 MCP 规范的默认值，它可能删除或覆盖数据）"
        if self.annotations.destructive_hint:
            return "（服务器标注：这个工具可能删除或覆盖数据）"
        return "（服务器标注：它会改动数据，但不删除、不覆盖）"


def tool_refusal(policy: Policy, call: MCPCall) -> str | None:
    """None when an MCP tool call may go ahead, otherwise the reason it may not.

    "allow-all" allows everything; a policy function decides for itself (it gets the
    `MCPCall`); "ask" and a list of command prefixes (the default) let a tool marked
    read-only run and ask a person about any other. Annotations are hints from a
    server that may not be trustworthy: a tool marked read-only is not asked.

    Args:
        policy: the approval policy, as for the workspace tools.
        call: the call, with what the server said about the tool.
    """
    if policy.rule == "allow-all":
        return None
    if callable(policy.rule):
        return policy.refusal(call)
    if call.read_only:
        return None
    from .screen import visible  # the one escaping function for what a person reads

    return policy.ask_person(dataclasses.replace(call, detail=visible(call.detail)),
                             call.warning)

# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


class MCPRegistry(ToolRegistry):
    """A `ToolRegistry` whose tools run on an MCP server.

    Attributes:
        server: the server's name (the middle of every tool name).
        listing: the tools as the server listed them (names, descriptions, schemas,
            annotations: the server's own, untrusted words).
        lost: for each registered tool name, what its schema (and description) lost on
            the way to the model.
        left_out: tools the server listed but that were not registered, and why.
        garbage: the first lines the server wrote on stdout that are not MCP messages
            (skipped; a server that prints its logs there breaks the stdio rule).
    """

    def __init__(self, server: str) -> None:
        super().__init__()
        self.server = server
        self.listing: list[MCPTool] = []
        self.lost: dict[str, list[str]] = {}
        self.left_out: dict[str, str] = {}
        self.garbage: list[str] = []

    def review(self) -> str:
        """Everything the server declared about each tool, for a person to read before use."""
        lines = []
        for tool in self.listing:
            name = mcp_tool_name(self.server, tool.name)
            status = "已注册" if name in self else f"未注册：{self.left_out.get(tool.name, '')}"
            hints = tool.annotations.model_dump(exclude_none=True) if tool.annotations else {}
            lines += [f"■ {name}（{status}）", f"  描述：{tool.description or '（无）'}",
                      f"  参数：{json.dumps(tool.input_schema, ensure_ascii=False)}"]
            if hints:
                lines.append(f"  标注：{json.dumps(hints, ensure_ascii=False)}")
        return "\n".join(lines)


def server_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The variables we add to the SDK's allow-list: `PASSED_ENV` where set, then `env`.

    Args:
        env: variables passed explicitly (e.g. a key the server needs).
    """
    passed = {key: os.environ[key] for key in PASSED_ENV if key in os.environ}
    return passed | (env or {})


@contextmanager
def mcp_registry(command: Sequence[str], *, name: str, env: dict[str, str] | None = None,
                 timeout: float = 30, tools: Collection[str] | None = None,
                 policy: Policy | Rule = DEFAULT_POLICY) -> Iterator[MCPRegistry]:
    """Start the stdio MCP server `command` and yield a registry of its tools.

    On leaving the block the server is stopped (stdin closed, then SIGTERM to its
    supervisor, which kills every descendant, and SIGKILL to its process group; each
    wait bounded) and the event loop thread ends.

    Args:
        command: the program and its arguments, e.g.
            [sys.executable, "-m", "vibe_agent.course.mcp_server"].
        name: the server's name in tool names (`mcp__{name}__{tool}`): letters, digits,
            "-" and single "_".
        env: environment variables the server gets besides the allow-list.
        timeout: seconds for each call; start-up may take max(timeout, MIN_START_S)
            (a Python server spends seconds importing its SDK on a busy machine).
        tools: the server's tool names to register (None: all of them).
        policy: approves calls, as for the workspace tools ("allow-all", "ask", a list of
            command prefixes, a function that gets an `MCPCall`, or a `Policy`). With the
            default, a tool marked read-only runs and any other is asked first.

    Raises:
        MCPServerError: the server did not start, did not answer in time, or is not an
            MCP server.
        ValueError: `command` is empty, `name` or `timeout` is not valid.
    """
    if isinstance(command, str) or not command:
        raise ValueError("command must be a non-empty list: the program, then its arguments")
    if not SERVER_NAME.fullmatch(name):
        raise ValueError(f"server name {name!r}: use letters, digits, '-' and single '_'")
    if not (isinstance(timeout, int | float) and timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    approval = policy if isinstance(policy, Policy) else Policy(policy)
    connection = _Connection(command, server_env(env), float(timeout))
    connection.open()
    try:
        registry = MCPRegistry(name)
        registry.listing = connection.listing
        registry.garbage = connection.garbage.lines  # the same list: it grows as lines come
        for listed in connection.listing:
            _add_tool(registry, connection, listed, tools, approval)
        yield registry
    finally:
        connection.close()


def _add_tool(registry: MCPRegistry, connection: _Connection, listed: MCPTool,
              allowed: Collection[str] | None, policy: Policy) -> None:
    """Register one listed tool, or record in `left_out` why it was not."""
    name = mcp_tool_name(registry.server, listed.name)
    if allowed is not None and listed.name not in allowed:
        registry.left_out[listed.name] = "not in the allow-list (tools=...)"
        return
    reason = leave_out_reason(listed, registry.server)
    if reason is None and name in registry:
        reason = f"another tool of this server is also called {name}"
    if reason is None:
        try:
            parameters, lost = to_parameters(listed.input_schema)
        except SchemaTooLarge as exc:
            reason = f"{exc}: too large to send with every request"
    if reason is not None:
        registry.left_out[listed.name] = reason
        return
    description = capped_description(listed.description)
    if description != (listed.description or ""):
        lost.append(f"description: cut to {MAX_DESCRIPTION_CHARS} of "
                    f"{len(listed.description or '')} characters")

    def forward(**arguments: Any) -> str:
        call = MCPCall("tool", f"{name} {json.dumps(arguments, ensure_ascii=False)}",
                       server=registry.server, tool=listed.name, arguments=arguments,
                       description=description, annotations=listed.annotations)
        refusal = tool_refusal(policy, call)
        if refusal is not None:
            return f"Error: {refusal}"
        return connection.call(listed.name, arguments, name)

    forward.__name__ = name
    # No time limit of the registry's: a person may take a while to approve (in the
    # caller's thread, where Ctrl-C reaches the question), and the connection bounds
    # the call itself (`timeout`, raising ToolTimeout).
    tool = Tool(name=name, description=description, parameters=parameters, fn=forward,
                timeout=None)
    try:
        registry.add(tool)
    except ToolDefinitionError as exc:  # cannot happen after the checks above; say so loudly
        raise MCPServerError(str(exc)) from exc
    registry.lost[name] = lost


def course_server_command(*options: str) -> list[str]:
    """The command that starts the course's own MCP server with this Python.

    Args:
        options: extra command-line options, e.g. "--clock", "2026-05-01T09:30:00+08:00".
    """
    return [sys.executable, "-m", "vibe_agent.course.mcp_server", *options]
