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
        close stdin -> wait -> SIGTERM / SIGKILL the server's process group

The model's mistakes and the server's failures become error text, never an exception
out of `call` and never a hang: a tool error (`isError`), a server that crashed, one
that does not answer within `timeout`, one that writes garbage on stdout. Results are
capped (`MAX_RESULT_CHARS`, announced); images, audio and binary resources are
described in a line, not dropped silently.

What the server learns and does is limited on our side:
- its environment is an allow-list: the SDK's (HOME, LOGNAME, PATH, SHELL, TERM,
  USER), plus `PASSED_ENV` (locale, PYTHONPATH) and what you pass in `env`; no API
  key reaches it unless you pass it explicitly;
- names are namespaced, `mcp__{server}__{tool}`, so a server cannot shadow
  `read_file` or another server's tool;
- `tools=` is an allow-list of the server's tool names; the rest is not registered;
- every call goes through the same approval `Policy` as the workspace tools
  (`vibe_agent.sandbox`): a tool annotated `destructiveHint` asks a person first.

Descriptions and annotations are the server's own words: untrusted text. A server can
put instructions for the model in a description (tool poisoning) or call itself
anything; `review()` shows a person everything a server declared before it is used.

The SDK is asynchronous and the registry is not, so the client session runs on an
event loop in a background thread (an anyio blocking portal) for as long as the
with-block lasts.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp.types import Tool as MCPTool

from .registry import Tool, ToolDefinitionError, ToolRegistry, ToolTimeout
from .sandbox import DEFAULT_POLICY, Action, Policy, Rule

MAX_RESULT_CHARS = 20_000  # a tool result is cut after this many characters (announced)
STDERR_TAIL_CHARS = 600  # of the server's stderr, quoted when it fails
MIN_START_S = 15.0  # start-up may take this long even with a shorter call timeout
SHUTDOWN_GRACE_S = 10.0  # the SDK's shutdown takes at most ~6 s (close stdin, TERM, KILL)
MAX_TOOLS = 200  # a server listing more tools than this is refused
MAX_PAGES = 20  # tools/list pages read at start-up
PASSED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH")  # besides the SDK's allow-list
MAX_NAME_CHARS = 64  # OpenAI: ^[a-zA-Z0-9_-]{1,64}$
SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__" inside
NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")

# The JSON Schema keywords sent to the model. Providers differ in what they accept
# (OpenAI takes most of JSON Schema; Gemini and several OpenAI-compatible servers
# reject $ref, anyOf, format, const, ...), so only this common core is sent.
KEPT_KEYWORDS = ("type", "description", "properties", "required", "items", "enum", "default",
                 "additionalProperties")
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")


class MCPServerError(RuntimeError):
    """The server could not be started or listed (a configuration problem: it is raised)."""


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model sees for `tool` of `server`: `mcp__{server}__{tool}`.

    Characters a provider refuses in a name (anything but letters, digits, _ and -)
    become "_".

    Args:
        server: the server's name in our configuration (e.g. "course").
        tool: the tool's name as the server lists it.
    """
    return f"mcp__{server}__{NOT_IN_NAMES.sub('_', tool)}"


# ---------------------------------------------------------------------------
# From an MCP inputSchema to the parameters the chat API takes
# ---------------------------------------------------------------------------


def to_parameters(input_schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Convert a tool's `inputSchema` to the `parameters` sent in `tools`, and say what was lost.

    Kept: `KEPT_KEYWORDS`, recursively. Rewritten: a local `$ref` is replaced by the
    definition it points to; `anyOf`/`oneOf` of one schema and null, or a type list
    with "null", become that one schema (null means "leave it out"). Dropped, each
    named in the returned list: any other keyword (`format`, `minimum`, `pattern`,
    `const`, ...), a real choice between schemas, a recursive `$ref`. `title` is
    dropped without a note (it repeats the property name). The server still checks
    the arguments against its own full schema.

    Args:
        input_schema: the tool's JSON Schema, as the server listed it.
    """
    lost: list[str] = []
    definitions = input_schema.get("$defs") or input_schema.get("definitions") or {}
    converted = _convert(input_schema, definitions, "", lost, depth=0)
    properties = converted.get("properties")
    if converted.get("type") != "object" or not isinstance(properties, dict):
        lost.append("the schema is not an object with properties: the tool takes no arguments")
        properties = {}
    listed = converted.get("required")
    required = [n for n in listed if n in properties] if isinstance(listed, list) else []
    parameters = {"type": "object", "properties": properties, "required": required}
    if isinstance(converted.get("additionalProperties"), bool):
        parameters["additionalProperties"] = converted["additionalProperties"]
    return parameters, lost


