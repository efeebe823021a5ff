"""Scripted models: test doubles that speak the real wire format.

A scripted model is NOT a language model. It is a small program that answers
`POST /chat/completions` with genuine ChatCompletion JSON, served at the HTTP
transport underneath a real `openai.OpenAI` client:

    your code -> openai.OpenAI -> httpx2.Client -> ScriptedModel.handle_request
                                                   (a list of replies or a responder)

So the SDK parses real JSON exactly as it would from a provider, and everything
above the transport (the loop, the registry, the learner's code) runs for real.

Scripts come in two shapes:
- a list of `Reply` objects, consumed in order (running out raises `ScriptExhausted`);
- a responder `f(request_body) -> Reply` that decides from what it was sent.

`max_requests=N` caps any script: request N + 1 raises `RequestCapReached`
instead of being answered, so a loop that never stops cannot hang a notebook or a
checker. `misbehaving(name)` builds the models the brakes lesson needs; the
reference model (the ideal path on the demo tasks) lives in `reference.py`.
Scripted models report no `usage` unless a reply carries one, or unless they are
given a context window (`context_window=N`): then they count tokens with a real
tokenizer (OpenAI's o200k_base, from the `bpe-openai` package), report that count as
`usage`, and answer a prompt longer than the window exactly as OpenAI does (HTTP 400,
code "context_length_exceeded"). We never invent token counts.
"""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import httpx2
import openai

from .sse import chunks_of, event_stream, wants_usage

SCRIPTED_BASE_URL = "http://scripted.invalid/v1"
CREATED = 1_764_460_800  # a fixed timestamp keeps scripted JSON reproducible


class ScriptExhausted(RuntimeError):
    """The scripted model got more requests than its script allows (a test bug, or a
    loop that does not stop)."""


class RequestCapReached(ScriptExhausted):
    """The scripted model refused a request beyond its `max_requests` cap."""


@dataclass
class ToolCallSpec:
    name: str
    arguments: str  # the raw JSON text, possibly broken on purpose
    id: str | None = None


@dataclass
class Reply:
    """One scripted response: a message, an HTTP error, or exact raw JSON."""

    content: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: dict[str, int] | None = None
    status: int = 200
    raw: dict[str, Any] | None = None  # sent as-is (e.g. a response with no choices)


def answer(content: str, usage: dict[str, int] | None = None) -> Reply:
    """A final answer: content and no tool calls."""
    return Reply(content=content, usage=usage)


def call(name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
         ) -> ToolCallSpec:
    """One tool call; a str `arguments` is sent verbatim (use it for broken JSON)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {},
                                                                   ensure_ascii=False)
    return ToolCallSpec(name, text, id)


def calls(*specs: ToolCallSpec, content: str | None = None,
          usage: dict[str, int] | None = None) -> Reply:
    """A response asking for one or more tool calls."""
    return Reply(content=content, tool_calls=list(specs), usage=usage)


# The error `type` and `code` OpenAI sends with these statuses (its error object always
# carries message, type, param and code; param and code may be null).
ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    404: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
}


def error_body(status: int, message: str, param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """An error body in OpenAI's shape: {"error": {message, type, param, code}}."""
    kind, default_code = ERROR_KINDS.get(status, ("api_error", None))
    return {"error": {"message": message, "type": kind, "param": param,
                      "code": code or default_code}}


def http_error(status: int, message: str = "scripted failure") -> Reply:
    """An HTTP error response such as 429 (rate limited) or 500."""
    return Reply(status=status, raw=error_body(status, message))


def usage_of(prompt: int, completion: int) -> dict[str, int]:
    """A usage block (for tests of how usage flows through, not a token count)."""
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


Responder = Callable[[dict[str, Any]], Reply]  # answers one request body with a Reply


