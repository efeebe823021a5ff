"""vibe_agent: the small package behind the Vibe Agent workbook.

The agent core a learner reads sits here, one mechanism per file:

    registry.py   a tool is a plain function; its JSON Schema comes from the signature
    loop.py       run_agent: the model decides, our code executes, brakes stop it
    trace.py      what happened, step by step
    context.py    what is sent each round, and how it grows
    tools.py      the demo tools (calculator, clock, fetch_url, fake weather)
    naive.py      tools described only in the prompt, and why that fails
    world.py      the outside world the tools see (clock, web pages)

and the coding agent built on the same loop (lessons 08-09):

    coding.py     list, read, search, write and edit files inside one workspace folder
    sandbox.py    run a command in bubblewrap with a time limit, an output cap and an
                  approval policy

Everything the course needs around it (run modes, recordings, scripted and local
models, the command line, notebook tooling, checkers) lives in `vibe_agent.course`,
which imports the core and never the other way round. Nothing here touches the
network, the clock or the disk at import time.
"""

from .loop import DEFAULT_SYSTEM_PROMPT, AgentResult, StopReason, run_agent
from .registry import ToolDefinitionError, ToolRegistry, ToolResult
from .trace import Trace, TraceStep

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AgentResult",
    "StopReason",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "Trace",
    "TraceStep",
    "run_agent",
]
