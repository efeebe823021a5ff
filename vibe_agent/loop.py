"""The agent loop: the model decides, our code executes, until no tool is called.

    messages = [system, user]
    for round in 1..max_iters:                       <- brake: max rounds
        reply = model(messages, tools)               <- a failed call or an unusable
                                                        reply ends the run (reply.py)
        append the assistant message, tool_calls verbatim
        if reply has no tool_calls:
            if a finish check refuses it:            <- optional (lesson 12): its message
                append it as a user message             goes back, bounded by max_refusals
                next round
            return its content                       <- the ONLY normal exit
        for each tool_call:
            if a brake tripped earlier in this reply:
                result = "not run" (an error text)
            elif it repeats a call or closes a cycle: <- brakes: repeated call, cycle
                result = an error text (not run)
            else:
                result = registry.call(name, arguments)
                                                     <- failures, time-outs become text
            append {"role": "tool", "tool_call_id": id, "content": result (capped)}
        if a brake tripped this round: stop          <- also: tools failing in a row
    stop: max rounds reached

The whole `messages` list is sent again every round: the model keeps no session.
Every way a run ends is a `StopReason` (`vibe_agent.stops`). The brakes of lesson 05
live in `vibe_agent.brakes`, with their limits in one checked `Brakes`; asking the
model and checking its reply live in `vibe_agent.reply`. A brake that trips only
marks the run to stop (the local `stop`): no later call of that reply runs, but every
call is answered first ("not run"), so the history stays valid. Then the `Stop`
exception is raised and caught in exactly one place.

Lesson 11's `compaction` hook (`vibe_agent.compact`, off by default) acts at step 1:
past a token budget, or when the provider answers that the context is too long (then
the round is retried once), the middle of the history becomes a summary. Without it,
an over-long context ends the run with its own stop reason, CONTEXT_TOO_LONG.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import openai

from .brakes import (
    MAX_CALLS_PER_REPLY,
    MAX_RESULT_CHARS,
    Brakes,
    ToolErrorBrake,
    capped,
    spinning,
    too_many_calls,
)
from .registry import ToolRegistry
from .reply import (
    CUT_OFF_CALL,
    ask_model,
    assistant_message,
    clean_text,
    cut_off_answer,
    cut_off_calls,
    function_calls,
)
from .stops import Stop, StopReason
from .stream import DEFAULT_LIMITS, ReplyLimits
from .trace import Trace, TraceStep, current_step, shorten

if TYPE_CHECKING:
    from .compact import Compaction

# What a caller of the loop needs; StopReason and Stop are defined in stops.py, so that
# the brakes and the reply checks can raise them without importing the loop.
__all__ = ["DEFAULT_SYSTEM_PROMPT", "AgentResult", "Stop", "StopReason", "run_agent"]

DEFAULT_SYSTEM_PROMPT = (
    "你是一个会使用工具的助手。\n"
    "- 实时信息（时间、网页内容、计算结果）必须通过工具获得，不要编造。\n"
    "- 一步一步来：需要时先调用工具，拿到结果后再决定下一步。\n"
    "- 工具报错时如实说明，可以修正参数后重试。\n"
    "- 没有合适的工具、也无法知道答案时，直接说明你不知道，不要硬调用无关的工具。\n"
    "- 信息齐全后再给出最终回答。"
)


@dataclass
class AgentResult:
    """Everything a run produced: the answer, why it stopped, and how it got there."""

    answer: str | None  # the final answer; CUT_OFF: the text so far; otherwise None
    stop_reason: StopReason
    message: str  # one line explaining the stop
    messages: list[dict[str, Any]]
    trace: Trace

    @property
    def ok(self) -> bool:
        return self.stop_reason is StopReason.ANSWERED

    @property
    def usage(self) -> list[dict[str, int] | None]:
        """The token usage each model call reported (None where it reported none),
        read from the trace's model steps."""
        return [reported_usage(step) for step in self.trace if step.kind == "model"]

    @property
    def model_calls(self) -> int:
        return sum(step.kind == "model" for step in self.trace)

    @property
    def total_tokens(self) -> int | None:
        """Sum of the reported totals, or None if any call came without `usage`."""
        usage = self.usage
        if not usage or any(u is None for u in usage):
            return None
        return sum(u.get("total_tokens") or 0 for u in usage if u)