def _convert(schema: Any, definitions: dict[str, Any], where: str, lost: list[str],
             depth: int) -> dict[str, Any]:
    """One schema node: follow $ref, fold nullable choices, keep KEPT_KEYWORDS."""
    at = where or "(top)"
    if not isinstance(schema, dict) or depth > 20:
        lost.append(f"{at}: a schema that is not an object, or nested too deeply")
        return {}
    schema = dict(schema)
    if "$ref" in schema:
        target = _local_definition(schema.pop("$ref"), definitions)
        if target is None or depth > 10:
            lost.append(f"{at}: $ref (not a local definition, or recursive)")
            return {k: v for k, v in schema.items() if k == "description"}
        schema = {**target, **schema}
    for choice in ("anyOf", "oneOf"):
        if choice in schema:
            options = [o for o in schema.pop(choice) if o != {"type": "null"}]
            if len(options) == 1 and isinstance(options[0], dict):
                schema = {**options[0], **schema}
            else:
                lost.append(f"{at}: {choice} with {len(options)} choices")
    if isinstance(schema.get("type"), list):
        kinds = [kind for kind in schema["type"] if kind != "null"]
        if len(kinds) == 1:
            schema["type"] = kinds[0]
        else:
            lost.append(f"{at}: type is one of {kinds}")
            del schema["type"]
    if "type" in schema and schema["type"] not in JSON_TYPES:
        lost.append(f"{at}: type {schema.pop('type')!r}")
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _convert(sub, definitions, f"{where}.{name}".lstrip("."), lost,
                                       depth + 1) for name, sub in value.items()}
        elif key == "items":
            out[key] = _convert(value, definitions, f"{where}[]", lost, depth + 1)
        elif key in KEPT_KEYWORDS:
            out[key] = value
        elif key not in ("title", "$defs", "definitions", "$schema"):
            lost.append(f"{at}: {key}")
    return out


def _local_definition(ref: Any, definitions: dict[str, Any]) -> dict[str, Any] | None:
    """The definition a local "#/$defs/Name" reference points to, or None."""
    if not isinstance(ref, str):
        return None
    match = re.fullmatch(r"#/(?:\$defs|definitions)/([^/]+)", ref)
    target = definitions.get(match.group(1)) if match else None
    return target if isinstance(target, dict) else None


def mcp_to_openai_tools(listing: Sequence[MCPTool], server: str) -> list[dict[str, Any]]:
    """The tools of an MCP listing in the OpenAI `tools` format, with namespaced names.

    Args:
        listing: the `tools` of the server's tools/list answer.
        server: the server's name in our configuration.
    """
    return [{"type": "function",
             "function": {"name": mcp_tool_name(server, tool.name),
                          "description": tool.description or "",
                          "parameters": to_parameters(tool.input_schema)[0]}}
            for tool in listing]


# ---------------------------------------------------------------------------
# From a tools/call result to text for the model
# ---------------------------------------------------------------------------


