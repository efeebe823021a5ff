"""Streaming: put a streamed reply back together, piece by piece, as one message.

With `stream=True` the server sends the reply as many small chunks (server-sent
events). Text arrives as pieces of `content`; each tool call arrives as deltas that
carry an `index` saying which call they belong to:

    chunk 1   delta.tool_calls = [{index: 0, id: "call_a", function: {name: "calc", arguments: ""}}]
    chunk 2   delta.tool_calls = [{index: 0, function: {arguments: '{"expr'}}]
    chunk 3   delta.tool_calls = [{index: 1, id: "call_b", function: {name: "now", ...}}]
    chunk 4   delta.tool_calls = [{index: 0, function: {arguments: 'ession": "17*23"}'}}]
    last      choices = [], usage = {...}       (only with stream_options.include_usage)

Pieces are joined per `index`, in the order they arrive, and never parsed on the
way: an argument string may be cut anywhere, even inside a JSON escape such as
`"\\u4e` | `2d"`. Joining by arrival instead of by index mixes two calls' arguments
(chunk 4 above belongs to call 0, not to call 1 that arrived just before it). The id
and the function name are kept as they first arrive: servers that repeat them in
later deltas send the same value again, not a further piece.

Servers differ in small ways, and all of these are accepted: the id (and the name)
only in a call's first delta, or repeated in every one (later ones may send "" or
nothing); no `index` at all when there is a single call; an empty last delta;
`finish_reason` "tool_calls" or "stop"; a final chunk without choices that carries
only `usage`.

What is not accepted, because no server means it: a field of the wrong type (a
number where text, a list or a usage object belongs) raises `StreamError`. A reply
is bounded by `ReplyLimits`: its time, the characters kept, and one call's arguments;
past a limit `ReplyTooLong` is raised. The pieces are kept in lists and joined once,
so joining takes time in proportion to the reply's size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pydantic
from openai.types.chat import ChatCompletion
from openai.types.completion_usage import CompletionUsage

from .layers import Layer


class StreamError(ValueError):
    """A chunk no server means: a field of the wrong type (the provider's fault)."""


class ReplyTooLong(Exception):
    """One reply passed a limit of `ReplyLimits`; the message names the limit."""


@dataclass(frozen=True)
class ReplyLimits:
    """How far one reply of the model may go before the loop gives up on it.

    The client's timeout bounds each read only: a server that keeps sending (empty
    deltas, or one byte at a time) never trips it. These bound the whole reply.
    """

    max_seconds: float = 600.0  # one streamed reply, from the request to its last chunk
    max_bytes: int = 32_000_000  # bytes received for one streamed reply (and characters kept)
    max_argument_chars: int = 2_000_000  # of one tool call's arguments (streamed or not)

    def __post_init__(self) -> None:
        if not (self.max_seconds > 0 and self.max_bytes > 0 and self.max_argument_chars > 0):
            raise ValueError(f"every limit of {self} must be more than 0")

    def check_time(self, started: float) -> None:
        """Raise ReplyTooLong when more than `max_seconds` passed since `started`
        (a `time.monotonic()` reading)."""
        if time.monotonic() - started > self.max_seconds:
            raise ReplyTooLong(f"流式回复过了 {self.max_seconds:g} 秒还没有结束"
                               "（ReplyLimits.max_seconds）")

    def check_bytes(self, size: int) -> None:
        if size > self.max_bytes:
            raise ReplyTooLong(f"一次回复超过了 {self.max_bytes:,} 字节（ReplyLimits.max_bytes）")

    def check_arguments(self, size: int) -> None:
        if size > self.max_argument_chars:
            raise ReplyTooLong(f"一个工具调用的参数超过了 {self.max_argument_chars:,} 个字符"
                               "（ReplyLimits.max_argument_chars）")


DEFAULT_LIMITS = ReplyLimits()


@dataclass
class _Call:
    """One tool call being assembled from its deltas."""

    index: int  # the server's index (-1: the server sent none)
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)  # the arguments, as they arrived
    size: int = 0  # characters in `pieces`

    @property
    def arguments(self) -> str:
        return "".join(self.pieces)