def run_agent(client: openai.OpenAI, question: str, registry: ToolRegistry, *, model: str,
              max_iters: int = 6, max_repeats: int = 3, max_cycle: int = 3,
              max_tool_errors: int = 3, max_result_chars: int = MAX_RESULT_CHARS,
              system_prompt: str = DEFAULT_SYSTEM_PROMPT, temperature: float | None = 0,
              trace: Trace | None = None, on_step: Callable[[TraceStep], None] | None = None,
              prepare: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
              stream: bool = False, on_text: Callable[[str], None] | None = None,
              reply_limits: ReplyLimits = DEFAULT_LIMITS,
              messages: list[dict[str, Any]] | None = None, tool_workers: int = 1,
              compaction: Compaction | None = None,
              finish_check: Callable[[str], str | None] | None = None, max_refusals: int = 3,
              max_calls_per_reply: int = MAX_CALLS_PER_REPLY,
              **request_options: Any) -> AgentResult:
    """Run the agent loop on one question (the sketch at the top of the file).

    Args:
        client: an `openai.OpenAI` client (live, replaying, local or scripted).
        question: the user's question.
        registry: the tools the model may call.
        model: the model name sent with every request.
        max_iters, max_repeats, max_cycle, max_tool_errors, max_result_chars, max_refusals,
        max_calls_per_reply: the brakes' limits, explained and checked by
            `vibe_agent.brakes.Brakes` (a setting that makes no sense raises ValueError
            before any request).
        system_prompt: the behaviour rules sent as the first message.
        temperature: sampling temperature; 0 makes runs reproducible (None: not sent).
        trace: a fresh Trace to fill (yours survives an exception that escapes).
        on_step: called with every step as it happens (e.g. to print live).
        prepare: makes what is sent each round from the full history (`vibe_agent.context`).
        stream: ask for streamed replies (with usage at the end); the result is the same.
            `stream_options=None` leaves that field out of the request (for a server that
            rejects it; then no usage comes back).
        on_text: with `stream`, called with each piece of the model's text as it arrives.
        reply_limits: how far one reply may go: a streamed reply's time and bytes, one
            call's arguments (`vibe_agent.stream.ReplyLimits`: 600 s, 32,000,000 bytes,
            2,000,000 characters). A reply past them ends the run as REPLY_TOO_LONG.
        messages: an earlier conversation to go on with (a terminal session): the question
            and everything after it are appended to this very list, so even a run cut
            short by Ctrl-C leaves its part there (`system_prompt` is used only when the
            list is empty).
        tool_workers: run up to this many calls of one reply at the same time (1: one
            after another). The spinning brakes decide on every call, in the reply's
            order, before any runs; the tool-error brake counts the results in that order
            once they are all in, so it stops the run after them, not between them.
        compaction: replaces the middle of the history by a summary when it grows too long,
            and may offload long tool results (`vibe_agent.compact`; None: off).
        finish_check: called with the answer when the model replies without tool calls;
            None accepts it, a message refuses it: the message goes back as the next user
            turn and the run goes on (e.g. `vibe_agent.plan.tests_gate`). None: no check.
        request_options: more fields for `chat.completions.create` (e.g. max_tokens).
            A reply that max_tokens cuts off (finish_reason "length") is unfinished: a
            call cut in half is not run but answered with a note (the run goes on), an
            answer cut off ends the run as CUT_OFF (`vibe_agent.reply`).
    """
    brakes = Brakes(max_iters, max_repeats, max_cycle, max_tool_errors, max_result_chars,
                    max_refusals, max_calls_per_reply)
    if tool_workers < 1:
        raise ValueError(f"tool_workers={tool_workers}: at least 1 (1 runs calls one by one)")
    messages = [] if messages is None else messages
    if not messages:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": clean_text(question)})
    trace = Trace() if trace is None else trace
    trace.model, request = model, request_fields(registry, model, temperature, request_options)
    if stream:  # the caller's stream_options win; None: not sent (some servers reject it)
        request = {"stream": True, "stream_options": {"include_usage": True}} | request
        if request["stream_options"] is None:
            del request["stream_options"]
    previous_calls: list[tuple[str, str]] = []  # for the repeat and cycle brakes
    errors, refusals, round_no = ToolErrorBrake(brakes.max_tool_errors), 0, 0

    def record(step: TraceStep) -> None:
        trace.append(step)
        if compaction:
            compaction.observe(step)
        if on_step:
            on_step(step)

    def sent() -> list[dict[str, Any]]:
        return prepare(messages) if prepare else messages

    def finish(reason: StopReason, message: str, answer: str | None = None) -> AgentResult:
        record(TraceStep(round=round_no, kind="stop", stop_reason=reason, content=message))
        return AgentResult(answer, reason, message, messages, trace)

    try:
        for round_no in range(1, brakes.max_iters + 1):
            # 1. call the model with the whole history (or what `prepare` makes of it)
            if compaction:  # over its budget, the middle of the history becomes a summary
                compaction.check(messages, round_no, record)
            try:
                reply, said = ask_model(client, round_no, record, on_text, reply_limits,
                                        messages=sent(), **request)
            except Stop as failed:  # too long for the window: compact, retry the round once
                if not (compaction and compaction.overflowed(failed, messages, round_no, record)):
                    raise
                reply, said = ask_model(client, round_no, record, on_text, reply_limits,
                                        messages=sent(), **request)
            # 2. the assistant message goes back verbatim (calls that max_tokens cut in half
            #    with "{}" as their arguments); no tool_calls: the only normal exit
            cut = cut_off_calls(reply, said.finish_reason)
            messages.append(assistant_message(reply, cut))
            if not reply.tool_calls:
                if said.finish_reason == "length":  # unfinished: its text, but not an answer
                    ended = cut_off_answer(request.get("max_tokens",
                                                       request.get("max_completion_tokens")))
                    return finish(ended.reason, ended.message, reply.content or "")
                refusal = check_answer(finish_check, reply.content or "")
                if refusal is None:
                    return finish(StopReason.ANSWERED, "模型给出了最终回答。", reply.content or "")
                refusals += 1
                record(TraceStep(round=round_no, kind="check", outcome="refused",
                                 content=refusal))
                if refusals > brakes.max_refusals:
                    raise Stop(StopReason.FINISH_REFUSED, f"完成检查第 {refusals} 次不接受"
                               "模型的回答，已停止。")
                messages.append({"role": "user", "content": refusal})  # the harness asks again
                continue
            # 3. answer every call by its id; once a brake trips, no later call runs
            stop: Stop | None = None
            steps = [TraceStep(round=round_no, kind="tool", outcome="ok", tool_call_id=call.id,
                               tool=call.function.name, arguments=call.function.arguments)
                     for call in function_calls(reply)]
            number = 0  # of the call in this reply, for the calls-per-reply brake
            for batch in [[step] for step in steps] if tool_workers == 1 else [steps]:
                todo: list[TraceStep] = []
                for step in batch:  # the spinning brakes look at earlier calls only
                    number += 1
                    if stop:  # a brake tripped earlier in this reply: answered, not run
                        step.outcome = "not_run"
                        step.result = f"Error: not run, the loop stopped ({stop.reason.value})."
                    elif step.tool_call_id in cut:  # its arguments are half-written: not run
                        step.outcome = "cut_off"
                        step.result = CUT_OFF_CALL.format(
                            arguments=repr(shorten(step.arguments, 200)))
                    else:  # refused: not run
                        stop = (too_many_calls(number, len(steps), step, brakes)
                                or spinning(previous_calls, step, brakes))
                        todo += [] if stop else [step]
                for step, ok in zip(todo, run_tools(registry, todo, tool_workers), strict=True):
                    if errors.record(ok) and not stop:
                        stop = Stop(StopReason.TOOL_ERRORS, "工具连续失败 "
                                    f"{errors.failures_in_a_row} 次（最后一次是 "
                                    f"{shorten(step.tool, 60)}），已停止。")
                for step in batch:  # in the reply's order, each paired with its own id
                    messages.append(tool_message(step, brakes.max_result_chars, compaction))
                    record(step)
            if stop:  # 4. every call is answered: now a brake may end the run
                raise stop
        still = "完成检查仍未通过" if messages[-1]["role"] == "user" else "模型仍在调用工具"
        raise Stop(StopReason.MAX_ITERS, f"已达到最大轮次 {brakes.max_iters}，{still}。")
    except Stop as ended:
        return finish(ended.reason, ended.message)
    except Exception as exc:
        # A bug in our code or a replay miss: keep the trace complete, then let it raise.
        record(TraceStep(round=round_no, kind="stop",
                         content=f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__))
        raise