class ScriptedModel(httpx2.BaseTransport):
    """A model played by a script, at the HTTP transport of a real client.

    Args:
        script: a list of replies (used in order) or a responder function.
        name: shown in provenance and errors; says what this model is.
        max_requests: answer at most this many requests; the next one raises
            `RequestCapReached` (None: no cap).
        check_history: answer a history that breaks the tool_calls rules with HTTP 400,
            as OpenAI does (the default); False passes it to the script unchecked, as
            servers that accept such a history do (llama.cpp does).
        interleave_calls: a streamed reply sends its tool calls' deltas taking turns
            (`sse.chunks_of`); the default sends one call after the other.
        context_window: the most prompt tokens a request may have (see `prompt_tokens`);
            a longer one gets OpenAI's HTTP 400 "context_length_exceeded". Set, every
            response also reports its counted `usage`. None: no window, no usage.
    """

    def __init__(self, script: Sequence[Reply] | Responder, *, name: str = "scripted",
                 max_requests: int | None = None, check_history: bool = True,
                 interleave_calls: bool = False, context_window: int | None = None) -> None:
        self.name = name
        self.interleave_calls = interleave_calls
        self.max_requests = max_requests
        self.check_history = check_history
        self.context_window = context_window
        self._responder = script if callable(script) else None
        self._replies = [] if callable(script) else list(script)
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    def client(self) -> openai.OpenAI:
        """A genuine `openai.OpenAI` whose HTTP requests reach this model."""
        return openai.OpenAI(api_key="scripted-no-key", base_url=SCRIPTED_BASE_URL,
                             http_client=httpx2.Client(transport=self), max_retries=0)

    @property
    def remaining(self) -> int:
        """Replies not yet used (always 0 for a responder)."""
        return max(0, len(self._replies) - len(self.requests)) if self._responder is None else 0

    def assert_consumed(self) -> None:
        """Raise if the script still has replies nobody asked for."""
        if self.remaining:
            raise AssertionError(f"scripted model {self.name!r}: {self.remaining} of "
                                 f"{len(self._replies)} replies were never requested")

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if not request.url.path.endswith("/chat/completions"):
            return httpx2.Response(404, json=error_body(
                404, f"Invalid URL ({request.method} {request.url.path}): scripted models "
                     "only serve /chat/completions"))
        body = json.loads(request.content)
        self.requests.append(body)
        if self.max_requests is not None and len(self.requests) > self.max_requests:
            raise RequestCapReached(
                f"scripted model {self.name!r} answers at most max_requests="
                f"{self.max_requests} requests and refused request #{len(self.requests)}: "
                "the loop calling it did not stop by itself"
            )
        problem = protocol_error(body) if self.check_history else None
        if problem:  # what OpenAI answers to a broken history
            return httpx2.Response(400, json=error_body(400, problem, param="messages"))
        prompt = prompt_tokens(body) if self.context_window is not None else None
        if prompt is not None and prompt > self.context_window:  # OpenAI's words and code
            return httpx2.Response(400, json=error_body(
                400, f"This model's maximum context length is {self.context_window} tokens. "
                     f"However, your messages resulted in {prompt} tokens. Please reduce the "
                     "length of the messages.", param="messages", code="context_length_exceeded"))
        reply = self._next_reply(body)
        if reply.raw is not None:
            return httpx2.Response(reply.status, json=reply.raw)
        if prompt is not None and reply.usage is None:
            reply = replace(reply, usage=usage_of(prompt, completion_tokens(reply)))
        completion = self.completion(body["model"], reply)
        if body.get("stream") and reply.status == 200:  # served as a provider streams it
            chunks = chunks_of(completion, include_usage=wants_usage(body),
                               interleave=self.interleave_calls)
            return httpx2.Response(200, content=event_stream(chunks),
                                   headers={"content-type": "text/event-stream"})
        return httpx2.Response(reply.status, json=completion)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self._responder is not None:
            return self._responder(body)
        if len(self.requests) > len(self._replies):
            raise ScriptExhausted(
                f"scripted model {self.name!r} got request #{len(self.requests)} but its "
                f"script has only {len(self._replies)} replies; add replies or look for "
                "an unexpected extra round"
            )
        return self._replies[len(self.requests) - 1]

    def completion(self, model: str, reply: Reply) -> dict[str, Any]:
        """Build the ChatCompletion JSON for a reply, with every field OpenAI always sends."""
        n = next(self._ids)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content,
                                   "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": spec.id or f"call_{n}_{i}", "type": "function",
                 "function": {"name": spec.name, "arguments": spec.arguments}}
                for i, spec in enumerate(reply.tool_calls, 1)
            ]
        body: dict[str, Any] = {
            "id": f"chatcmpl-{self.name}-{n}",
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
        }
        if reply.usage is not None:
            body["usage"] = reply.usage
        return body


