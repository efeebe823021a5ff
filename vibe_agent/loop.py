"""The agent loop: the model decides, our code executes, until no tool is called.

    messages = [system, user]
    for round in 1..max_iters:                       <- brake: max rounds
        reply = model(messages, tools)               <- a failed call or an unusable
                                                        reply ends the run
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
Each brake is a named `StopReason` with its own limit; a limit of 0 switches the
repeat, cycle and tool-error brakes off, while `max_iters` can never be switched
off. A brake that trips only marks the run to stop (the local `stop`): no later call
of that reply runs, but every call is answered first ("not run"), so the history
stays valid. Then the `Stop` exception is raised and caught in exactly one place.

What goes into `messages` is text a provider accepts: a lone surrogate (a file name
that is not UTF-8, echoed back by a tool) becomes U+FFFD, and a tool name the
provider would reject (empty, null, "a b") is sent back in a valid spelling
(`history_name`); the trace keeps the name the model really sent.

The brakes have the names lesson 05 teaches: `is_repeat(previous_calls, name,
arguments, limit)` and `ToolErrorBrake(limit).record(ok)`. `find_cycle` adds the
ping-pong between two or three calls (A, B, A, B), which is spinning too.

Lesson 11's `compaction` hook (`vibe_agent.compact`, off by default) acts at step 1:
past a token budget, or when the provider answers that the context is too long (then
the round is retried once), the middle of the history becomes a summary. Without it,
an over-long context ends the run with its own stop reason, CONTEXT_TOO_LONG.
"""

from __future__ import annotations

import contextvars
import json
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import httpx2
import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.completion_usage import CompletionUsage

from . import stream as streaming
from .registry import ToolRegistry
from .trace import Trace, TraceStep, current_step, shorten

if TYPE_CHECKING:
    from .compact import Compaction

DEFAULT_SYSTEM_PROMPT = (
    "你是一个会使用工具的助手。\n"
    "- 实时信息（时间、网页内容、计算结果）必须通过工具获得，不要编造。\n"
    "- 一步一步来：需要时先调用工具，拿到结果后再决定下一步。\n"
    "- 工具报错时如实说明，可以修正参数后重试。\n"
    "- 没有合适的工具、也无法知道答案时，直接说明你不知道，不要硬调用无关的工具。\n"
    "- 信息齐全后再给出最终回答。"
)
MAX_RESULT_CHARS = 20_000  # the most one tool result may put into the history


class StopReason(StrEnum):
    """Why a run ended. Only ANSWERED means the model gave a final answer."""

    ANSWERED = "answered"
    MAX_ITERS = "max_iters"  # brake: the round limit
    REPEATED_CALL = "repeated_call"  # brake: the same call N times in a row
    CYCLE = "cycle"  # brake: the same 2 or 3 calls going round twice (A, B, A, B)
    TOOL_ERRORS = "tool_errors"  # brake: tools kept failing
    PROVIDER_ERROR = "provider_error"  # the model service failed or sent an unusable reply
    CONTEXT_TOO_LONG = "context_too_long"  # the history no longer fits the model's window
    FINISH_REFUSED = "finish_refused"  # the finish check refused the answer too often


class Stop(Exception):
    """Ends a run: a brake, or a provider failure. Carries the reason and one line for people."""

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


def reported_usage(step: TraceStep) -> dict[str, int] | None:
    """A model step's token counts as the API's `usage` block (None: none reported)."""
    counts = {"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens,
              "total_tokens": step.total_tokens}
    return {key: value for key, value in counts.items() if value is not None} or None


# ---------------------------------------------------------------------------
# The brakes against spinning (lesson 05's words)
# ---------------------------------------------------------------------------


def call_key(name: str, arguments: str) -> str:
    """The identity of a call for the repeat and cycle brakes: name plus canonical arguments."""
    try:
        canonical = json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, a number too long, nesting too deep
        canonical = (arguments or "").strip()
    return f"{name}:{canonical}"


