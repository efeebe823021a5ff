"""The course's own MCP server: the course's knowledge, the calculator and the clock.

    python -m vibe_agent.course.mcp_server [--clock 2026-05-01T09:30:00+08:00]

It speaks MCP over stdin/stdout (the stdio transport), so any MCP client can start it.
Its tools:

    search_course(query, limit)   the lessons' text and the course's bundled pages:
                                  knowledge no model was trained on ("private knowledge")
    calculator(expression)        the same calculator as vibe_agent.tools
    current_time(timezone)        the same clock tool; --clock fixes the time (recordings)
    page_length(url)              the demo task's page tool, on the bundled pages only
                                  (no network: any other address is not found)

Every tool is annotated read-only. A tool's error (the calculator refusing 1/0) comes
back as its text with `isError: true`, as the specification asks, so that any client
sees a failure. The server claims only what it serves: tools, with no subscriptions
and no change notifications (its tool list never changes); `serverInfo.version` is the
package's version.

To use it from another client, give that client
the command; for example, in the `mcpServers` section of a JSON configuration
(Claude Desktop, Cursor, Cline and others use this shape):

    {"mcpServers": {"vibe-course": {
        "command": "/path/to/venv/bin/python",
        "args": ["-m", "vibe_agent.course.mcp_server"]}}}
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from ..registry import function_to_tool
from ..tools import DemoTools
from ..world import World, http_client, system_clock
from .pages import BUNDLED_PAGES, BundledPages

SERVER_NAME = "vibe-course"
MAX_RESULTS = 8
SNIPPET_CHARS = 500
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
REPO = Path(__file__).resolve().parents[2]
LESSON_FOLDERS = ("solutions", "notebooks")  # the first that exists is searched


@dataclass(frozen=True)
class Passage:
    """One searchable piece of text and where it comes from."""

    source: str  # e.g. "lesson 05_brakes" or "page https://example.com/"
    text: str


def lesson_passages(root: Path = REPO) -> Iterator[Passage]:
    """Each markdown cell of the lessons, in lesson order (none outside a source checkout)."""
    folder = next((root / name for name in LESSON_FOLDERS if (root / name).is_dir()), None)
    if folder is None:
        return
    for notebook in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
        for cell in cells:
            text = "".join(cell.get("source", "")).strip()
            if cell.get("cell_type") == "markdown" and text:
                yield Passage(f"lesson {notebook.stem}", text)


def page_passages() -> Iterator[Passage]:
    """The paragraphs of the course's bundled pages, tags removed."""
    for url, file in BUNDLED_PAGES.items():
        page = resources.files("vibe_agent").joinpath("data", file).read_text(encoding="utf-8")
        page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S | re.I)
        for block in re.split(r"</(?:p|h[1-6]|li|pre|div)>", page, flags=re.I):
            text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", block)).split())
            if len(text) >= 20:
                yield Passage(f"page {url}", text)


@cache
def corpus() -> tuple[Passage, ...]:
    return (*lesson_passages(), *page_passages())


def terms(text: str) -> set[str]:
    """Search terms: lower-case words of letters/digits, and each pair of Chinese characters."""
    lowered = text.lower()
    words = set(re.findall(r"[a-z0-9_]{2,}", lowered))
    for run in re.findall(r"[\u4e00-\u9fff]+", lowered):
        words |= {run[i:i + 2] for i in range(len(run) - 1)} or {run}
    return words


def search(query: str, limit: int = 5,
           passages: tuple[Passage, ...] | None = None) -> list[Passage]:
    """The passages sharing most terms with `query`, best first (ties: shorter first).

    Args:
        query: what to look for.
        limit: how many passages at most.
        passages: where to look; None means the course (`corpus()`).
    """
    wanted = terms(query)
    scored = [(len(wanted & terms(p.text)), -len(p.text), i, p)
              for i, p in enumerate(passages if passages is not None else corpus())]
    best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], -s[1], s[2]))
    return [p for *_, p in best[:limit]]


