"""The agent loop: the model decides, our code executes, until no tool is called.

    messages = [system, user]
    for round in 1..max_iters:                      <- brake: max rounds
        response = model(messages, tools)           <- provider errors end the run
        if response has no tool_calls:
            return its content                      <- the ONLY normal exit
        append the assistant message, tool_calls verbatim
        for each tool_call:
            result = registry.call(name, arguments) <- brake: exceptions become text
            append {"role": "tool", "tool_call_id": id, "content": result}
        check the brakes                            <- repeated call, failing tools
    stop: max rounds reached

The whole `messages` list is sent again every round: the model keeps no session.
Each brake is a named `StopReason` with its own counter, raised as a `Brake`
exception inside the loop and caught in exactly one place. A limit of 0 switches
the repeat and tool-error brakes off; `max_iters` can never be switched off.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageToolCall

from .registry import ToolRegistry
from .trace import Trace, TraceStep

DEFAULT_SYSTEM_PROMPT = (
    "你是一个会使用工具的助手。\n"
    "- 实时信息（时间、网页内容、计算结果）必须通过工具获得，不要编造。\n"
    "- 一步一步来：需要时先调用工具，拿到结果后再决定下一步。\n"
    "- 工具报错时如实说明，可以修正参数后重试。\n"
    "- 没有合适的工具、也无法知道答案时，直接说明你不知道，不要硬调用无关的工具。\n"
    "- 信息齐全后再给出最终回答。"
)


class StopReason(StrEnum):
    """Why a run ended. Only ANSWERED means the model gave a final answer."""

    ANSWERED = "answered"
    MAX_ITERS = "max_iters"  # brake: the round limit
    REPEATED_CALL = "repeated_call"  # brake: the same call N times in a row
    TOOL_ERRORS = "tool_errors"  # brake: tools kept failing
    PROVIDER_ERROR = "provider_error"  # the model service failed (HTTP error, timeout, empty)


class Brake(Exception):
    """Raised inside the loop to stop it; carries the reason and a message for people."""

    def __init__(self, reason: StopReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class AgentResult:
    """Everything a run produced: the answer, why it stopped, and how it got there."""

    answer: str | None
    stop_reason: StopReason
    message: str  # one line explaining the stop
    messages: list[dict[str, Any]]
    trace: Trace
    usage: list[dict[str, Any] | None] = field(default_factory=list)  # per model call

    @property
    def ok(self) -> bool:
        return self.stop_reason is StopReason.ANSWERED

    @property
    def model_calls(self) -> int:
        return len(self.usage)

    @property
    def total_tokens(self) -> int | None:
        """Sum of the reported totals, or None if any round came without `usage`."""
        if not self.usage or any(u is None for u in self.usage):
            return None
        return sum(u.get("total_tokens") or 0 for u in self.usage if u)


def assistant_message(message: ChatCompletionMessage) -> dict[str, Any]:
    """The assistant's reply as a dict for `messages`, with its tool_calls verbatim."""
    entry: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    # Reasoning models (e.g. DeepSeek's) want their reasoning passed back unchanged.
    reasoning = (message.model_extra or {}).get("reasoning_content")
    if reasoning:
        entry["reasoning_content"] = reasoning
    return entry


def call_key(name: str, arguments: str) -> str:
    """The identity of a call for repeat detection: name plus canonical arguments."""
    try:
        canonical = json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except json.JSONDecodeError:
        canonical = (arguments or "").strip()
    return f"{name}:{canonical}"


class Brakes:
    """The counters behind the repeat and tool-error brakes (0 switches one off)."""

    def __init__(self, max_repeats: int, max_tool_errors: int) -> None:
        self.max_repeats = max_repeats
        self.max_tool_errors = max_tool_errors
        self.last_key: str | None = None
        self.repeats = 0  # how many times in a row the last call was made
        self.tool_errors = 0  # failing tool results in a row
        self.tripped: Brake | None = None

    def is_repeat_limit(self, name: str, arguments: str) -> bool:
        """Count this call; True when it reaches the limit (it must not run again)."""
        key = call_key(name, arguments)
        self.repeats = self.repeats + 1 if key == self.last_key else 1
        self.last_key = key
        if self.max_repeats and self.repeats >= self.max_repeats:
            self.tripped = self.tripped or Brake(
                StopReason.REPEATED_CALL,
                f"同一个调用 {name}({arguments}) 连续出现 {self.repeats} 次，已停止。",
            )
            return True
        return False

    def count_result(self, ok: bool, name: str) -> None:
        self.tool_errors = 0 if ok else self.tool_errors + 1
        if self.max_tool_errors and self.tool_errors >= self.max_tool_errors:
            self.tripped = self.tripped or Brake(
                StopReason.TOOL_ERRORS,
                f"工具连续失败 {self.tool_errors} 次（最后一次是 {name}），已停止。",
            )


def execute_call(call: ChatCompletionMessageToolCall, registry: ToolRegistry, brakes: Brakes,
                 round_no: int) -> TraceStep:
    """Run one tool call (unless the repeat brake blocks it); the step's `result` is the
    text for the model's `role: "tool"` message."""
    name, arguments = call.function.name, call.function.arguments
    started = time.perf_counter()
    step = TraceStep(round=round_no, kind="tool", decision="ok", tool=name,
                     tool_call_id=call.id, arguments=arguments)
    if brakes.is_repeat_limit(name, arguments):
        step.decision = "repeated_call"
        step.result = (f"Error: this exact call was already made {brakes.repeats - 1} "
                       "times in a row; it was not run again.")
    else:
        result = registry.call(name, arguments)
        brakes.count_result(result.ok, name)
        step.result, step.decision = result.output, result.error_kind or "ok"
        if result.exception is not None:  # the model gets text; the trace keeps the exception
            step.error = f"{type(result.exception).__name__}: {result.exception}"
            step.error_type = type(result.exception).__name__
        elif not result.ok:
            step.error = result.output
    step.elapsed_ms = (time.perf_counter() - started) * 1000
    return step


