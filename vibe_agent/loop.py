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

Every mechanism of Part III plugs in as a layer (`vibe_agent.layers`): an object with
named events the loop fires, each a no-op by default, so the loop above never names
one. Where they act:

    start, request            before round 1: the history to go on with (Conversation,
                              lesson 15) and what every request carries (Streaming, 15)
    before_model              step 1, before the call (Compaction, 11: past a budget,
                              the middle of the history becomes a summary)
    text_piece                step 1, while a streamed reply arrives (Streaming, 15)
    model_failed              step 1, the call failed: True retries the round once
                              (Compaction, 11: the provider said the context is too long)
    recorded                  every trace step (Compaction, 11: reads the prompt tokens)
    on_stop                   step 2, no tool_calls: a refusal goes back as a user
                              message, bounded by max_refusals (FinishCheck, 12)
    batches, run_tools        step 3: how one reply's calls are grouped and run
                              (ToolWorkers, 13: all of them at the same time)
    tool_result               step 3, what the history keeps of a result (Compaction, 11:
                              a long one goes to a file)

Without a Compaction layer, an over-long context ends the run with its own stop
reason, CONTEXT_TOO_LONG.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessage

from .brakes import (
    MAX_CALLS_PER_REPLY,
    MAX_RESULT_CHARS,
    Brakes,
    ToolErrorBrake,
    capped,
    spinning,
    too_many_calls,
)
from .layers import Layer, Layers, Record
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
from .trace import Trace, TraceStep, shorten
from .workers import run_tool, run_tools