# ---------------------------------------------------------------------------
# What only the loop needs: running the calls, the finish check, the request
# ---------------------------------------------------------------------------


def run_tool(registry: ToolRegistry, step: TraceStep) -> bool:
    """Run a tool call (its step) through the registry, which never raises for the
    model's mistakes, and fill in the step; True when the tool succeeded."""
    started = time.perf_counter()
    token = current_step.set(step)  # a sub-agent run by the tool files its steps here
    try:
        result = registry.call(step.tool, step.arguments)
    finally:
        current_step.reset(token)
    step.result, step.outcome = clean_text(result.output), result.error_kind or "ok"
    step.result_type = result.output_type
    if result.exception is not None:  # the model gets text; the trace keeps the exception
        step.error = f"{type(result.exception).__name__}: {result.exception}"
        step.error_type = type(result.exception).__name__
    elif not result.ok:
        step.error = result.output
    step.elapsed_ms = (time.perf_counter() - started) * 1000
    return result.ok


def run_tools(registry: ToolRegistry, steps: list[TraceStep], workers: int) -> list[bool]:
    """Run the steps' calls, up to `workers` at the same time; whether each succeeded,
    in the steps' order (never in the order they finished). No thread outlives this."""
    if workers == 1 or len(steps) < 2:
        return [run_tool(registry, step) for step in steps]
    with ThreadPoolExecutor(max_workers=min(workers, len(steps)),
                            thread_name_prefix="tool-call") as pool:
        running = [pool.submit(contextvars.copy_context().run, run_tool, registry, step)
                   for step in steps]
        return [future.result() for future in running]


