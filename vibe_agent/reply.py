"""Talking to the model: one request, and its reply checked before the loop uses it.

    ask_model(client, ...)         one request, recorded as a model step
        streamed_reply(chunks)     a stream joined back into one completion (lesson 15),
                                   within `ReplyLimits` (time, bytes, one call's arguments)
        read_reply(response)       a usable chat completion, or Stop(PROVIDER_ERROR)
    cut_off_calls(message, ...)    the calls max_tokens cut in half (finish_reason "length")
    assistant_message(message)     the reply as the history carries it

A model service can fail (an HTTP error, a time-out, an HTML page where JSON was
expected, a context window that is too small), and a reply can be unusable (no
choices, a tool call without an id or with an id seen twice, a streamed chunk with
a field of the wrong type). Each becomes a `Stop` with one line for people
(`provider_failure`, `too_long`); none of it is the model's mistake, so none of it
goes back to the model. A reply past `ReplyLimits` ends the run as REPLY_TOO_LONG.

A reply cut off by max_tokens (finish_reason "length") is unfinished. A call whose
arguments were cut is never run: it is answered with `CUT_OFF_CALL`, and the history
carries "{}" as its arguments, since a provider may reject the half-written JSON
(llama.cpp answers HTTP 500). An answer that was cut ends the run as CUT_OFF
(`cut_off_answer`), never as a plain ANSWERED: the result keeps the text so far, but
`ok` is False. The loop does not ask the model to go on by itself (the person or the
caller decides: a larger max_tokens, or "go on").

What goes into the history is text a provider accepts: a lone surrogate (a file
name that is not UTF-8, echoed back by a tool) becomes U+FFFD (`clean_text`), and
a tool name the provider would reject (empty, null, "a b") is sent back in a valid
spelling (`history_name`); the trace keeps the name the model really sent.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx2
import openai
import pydantic
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.completion_usage import CompletionUsage

from . import stream as streaming
from .stops import Stop, StopReason
from .stream import DEFAULT_LIMITS, ReplyLimits, ReplyTooLong, StreamError
from .trace import TraceStep, shorten

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


def assistant_message(message: ChatCompletionMessage,
                      cut_off: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """The assistant's reply as a dict for `messages`, with its tool_calls as sent,
    except that a name becomes a valid one (`history_name`), missing arguments become
    "{}", and lone surrogates become U+FFFD (`clean_text`).

    Args:
        message: the reply.
        cut_off: ids of calls max_tokens cut in half (`cut_off_calls`): their
            arguments become "{}", which every provider accepts.
    """
    content = message.content
    entry: dict[str, Any] = {"role": "assistant",
                             "content": content if content is None else clean_text(content)}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": clean_text(call.id),
                "type": "function",
                "function": {"name": history_name(clean_text(call.function.name or "")),
                             "arguments": "{}" if call.id in cut_off
                             else clean_text(call.function.arguments or "{}")},
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


def read_reply(response: Any, step: TraceStep,
               limits: ReplyLimits = DEFAULT_LIMITS) -> ChatCompletionMessage:
    """The reply's message once checked; fills in the model step (tokens, model, finish).

    Raises:
        Stop: PROVIDER_ERROR when the response is not a usable chat completion
            (an HTML page, a list, no choices, no message, a strange tool call ...);
            REPLY_TOO_LONG when a call's arguments pass `limits.max_argument_chars`.
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
    try:
        for call in function_calls(message):
            limits.check_arguments(len(call.function.arguments or ""))
    except ReplyTooLong as exc:
        raise too_big(exc) from None
    step.content = message.content
    step.decision = "tool_calls" if message.tool_calls else "answer"
    return message