def is_repeat(previous_calls: list[tuple[str, str]], name: str, arguments: str,
              limit: int) -> bool:
    """True when this call makes `limit` identical calls in a row (limit 0: never).

    Args:
        previous_calls: (name, arguments) of every call so far, oldest first.
        name: this call's tool name.
        arguments: this call's argument text.
        limit: how many identical calls in a row are refused: the limit-th is not run.
    """
    if limit <= 0:
        return False
    this, in_a_row = call_key(name, arguments), 1
    for tool, args in reversed(previous_calls):
        if in_a_row >= limit or call_key(tool, args) != this:
            break
        in_a_row += 1
    return in_a_row >= limit


def find_cycle(previous_calls: list[tuple[str, str]], name: str, arguments: str,
               longest: int) -> list[tuple[str, str]]:
    """The calls of a cycle this call completes for the second time in a row, else [].

    A cycle is 2 to `longest` calls, not all the same, that come twice in a row in the
    same order: A, B, A, B or A, B, C, A, B, C. (One call over and over is
    `is_repeat`'s job.) `longest` 0 switches the check off.

    Args:
        previous_calls: (name, arguments) of every call so far, oldest first.
        name: this call's tool name.
        arguments: this call's argument text.
        longest: the longest cycle to look for.
    """
    if longest < 2:
        return []
    calls = [*previous_calls[-(2 * longest - 1):], (name, arguments)]
    keys = [call_key(*call) for call in calls]
    for length in range(2, longest + 1):
        last, before = keys[-length:], keys[-2 * length:-length]
        if len(keys) >= 2 * length and last == before and len(set(last)) > 1:
            return calls[-length:]
    return []


class ToolErrorBrake:
    """Counts failing tool results in a row; a success resets the count (limit 0: off)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.failures_in_a_row = 0

    def record(self, ok: bool) -> bool:
        """Count one tool result; True when `limit` results in a row have failed."""
        self.failures_in_a_row = 0 if ok else self.failures_in_a_row + 1
        return self.limit > 0 and self.failures_in_a_row >= self.limit


def shown(name: str, arguments: str) -> str:
    """A call on one short line, for stop messages: name(arguments)."""
    return shorten(f"{name}({arguments})", 100)


def spinning(made: list[tuple[str, str]], step: TraceStep, max_repeats: int,
             max_cycle: int) -> Stop | None:
    """The repeat and cycle brakes for one tool call (its step), which joins `made`.

    When the call must not run, the step gets the error text the model reads instead
    of a result, and the Stop the brake asks for is returned; otherwise None.
    """
    name, arguments = step.tool or "", step.arguments or ""
    stop = None
    if is_repeat(made, name, arguments, max_repeats):
        before = max_repeats - 1
        stop = Stop(StopReason.REPEATED_CALL,
                    f"同一个调用 {shown(name, arguments)} 连续出现 {max_repeats} 次，已停止。")
        step.result = (f"Error: this exact call was already made {before} "
                       f"time{'s' * (before > 1)} in a row; it was not run again.")
    elif cycle := find_cycle(made, name, arguments, max_cycle):
        path = " → ".join(shown(*call) for call in cycle)
        stop = Stop(StopReason.CYCLE, f"调用在 {path} 之间来回打转（连续转了两圈），已停止。")
        step.result = (f"Error: these calls go round in a cycle a second time ({path}); "
                       "this call was not run again.")
    made.append((name, arguments))
    if stop:
        step.decision = stop.reason.value
    return stop


# ---------------------------------------------------------------------------
# Talking to the model: a reply is checked before the loop uses it
# ---------------------------------------------------------------------------


_SURROGATE = re.compile("[\ud800-\udfff]")
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # what OpenAI accepts as a function name
NO_NAME = "unnamed_tool"  # sent back for a call that came without a name


def clean_text(text: str) -> str:
    """Text that can be sent as UTF-8: every lone surrogate becomes U+FFFD.

    A tool may return one (a file name that is not UTF-8, as Python decodes it), and
    so may a provider's JSON ("\\udcff"); sent back as it is, the next request
    cannot even be encoded.
    """
    return _SURROGATE.sub("\ufffd", text)


def history_name(name: str | None) -> str:
    """A tool name as the history may carry it: ^[a-zA-Z0-9_-]{1,64}$.

    Providers reject a request whose history holds another name, so an empty or
    null name becomes NO_NAME, other characters become "_". The call itself is still
    answered (with the registry's error text for the name the model really sent).
    """
    if not name:
        return NO_NAME
    if _TOOL_NAME.fullmatch(name):
        return name
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]


def function_calls(message: ChatCompletionMessage) -> list[ChatCompletionMessageFunctionToolCall]:
    """The reply's tool calls, which `read_reply` has checked are all function calls."""
    return [call for call in message.tool_calls or []
            if isinstance(call, ChatCompletionMessageFunctionToolCall)]


def assistant_message(message: ChatCompletionMessage) -> dict[str, Any]:
    """The assistant's reply as a dict for `messages`, with its tool_calls as sent,
    except that a name becomes a valid one (`history_name`), missing arguments become
    "{}", and lone surrogates become U+FFFD (`clean_text`)."""
    content = message.content
    entry: dict[str, Any] = {"role": "assistant",
                             "content": content if content is None else clean_text(content)}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": clean_text(call.id),
                "type": "function",
                "function": {"name": history_name(clean_text(call.function.name or "")),
                             "arguments": clean_text(call.function.arguments or "{}")},
            }
            for call in function_calls(message)
        ]
    # Reasoning models (e.g. DeepSeek's) want their reasoning passed back unchanged.
    reasoning = (message.model_extra or {}).get("reasoning_content")
    if reasoning and isinstance(reasoning, str):
        entry["reasoning_content"] = clean_text(reasoning)
    return entry


