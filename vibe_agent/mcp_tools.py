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
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import importlib
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import IO, Any

import anyio
from anyio.abc import Process
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, MCPError
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
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
    jsonrpc_message_adapter,
)
from mcp.types import Tool as MCPTool

from .registry import Tool, ToolDefinitionError, ToolRegistry, ToolTimeout
from .sandbox import DEFAULT_POLICY, Action, Policy, Rule
from .supervise import supervised

MAX_RESULT_CHARS = 20_000  # a tool result is cut after this many characters (announced)
STDERR_TAIL_CHARS = 600  # of the server's stderr, quoted when it fails
MIN_START_S = 15.0  # start-up may take this long even with a shorter call timeout
SHUTDOWN_GRACE_S = 10.0  # the SDK's shutdown takes at most ~6 s (close stdin, TERM, KILL)
MAX_TOOLS = 200  # a server listing more tools than this is refused
MAX_PAGES = 20  # tools/list pages read at start-up
PASSED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH")  # besides the SDK's allow-list
MAX_NAME_CHARS = 64  # OpenAI: ^[a-zA-Z0-9_-]{1,64}$
MAX_LINE_BYTES = 8 * 2**20  # one message on the server's stdout; a longer line is skipped
MAX_DESCRIPTION_CHARS = 2_000  # a tool's description is cut after this (with a note)
MAX_SCHEMA_NODES = 2_000  # one tool's schema, $refs inlined: past this the tool is left out
MAX_SCHEMA_CHARS = 40_000  # one tool's parameters as JSON (sent with every request)
MAX_SCHEMA_SECONDS = 1.0  # converting one tool's schema
MAX_PROPERTIES = 100  # properties of one object in a schema
STOP_WAIT_S = 2.0  # on close: for the server to exit once its stdin is closed, then after TERM
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