def ask_model(client: openai.OpenAI, round_no: int, record: Callable[[TraceStep], None],
              on_text: Callable[[str], None] | None = None,
              limits: ReplyLimits = DEFAULT_LIMITS,
              **request: Any) -> tuple[ChatCompletionMessage, TraceStep]:
    """One model call, recorded as a model step; its checked message and that step
    (its `finish_reason` says whether max_tokens cut the reply off). A streamed reply
    (`stream=True` in the request) is joined first (`vibe_agent.stream`), within
    `limits`, its text pieces passed to `on_text` as they arrive, and then checked
    like any other.

    Raises:
        Stop: PROVIDER_ERROR when the call failed or the reply cannot be used,
            REPLY_TOO_LONG past `limits` (the model step is recorded first, with
            decision "error").
    """
    step = TraceStep(round=round_no, kind="model", decision="error")
    started, sent = time.perf_counter(), time.monotonic()
    failure: Stop | None = None
    try:
        response = client.chat.completions.create(**request)
        if request.get("stream"):
            response = streamed_reply(response, on_text, limits, sent)
        message = read_reply(response, step, limits)
    except (openai.APIError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        failure = too_long(exc) if is_context_overflow(exc) else Stop(
            StopReason.PROVIDER_ERROR, provider_failure(exc))
    except Stop as unusable:
        failure = unusable
    step.elapsed_ms = (time.perf_counter() - started) * 1000
    record(step)
    if failure:
        raise failure
    return message, step


def streamed_reply(chunks: Any, on_text: Callable[[str], None] | None,
                   limits: ReplyLimits = DEFAULT_LIMITS,
                   started: float | None = None) -> ChatCompletion:
    """The completion a stream adds up to, read within `limits` (the time counted from
    `started`, a `time.monotonic()` reading taken when the request was sent).

    Raises:
        Stop: PROVIDER_ERROR when the stream broke off, a chunk has a field of the
            wrong type, or not a single chunk arrived (e.g. an HTML page);
            REPLY_TOO_LONG when the reply passed one of `limits`.
    """
    started = time.monotonic() if started is None else started
    try:
        assembled = streaming.assemble(bounded(chunks, limits, started), on_text,
                                       limits=limits, started=started)
        if not assembled.chunks:
            raise Stop(StopReason.PROVIDER_ERROR, "模型服务的流式响应里一个数据块也没有"
                       "（可能是一个 HTML 网页，或者服务不支持 stream=True）。")
        return streaming.completion(assembled)
    except (openai.APIConnectionError, httpx2.TransportError) as exc:
        cause = exc.__cause__ or exc
        raise Stop(StopReason.PROVIDER_ERROR, f"流式响应中途断开：{type(cause).__name__}: "
                   f"{shorten(str(cause), 120)}") from exc
    except (StreamError, pydantic.ValidationError) as exc:
        raise Stop(StopReason.PROVIDER_ERROR, "模型服务的流式响应不能用："
                   f"{shorten(str(exc), 160)}。") from exc
    except ReplyTooLong as exc:
        raise too_big(exc) from exc


def too_big(exc: ReplyTooLong) -> Stop:
    """The stop for a reply past one of its `ReplyLimits`: the limit named, and how to change it."""
    return Stop(StopReason.REPLY_TOO_LONG, f"模型的回复超出上限，已停止：{exc}。"
                "需要时用 run_agent(..., reply_limits=ReplyLimits(...)) 调大。")


class _Bounded(httpx2.SyncByteStream):
    """A streamed body read within one reply's limits: its bytes counted and the clock
    checked at every piece that arrives. (The client's timeout is per read: a server
    sending a byte at a time, or empty deltas forever, never trips it.)"""

    def __init__(self, body: httpx2.SyncByteStream, limits: ReplyLimits,
                 started: float) -> None:
        self.body, self.limits, self.started = body, limits, started

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for piece in self.body:
            received += len(piece)
            self.limits.check_bytes(received)
            self.limits.check_time(self.started)
            yield piece

    def close(self) -> None:
        self.body.close()


def bounded(chunks: Any, limits: ReplyLimits, started: float) -> Any:
    """The SDK's stream with its HTTP body read through `_Bounded`, before a byte is read,
    so the limits hold even inside one endless server-sent event (other iterables of
    chunks are returned as they are: `assemble` checks them chunk by chunk).

    The SDK's own `Stream` is read as plain dicts (`events`): it would build a pydantic
    object for every chunk, which cost as much again as the rest of a streamed reply.
    """
    response = getattr(chunks, "response", None)  # the SDK's Stream keeps its response
    if isinstance(response, httpx2.Response) and isinstance(response.stream,
                                                            httpx2.SyncByteStream):
        response.stream = _Bounded(response.stream, limits, started)
        if isinstance(chunks, openai.Stream):
            return events(response)
    return chunks


def events(response: httpx2.Response) -> Iterator[Any]:
    """The chunks of a server-sent event stream, each event's JSON parsed once, as the
    SDK's `Stream` reads them: up to `data: [DONE]`, and an event that carries an
    `error` raises `openai.APIError`. Bytes that are not UTF-8 raise UnicodeDecodeError."""
    data: list[str] = []  # the data lines of the event being read
    try:
        for line in _lines(response.iter_bytes()):
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:  # a blank line ends an event (other fields are skipped)
                payload, data = "\n".join(data), []
                if payload.startswith("[DONE]"):
                    return
                chunk = json.loads(payload)
                if isinstance(chunk, dict) and chunk.get("error"):
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else None
                    raise openai.APIError(message if isinstance(message, str) and message
                                          else "An error occurred during streaming",
                                          response.request, body=error)
                yield chunk
    finally:
        response.close()


def _lines(pieces: Iterable[bytes]) -> Iterator[str]:
    """The lines of a byte stream (ended by \\n or \\r\\n), decoded as UTF-8. A line
    that arrives in many pieces is joined once, so the time stays linear in its size."""
    parts: list[bytes] = []  # the pieces of the line not yet ended
    for piece in pieces:
        *ends, rest = piece.split(b"\n")
        for end in ends:
            yield b"".join([*parts, end]).removesuffix(b"\r").decode()
            parts = []
        parts.append(rest)


CUT_OFF_CALL = ("Error: your reply was cut off at max_tokens (finish_reason \"length\") "
                "while you were still writing this call, so it was not run. Its arguments "
                "were incomplete: {arguments}. Make the call again; if its arguments are "
                "long, do the work in smaller calls.")


def _whole_json(text: str | None) -> bool:
    try:
        json.loads(text or "")
    except (ValueError, RecursionError):
        return False
    return True


def cut_off_calls(message: ChatCompletionMessage, finish_reason: str | None) -> set[str]:
    """The ids of the calls that max_tokens cut in half: with finish_reason "length",
    every call whose arguments are not a whole JSON value (empty ones included)."""
    if finish_reason != "length":
        return set()
    return {call.id for call in function_calls(message)
            if not _whole_json(call.function.arguments)}


def cut_off_answer(max_tokens: Any) -> Stop:
    """The stop for an answer cut off by max_tokens: CUT_OFF, with the limit named."""
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        limit = f" max_tokens={max_tokens} 的上限"
    else:
        limit = "回复长度的上限（这次请求没有设 max_tokens，用的是模型服务自己的默认值）"
    return Stop(StopReason.CUT_OFF, f"回答被截断了：模型写到{limit}时还没写完"
                "（finish_reason 是 length），这不是完整的回答。调大 max_tokens，或者让它接着写。")