def provider_failure(exc: Exception) -> str:
    """One line saying why the model service failed (an SDK error or an unreadable body)."""
    if isinstance(exc, json.JSONDecodeError):
        if exc.doc.lstrip().startswith("<"):
            return HTML_PAGE
        return f"模型服务返回的内容不是合法的 JSON（{exc.msg}，位置 {exc.pos}）。"
    if isinstance(exc, UnicodeDecodeError):
        return "模型服务返回的内容不是 UTF-8 文本，读不了。"
    if isinstance(exc, openai.APIStatusError) and str(exc.body).lstrip().startswith("<"):
        hint = "：OPENAI_BASE_URL 很可能少了结尾的 /v1" if exc.status_code in (404, 405) else ""
        return f"模型服务返回 HTTP {exc.status_code} 和一个 HTML 网页，不是 API 的回答{hint}。"
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error", body)
        detail = error.get("message") if isinstance(error, dict) else None
        detail = " ".join(str(detail or exc.message).split())[:200]
        return f"模型服务返回 HTTP {exc.status_code}：{detail}"
    if isinstance(exc, openai.APITimeoutError):
        return "请求模型服务超时。"
    if isinstance(exc, openai.APIConnectionError):
        return f"连不上模型服务：{exc.request.url if exc.request else ''}"
    return f"模型服务出错：{type(exc).__name__}: {shorten(str(exc), 200)}"


HTML_PAGE = "模型服务返回了一个 HTML 网页而不是 JSON：OPENAI_BASE_URL 很可能少了结尾的 /v1。"


