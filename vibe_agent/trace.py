"""The trace: a step-by-step record of what happened inside one agent run.

An agent that reasons wrongly usually raises no error, so we write down every
step and read it afterwards. There are five kinds of step (and a sixth, below), and
the field that says how each one went is named after what it holds:

    model    one call to the model; `decision`: what it decided ("tool_calls",
             "answer", or "error" when there was no usable reply); tokens, which
             model answered
    tool     one tool call; `outcome`: "ok", the registry's error kind, "refused"
             (a brake did not let it run), "not_run" or "cut_off" (max_tokens cut its
             arguments in half); arguments, result, error, time
    check    a finish check; `outcome` "refused" (its message went back to the model)
    compact  the history was compacted (lesson 11); `trigger`: "budget" or
             "context_too_long"; tokens before → after, the summary
    stop     the end of the run; `stop_reason`: a `StopReason` (answered, a brake, a
             provider error), or None when an exception escaped (`error_type`)

The terminal agent's saved trajectory adds a sixth, never written by `run_agent`:

    user     what the person did to the conversation (`vibe_agent.terminal.Session`);
             `trigger`: "request", "/undo", "/clear", "/compact" or "resume"; content:
             the request, or the note the model was given

Steps are plain dataclasses, so a trace turns into JSON for saving and into text
for a terminal or a notebook. The token counts live only here: `AgentResult.usage`
is read from the model steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from .stops import StopReason

StepKind = Literal["model", "tool", "check", "compact", "stop", "user"]


@dataclass
class TraceStep:
    """One thing that happened in round `round` (rounds count model calls from 1)."""

    round: int
    kind: StepKind
    # How the step went: one field per kind of step, None on the others.
    decision: str | None = None  # model: "tool_calls" | "answer" | "error" (no usable reply)
    # tool: "ok" | an error kind | "refused" | "not_run" | "cut_off"; check: "refused"
    outcome: str | None = None
    trigger: str | None = None  # compact: "budget" | "context_too_long"; user: see above
    stop_reason: StopReason | None = None  # stop: None when an exception escaped
    content: str | None = None  # model text, or the stop message
    tool: str | None = None
    tool_call_id: str | None = None
    arguments: str | None = None  # exactly as the model sent them
    result: str | None = None  # the tool's whole text (the history may hold a shortened copy)
    result_type: str | None = None  # what the tool returned, when it was not a str ("bytes")
    error: str | None = None  # "ZeroDivisionError: division by zero"
    error_type: str | None = None  # the exception's class name, if one was raised
    elapsed_ms: float = 0.0
    prompt_tokens: int | None = None  # from the API's `usage`; None when not reported
    completion_tokens: int | None = None
    total_tokens: int | None = None
    finish_reason: str | None = None  # model steps: "stop", "tool_calls", "length" (cut off)
    model: str | None = None  # model steps: the model the response names (e.g. a fallback)
    # tool steps that ran an agent of their own (a sub-agent): that agent's steps
    children: list[TraceStep] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Trace(list[TraceStep]):
    """A list of steps with JSON and text renderings.

    `model` is the model the run asked for (set by `run_agent`); the text rendering
    names a step's model only when a response came from a different one.
    """

    model: str | None = None

    def to_json(self, indent: int | None = 2) -> str:
        """One JSON object per step; each model step also carries `asked_for`, the model the
        run asked for (`Trace.model`), so the text rendering survives a round trip."""
        data = [step.to_dict() | ({"asked_for": self.model} if step.kind == "model" else {})
                for step in self]
        return json.dumps(data, ensure_ascii=False, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        """The trace `to_json` wrote, `model` included."""
        data = json.loads(text)
        trace = cls(_step(d) for d in data)
        trace.model = next((d.get("asked_for") for d in data if d.get("kind") == "model"), None)
        return trace

    def render(self, width: int = 100) -> str:
        """Readable text, one line per step (long values shortened); a sub-agent's
        steps indented under the step that ran it."""
        return "\n".join(_render_tree(self, width, self.model, ""))

    def __str__(self) -> str:
        return self.render()


def _step(data: dict[str, Any]) -> TraceStep:
    names = {f.name for f in fields(TraceStep)}
    step = TraceStep(**{k: v for k, v in data.items() if k in names and k != "children"})
    step.stop_reason = None if step.stop_reason is None else StopReason(step.stop_reason)
    step.children = [_step(child) for child in data.get("children") or []]
    return step


# The tool step running now, so that a tool which runs an agent of its own (a
# sub-agent) can put that agent's steps under it (`TraceStep.children`).
current_step: ContextVar[TraceStep | None] = ContextVar("current_step", default=None)


def shorten(text: str | None, width: int) -> str:
    """One line, at most `width` characters, with an ellipsis when cut."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _tokens(step: TraceStep) -> str:
    if step.prompt_tokens is None and step.completion_tokens is None:
        return "tokens n/a"
    return f"tokens {step.prompt_tokens}+{step.completion_tokens}"


# The words a learner reads in a rendered trace (the lessons are in Chinese); decisions,
# outcomes, tool names and stop reasons stay as they are: they are the identifiers the
# code uses.
CUT_OFF = "[被 max_tokens 截断]"  # finish_reason "length": the reply is unfinished
ANSWERED_BY = "[回答来自 {model}]"  # a response from another model than the run asked for
FAILED = "出错"  # a tool step whose outcome is not "ok"


def render_step(step: TraceStep, width: int = 100, requested: str | None = None) -> str:
    """One step as a line of text.

    Args:
        step: the step.
        width: the longest line to aim for.
        requested: the model the run asked for; a model step answered by another
            model (e.g. a fallback) names it (None: never named).
    """
    head = f"[{step.round}] {step.kind:<5}"
    if step.kind == "model":
        what = f"→ {step.decision}"
        if requested and step.model and step.model != requested:
            what += " " + ANSWERED_BY.format(model=step.model)
        if step.finish_reason == "length":
            what += " " + CUT_OFF
        text = f" {shorten(step.content, width // 2)!r}" if step.content else ""
        return f"{head} {what}{text}  ({_tokens(step)}, {step.elapsed_ms:.0f} ms)"
    if step.kind == "tool":
        call = f"{step.tool}({shorten(step.arguments, width // 3)})"
        mark = "ok" if step.outcome == "ok" else f"{FAILED} {step.outcome}"
        return (f"{head} {call} {mark} → {shorten(step.result, width // 2)}"
                f"  ({step.elapsed_ms:.0f} ms)")
    how = step.trigger if step.kind in ("compact", "user") else step.outcome  # check: outcome
    if step.kind == "stop":
        how = step.stop_reason or "exception"  # None: an exception escaped the loop
    return f"{head} {how}: {shorten(step.content, width)}"


def _render_tree(steps: list[TraceStep], width: int, requested: str | None,
                 indent: str) -> Iterator[str]:
    for step in steps:
        yield indent + render_step(step, width, requested)
        yield from _render_tree(step.children, width, None, indent + "    │ ")