@cache
def _encoding() -> Any:
    with warnings.catch_warnings():  # bpe-openai 0.1.4 reads its data with a deprecated call
        warnings.simplefilter("ignore", DeprecationWarning)
        from bpe_openai import get_encoding  # imported on first use (it loads its data)

        encoding = get_encoding("o200k_base")
        encoding.encode("warm up: the data is read on the first call")
    return encoding


def count_tokens(text: str) -> int:
    """How many o200k_base tokens (GPT-4o's tokenizer) `text` has: a real tokenizer."""
    return len(_encoding().encode(text, disallowed_special=()))


def prompt_tokens(body: dict[str, Any]) -> int:
    """A request's prompt tokens as a scripted model with a window counts them.

    The tokens of each message's role, content, tool calls and tool_call_id, plus
    those of the tool schemas as compact JSON. A real tokenizer, but not the exact
    count OpenAI would report (it adds a few tokens per message and formats tools its
    own way); the window and `usage` use this same count, so they agree.
    """
    parts = [json.dumps(body.get("tools") or [], ensure_ascii=False, separators=(",", ":"))]
    for m in body.get("messages") or []:
        parts += [str(m.get("role") or ""), str(m.get("content") or ""),
                  str(m.get("tool_call_id") or "")]
        parts += [f"{tc['function']['name']}({tc['function']['arguments']})"
                  for tc in m.get("tool_calls") or []]
    return sum(count_tokens(part) for part in parts)


def completion_tokens(reply: Reply) -> int:
    """A reply's tokens, counted like `prompt_tokens`."""
    return count_tokens(reply.content or "") + sum(
        count_tokens(f"{spec.name}({spec.arguments})") for spec in reply.tool_calls)


def protocol_error(body: dict[str, Any]) -> str | None:
    """The tool_calls rules a provider enforces, or None when the history keeps them.

    Every `role: tool` message must answer an id from the assistant message right
    before it, and every id must be answered before the conversation goes on.
    (OpenAI answers HTTP 400 with a message like the ones below.)
    """
    pending: list[str] = []
    for i, m in enumerate(body.get("messages") or []):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in pending:
                return (f"Invalid parameter: messages[{i}]: a message with role 'tool' must be "
                        "a response to a preceding message with 'tool_calls' "
                        f"(tool_call_id {m.get('tool_call_id')!r} matches none).")
            pending.remove(m["tool_call_id"])
            continue
        if pending:
            return (f"Invalid parameter: messages[{i}]: an assistant message with "
                    "'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. Missing: {', '.join(pending)}.")
        pending = [tc["id"] for tc in m.get("tool_calls") or []]
    if pending:
        return ("Invalid parameter: the last assistant message has 'tool_calls' that were "
                f"never answered: {', '.join(pending)}.")
    return None


# ---------------------------------------------------------------------------
# Reading a request: what was asked, which tools exist, what came back
# ---------------------------------------------------------------------------


def first_user_message(body: dict[str, Any]) -> str:
    """The text of a request's first user message ("" when there is none)."""
    return next((str(m.get("content") or "") for m in body.get("messages") or []
                 if m.get("role") == "user"), "")


def system_prompt(body: dict[str, Any]) -> str:
    """The text of a request's first system message ("" when there is none)."""
    return next((str(m.get("content") or "") for m in body.get("messages") or []
                 if m.get("role") == "system"), "")


def offered_tools(body: dict[str, Any]) -> list[str]:
    """The names of the tools a request offers."""
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def tool_rounds(body: dict[str, Any]) -> int:
    """How many assistant messages with tool calls the request's history holds."""
    return sum(1 for m in body.get("messages") or []
               if m.get("role") == "assistant" and m.get("tool_calls"))