def is_context_overflow(exc: Exception) -> bool:
    """True when the provider says the prompt does not fit its context window: OpenAI's
    HTTP 400 with code "context_length_exceeded", or llama.cpp's "exceed_context_size_error"."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code != 400:
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    return isinstance(error, dict) and (error.get("code") == "context_length_exceeded"
                                        or error.get("type") == "exceed_context_size_error")


def too_long(exc: Exception) -> Stop:
    """The stop for a context overflow: its own reason and one line saying what to do."""
    said = provider_failure(exc).removeprefix("模型服务返回 ")
    return Stop(StopReason.CONTEXT_TOO_LONG,
                f"历史太长，超出了模型的上下文窗口（{said}）：需要压缩历史，或换窗口更大的模型。")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def tool_calls_problem(tool_calls: Any) -> str | None:
    """What makes a reply's tool_calls unusable, or None. Each call must be a function
    call with a string name and arguments (either may be missing) and an id of its own:
    a result is matched to its call by id, so a missing or repeated id cannot be answered."""
    if tool_calls is None:
        return None
    if not isinstance(tool_calls, list):
        return "tool_calls 不是列表"
    seen: set[str] = set()
    for i, call in enumerate(tool_calls):
        where = f"tool_calls[{i}]"
        kind = getattr(call, "type", type(call).__name__)
        if not isinstance(call, ChatCompletionMessageFunctionToolCall) or kind not in (
                None, "function"):
            return f"{where} 的类型是 {kind!r}，这个循环只执行 function 类型的调用"
        if not isinstance(call.function, Function):
            return f"{where} 里没有 function"
        if not isinstance(call.function.name, str | None) or not isinstance(
                call.function.arguments, str | None):
            return f"{where} 的 function.name 和 function.arguments 必须是字符串"
        if not isinstance(call.id, str) or not call.id.strip():
            return f"{where} 没有 id，结果无法对应回去"
        if call.id in seen:
            return f"id {call.id!r} 在同一个回复里出现了两次，结果无法一一对应"
        seen.add(call.id)
    return None


def read_reply(response: Any, step: TraceStep) -> ChatCompletionMessage:
    """The reply's message once checked; fills in the model step (tokens, model, finish).

    Raises:
        Stop: PROVIDER_ERROR when the response is not a usable chat completion
            (an HTML page, a list, no choices, no message, a strange tool call ...).
    """
    def unusable(problem: str) -> Stop:
        return Stop(StopReason.PROVIDER_ERROR, f"模型服务返回的响应不能用：{problem}。")

    if isinstance(response, str) and response.lstrip().startswith("<"):
        raise Stop(StopReason.PROVIDER_ERROR, HTML_PAGE)
    if not isinstance(response, ChatCompletion):
        raise unusable(f"它不是 chat completion 对象，而是 {type(response).__name__} "
                       f"{shorten(repr(response), 60)}")
    if isinstance(response.usage, CompletionUsage):
        step.prompt_tokens = _count(response.usage.prompt_tokens)
        step.completion_tokens = _count(response.usage.completion_tokens)
        step.total_tokens = _count(response.usage.total_tokens)
    step.model = response.model if isinstance(response.model, str) else None
    if not isinstance(response.choices, list) or not response.choices:
        raise Stop(StopReason.PROVIDER_ERROR, "模型服务返回的响应里没有 choices。")
    choice = response.choices[0]
    message = getattr(choice, "message", None)
    if not isinstance(message, ChatCompletionMessage):
        raise unusable("choices[0] 里没有 message")
    step.finish_reason = choice.finish_reason if isinstance(choice.finish_reason, str) else None
    if not isinstance(message.content, str | None):
        raise unusable("message.content 不是文本")
    problem = tool_calls_problem(message.tool_calls)
    if problem:
        raise unusable(problem)
    step.content = message.content
    step.decision = "tool_calls" if message.tool_calls else "answer"
    return message


def ask_model(client: openai.OpenAI, round_no: int, record: Callable[[TraceStep], None],
              on_text: Callable[[str], None] | None = None,
              **request: Any) -> ChatCompletionMessage:
    """One model call, recorded as a model step; its checked message. A streamed reply
    (`stream=True` in the request) is joined first (`vibe_agent.stream`), its text
    pieces passed to `on_text` as they arrive, and then checked like any other.

    Raises:
        Stop: PROVIDER_ERROR when the call failed or the reply cannot be used (the
            model step is recorded first, with decision "error").
    """
    step = TraceStep(round=round_no, kind="model", decision="error")
    started = time.perf_counter()
    failure: Stop | None = None
    try:
        response = client.chat.completions.create(**request)
        if request.get("stream"):
            response = streamed_reply(response, on_text)
        message = read_reply(response, step)
    except (openai.APIError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        failure = too_long(exc) if is_context_overflow(exc) else Stop(
            StopReason.PROVIDER_ERROR, provider_failure(exc))
    except Stop as unusable:
        failure = unusable
    step.elapsed_ms = (time.perf_counter() - started) * 1000
    record(step)
    if failure:
        raise failure
    return message


def streamed_reply(chunks: Any, on_text: Callable[[str], None] | None) -> ChatCompletion:
    """The completion a stream adds up to.

    Raises:
        Stop: PROVIDER_ERROR when the stream broke off, or not a single chunk
            arrived (e.g. an HTML page).
    """
    try:
        assembled = streaming.assemble(chunks, on_text)
    except (openai.APIConnectionError, httpx2.TransportError) as exc:
        cause = exc.__cause__ or exc
        raise Stop(StopReason.PROVIDER_ERROR, f"流式响应中途断开：{type(cause).__name__}: "
                   f"{shorten(str(cause), 120)}") from exc
    if not assembled.chunks:
        raise Stop(StopReason.PROVIDER_ERROR, "模型服务的流式响应里一个数据块也没有"
                   "（可能是一个 HTML 网页，或者服务不支持 stream=True）。")
    return streaming.completion(assembled)


# ---------------------------------------------------------------------------
# Running one tool call
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
    step.result, step.decision = clean_text(result.output), result.error_kind or "ok"
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


def capped(text: str, limit: int) -> str:
    """At most `limit` characters of a tool result, with a note of what was cut (0: no cap)."""
    if not limit or len(text) <= limit:
        return text
    return (f"{text[:limit]}\n\n[truncated by the agent loop: showing the first {limit} of "
            f"{len(text)} characters, {len(text) - limit} cut]")


def check_limits(max_iters: int, max_repeats: int, max_cycle: int, max_tool_errors: int,
                 max_result_chars: int) -> None:
    """Raise ValueError for brake settings that are a harness bug."""
    if max_iters < 1:
        raise ValueError("max_iters must be at least 1: the round brake cannot be switched off")
    if max_repeats == 1 or max_repeats < 0:
        raise ValueError(f"max_repeats={max_repeats}: the limit-th identical call in a row is "
                         "refused, so 1 would refuse every call; use 0 (off) or 2 or more")
    if max_cycle == 1 or max_cycle < 0:
        raise ValueError(f"max_cycle={max_cycle}: a cycle has 2 or more calls; "
                         "use 0 (off) or 2 or more")
    if max_tool_errors < 0 or max_result_chars < 0:
        raise ValueError("max_tool_errors and max_result_chars must be 0 (off) or more")


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


def run_agent(client: openai.OpenAI, question: str, registry: ToolRegistry, *, model: str,
              max_iters: int = 6, max_repeats: int = 3, max_cycle: int = 3,
              max_tool_errors: int = 3, max_result_chars: int = MAX_RESULT_CHARS,
              system_prompt: str = DEFAULT_SYSTEM_PROMPT, temperature: float | None = 0,
              trace: Trace | None = None, on_step: Callable[[TraceStep], None] | None = None,
              prepare: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None,
              stream: bool = False, on_text: Callable[[str], None] | None = None,
              messages: list[dict[str, Any]] | None = None, tool_workers: int = 1,
              compaction: Compaction | None = None,
              finish_check: Callable[[str], str | None] | None = None, max_refusals: int = 3,
              **request_options: Any) -> AgentResult:
    """Run the agent loop on one question (the brakes are described at the top of the file).

    Args:
        client: an `openai.OpenAI` client (live, replaying, local or scripted).
        question: the user's question.
        registry: the tools the model may call.
        model: the model name sent with every request.
        max_iters: most model calls in one run (at least 1: it cannot be switched off).
        max_repeats: the max_repeats-th identical call in a row is refused (0: off; not 1).
        max_cycle: 2 to max_cycle calls going round a second time are refused (0: off).
        max_tool_errors: stop after this many failing tool results in a row (0: off).
        max_result_chars: most characters of one tool result in the history (0: no cap).
        system_prompt: the behaviour rules sent as the first message.
        temperature: sampling temperature; 0 makes runs reproducible (None: not sent).
        trace: a fresh Trace to fill (yours survives an exception that escapes).
        on_step: called with every step as it happens (e.g. to print live).
        prepare: makes what is sent each round from the full history (`vibe_agent.context`).
        stream: ask for streamed replies (with usage at the end); the result is the same.
        on_text: with `stream`, called with each piece of the model's text as it arrives.
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
        max_refusals: refusals sent back to the model; the next one ends the run
            (FINISH_REFUSED). 0: the check judges once and never asks again.
        request_options: more fields for `chat.completions.create` (e.g. max_tokens).
    """
    if tool_workers < 1:
        raise ValueError(f"tool_workers={tool_workers}: at least 1 (1 runs calls one by one)")
    check_limits(max_iters, max_repeats, max_cycle, max_tool_errors, max_result_chars)
    if max_refusals < 0:
        raise ValueError("max_refusals must be 0 or more")
    messages = [] if messages is None else messages
    if not messages:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": clean_text(question)})
    trace = Trace() if trace is None else trace
    trace.model, request = model, request_fields(registry, model, temperature, request_options)
    if stream:  # the caller's stream_options win (some providers reject include_usage)
        request = {"stream": True, "stream_options": {"include_usage": True}} | request
    made: list[tuple[str, str]] = []  # every call so far, for the repeat and cycle brakes
    errors, round_no = ToolErrorBrake(max_tool_errors), 0
    refusals = 0  # answers the finish check sent back

    def record(step: TraceStep) -> None:
        trace.append(step)
        if compaction:
            compaction.observe(step)
        if on_step:
            on_step(step)

    def sent() -> list[dict[str, Any]]:
        return prepare(messages) if prepare else messages

    def finish(reason: StopReason, message: str, answer: str | None = None) -> AgentResult:
        record(TraceStep(round=round_no, kind="stop", decision=reason.value, content=message))
        return AgentResult(answer, reason, message, messages, trace)

    try:
        for round_no in range(1, max_iters + 1):
            # 1. call the model with the whole history (or what `prepare` makes of it)
            if compaction:  # over its budget, the middle of the history becomes a summary
                compaction.check(messages, round_no, record)
            try:
                reply = ask_model(client, round_no, record, on_text, messages=sent(), **request)
            except Stop as failed:  # too long for the window: compact, retry the round once
                if not (compaction and compaction.overflowed(failed, messages, round_no, record)):
                    raise
                reply = ask_model(client, round_no, record, on_text, messages=sent(), **request)
            # 2. the assistant message goes back verbatim; no tool_calls: the only normal exit
            messages.append(assistant_message(reply))
            if not reply.tool_calls:
                refusal = check_answer(finish_check, reply.content or "")
                if refusal is None:
                    return finish(StopReason.ANSWERED, "模型给出了最终回答。", reply.content or "")
                refusals += 1
                record(TraceStep(round=round_no, kind="check", decision="refused",
                                 content=refusal))
                if refusals > max_refusals:
                    raise Stop(StopReason.FINISH_REFUSED, f"完成检查第 {refusals} 次不接受"
                               "模型的回答，已停止。")
                messages.append({"role": "user", "content": refusal})  # the harness asks again
                continue
            # 3. answer every call by its id; once a brake trips, no later call runs
            stop: Stop | None = None
            steps = [TraceStep(round=round_no, kind="tool", decision="ok", tool_call_id=call.id,
                               tool=call.function.name, arguments=call.function.arguments)
                     for call in function_calls(reply)]
            for batch in [[step] for step in steps] if tool_workers == 1 else [steps]:
                todo: list[TraceStep] = []
                for step in batch:  # the spinning brakes look at earlier calls only
                    if stop:  # a brake tripped earlier in this reply: answered, not run
                        step.decision = "not_run"
                        step.result = f"Error: not run, the loop stopped ({stop.reason.value})."
                    else:
                        stop = spinning(made, step, max_repeats, max_cycle)  # refused: not run
                        todo += [] if stop else [step]
                for step, ok in zip(todo, run_tools(registry, todo, tool_workers), strict=True):
                    if errors.record(ok) and not stop:
                        stop = Stop(StopReason.TOOL_ERRORS, "工具连续失败 "
                                    f"{errors.failures_in_a_row} 次（最后一次是 "
                                    f"{shorten(step.tool, 60)}），已停止。")
                for step in batch:  # in the reply's order, each paired with its own id
                    call_id = clean_text(step.tool_call_id or "")
                    content = capped(step.result or "", max_result_chars)
                    if compaction:  # a long result may go to a file, the history keeps its head
                        content = compaction.offload(call_id, step.result or "", content)
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
                    record(step)
            if stop:  # 4. every call is answered: now a brake may end the run
                raise stop
        still = "完成检查仍未通过" if messages[-1]["role"] == "user" else "模型仍在调用工具"
        raise Stop(StopReason.MAX_ITERS, f"已达到最大轮次 {max_iters}，{still}。")
    except Stop as ended:
        return finish(ended.reason, ended.message)
    except Exception as exc:
        # A bug in our code or a replay miss: keep the trace complete, then let it raise.
        record(TraceStep(round=round_no, kind="stop", decision="exception",
                         content=f"{type(exc).__name__}: {exc}", error_type=type(exc).__name__))
        raise
