"""The terminal agent's tools and rules, built in one place: `code_agent(...)`.

`python -m vibe_agent code` (`terminal.Session`) and `python -m vibe_agent bench
--agent code` both build their agent here, so the agent a learner uses is the agent
the suite measures:

    coding tools (08) + todo_write (12) + more tools (an MCP server's, 14)
        + remember (12, when there is a notes file)
        + delegate: a read-only sub-agent on list_files, read_file, search_code (13)
    system prompt: the coding rules + the project's AGENTS.md + the notes (12)

Only the coding tools differ between the two: the terminal's ask a person (its
approval rule), the bench's follow an allow-list and the task's time limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import openai

from .memory import MemoryFile, coding_system_prompt
from .plan import TodoList
from .registry import ToolRegistry
from .subagents import delegate_registry

READ_ONLY_TOOLS = ["list_files", "read_file", "search_code"]  # what a sub-agent may use


@dataclass
class CodeAgent:
    """What `code_agent` builds: the tools, the system prompt and the model's plan."""

    registry: ToolRegistry
    system_prompt: str
    todos: TodoList


def code_agent(client: openai.OpenAI, model: str, root: str | Path, coding: ToolRegistry, *,
               tools: ToolRegistry | None = None, memory: MemoryFile | None = None,
               delegate: bool = True) -> CodeAgent:
    """The terminal agent on the workspace `root`.

    Args:
        client: the client the sub-agent calls (the parent's own).
        model: the model the sub-agent uses.
        root: the workspace (its AGENTS.md goes into the system prompt).
        coding: the six coding tools on `root`, with the approval rule they obey.
        tools: more tools, e.g. an MCP server's (lesson 14).
        memory: the notes kept across sessions (None: no `remember` tool, no notes).
        delegate: offer the read-only sub-agent `delegate` (lesson 13).
    """
    todos = TodoList()
    parts = [coding, todos.register(ToolRegistry()), tools or ToolRegistry()]
    if memory is not None:
        parts.append(memory.register(ToolRegistry()))
    if delegate:  # a child that may only look: list, read, search
        parts.append(delegate_registry(client, model=model,
                                       tools=coding.subset(READ_ONLY_TOOLS)))
    return CodeAgent(ToolRegistry.combine(*parts), coding_system_prompt(root, memory), todos)