class SchemaTooLarge(ValueError):
    """A tool's schema is past one of the bounds (MAX_SCHEMA_*, MAX_PROPERTIES)."""


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

    Inlining `$ref`s can multiply a small schema (five properties that each refer to
    the next of eleven definitions make 5**11 nodes), so the conversion is bounded:
    `MAX_SCHEMA_NODES` nodes, `MAX_SCHEMA_CHARS` characters of JSON, `MAX_SCHEMA_SECONDS`,
    and `MAX_PROPERTIES` properties in one object.

    Args:
        input_schema: the tool's JSON Schema, as the server listed it.

    Raises:
        SchemaTooLarge: the schema is past a bound (the registry leaves the tool out).
    """
    lost: list[str] = []
    definitions = input_schema.get("$defs") or input_schema.get("definitions") or {}
    budget = _Budget()
    converted = _convert(input_schema, definitions, "", lost, 0, budget)
    properties = converted.get("properties")
    if converted.get("type") != "object" or not isinstance(properties, dict):
        lost.append("the schema is not an object with properties: the tool takes no arguments")
        properties = {}
    listed = converted.get("required")
    required = [n for n in listed if n in properties] if isinstance(listed, list) else []
    parameters = {"type": "object", "properties": properties, "required": required}
    if isinstance(converted.get("additionalProperties"), bool):
        parameters["additionalProperties"] = converted["additionalProperties"]
    size = len(json.dumps(parameters, ensure_ascii=False))
    if size > MAX_SCHEMA_CHARS:
        raise SchemaTooLarge(f"its parameters are {size} characters of JSON (at most "
                             f"{MAX_SCHEMA_CHARS})")
    return parameters, lost


class _Budget:
    """What converting one schema may still spend: nodes, characters, time."""

    def __init__(self) -> None:
        self.nodes = 0
        self.chars = 0
        self.ends = time.monotonic() + MAX_SCHEMA_SECONDS

    def spend(self, nodes: int = 0, kept: Any = None) -> None:
        self.nodes += nodes
        if kept is not None:
            self.chars += len(json.dumps(kept, ensure_ascii=False, default=str))
        if self.nodes > MAX_SCHEMA_NODES:
            raise SchemaTooLarge(f"its schema expands to more than {MAX_SCHEMA_NODES} nodes "
                                 "once its $refs are inlined")
        if self.chars > MAX_SCHEMA_CHARS:
            raise SchemaTooLarge(f"its schema expands to more than {MAX_SCHEMA_CHARS} "
                                 "characters once its $refs are inlined")
        if time.monotonic() > self.ends:
            raise SchemaTooLarge(f"converting its schema took more than {MAX_SCHEMA_SECONDS:g} s")


def _convert(schema: Any, definitions: dict[str, Any], where: str, lost: list[str],
             depth: int, budget: _Budget) -> dict[str, Any]:
    """One schema node: follow $ref, fold nullable choices, keep KEPT_KEYWORDS."""
    at = where or "(top)"
    budget.spend(nodes=1)
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
            if len(value) > MAX_PROPERTIES:
                raise SchemaTooLarge(f"{at} has {len(value)} properties (at most "
                                     f"{MAX_PROPERTIES})")
            budget.spend(kept=list(value))
            out[key] = {name: _convert(sub, definitions, f"{where}.{name}".lstrip("."), lost,
                                       depth + 1, budget) for name, sub in value.items()}
        elif key == "items":
            out[key] = _convert(value, definitions, f"{where}[]", lost, depth + 1, budget)
        elif key in KEPT_KEYWORDS:
            budget.spend(kept=value)
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


def capped_description(text: str | None) -> str:
    """A tool's description as the model gets it: cut after MAX_DESCRIPTION_CHARS, with a note.

    Args:
        text: the description the server listed (None: none).
    """
    text = text or ""
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    return (f"{text[:MAX_DESCRIPTION_CHARS]} [description truncated: {MAX_DESCRIPTION_CHARS} "
            f"of {len(text)} characters shown]")


def leave_out_reason(tool: MCPTool, server: str) -> str | None:
    """Why a listed tool cannot be offered to the model on its own terms, or None.

    Args:
        tool: one tool of the listing.
        server: the server's name in our configuration.
    """
    if not re.search(r"[A-Za-z0-9]", tool.name):
        return "the tool's name has no letter or digit"
    if len(mcp_tool_name(server, tool.name)) > MAX_NAME_CHARS:
        return f"the name is longer than {MAX_NAME_CHARS} characters"
    if tool.execution is not None and tool.execution.task_support == "required":
        return ("it requires task augmentation (execution.taskSupport: \"required\"), which "
                "this client does not support: every call would fail")
    return None


def mcp_to_openai_tools(listing: Sequence[MCPTool], server: str) -> list[dict[str, Any]]:
    """The tools of an MCP listing in the OpenAI `tools` format, with namespaced names.

    A tool `mcp_registry` would leave out (`leave_out_reason`, a schema past the bounds)
    is left out here too; descriptions are capped (`capped_description`).

    Args:
        listing: the `tools` of the server's tools/list answer.
        server: the server's name in our configuration.
    """
    tools = []
    for tool in listing:
        if leave_out_reason(tool, server) is not None:
            continue
        try:
            parameters = to_parameters(tool.input_schema)[0]
        except SchemaTooLarge:
            continue
        tools.append({"type": "function",
                      "function": {"name": mcp_tool_name(server, tool.name),
                                   "description": capped_description(tool.description),
                                   "parameters": parameters}})
    return tools


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
    if result.is_error:  # (a server's own "Error: " prefix is not repeated)
        return cap(f"Error: tool '{tool}' reported an error: {text.removeprefix('Error: ')}")
    return cap(text)


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
    from .terminal import visible  # the one escaping function for what a person reads

    return policy.ask_person(dataclasses.replace(call, detail=visible(call.detail)),
                             call.warning)


# ---------------------------------------------------------------------------
# The connection: a client session on an event loop in a background thread
# ---------------------------------------------------------------------------


class _Garbage:
    """The first few lines a server wrote on stdout that are not MCP messages (skipped)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def add(self, line: str) -> None:
        self.count += 1
        if len(self.lines) < 5:
            self.lines.append(line[:200])