def results_this_turn(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool name, result text) for every tool message in the request, in order."""
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for m in body["messages"]:
        for tc in m.get("tool_calls") or []:
            names[tc["id"]] = tc["function"]["name"]
        if m["role"] == "tool":
            results.append((names.get(m.get("tool_call_id", ""), "?"), str(m["content"])))
    return results


# ---------------------------------------------------------------------------
# Misbehaving models for the brakes lesson and the tests: each is a responder
# ---------------------------------------------------------------------------

PRODUCT = {"expression": "17 * 23"}


def _first_tool(body: dict[str, Any]) -> str:
    """The calculator if offered (the misbehaviours send its arguments), else any tool."""
    tools = offered_tools(body)
    return "calculator" if "calculator" in tools or not tools else tools[0]


def _wrong_value(schema: dict[str, Any]) -> Any:
    return {"string": 42, "integer": "many", "number": "lots", "boolean": "yes",
            "array": "not a list"}.get(schema.get("type", "string"), None)


def repeat_forever(body: dict[str, Any]) -> Reply:
    """The same call every time, whatever comes back."""
    return calls(call(_first_tool(body), PRODUCT))


def invalid_json(body: dict[str, Any]) -> Reply:
    """Arguments that are not valid JSON (an unclosed object), every time."""
    return calls(call(_first_tool(body), '{"expression": 17 * 23'))


def unknown_tool(body: dict[str, Any]) -> Reply:
    """A call to a tool nobody offered."""
    return calls(call("search_web", {"query": "17 × 23"}))


def wrong_types(body: dict[str, Any]) -> Reply:
    """The first offered tool, every argument of the wrong JSON type."""
    tool = (body.get("tools") or [{"function": {"name": "calculator", "parameters": {
        "properties": {"expression": {"type": "string"}}}}}])[0]["function"]
    props = tool.get("parameters", {}).get("properties", {})
    return calls(call(tool["name"], {n: _wrong_value(s) for n, s in props.items()}))


def parallel_calls(body: dict[str, Any]) -> Reply:
    """Three calls in one reply, ids out of order; then the results joined as the answer."""
    results = results_this_turn(body)
    if results:
        return answer("；".join(text for _, text in results))
    return calls(call("calculator", PRODUCT, id="call_b"),
                 call("calculator", {"expression": "2 ** 10"}, id="call_a"),
                 call("current_time", {"timezone": "Asia/Shanghai"}, id="call_c"))


def says_done_while_calling(body: dict[str, Any]) -> Reply:
    """"完成！" in the content while still asking for a tool; then a real answer."""
    if results_this_turn(body):
        return answer("工具结果已收到，这是最终回答。")
    return calls(call(_first_tool(body), PRODUCT), content="完成！")


def http_429(body: dict[str, Any]) -> Reply:
    """The provider is rate limiting."""
    return http_error(429, "Rate limit reached, retry later")


def http_500(body: dict[str, Any]) -> Reply:
    """The provider failed."""
    return http_error(500, "Internal server error")


def no_choices(body: dict[str, Any]) -> Reply:
    """A 200 response whose `choices` list is empty."""
    return Reply(raw={"id": "chatcmpl-empty", "object": "chat.completion", "created": CREATED,
                      "model": body["model"], "choices": []})


def omits_usage(body: dict[str, Any]) -> Reply:
    """Usage on the first response, none on the second (the final answer)."""
    if results_this_turn(body):
        return answer("17 × 23 = 391。")
    return calls(call("calculator", PRODUCT), usage=usage_of(100, 10))


MISBEHAVIOURS: dict[str, Responder] = {responder.__name__: responder for responder in (
    repeat_forever, invalid_json, unknown_tool, wrong_types, parallel_calls,
    says_done_while_calling, http_429, http_500, no_choices, omits_usage)}


def misbehaving(name: str, *, max_requests: int | None = None) -> ScriptedModel:
    """A scripted model with a named misbehaviour (see `MISBEHAVIOURS`).

    Args:
        name: one of the keys of `MISBEHAVIOURS`, e.g. "repeat_forever".
        max_requests: the request cap (None: no cap).
    """
    if name not in MISBEHAVIOURS:
        raise KeyError(f"unknown misbehaviour {name!r}; choose from {sorted(MISBEHAVIOURS)}")
    return ScriptedModel(MISBEHAVIOURS[name], name=f"scripted-{name}", max_requests=max_requests)
