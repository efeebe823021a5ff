"""The registry: schemas from functions, and safe dispatch of the model's calls."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from typing import Literal, Optional

import pytest

from vibe_agent.registry import (
    DEFAULT_TIMEOUT,
    CallAbandoned,
    ToolDefinitionError,
    ToolRegistry,
    ToolTimeout,
    current_deadline,
    function_to_tool,
    json_type,
)


def add(a: int, b: int = 2) -> str:
    """Add two integers.

    Args:
        a: the first number.
        b (int): the second number,
            described over two lines.
    """
    return str(a + b)


def boom(path: str) -> str:
    """Read a file that does not exist.

    Args:
        path: where to read.
    """
    raise FileNotFoundError(f"no such file: {path}")


def kinds(
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    tags: list[str],
    unit: Literal["c", "f"],
    note: Optional[str] = None,  # noqa: UP045 - the Optional spelling is part of the test
    limit: int | None = None,
) -> str:
    """Take every supported kind of parameter.

    Args:
        text: a string.
        count: an integer.
        ratio: a float.
        flag: a boolean.
        tags: a list of strings.
        unit: one of two units.
        note: optional text.
        limit: optional integer.

    Returns:
        A string (this section is not a parameter).
    """
    return "ok"


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(add)
    reg.register(boom)
    reg.register(kinds)
    return reg


def test_schema_from_signature_and_docstring():
    tool = function_to_tool(add)
    assert tool.schema() == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "the first number."},
                    "b": {"type": "integer", "default": 2,
                          "description": "the second number, described over two lines."},
                },
                "required": ["a"],
                "additionalProperties": False,
            },
        },
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("text", {"type": "string"}),
        ("count", {"type": "integer"}),
        ("ratio", {"type": "number"}),
        ("flag", {"type": "boolean"}),
        ("tags", {"type": "array", "items": {"type": "string"}}),
        ("unit", {"type": "string", "enum": ["c", "f"]}),
        ("note", {"type": "string"}),
        ("limit", {"type": "integer"}),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_type_maps_to_json_schema(name, expected):
    prop = function_to_tool(kinds).parameters["properties"][name]
    assert {k: v for k, v in prop.items() if k != "description"} == expected
    assert prop["description"]


def test_optional_parameters_are_not_required():
    assert function_to_tool(kinds).parameters["required"] == [
        "text", "count", "ratio", "flag", "tags", "unit"]


def _no_doc(x: int) -> str:
    return str(x)


def _no_type(x) -> str:  # noqa: ANN001 - missing on purpose
    """Doc.

    Args:
        x: something.
    """
    return str(x)


def _no_arg_doc(x: int, y: int) -> str:
    """Doc.

    Args:
        x: described.
    """
    return str(x)


class Custom:
    pass


def _custom_type(x: Custom) -> str:
    """Doc.

    Args:
        x: a custom object the model cannot send.
    """
    return ""


def _var_args(*xs: int) -> str:
    """Doc.

    Args:
        xs: many.
    """
    return ""


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_no_doc, "no docstring"),
        (_no_type, "has no type"),
        (_no_arg_doc, "'y' is not described"),
        (_custom_type, "unsupported parameter type"),
        (_var_args, "cannot be described"),
    ],
    ids=["no-docstring", "no-type", "undescribed-arg", "custom-type", "var-args"],
)
def test_registration_fails_loudly(fn, message):
    with pytest.raises(ToolDefinitionError, match=message):
        ToolRegistry().register(fn)


def test_duplicate_name_is_rejected(registry):
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.register(add)


def test_decorator_and_explicit_name():
    reg = ToolRegistry()

    @reg.tool
    def hello(name: str) -> str:
        """Greet someone.

        Args:
            name: who.
        """
        return f"hi {name}"

    reg.register(add, name="plus")
    assert reg.names == ["hello", "plus"]
    assert hello("x") == "hi x"  # the decorator returns the function unchanged
    assert [s["function"]["name"] for s in reg.to_schemas()] == ["hello", "plus"]


def test_literal_values_must_share_a_type():
    with pytest.raises(ToolDefinitionError):
        json_type(Literal["a", 1])


@pytest.mark.parametrize(
    ("name", "arguments", "output"),
    [
        ("add", '{"a": 1, "b": 2}', "3"),
        ("add", {"a": 40}, "42"),
        ("add", '  {"a": 1}  ', "3"),
    ],
    ids=["json-string", "dict", "default-used"],
)
def test_call_runs_the_tool(registry, name, arguments, output):
    assert registry.call(name, arguments).output == output


@pytest.mark.parametrize(
    ("name", "arguments", "kind", "hint"),
    [
        ("nope", "{}", "unknown_tool", "Available tools: add, boom, kinds"),
        ("add", '{"a": 1', "invalid_json", "not valid JSON"),
        ("add", "[1, 2]", "bad_arguments", "must be a JSON object"),
        ("add", "{}", "bad_arguments", "missing required argument 'a'"),
        ("add", '{"a": 1, "c": 3}', "bad_arguments", "unexpected argument 'c'"),
        ("add", '{"a": "one"}', "bad_arguments", "'a' must be integer, got str"),
        ("add", '{"a": true}', "bad_arguments", "'a' must be integer, got bool"),
        ("kinds", json.dumps({"text": "t", "count": 1, "ratio": 1, "flag": True,
                              "tags": ["a", 2], "unit": "c"}), "bad_arguments",
         "'tags[1]' must be string"),
        ("kinds", json.dumps({"text": "t", "count": 1, "ratio": 0.5, "flag": False,
                              "tags": [], "unit": "k"}), "bad_arguments",
         "'unit' must be one of"),
        ("boom", '{"path": "/nope"}', "tool_raised", "FileNotFoundError: no such file"),
    ],
    ids=["unknown-tool", "invalid-json", "not-an-object", "missing", "unexpected",
         "wrong-type", "bool-is-not-int", "bad-list-item", "not-in-enum", "tool-raises"],
)
def test_model_mistakes_become_text(registry, name, arguments, kind, hint):
    result = registry.call(name, arguments)
    assert result.error_kind == kind
    assert result.output.startswith("Error:")
    assert hint in result.output


def test_the_exception_is_kept_for_the_trace(registry):
    result = registry.call("boom", {"path": "x"})
    assert isinstance(result.exception, FileNotFoundError)
    assert "try again" in result.output


def test_float_parameter_accepts_integers(registry):
    args = {"text": "t", "count": 1, "ratio": 2, "flag": True, "tags": ["a"], "unit": "f"}
    assert registry.call("kinds", args).output == "ok"


def test_null_for_an_optional_argument_means_the_default(registry):
    assert registry.call("add", '{"a": 1, "b": null}').output == "3"
    assert registry.call("add", '{"a": null}').error_kind == "bad_arguments"


def test_a_tool_answering_with_error_text_counts_as_a_failure():
    reg = ToolRegistry()

    @reg.tool
    def divide(a: int, b: int) -> str:
        """Divide.

        Args:
            a: numerator.
            b: denominator.
        """
        return "Error: division by zero. Use another denominator." if b == 0 else str(a / b)

    assert reg.call("divide", {"a": 1, "b": 0}).error_kind == "tool_error"
    assert reg.call("divide", {"a": 1, "b": 2}).ok


# ---------------------------------------------------------------------------
# Argument text that crashes a parser, and results that are not text
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("arguments", "kind", "hint"), [
    ("[" * 100_000, "invalid_json", "nested too deeply"),
    ('{"a": ' + "9" * 5000 + "}", "invalid_json", "too large"),
    ('{"a": "' + "x" * 1_000_000 + '"}', "bad_arguments", "got str \"xxx"),
    ("[" * 900 + "]" * 900, "bad_arguments", "must be a JSON object"),
    ("", "bad_arguments", "missing required argument 'a'"),
    (None, "bad_arguments", "missing required argument 'a'"),
], ids=["deep-nesting", "int-too-long", "huge-wrong-type", "deep-but-parsable", "empty", "null"])
def test_arguments_that_crash_a_parser_become_text(registry, arguments, kind, hint):
    result = registry.call("add", arguments)
    assert (result.error_kind, result.output.startswith("Error:")) == (kind, True)
    assert hint in result.output and len(result.output) < 500


class Opaque:
    """Neither text nor JSON data."""


def _circular() -> list:
    loop: list = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(("value", "output", "output_type", "kind"), [
    ("text", "text", None, None),
    ("中文".encode(), "中文", "bytes", None),
    (b"\xff", "\ufffd", "bytes", None),
    ({3, 1, 2}, "[1, 2, 3]", "set", None),
    ({"a": {1, "b"}}, '{"a": ["b", 1]}', "dict", None),  # sorted by repr
    ({"raw": b"ok"}, '{"raw": "ok"}', "dict", None),
    (None, "null", "NoneType", None),
    (Opaque(), "returned a value of type Opaque", "Opaque", "bad_result"),
    (_circular(), "of type list", "list", "bad_result"),
    (10 ** 5000, "of type int", "int", "bad_result"),
], ids=["str", "bytes", "bad-utf8", "set", "mixed-set", "bytes-inside", "none", "object",
        "circular", "int-too-long"])
def test_what_a_tool_returns_becomes_text_or_error_text(value, output, output_type, kind):
    reg = ToolRegistry()

    @reg.tool
    def give() -> object:
        """Return the value under test."""
        return value

    result = reg.call("give", "{}")
    assert output in result.output
    assert (result.output_type, result.error_kind) == (output_type, kind)


# ---------------------------------------------------------------------------
# The time limit
# ---------------------------------------------------------------------------


def sleeper(seconds: float) -> str:
    """Sleep.

    Args:
        seconds: how long.
    """
    time.sleep(seconds)
    return "awake"


def test_a_late_tool_is_abandoned_with_error_text():
    reg = ToolRegistry()
    reg.register(sleeper, timeout=0.1)
    started = time.perf_counter()
    result = reg.call("sleeper", {"seconds": 3})
    assert time.perf_counter() - started < 1
    assert result.error_kind == "timeout" and isinstance(result.exception, ToolTimeout)
    assert result.output.startswith("Error: tool 'sleeper' did not finish within 0.1 seconds")
    assert reg.call("sleeper", {"seconds": 0}).output == "awake"  # in time: the result


@pytest.mark.parametrize(("register", "timeout"), [
    (lambda reg: reg.register(sleeper), DEFAULT_TIMEOUT),
    (lambda reg: reg.register(sleeper, timeout=5), 5),
    (lambda reg: reg.register(sleeper, timeout=None), None),
    (lambda reg: reg.tool(sleeper), DEFAULT_TIMEOUT),
    (lambda reg: reg.tool(timeout=2.5)(sleeper), 2.5),
    (lambda reg: reg.tool(name="nap", timeout=1)(sleeper), 1),
], ids=["register", "register-timeout", "no-limit", "decorator", "decorator-timeout",
        "decorator-name"])
def test_the_time_limit_is_set_per_tool(register, timeout):
    reg = ToolRegistry()
    assert register(reg) is sleeper  # the function comes back unchanged
    assert reg[reg.names[0]].timeout == timeout
    assert DEFAULT_TIMEOUT == 30


@pytest.mark.parametrize("timeout", [0, -1, float("nan")], ids=["zero", "negative", "nan"])
def test_a_time_limit_that_is_not_positive_is_a_definition_error(timeout):
    with pytest.raises(ToolDefinitionError, match="positive number of seconds"):
        ToolRegistry().register(sleeper, timeout=timeout)


def test_without_a_limit_the_tool_runs_in_the_callers_thread():
    seen = []

    def where() -> str:
        """Report the thread."""
        seen.append(threading.current_thread())
        return "here"

    reg = ToolRegistry()
    reg.register(where, timeout=None)
    reg.register(where, name="limited")
    reg.call("where", "{}"), reg.call("limited", "{}")
    assert seen[0] is threading.current_thread()
    assert seen[1] is not threading.current_thread() and seen[1].daemon


def test_a_limited_tool_sees_the_callers_context_and_raises_as_before():
    current = contextvars.ContextVar("current", default="unset")
    current.set("from the caller")

    def read_context() -> str:
        """Read a context variable."""
        return current.get()

    reg = ToolRegistry()
    reg.register(read_context)
    reg.register(boom)
    assert reg.call("read_context", "{}").output == "from the caller"
    assert isinstance(reg.call("boom", {"path": "x"}).exception, FileNotFoundError)


def test_an_interrupt_inside_a_tool_is_not_swallowed():
    def interrupted() -> str:
        """Raise KeyboardInterrupt."""
        raise KeyboardInterrupt

    reg = ToolRegistry()
    reg.register(interrupted)
    with pytest.raises(KeyboardInterrupt):
        reg.call("interrupted", "{}")


@pytest.mark.parametrize("name", [None, ""], ids=["null", "empty"])
def test_a_call_without_a_name_is_an_unknown_tool(registry, name):
    result = registry.call(name, "{}")
    assert result.error_kind == "unknown_tool"
    assert "has no tool name. Available tools: add, boom, kinds" in result.output


# ---------------------------------------------------------------------------
# An abandoned call never acts: the deadline a tool sees
# ---------------------------------------------------------------------------


def acting_tool(done: list[str]):
    """A tool that waits `before`, then acts (recorded in `done`) for `during` seconds."""

    def act(before: float, during: float) -> str:
        """Wait, then act.

        Args:
            before: seconds before acting (e.g. waiting for a person's approval).
            during: seconds the act takes.
        """
        time.sleep(before)
        deadline = current_deadline()
        assert deadline is not None
        with deadline.acting():
            done.append("started")
            time.sleep(during)
            done.append("finished")
        return "acted"

    return act


# (before, during, result, what happened, id)
ACTS = [
    (0.0, 0.0, "acted", ["started", "finished"], "in-time"),
    (0.5, 0.0, "timeout", [], "starts-after-the-limit: never acts"),
    (0.1, 0.4, "acted", ["started", "finished"], "started-in-time: waited for"),
]


@pytest.mark.parametrize(("before", "during", "result", "happened"),
                         [row[:4] for row in ACTS], ids=[row[4] for row in ACTS])
def test_a_tool_acts_before_the_model_hears_of_a_timeout_or_never(before, during, result,
                                                                  happened):
    done: list[str] = []
    reg = ToolRegistry()
    reg.register(acting_tool(done), name="act", timeout=0.2)
    outcome = reg.call("act", json.dumps({"before": before, "during": during}))
    assert (outcome.error_kind or outcome.output) == result
    time.sleep(before + during + 0.3)  # an abandoned thread has had time to try
    assert done == happened


def test_a_late_act_raises_call_abandoned_inside_the_tool():
    raised: list[BaseException] = []

    def late() -> str:
        """Act too late."""
        time.sleep(0.3)
        try:
            with current_deadline().acting():
                return "acted"
        except CallAbandoned as exc:
            raised.append(exc)
            raise

    reg = ToolRegistry()
    reg.register(late, timeout=0.1)
    assert reg.call("late", "{}").error_kind == "timeout"
    time.sleep(0.5)
    assert len(raised) == 1 and isinstance(raised[0], ToolTimeout)


def test_the_deadline_a_tool_sees():
    seen: dict[str, object] = {}

    def look() -> str:
        """Look at the deadline."""
        deadline = current_deadline()
        seen["limited"] = deadline is not None and 0 < deadline.remaining() <= 5
        return "ok"

    def unlimited() -> str:
        """Look without a limit."""
        seen["unlimited"] = current_deadline()
        return "ok"

    reg = ToolRegistry()
    reg.register(look, timeout=5)
    reg.register(unlimited, timeout=None)
    reg.call("look", "{}")
    reg.call("unlimited", "{}")
    assert seen == {"limited": True, "unlimited": None}
    assert current_deadline() is None  # outside any call
