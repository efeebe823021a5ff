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
(chunk 4 above belongs to call 0, not to call 1 that arrived just before it).

Servers differ in small ways, and all of these are accepted: the id only in a
call's first delta (later ones send "" or nothing), no `index` at all when there is
a single call, an empty last delta, `finish_reason` "tool_calls" or "stop", a final
chunk without choices that carries only `usage`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletion


@dataclass
class _Call:
    """One tool call being assembled from its deltas."""

    index: int  # the server's index (-1: the server sent none)
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class Assembled:
    """Everything a stream said, joined: the message's parts and the stream's extras."""

    content: str | None = None
    reasoning: str | None = None
    calls: dict[int, _Call] = field(default_factory=dict)  # in order of first arrival
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    id: str | None = None
    chunks: int = 0  # how many chunks arrived (none at all: not a stream)
    slots: dict[int, int] = field(default_factory=dict)  # the server's index -> ours
    last: int = -1  # the server index of the last delta (for deltas without one)

    def message(self) -> dict[str, Any]:
        """The assistant message as the non-streaming API gives it, ready for `messages`."""
        # Providers open every stream with content "", even before tool calls; the
        # same reply unstreamed has content null unless some text really came.
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


def _as_dict(usage: Any) -> dict[str, Any]:
    return dict(usage) if isinstance(usage, dict) else usage.model_dump(exclude_none=True)


def _add_call_delta(assembled: Assembled, delta: Any) -> None:
    """Fold one tool-call delta into the call it belongs to."""
    calls, slots = assembled.calls, assembled.slots
    index, call_id = _get(delta, "index"), _get(delta, "id") or ""
    if not isinstance(index, int):
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
    function = _get(delta, "function")
    if function is not None:
        call.name += _get(function, "name") or ""
        call.arguments += _get(function, "arguments") or ""
    assembled.last = index


def assemble(chunks: Iterable[Any], on_text: Callable[[str], None] | None = None) -> Assembled:
    """Join a stream's chunks (SDK `ChatCompletionChunk`s or their dicts), in order.

    Args:
        chunks: the stream, e.g. what `client.chat.completions.create(stream=True)` returns.
        on_text: called with each piece of content as it arrives (e.g. to print it).
    """
    result = Assembled()
    for chunk in chunks:
        result.chunks += 1
        result.id = result.id or _get(chunk, "id")
        result.model = result.model or _get(chunk, "model")
        if _get(chunk, "usage") is not None:
            result.usage = _as_dict(_get(chunk, "usage"))
        choices = _get(chunk, "choices") or []
        if not choices:  # the usage-only chunk at the end
            continue
        choice = choices[0]
        result.finish_reason = _get(choice, "finish_reason") or result.finish_reason
        delta = _get(choice, "delta")
        if delta is None:
            continue
        text = _get(delta, "content")
        if isinstance(text, str):
            result.content = (result.content or "") + text
            if on_text and text:
                on_text(text)
        reasoning = _get(delta, "reasoning_content")
        if isinstance(reasoning, str):
            result.reasoning = (result.reasoning or "") + reasoning
        for call_delta in _get(delta, "tool_calls") or []:
            _add_call_delta(result, call_delta)
    return result


def accumulate(chunks: Iterable[Any]) -> dict[str, Any]:
    """The assistant message a stream adds up to: role, content, and tool_calls (id,
    type "function", name and arguments joined per index, calls in index order) as
    the non-streaming API would give them; `usage` too when a chunk carried it.

    Args:
        chunks: the stream's chunks, in the order they arrived.
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
