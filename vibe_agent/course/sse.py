"""Server-sent events for the course's own models: a reply served as a stream.

A real provider answers `stream=True` with `text/event-stream`: one `data: {chunk}`
event per piece and a final `data: [DONE]`. The scripted models and the replay of a
recording that holds a whole completion use `chunks_of` to cut that completion into
the chunks a provider would send: content in small pieces, each tool call's id and
name in its first delta and its arguments in pieces after it, `finish_reason` in an
empty last delta, and `usage` in a chunk of its own when the request asked for it
(`stream_options.include_usage`). `parse_events` reads such a body back.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai

PIECE_CHARS = 8  # characters per content or arguments piece


def _pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def wants_usage(request: dict[str, Any]) -> bool:
    """Whether a streamed request asked for the usage chunk at the end."""
    options = request.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def chunks_of(completion: dict[str, Any], *, include_usage: bool,
              interleave: bool = False) -> list[dict[str, Any]]:
    """The chunks a provider streams for this ChatCompletion body.

    Args:
        completion: the whole reply.
        include_usage: end with a chunk that carries only `usage`.
        interleave: send the tool calls' deltas taking turns (call 0, call 1, call 0 ...)
            instead of one call after the other. Every delta still names its call by
            `index`, so the protocol allows it; only joining by index gets it right.
    """
    head = {key: completion.get(key) for key in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return head | {"choices": [{"index": 0, "delta": delta, "logprobs": None,
                                    "finish_reason": finish}]}

    choice = completion["choices"][0]
    message = choice.get("message") or {}
    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [chunk({"content": piece}) for piece in _pieces(message.get("content") or "")]
    per_call = []
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        first = chunk({"tool_calls": [{
            "index": index, "id": call.get("id"), "type": "function",
            "function": {"name": function.get("name"), "arguments": ""}}]})
        per_call.append([first] + [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(function.get("arguments") or "")])
    if interleave:  # round robin: one delta of each call in turn
        longest = max((len(deltas) for deltas in per_call), default=0)
        chunks += [deltas[i] for i in range(longest) for deltas in per_call if i < len(deltas)]
    else:
        chunks += [delta for deltas in per_call for delta in deltas]
    chunks.append(chunk({}, choice.get("finish_reason")))
    if include_usage:
        chunks.append(head | {"choices": [], "usage": completion.get("usage")})
    return chunks


def event_stream(chunks: list[dict[str, Any]]) -> bytes:
    """The `text/event-stream` body carrying these chunks, ended by `[DONE]`."""
    events = [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
    return ("".join(events) + "data: [DONE]\n\n").encode()


def parse_events(body: bytes | str) -> list[dict[str, Any]]:
    """The JSON chunks of an event-stream body (comments, other fields and [DONE] skipped).

    Raises:
        ValueError: an event's data is not JSON.
    """
    text = body.decode() if isinstance(body, bytes) else body
    chunks, data = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:  # a blank line ends an event
            payload, data = "\n".join(data), []
            if payload.strip() != "[DONE]":
                chunks.append(json.loads(payload))
    return chunks


# --- chunks written by hand (tests, checkers and lesson 15 build odd shapes with them) ---


def chunk_body(delta: dict[str, Any] | None, finish: str | None = None,
               **extra: Any) -> dict[str, Any]:
    """One chunk's JSON: `delta` for choice 0 (None: a chunk with no choices, like the
    usage chunk); `extra` adds top-level fields such as `usage`."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-stream", "object": "chat.completion.chunk", "created": 1,
            "model": "m", "choices": choices, **extra}


def call_delta(index: int | None, id: str | None = None, name: str | None = None,
               arguments: str | None = None) -> dict[str, Any]:
    """A delta carrying one piece of one tool call; None leaves the field out."""
    piece: dict[str, Any] = {"function": {}}
    if index is not None:
        piece["index"] = index
    if id is not None:
        piece |= {"id": id, "type": "function"}
    if name is not None:
        piece["function"]["name"] = name
    if arguments is not None:
        piece["function"]["arguments"] = arguments
    return {"tool_calls": [piece]}


def sdk_chunks(chunks: list[dict[str, Any]]) -> list[Any]:
    """These chunk bodies as the SDK hands them out: served as server-sent events to a
    genuine `openai.OpenAI` client and read back as `ChatCompletionChunk` objects."""
    body = event_stream(chunks)
    transport = httpx2.MockTransport(lambda request: httpx2.Response(
        200, content=body, headers={"content-type": "text/event-stream"}))
    client = openai.OpenAI(api_key="no-key", base_url="http://stream.invalid/v1",
                           max_retries=0, http_client=httpx2.Client(transport=transport))
    return list(client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True))