def describe_content(block: Any) -> str:
    """One content block of a result as text: text as it is, anything else described.

    Args:
        block: a TextContent, ImageContent, AudioContent, ResourceLink or EmbeddedResource.
    """
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        size = len(block.data) * 3 // 4  # base64: 4 characters for 3 bytes
        return (f"[{kind} {block.mime_type}, about {size} bytes: not shown, the model reads "
                "text only]")
    if isinstance(block, ResourceLink):
        kind = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link: {block.uri} ({block.name}{kind})]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        if isinstance(resource, BlobResourceContents):
            return (f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'}), "
                    f"about {len(resource.blob) * 3 // 4} bytes: not shown]")
    return f"[content of type {getattr(block, 'type', type(block).__name__)!r}: not shown]"


def cap(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """`text`, cut after `limit` characters with a notice saying how much was cut.

    Args:
        text: a tool result.
        limit: the most characters kept.
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n\n[truncated: showing {limit} of {len(text)} characters]"


def result_text(result: CallToolResult, tool: str) -> str:
    """A tools/call result as the text the model reads; an `isError` result starts with "Error:".

    Args:
        result: what the server answered.
        tool: the tool's name as the model knows it (for the error text).
    """
    parts = [describe_content(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(the tool returned nothing)"
    if result.is_error:
        return cap(f"Error: tool '{tool}' reported an error: {text}")
    return cap(text)


# ---------------------------------------------------------------------------
# Approval: the same policy as the workspace tools
# ---------------------------------------------------------------------------


def is_destructive(annotations: ToolAnnotations | None) -> bool:
    """Whether the server annotated the tool as one that may destroy data.

    Only an explicit `destructiveHint: true` on a tool not marked read-only counts. The
    hint is the server's claim: a hostile server simply leaves it out, which is why the
    policy's own rule (e.g. "ask") applies to every tool as well.

    Args:
        annotations: the tool's annotations from the listing.
    """
    return (annotations is not None and annotations.destructive_hint is True
            and annotations.read_only_hint is not True)


def tool_refusal(policy: Policy, call: str, destructive: bool) -> str | None:
    """None when an MCP tool call may go ahead, otherwise the reason it may not.

    "allow-all" allows everything; a policy function decides for itself (it gets an
    `Action` of kind "tool" whose detail is the call); "ask" asks a person for every
    call; a list of command prefixes (the default) governs commands, so a tool runs,
    unless it is destructive: then a person is asked first.

    Args:
        policy: the approval policy, as for the workspace tools.
        call: the call as a person reads it, e.g. `mcp__notes__delete {"id": 3}`.
        destructive: the tool is annotated destructiveHint.
    """
    if policy.rule == "allow-all":
        return None
    if callable(policy.rule):
        return policy.refusal(Action("tool", call))
    if policy.rule != "ask" and not destructive:
        return None
    warning = "（服务器标注：这个工具可能删除或覆盖数据）" if destructive else ""
    return policy.ask_person(Action("tool", call), warning)


# ---------------------------------------------------------------------------
# The connection: a client session on an event loop in a background thread
# ---------------------------------------------------------------------------


class _StdoutGarbage(logging.Handler):
    """Collects the lines the SDK skipped because they were not MCP messages.

    The SDK only logs them (on "mcp.client.stdio"), without saying which server wrote
    them, so with several servers open at once each connection hears every server's.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        errors = getattr(error, "errors", None)
        line = str(errors()[0].get("input", "")) if callable(errors) else record.getMessage()
        if len(self.lines) < 5:
            self.lines.append(line[:200])


class _Connection:
    """One server process and the client session talking to it."""

    def __init__(self, command: Sequence[str], env: dict[str, str], timeout: float) -> None:
        self.params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env)
        self.shown = " ".join(command)
        self.timeout = timeout
        self.start_timeout = max(timeout, MIN_START_S)  # a Python server imports for seconds
        # The server writes to this file's descriptor directly; we only read it (os.pread).
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self.garbage = _StdoutGarbage()
        self.listing: list[MCPTool] = []
        self.client: Client | None = None
        self.failure: BaseException | None = None  # why the session ended early
        self._ready = threading.Event()
        self._stop: anyio.Event | None = None
        self._portal: BlockingPortal | None = None
        self._portal_cm: Any = None
        self._task: concurrent.futures.Future[None] | None = None

    # --- life cycle (caller's thread) -----------------------------------------------

    def open(self) -> None:
        """Start the server and list its tools; raises MCPServerError when that fails."""
        stdio_log = logging.getLogger("mcp.client.stdio")
        stdio_log.addHandler(self.garbage)
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._task = self._portal.start_task_soon(self._serve)
        # The SDK checks structured results with jsonschema, imported on the first call
        # inside the event loop: seconds during which no time limit can fire. Import it
        # now, while the server starts.
        warm_up = threading.Thread(target=importlib.import_module, args=("jsonschema",),
                                   name="mcp-warm-up", daemon=True)
        warm_up.start()
        self._ready.wait(self.start_timeout + SHUTDOWN_GRACE_S)
        warm_up.join(self.start_timeout)
        if self.client is None:
            reason = self.failure or TimeoutError(f"no answer within {self.start_timeout:g} s")
            message = (f"the MCP server `{self.shown}` did not start: {_explain(reason)}"
                       f"{self._garbage_note()}{self.stderr_tail()}")
            self.close()
            raise MCPServerError(message) from reason

    def close(self) -> None:
        """Stop the server (bounded) and the event loop; safe to call twice."""
        if self._portal is not None and self._task is not None:
            if self._stop is not None:
                self._portal.call(self._stop.set)
            try:
                self._task.result(SHUTDOWN_GRACE_S)
            except concurrent.futures.TimeoutError:
                self._task.cancel()
            except BaseException:  # noqa: BLE001 - recorded in self.failure already
                pass
            self._portal_cm.__exit__(None, None, None)
        self._portal = None
        logging.getLogger("mcp.client.stdio").removeHandler(self.garbage)
        self.stderr.close()

    def call(self, tool: str, arguments: dict[str, Any], shown_name: str) -> str:
        """Run one tool on the server; every failure becomes "Error: ..." text (timeouts raise
        ToolTimeout, which the registry turns into its usual time-limit text)."""
        if self.client is None or self._portal is None or self._task is None or self._task.done():
            return (f"Error: the MCP server for '{shown_name}' is no longer running "
                    f"({_explain(self.failure)}). Answer without its tools, or tell the user."
                    + self.stderr_tail())
        future = self._portal.start_task_soon(self._call, tool, arguments)
        try:
            result = future.result(self.timeout + SHUTDOWN_GRACE_S)
        except (concurrent.futures.TimeoutError, TimeoutError):
            future.cancel()
            raise ToolTimeout(f"the MCP server did not answer within {self.timeout:g} s"
                              + self._garbage_note()) from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise ToolTimeout(f"the MCP server did not answer within {self.timeout:g} s"
                                  + self._garbage_note()) from exc
            if exc.code == CONNECTION_CLOSED:
                return (f"Error: the MCP server stopped while running '{shown_name}' (it crashed "
                        "or exited). Its tools cannot be used any more in this run; answer "
                        "without them, or tell the user." + self.stderr_tail())
            return (f"Error: the MCP server refused the call to '{shown_name}': {exc}. Check the "
                    "arguments and try again.")
        except Exception as exc:  # noqa: BLE001 - a malformed answer, an SDK failure
            return (f"Error: the MCP server's answer for '{shown_name}' could not be read "
                    f"({type(exc).__name__}: {str(exc)[:300]}). Tell the user the tool failed."
                    + self._garbage_note())
        return result_text(result, shown_name)

    def stderr_tail(self) -> str:
        """The end of what the server wrote on stderr, for an error text ('' when nothing)."""
        try:
            fd = self.stderr.fileno()
            size = os.fstat(fd).st_size
            data = os.pread(fd, STDERR_TAIL_CHARS * 4, max(0, size - STDERR_TAIL_CHARS * 4))
        except (OSError, ValueError):  # closed already
            return ""
        tail = data.decode("utf-8", errors="replace")[-STDERR_TAIL_CHARS:].strip()
        return f"\n[the server's stderr ends with]\n{tail}" if tail else ""

    def _garbage_note(self) -> str:
        if not self.garbage.lines:
            return ""
        return (f" (it wrote {len(self.garbage.lines)} line(s) on stdout that are not MCP "
                f"messages, e.g. {self.garbage.lines[0]!r})")

    # --- inside the event loop ------------------------------------------------------

    async def _serve(self) -> None:
        """Own the client for its whole life: connect, list, then wait until asked to stop."""
        self._stop = anyio.Event()
        try:
            # The deadline bounds start-up only; it is lifted once the tools are listed.
            with anyio.CancelScope(deadline=anyio.current_time() + self.start_timeout) as scope:
                transport = stdio_client(self.params, errlog=self.stderr)
                async with Client(transport, read_timeout_seconds=self.start_timeout) as client:
                    self.listing = await _list_tools(client)
                    scope.deadline = math.inf
                    self.client = client
                    self._ready.set()
                    await self._stop.wait()
            if scope.cancelled_caught and self.client is None:
                self.failure = TimeoutError(f"no answer within {self.start_timeout:g} s")
        except BaseException as exc:  # noqa: BLE001 - reported by open() or call()
            self.failure = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self._ready.set()

    async def _call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        assert self.client is not None
        # A little shorter than the registry's own limit (the same `timeout`), so that the
        # trace gets our reason (e.g. garbage on stdout) rather than a bare time-out.
        wait = self.timeout - min(0.25, self.timeout / 10)
        with anyio.fail_after(wait):
            return await self.client.call_tool(tool, arguments, read_timeout_seconds=wait)