@asynccontextmanager
async def _stdio_transport(argv: list[str], env: dict[str, str], errlog: IO[str],
                           garbage: _Garbage) -> AsyncIterator[Any]:
    """The stdio transport: the SDK's (newline-delimited JSON-RPC), with our bounds.

    - The server runs under vibe_agent/supervise.py: on close, stdin is closed, then
      the supervisor is told to stop (it kills every descendant, a `setsid` daemon
      too), then the process group is killed; each wait is bounded.
    - A line on stdout is at most MAX_LINE_BYTES: a longer one is skipped (and named
      in `garbage`), never buffered whole.

    Yields the (read, write) streams the SDK's `Client` takes.
    """
    process = await anyio.open_process(supervised(argv), env=env, stderr=errlog,
                                       start_new_session=True)
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def deliver(line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            garbage.add(line.decode("utf-8", errors="replace"))
            return
        await to_session.send(SessionMessage(message))

    async def read() -> None:
        assert process.stdout is not None
        pending, skipping = bytearray(), False
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with to_session:
                async for chunk in process.stdout:
                    pending += chunk
                    if b"\n" not in chunk:  # only the new piece is searched: linear
                        if len(pending) > MAX_LINE_BYTES:
                            if not skipping:
                                garbage.add(f"<a line of more than {MAX_LINE_BYTES} bytes: "
                                            f"skipped> {bytes(pending[:60])!r}...")
                            pending.clear()
                            skipping = True
                        continue
                    *lines, rest = pending.split(b"\n")
                    pending = bytearray(rest)
                    if skipping:  # the end of the line that was too long
                        lines, skipping = lines[1:], False
                    for line in lines:
                        await deliver(bytes(line))

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server stopped reading: the session sees the end

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield from_server, to_server
        finally:
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                from_server.close()
                to_server.close()
                await _stop(process)
            tasks.cancel_scope.cancel()


async def _stop(process: Process) -> None:
    """Close stdin, wait; tell the supervisor to stop, wait; kill the group; close stdout."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        assert process.stdin is not None
        await process.stdin.aclose()
    if not await _exited(process, STOP_WAIT_S):
        with contextlib.suppress(ProcessLookupError):
            process.terminate()  # SIGTERM: the supervisor kills its descendants, then exits
        await _exited(process, STOP_WAIT_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # anything left in the group (no /proc: macOS)
    await _exited(process, STOP_WAIT_S)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        assert process.stdout is not None
        await process.stdout.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    """Whether the process exited within `seconds` (polled: a daemon may hold its pipes)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None


class _Connection:
    """One server process and the client session talking to it."""

    def __init__(self, command: Sequence[str], env: dict[str, str], timeout: float) -> None:
        self.command = list(command)
        self.env = get_default_environment() | env  # the SDK's allow-list, then ours
        self.shown = " ".join(command)
        self.timeout = timeout
        self.start_timeout = max(timeout, MIN_START_S)  # a Python server imports for seconds
        # The server writes to this file's descriptor directly; we only read it (os.pread).
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self.garbage = _Garbage()
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
        self.stderr.close()

    def call(self, tool: str, arguments: dict[str, Any], shown_name: str) -> str:
        """Run one tool on the server; every failure becomes "Error: ..." text (timeouts raise
        ToolTimeout, which the registry turns into its usual time-limit text)."""
        if self.client is None or self._portal is None or self._task is None or self._task.done():
            return (f"Error: the MCP server for '{shown_name}' is no longer running "
                    f"({_explain(self.failure)}). Answer without its tools, or tell the user."
                    + self.stderr_tail())
        future = self._portal.start_task_soon(self._call, tool, arguments)
        late = f"the MCP server did not answer within {self.timeout:g} s"
        try:
            result = future.result(self.timeout + SHUTDOWN_GRACE_S)
        except (concurrent.futures.TimeoutError, TimeoutError):
            future.cancel()
            raise ToolTimeout(late + self._garbage_note(), self.timeout) from None
        except KeyboardInterrupt:  # Ctrl-C in the terminal: the call is not waited for
            future.cancel()
            raise
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise ToolTimeout(late + self._garbage_note(), self.timeout) from exc
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
        return (f" (it wrote {self.garbage.count} line(s) on stdout that are not MCP "
                f"messages, e.g. {self.garbage.lines[0]!r})")

    # --- inside the event loop ------------------------------------------------------

    async def _serve(self) -> None:
        """Own the client for its whole life: connect, list, then wait until asked to stop."""
        self._stop = anyio.Event()
        try:
            # The deadline bounds start-up only; it is lifted once the tools are listed.
            with anyio.CancelScope(deadline=anyio.current_time() + self.start_timeout) as scope:
                program = shutil.which(self.command[0], path=self.env.get("PATH"))
                if program is None:
                    raise FileNotFoundError(f"no program {self.command[0]!r} (PATH: "
                                            f"{self.env.get('PATH', '')})")
                transport = _stdio_transport([program, *self.command[1:]], self.env,
                                             self.stderr, self.garbage)
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
