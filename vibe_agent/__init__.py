"""vibe_agent: the small package behind the Vibe Agent workbook.

The agent core a learner reads sits here, one mechanism per file, in the order the
lessons build them:

    naive.py      tools described only in the prompt, and why that fails        (01)
    registry.py   a tool is a plain function; its JSON Schema comes from the
                  signature; safe dispatch turns the model's mistakes into text  (03)
    loop.py       run_agent: the model decides, our code executes its tool calls (04)
    stops.py      why a run ends: StopReason, and the Stop that carries it       (04)
    reply.py      one model call; its reply checked before the loop uses it   (02, 04)
    brakes.py     the brakes against spinning, their limits in one Brakes        (05)
    tools.py      the demo tools (calculator, clock, fetch_url, fake weather)    (06)
    web.py        fetch_url's reader: public pages only, a deadline, a byte cap  (06)
    world.py      the outside world the tools see (clock, web pages)             (06)
    trace.py      what happened, step by step                                    (07)
    context.py    what is sent each round, and how it grows                      (07)

the coding agent built on the same loop:

    coding.py     list, read, search, write and edit files inside one workspace (08-09)
    sandbox.py    run a command in bubblewrap: another user, limits, no secrets (08)
    supervise.py  without bubblewrap (chosen explicitly): kill every descendant  (08)

and the chapters the loop leaves out, each switched on as a layer or a tool:

    layers.py     the loop's one extension point: a Layer's named events     (11-15)
    compact.py    replace the middle of a long history by a summary             (11)
    plan.py       a todo list the model keeps; a finish check for run_agent      (12)
    memory.py     AGENTS.md and notes kept across sessions                       (12)
    subagents.py  delegate: the same loop with a fresh history, fewer tools      (13)
    workers.py    the calls of one reply, run at the same time (ToolWorkers)     (13)
    mcp_tools.py  tools from MCP servers, through the same registry              (14)
    stream.py     a streamed reply joined back into one message                  (15)
    terminal.py   the terminal coding agent: every part above at one prompt      (15)

Everything the course needs around it (run modes, recordings, scripted and local
models, the command line, notebook tooling, checkers, the bench and its judge) lives
in `vibe_agent.course`, which imports the core; the core imports it nowhere. Nothing
here touches the network, the clock or the disk at import time.
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