def provider_failure(exc: openai.APIError) -> Brake:
    """Turn an SDK error into a one-line stop message."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error", body)
        detail = error.get("message") if isinstance(error, dict) else None
        detail = " ".join(str(detail or exc.message).split())[:200]
        text = f"模型服务返回 HTTP {exc.status_code}：{detail}"
    elif isinstance(exc, openai.APITimeoutError):
        text = "请求模型服务超时。"
    elif isinstance(exc, openai.APIConnectionError):
        text = f"连不上模型服务：{exc.request.url if exc.request else ''}"
    else:
        text = f"模型服务出错：{type(exc).__name__}: {exc}"
    return Brake(StopReason.PROVIDER_ERROR, text)


def run_agent(
    client: openai.OpenAI,
    question: str,
    registry: ToolRegistry,
    *,
    model: str,
    max_iters: int = 6,
    max_repeats: int = 3,
    max_tool_errors: int = 3,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    temperature: float | None = 0,
    trace: Trace | None = None,
    on_step: Callable[[TraceStep], None] | None = None,
    prepare: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
    **request_options: Any,
) -> AgentResult:
    """Run the agent loop on one question.

    Args:
        client: an `openai.OpenAI` client (live, replaying, local or scripted).
        question: the user's question.
        registry: the tools the model may call.
        model: the model name sent with every request.
        max_iters: most model calls in one run (the round brake; must be at least 1).
        max_repeats: stop when the same call comes this many times in a row (0: off).
        max_tool_errors: stop after this many failing tool results in a row (0: off).
        system_prompt: the behaviour rules sent as the first message.
        temperature: sampling temperature; 0 makes runs reproducible (None: not sent).
        trace: a Trace to append to; pass your own to keep it if an exception escapes.
        on_step: called with every step as it happens (e.g. to print live).
        prepare: turns the full history into what is sent each round (e.g. a trimming
            strategy from `vibe_agent.context`); the result keeps the full history.
        request_options: extra fields for `chat.completions.create` (e.g. max_tokens).
    """
    if max_iters < 1:
        raise ValueError("max_iters must be at least 1: the round brake cannot be switched off")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": question},
    ]
    trace = Trace() if trace is None else trace
    usage: list[dict[str, Any] | None] = []
    brakes = Brakes(max_repeats, max_tool_errors)

    def record(step: TraceStep) -> None:
        trace.append(step)
        if on_step:
            on_step(step)

    def finish(reason: StopReason, message: str, answer: str | None = None) -> AgentResult:
        record(TraceStep(round=len(usage), kind="stop", decision=reason.value, content=message))
        return AgentResult(answer, reason, message, messages, trace, usage)

    tool_options: dict[str, Any] = {}
    if len(registry):
        tool_options = {"tools": registry.to_schemas(), "tool_choice": "auto"}
    if temperature is not None:
        request_options["temperature"] = temperature

    try:
        for round_no in range(1, max_iters + 1):
            # 1. call the model with the whole history
            started = time.perf_counter()
            try:
                sent = prepare(messages) if prepare else messages
                # request options win: e.g. tool_choice="required" replaces "auto"
                response = client.chat.completions.create(
                    model=model, messages=sent, **(tool_options | request_options)
                )
            except openai.APIError as exc:
                raise provider_failure(exc) from exc
            elapsed = (time.perf_counter() - started) * 1000
            usage.append(response.usage.model_dump(exclude_unset=True) if response.usage else None)
            if not response.choices:
                raise Brake(StopReason.PROVIDER_ERROR, "模型服务返回的响应里没有 choices。")
            choice = response.choices[0]
            message = choice.message
            tokens = usage[-1] or {}
            record(TraceStep(
                round=round_no, kind="model",
                decision="tool_calls" if message.tool_calls else "answer",
                content=message.content, elapsed_ms=elapsed,
                prompt_tokens=tokens.get("prompt_tokens"),
                completion_tokens=tokens.get("completion_tokens"),
                finish_reason=choice.finish_reason,
            ))
            # 2. no tool_calls: the only normal exit (never look for "完成" in the text)
            if not message.tool_calls:
                messages.append(assistant_message(message))
                return finish(StopReason.ANSWERED, "模型给出了最终回答。", message.content or "")
            # 3. the assistant message goes back verbatim, then one tool message per call
            messages.append(assistant_message(message))
            for call in message.tool_calls:
                step = execute_call(call, registry, brakes, round_no)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": step.result})
                record(step)
            # 4. every call is answered; now the brakes may stop the run
            if brakes.tripped:
                raise brakes.tripped
        raise Brake(StopReason.MAX_ITERS, f"已达到最大轮次 {max_iters}，模型仍在调用工具。")
    except Brake as brake:
        return finish(brake.reason, brake.message)
    except Exception as exc:
        # A bug in our code or a replay miss: keep the trace complete, then let it raise.
        record(TraceStep(round=len(usage), kind="stop", decision="exception",
                         content=f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__))
        raise