@dataclass
class Assembled:
    """Everything a stream said, joined: the message's parts and the stream's extras."""

    text: list[str] | None = None  # the content pieces (None: no content field came)
    thoughts: list[str] | None = None  # the reasoning_content pieces
    calls: dict[int, _Call] = field(default_factory=dict)  # in order of first arrival
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    id: str | None = None
    chunks: int = 0  # how many chunks arrived (none at all: not a stream)
    kept: int = 0  # characters kept (text, reasoning and arguments)
    slots: dict[int, int] = field(default_factory=dict)  # the server's index -> ours
    last: int = -1  # the server index of the last delta (for deltas without one)

    @property
    def content(self) -> str | None:
        return None if self.text is None else "".join(self.text)

    @property
    def reasoning(self) -> str | None:
        return None if self.thoughts is None else "".join(self.thoughts)

    def message(self) -> dict[str, Any]:
        """The assistant message as the non-streaming API gives it, ready for `messages`."""
        # Some servers (and the course's scripted models) open a stream with content ""
        # even before tool calls, where OpenAI sends null; unstreamed, the same reply has
        # content null unless some text really came.
        content = self.content or (None if self.calls else self.content)
        entry: dict[str, Any] = {"role": "assistant", "content": content}
        if self.calls:
            entry["tool_calls"] = [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for _, call in sorted(self.calls.items(), key=lambda kv: (kv[1].index, kv[0]))
            ]
        if self.reasoning:  # reasoning models want it passed back unchanged
            entry["reasoning_content"] = self.reasoning
        return entry


def _get(obj: Any, name: str) -> Any:
    """A field of an SDK object or of a plain dict (a chunk read from a recording)."""
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:  # fields the SDK does not know (reasoning_content) live here
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


OBJECT = (dict, pydantic.BaseModel)  # a JSON object: a plain dict, or the SDK's model of one