class CourseTools:
    """The server's tools (their docstrings are what a client's model reads).

    Args:
        world: the clock and the HTTP client; the pages are the bundled ones only.
    """

    def __init__(self, world: World) -> None:
        self.demo = DemoTools(world)

    def search_course(self, query: str, limit: int = 3) -> str:
        """Search the course's lessons and bundled pages; returns matching passages and sources.

        Args:
            query: words to look for, in Chinese or English, e.g. "刹车 重复调用".
            limit: how many passages to return (1 to 8).
        """
        if not query.strip():
            return "Error: the query is empty. Send a few words to look for."
        found = search(query, max(1, min(limit, MAX_RESULTS)))
        if not found:
            return f"No passage of the course matches '{query}'. Try other words."
        blocks = []
        for passage in found:
            text = passage.text
            if len(text) > SNIPPET_CHARS:
                text = text[:SNIPPET_CHARS] + " […]"
            blocks.append(f"[{passage.source}]\n{text}")
        return "\n\n".join(blocks)

    def calculator(self, expression: str) -> str:
        return self.demo.calculator(expression)

    def current_time(self, timezone: str = "Asia/Shanghai") -> str:
        return self.demo.current_time(timezone)

    def page_length(self, url: str) -> str:
        return self.demo.page_length(url)

    calculator.__doc__ = DemoTools.calculator.__doc__
    current_time.__doc__ = DemoTools.current_time.__doc__
    page_length.__doc__ = DemoTools.page_length.__doc__


TOOL_NAMES = ("search_course", "calculator", "current_time", "page_length")


def package_version() -> str:
    """The vibe-agent package's version, for `serverInfo.version`."""
    try:
        return metadata.version("vibe-agent")
    except metadata.PackageNotFoundError:  # run from a source folder that is not installed
        return "0+source"


def reporting_errors(method: Callable[..., str]) -> Callable[..., Any]:
    """`method`, whose "Error: ..." answers become results with `isError: true`.

    The course's tools answer a mistake with text (the model reads it either way); over
    MCP the result must also say it is an error, or other clients report a success.
    """
    @functools.wraps(method)
    def tool(**arguments: Any) -> str | CallToolResult:
        text = method(**arguments)
        if text.startswith("Error:"):
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return text

    return tool


def build_server(clock: datetime | None = None) -> MCPServer:
    """The course's MCP server (not yet running).

    Args:
        clock: a fixed time for current_time (None: the system clock).
    """
    now = (lambda: clock) if clock is not None else system_clock
    course = CourseTools(World(now=now, http=http_client(BundledPages())))
    tools = []
    for name in TOOL_NAMES:
        method = getattr(course, name)
        ours = function_to_tool(method)  # the schema a local ToolRegistry would send
        tool = Tool.from_function(reporting_errors(method), name=name,
                                  description=ours.description, annotations=READ_ONLY,
                                  structured_output=False)
        tool.parameters = ours.parameters  # listed as is: descriptions included
        tools.append(tool)
    # subscriptions=False: no subscriptions/listen, so no listChanged or subscribe claimed
    server = MCPServer(SERVER_NAME, version=package_version(), tools=tools,
                       instructions="The Vibe Agent course's own tools.", subscriptions=False)
    # The pages come from the bundled copies: a logged "HTTP Request: GET https://..."
    # (httpx2 logs each request at INFO) would tell a person the server went online.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="课程自带的 MCP 服务器（stdio）")
    parser.add_argument("--clock", type=datetime.fromisoformat, default=None,
                        help="固定 current_time 的时间（ISO 8601，带时区），用于录制与回放")
    args = parser.parse_args(argv)
    if args.clock is not None and args.clock.tzinfo is None:
        parser.error("--clock 需要带时区，例如 2026-05-01T09:30:00+08:00")
    build_server(args.clock).run()


if __name__ == "__main__":
    main()
