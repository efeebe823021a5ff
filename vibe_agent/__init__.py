"""vibe_agent: the small package behind the Vibe Agent workbook.

The agent core a learner reads sits here, one mechanism per file, in the order the
lessons build them:

    naive.py           tools described only in the prompt, and why that fails    (01)
    registry.py        the registry: safe dispatch turns the model's mistakes
                       into text                                                 (03)
    tool_schema.py     a tool is a plain function; its JSON Schema comes from
                       the signature and the docstring                           (03)
    time_limits.py     a tool call's time limit: the deadline a tool sees        (03)
    loop.py            run_agent: the model decides, our code executes its calls (04)
    stops.py           why a run ends: StopReason, and the Stop that carries it  (04)
    reply.py           one model call; its reply checked before the loop uses it (02, 04)
    brakes.py          the brakes against spinning, their limits in one Brakes   (05)
    tools.py           the demo tools (calculator, clock, fetch_url, weather)    (06)
    web.py             fetch_url's reader: public pages only, a deadline, a cap  (06)
    world.py           the outside world the tools see (clock, web pages)        (06)
    trace.py           what happened, step by step                               (07)
    context.py         what is sent each round, and how it grows                 (07)

the coding agent built on the same loop:

    coding.py          the Workspace and its six tools: the command tool, and
                       coding_registry                                        (08-09)
    workspace.py       the folder the tools may not leave: paths walked by
                       handle, and the guards every tool passes                  (08)
    read_tools.py      list_files, read_file, search_code                        (08)
    edit_tools.py      write_file, edit_file: approved, atomic, exact            (08)
    tree.py            walk or remove a folder tree by handles, never a link     (08)
    policy.py          may an action happen at all: allow-list, ask a person,
                       or a function                                             (08)
    sandbox.py         run a command in bubblewrap: another user, limits, no
                       secrets                                                   (08)
    supervise.py       without bubblewrap (chosen explicitly): kill every
                       descendant                                                (08)
    changes.py         what did the agent change: a snapshot and its diff        (09)

and the chapters the loop leaves out, each switched on as a layer or a tool:

    layers.py          the loop's one extension point: a Layer's named events (11-15)
    compact.py         replace the middle of a long history by a summary         (11)
    plan.py            a todo list the model keeps; a finish check for run_agent (12)
    memory.py          AGENTS.md and notes kept across sessions                  (12)
    subagents.py       delegate: the same loop with a fresh history, fewer tools (13)
    workers.py         the calls of one reply, run at the same time (ToolWorkers) (13)
    mcp_tools.py       tools from MCP servers, through the same registry; the
                       approval of a call                                        (14)
    mcp_schema.py      what a server lists, as tools the chat API takes          (14)
    mcp_connection.py  the server's process, its session, a result as text       (14)
    stream.py          a streamed reply joined back into one message             (15)
    verdict.py         after a turn that changed files, the project's tests say  (15)
    undo.py            checkpoints of the workspace, for the terminal's /undo    (15)
    terminal.py        the terminal coding agent: every part above at one prompt;
                       the Session, a turn, the prompt loop, the banner          (15)
    code_agent.py      the terminal agent's tools and rules, built in one place  (15)
    approval.py        an action asked at the terminal: the rule the tools obey,
                       the diff or call a person is shown                    (08, 15)
    permissions.py     the project's rules: allow, ask, deny (deny beats ask
                       beats allow); the approval modes are the defaults below   (15)
    commands.py        the slash commands: a table, `@command` adds one          (15)
    screen.py          what a person sees: the spinner, the answer as Markdown,
                       a step's line; `visible` escapes control characters       (15)
    prompt_input.py    the prompt: line editing, history, Tab, @path, !command   (15)
    sessions.py        a session saved, resumed (--continue, --resume), cleared  (15)
    agents_md.py       /init: an AGENTS.md proposed from the folder, written
                       on a yes                                                  (15)

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