# What a caller of the loop needs; StopReason and Stop are defined in stops.py, so that
# the brakes and the reply checks can raise them without importing the loop.
# run_tool and run_tools (vibe_agent.workers) are imported here for the lessons' checks.
Messages = list[dict[str, Any]]
__all__ = ["DEFAULT_SYSTEM_PROMPT", "AgentResult", "Layer", "Stop", "StopReason", "run_agent",
           "run_tool", "run_tools"]

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
              max_refusals: int = 3, max_calls_per_reply: int = MAX_CALLS_PER_REPLY,
              system_prompt: str = DEFAULT_SYSTEM_PROMPT, temperature: float | None = 0,
              trace: Trace | None = None, layers: Sequence[Layer | None] = (),
              prepare: Callable[[Messages], Messages] | None = None, on_step: Record | None = None,
              reply_limits: ReplyLimits = DEFAULT_LIMITS, **request_options: Any) -> AgentResult:
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
        reply_limits: how far one reply may go: a streamed reply's time and bytes, one
            call's arguments (`vibe_agent.stream.ReplyLimits`: 600 s, 32,000,000 bytes,
            2,000,000 characters). A reply past them ends the run as REPLY_TOO_LONG.
        layers: the mechanisms around the loop, fired in this order at each event
            (`vibe_agent.layers`): `Compaction`, `FinishCheck`, `Streaming`,
            `ToolWorkers`, `Conversation`, or yours (None in the list: switched off).
            None: lesson 04's loop.
        request_options: more fields for `chat.completions.create` (e.g. max_tokens).
            A reply that max_tokens cuts off (finish_reason "length") is unfinished: a
            call cut in half is not run but answered with a note (the run goes on), an
            answer cut off ends the run as CUT_OFF (`vibe_agent.reply`).
    """
    brakes = Brakes(max_iters, max_repeats, max_cycle, max_tool_errors, max_result_chars,
                    max_refusals, max_calls_per_reply)
    trace = Trace() if trace is None else trace
    hooks = Layers(layers, trace, on_step, brakes.max_refusals)
    calls = ToolCalls(registry, brakes, hooks)  # it remembers earlier calls for the brakes
    # the history: a fresh one, unless a layer goes on with a conversation
    round_no, messages = 0, hooks.start([{"role": "system", "content": system_prompt}])

    def ask() -> tuple[ChatCompletionMessage, TraceStep]:
        return ask_model(client, round_no, hooks.record, hooks.text_piece, reply_limits,
                         messages=prepare(messages) if prepare else messages, **request)

    def finish(reason: StopReason, message: str, answer: str | None = None) -> AgentResult:
        hooks.record(TraceStep(round=round_no, kind="stop", stop_reason=reason, content=message))
        return AgentResult(answer, reason, message, messages, trace)

    try:
        messages.append({"role": "user", "content": clean_text(question)})
        trace.model = model
        request = hooks.request(request_fields(registry, model, temperature, request_options))
        for round_no in range(1, brakes.max_iters + 1):
            # 1. call the model with the whole history (or what `prepare` makes of it)
            hooks.before_model(messages, round_no, hooks.record)
            try:
                reply, said = ask()
            except Stop as failed:  # a layer may mend the history: the round is asked again
                if not hooks.model_failed(failed, messages, round_no, hooks.record):
                    raise
                reply, said = ask()
            # 2. the assistant message goes back verbatim (calls that max_tokens cut in half
            #    with "{}" as their arguments); no tool_calls: the only normal exit
            cut = cut_off_calls(reply, said.finish_reason)
            messages.append(assistant_message(reply, cut))
            if not reply.tool_calls:
                if said.finish_reason == "length":  # unfinished: its text, but not an answer
                    return finish(*cut_off(request), reply.content or "")
                refusal = hooks.on_stop(reply.content or "", round_no)  # a layer may refuse
                if refusal is None:
                    return finish(StopReason.ANSWERED, "模型给出了最终回答。", reply.content or "")
                messages.append({"role": "user", "content": refusal})  # the harness asks again
                continue
            # 3. answer every call by its id; once a brake trips, no later call runs, and
            #    when every call is answered, the brake ends the run (raises its Stop)
            calls.answer(reply, cut, messages, round_no)
        still = "完成检查仍未通过" if messages[-1]["role"] == "user" else "模型仍在调用工具"
        raise Stop(StopReason.MAX_ITERS, f"已达到最大轮次 {brakes.max_iters}，{still}。")
    except Stop as ended:
        return finish(ended.reason, ended.message)
    except Exception as exc:  # a bug in our code or a layer, or a replay miss: keep the
        hooks.record(crashed(round_no, exc))  # trace complete, then let it raise
        raise


# ---------------------------------------------------------------------------
# What only the loop needs: answering the calls, the request
# ---------------------------------------------------------------------------


class ToolCalls:
    """Answers the tool calls of each reply, and remembers what the brakes need across
    rounds: the earlier calls (repeat, cycle) and the tool errors in a row."""

    def __init__(self, registry: ToolRegistry, brakes: Brakes, hooks: Layers) -> None:
        self.registry, self.brakes, self.hooks = registry, brakes, hooks
        self.previous_calls: list[tuple[str, str]] = []
        self.errors = ToolErrorBrake(brakes.max_tool_errors)

    def answer(self, reply: ChatCompletionMessage, cut: set[str], messages: Messages,
               round_no: int) -> None:
        """Answer every call of `reply` in `messages`, in the reply's order: run it, or say
        why it was not run. The layers group the calls (one after another by default):
        the spinning brakes decide on every call of a group before any of it runs; the
        tool-error brake counts a group's results in order once they are all in.

        Raises:
            Stop: a brake tripped, once every call is answered.
        """
        brakes, stop = self.brakes, None
        steps = [TraceStep(round=round_no, kind="tool", outcome="ok", tool_call_id=call.id,
                           tool=call.function.name, arguments=call.function.arguments)
                 for call in function_calls(reply)]
        number = 0  # of the call in this reply, for the calls-per-reply brake
        for batch in self.hooks.batches(steps):
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
                            or spinning(self.previous_calls, step, brakes))
                    todo += [] if stop else [step]
            ran = self.hooks.run_tools(self.registry, todo, run_tool)
            for step, ok in zip(todo, ran, strict=True):
                if self.errors.record(ok) and not stop:
                    stop = Stop(StopReason.TOOL_ERRORS, "工具连续失败 "
                                f"{self.errors.failures_in_a_row} 次（最后一次是 "
                                f"{shorten(step.tool, 60)}），已停止。")
            for step in batch:  # in the reply's order, each paired with its own id
                messages.append(tool_message(step, brakes.max_result_chars, self.hooks))
                self.hooks.record(step)
        if stop:  # every call is answered: now a brake may end the run
            raise stop


def cut_off(request: dict[str, Any]) -> tuple[StopReason, str]:
    """Why a run ends whose answer max_tokens cut off (CUT_OFF, the limit named)."""
    ended = cut_off_answer(request.get("max_tokens", request.get("max_completion_tokens")))
    return ended.reason, ended.message


def crashed(round_no: int, exc: Exception) -> TraceStep:
    """The last step of a run that a harness bug ended (the exception is raised after it)."""
    return TraceStep(round=round_no, kind="stop", content=f"{type(exc).__name__}: {exc}",
                     error_type=type(exc).__name__)


def tool_message(step: TraceStep, max_result_chars: int, hooks: Layers) -> dict[str, Any]:
    """The message answering a tool step's call by its id: the result, capped (a layer
    may change what the history keeps, e.g. a long one offloaded to a file)."""
    content = hooks.tool_result(step, capped(step.result or "", max_result_chars))
    return {"role": "tool", "tool_call_id": clean_text(step.tool_call_id or ""),
            "content": content}


# The keyword arguments run_agent had before the mechanisms became layers.
MOVED = {"compaction": "Compaction(...)", "finish_check": "FinishCheck(check)",
         "stream": "Streaming()", "on_text": "Streaming(on_text=...)",
         "tool_workers": "ToolWorkers(n)", "messages": "Conversation(messages)"}


def request_fields(registry: ToolRegistry, model: str, temperature: float | None,
                   options: dict[str, Any]) -> dict[str, Any]:
    """What every request carries besides `messages`; the caller's options win (e.g.
    tool_choice="required" replaces "auto").

    Raises:
        TypeError: an option that was a mechanism's keyword argument (now a layer).
    """
    for name in options.keys() & MOVED.keys():
        raise TypeError(f"run_agent({name}=...) is now a layer: "
                        f"run_agent(..., layers=[{MOVED[name]}])")
    tools = {"tools": registry.to_schemas(), "tool_choice": "auto"} if len(registry) else {}
    sampling = {} if temperature is None else {"temperature": temperature}
    return {"model": model} | tools | sampling | options


def reported_usage(step: TraceStep) -> dict[str, int] | None:
    """A model step's token counts as the API's `usage` block (None: none reported)."""
    counts = {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
              "total_tokens": step.total_tokens}
    return {key: value for key, value in counts.items() if value is not None} or None