async def _list_tools(client: Client) -> list[MCPTool]:
    """Every tool the server lists, page by page (bounded)."""
    tools: list[MCPTool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None or len(tools) > MAX_TOOLS:
            break
    if len(tools) > MAX_TOOLS:
        raise MCPServerError(f"the server lists more than {MAX_TOOLS} tools")
    return tools


def _explain(error: BaseException | None) -> str:
    """An exception (or a group of them, from a task group) in one line."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if error is None:
        return "it ended"
    if isinstance(error, MCPError) and error.code == REQUEST_TIMEOUT:
        return f"no answer in time ({error})"
    if isinstance(error, MCPError) and error.code == CONNECTION_CLOSED:
        return "the process exited or closed its output before answering"
    if isinstance(error, FileNotFoundError):
        return f"the program was not found ({error})"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


class MCPRegistry(ToolRegistry):
    """A `ToolRegistry` whose tools run on an MCP server.

    Attributes:
        server: the server's name (the middle of every tool name).
        listing: the tools as the server listed them (names, descriptions, schemas,
            annotations: the server's own, untrusted words).
        lost: for each registered tool name, what its schema lost on the way to the model.
        left_out: tools the server listed but that were not registered, and why.
    """

    def __init__(self, server: str) -> None:
        super().__init__()
        self.server = server
        self.listing: list[MCPTool] = []
        self.lost: dict[str, list[str]] = {}
        self.left_out: dict[str, str] = {}

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

    On leaving the block the server is stopped (stdin closed, then SIGTERM and SIGKILL
    to its process group, each wait bounded) and the event loop thread ends.

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
            command prefixes, a function, or a `Policy`).

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
    if len(name) > MAX_NAME_CHARS:
        registry.left_out[listed.name] = f"the name is longer than {MAX_NAME_CHARS} characters"
        return
    if name in registry:
        registry.left_out[listed.name] = f"another tool of this server is also called {name}"
        return
    parameters, lost = to_parameters(listed.input_schema)
    destructive = is_destructive(listed.annotations)

    def forward(**arguments: Any) -> str:
        call = f"{name} {json.dumps(arguments, ensure_ascii=False)}"
        refusal = tool_refusal(policy, call, destructive)
        if refusal is not None:
            return f"Error: {refusal}"
        return connection.call(listed.name, arguments, name)

    forward.__name__ = name
    tool = Tool(name=name, description=listed.description or "", parameters=parameters,
                fn=forward, timeout=connection.timeout)
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
