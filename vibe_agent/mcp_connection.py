"""The connection to an MCP server: its process, and a client session on an event loop.

The SDK is asynchronous and the registry is not, so the client session runs on an
event loop in a background thread (an anyio blocking portal) for as long as the
server is used. `_Connection.call` runs one tool and turns every failure into text
for the model, never an exception and never a hang: a tool error (`isError`), a
server that crashed, one that does not answer within `timeout` (raised as
`ToolTimeout`, which the registry turns into its usual text), one that writes garbage
on stdout (a line is at most `MAX_LINE_BYTES`: a longer one is skipped, never
buffered whole). Results are capped (`MAX_RESULT_CHARS`, announced); images, audio
and binary resources are described in a line, not dropped silently.

The server runs under vibe_agent/supervise.py, so that closing ends its whole process
tree, a `setsid` daemon included; every wait on the way is bounded.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import json
import math
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
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
    jsonrpc_message_adapter,
)
from mcp.types import Tool as MCPTool

from .registry import ToolTimeout
from .supervise import supervised

MAX_RESULT_CHARS = 20_000  # a tool result is cut after this many characters (announced)
STDERR_TAIL_CHARS = 600  # of the server's stderr, quoted when it fails
MIN_START_S = 15.0  # start-up may take this long even with a shorter call timeout
SHUTDOWN_GRACE_S = 10.0  # the SDK's shutdown takes at most ~6 s (close stdin, TERM, KILL)
MAX_TOOLS = 200  # a server listing more tools than this is refused
MAX_PAGES = 20  # tools/list pages read at start-up
MAX_LINE_BYTES = 8 * 2**20  # one message on the server's stdout; a longer line is skipped
STOP_WAIT_S = 2.0  # on close: for the server to exit once its stdin is closed, then after TERM


class MCPServerError(RuntimeError):
    """The server could not be started or listed (a configuration problem: it is raised)."""



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