def _field(obj: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    """A field that is missing, null or of type `kind`.

    Raises:
        StreamError: it is there, with another type (e.g. a number where text belongs).
    """
    value = _get(obj, name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise StreamError(f"{where}{name} 是 {type(value).__name__} {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _usage(usage: Any) -> dict[str, Any]:
    """The usage object as a dict, checked against the SDK's own type."""
    data = usage if isinstance(usage, dict) else usage.model_dump(exclude_none=True,
                                                                  warnings=False)
    try:
        CompletionUsage.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise StreamError(f"usage.{where} 不对（{first['msg']}）") from None
    return dict(data)


def _add_call_delta(assembled: Assembled, delta: Any, limits: ReplyLimits) -> None:
    """Fold one tool-call delta into the call it belongs to."""
    if not isinstance(delta, OBJECT):
        raise StreamError(f"delta.tool_calls 里有一项是 {type(delta).__name__} {_shown(delta)}")
    calls, slots = assembled.calls, assembled.slots
    index = _field(delta, "index", int, "tool_calls[].")
    call_id = _field(delta, "id", str, "tool_calls[].") or ""
    function = _field(delta, "function", OBJECT, "tool_calls[].")
    name = _field(function, "name", str, "tool_calls[].function.") if function else None
    arguments = _field(function, "arguments", str, "tool_calls[].function.") if function else None
    if index is None:
        # No index (some servers, a single call): a new id starts a new call,
        # anything else continues the call seen last.
        known = any(call.id == call_id for call in calls.values())
        index = -1 if call_id and not known else assembled.last
    slot = slots.get(index)
    if slot is None or (call_id and calls[slot].id and calls[slot].id != call_id):
        # A call not seen yet - or a server that reuses one index for several calls,
        # each with an id of its own: either way the delta starts a new call.
        slot = slots[index] = len(calls)
        calls[slot] = _Call(index)
    call = calls[slot]
    if call_id and not call.id:  # the id comes once; later deltas repeat it or send ""
        call.id = call_id
    if name and not call.name:  # the same for the name: a repeat is not a second piece
        call.name = name
    if arguments:
        call.pieces.append(arguments)
        call.size += len(arguments)
        assembled.kept += len(arguments)
        limits.check_arguments(call.size)
    assembled.last = index


def assemble(chunks: Iterable[Any], on_text: Callable[[str], None] | None = None, *,
             limits: ReplyLimits = DEFAULT_LIMITS, started: float | None = None) -> Assembled:
    """Join a stream's chunks (SDK `ChatCompletionChunk`s or their dicts), in order.

    Args:
        chunks: the stream, e.g. what `client.chat.completions.create(stream=True)` returns.
        on_text: called with each piece of content as it arrives (e.g. to print it).
        limits: the bounds of one reply; the time counts from `started`.
        started: when the request was sent (`time.monotonic()`; None: now).

    Raises:
        StreamError: a chunk has a field of the wrong type.
        ReplyTooLong: the reply passed one of `limits`.
    """
    result = Assembled()
    started = time.monotonic() if started is None else started
    for chunk in chunks:
        limits.check_time(started)
        result.chunks += 1
        if not isinstance(chunk, OBJECT):
            raise StreamError(f"数据块是 {type(chunk).__name__} {_shown(chunk)}，不是 JSON 对象")
        result.id = result.id or _field(chunk, "id", str, "")
        result.model = result.model or _field(chunk, "model", str, "")
        usage = _field(chunk, "usage", OBJECT, "")
        if usage is not None:
            result.usage = _usage(usage)
        choices = _field(chunk, "choices", list, "") or []
        if not choices:  # the usage-only chunk at the end
            continue
        choice = choices[0]
        if not isinstance(choice, OBJECT):
            raise StreamError(f"choices[0] 是 {type(choice).__name__} {_shown(choice)}")
        result.finish_reason = _field(choice, "finish_reason", str, "choices[0].") or (
            result.finish_reason)
        delta = _field(choice, "delta", OBJECT, "choices[0].")
        if delta is None:
            continue
        text = _field(delta, "content", str, "delta.")
        if text is not None:
            result.text = [] if result.text is None else result.text
            result.text.append(text)
            result.kept += len(text)
            if on_text and text:
                on_text(text)
        reasoning = _field(delta, "reasoning_content", str, "delta.")
        if reasoning is not None:
            result.thoughts = [] if result.thoughts is None else result.thoughts
            result.thoughts.append(reasoning)
            result.kept += len(reasoning)
        for call_delta in _field(delta, "tool_calls", list, "delta.") or []:
            _add_call_delta(result, call_delta, limits)
        limits.check_bytes(result.kept)
    return result


def accumulate(chunks: Iterable[Any]) -> dict[str, Any]:
    """The assistant message a stream adds up to: role, content, and tool_calls (id,
    type "function", name and arguments joined per index, calls in index order) as
    the non-streaming API would give them; `usage` too when a chunk carried it.

    Args:
        chunks: the stream's chunks, in the order they arrived.

    Raises:
        StreamError: a chunk has a field of the wrong type.
        ReplyTooLong: the reply passed one of the default `ReplyLimits`.
    """
    assembled = assemble(chunks)
    message = assembled.message()
    if assembled.usage is not None:
        message["usage"] = assembled.usage
    return message


FINISH_REASONS = {"stop", "length", "tool_calls", "content_filter", "function_call"}


def completion(assembled: Assembled) -> ChatCompletion:
    """The `ChatCompletion` the same reply would have been without streaming, so the
    loop checks a streamed reply exactly like any other (`vibe_agent.reply.read_reply`)."""
    message = assembled.message()
    finish = assembled.finish_reason
    if finish not in FINISH_REASONS:  # a stream cut short, or a server's own word
        finish = "tool_calls" if message.get("tool_calls") else "stop"
    return ChatCompletion.model_validate({
        "id": assembled.id or "streamed", "object": "chat.completion", "created": 0,
        "model": assembled.model or "", "usage": assembled.usage,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    })


class Streaming(Layer):
    """Ask for streamed replies (event `request`), with the usage at the end; the run's
    result is the same. `on_text` is called with each piece of the model's text as it
    arrives (event `text_piece`). A caller's `stream_options=None` (a request option of
    `run_agent`) leaves that field out, for a server that rejects it (then no usage)."""

    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        self.text = on_text

    def request(self, fields: dict[str, Any]) -> dict[str, Any]:
        fields = {"stream": True, "stream_options": {"include_usage": True}} | fields
        if fields["stream_options"] is None:  # the caller's choice wins
            del fields["stream_options"]
        return fields

    def text_piece(self, piece: str) -> None:
        if self.text:
            self.text(piece)