def tool_message(step: TraceStep, max_result_chars: int,
                 compaction: Compaction | None) -> dict[str, Any]:
    """The message answering a tool step's call by its id: the result, capped (a long
    one may go to a file with `compaction`, the history keeping its head)."""
    call_id = clean_text(step.tool_call_id or "")
    content = capped(step.result or "", max_result_chars)
    if compaction:
        content = compaction.offload(call_id, step.result or "", content)
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def check_answer(finish_check: Callable[[str], str | None] | None, answer: str) -> str | None:
    """The finish check's refusal of an answer, or None when it accepts it (or there is none).

    Raises:
        TypeError: the check returned something else than None or a non-empty text
            (a harness bug: False or "" would say nothing the model could act on).
    """
    if finish_check is None:
        return None
    verdict = finish_check(answer)
    if verdict is not None and not (isinstance(verdict, str) and verdict.strip()):
        raise TypeError(f"a finish check returns None (done) or a message for the model, "
                        f"not {verdict!r}")
    return verdict


def request_fields(registry: ToolRegistry, model: str, temperature: float | None,
                   options: dict[str, Any]) -> dict[str, Any]:
    """What every request carries besides `messages`; the caller's options win (e.g.
    tool_choice="required" replaces "auto")."""
    tools = {"tools": registry.to_schemas(), "tool_choice": "auto"} if len(registry) else {}
    sampling = {} if temperature is None else {"temperature": temperature}
    return {"model": model} | tools | sampling | options


def reported_usage(step: TraceStep) -> dict[str, int] | None:
    """A model step's token counts as the API's `usage` block (None: none reported)."""
    counts = {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
              "total_tokens": step.total_tokens}
    return {key: value for key, value in counts.items() if value is not None} or None
