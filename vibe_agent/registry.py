"""Tools and the registry: plain functions the model can ask us to run.

A tool is an ordinary Python function. The model never sees the function, only
a JSON Schema that describes it, so the schema is generated from the function's
signature and its Google-style docstring (one source, no hand-written copy that
can drift). The registry maps the *name string* the model sends back to the real
function, and `call()` runs it safely:

    model says: {"name": "calculator", "arguments": "{\"expression\": \"17*23\"}"}
    registry:   find "calculator" -> parse JSON -> check against schema -> call
    result:     ToolResult(output="17 * 23 = 391")   (or error text the model can act on)

The model's mistakes (unknown tool, invalid JSON, wrong arguments, a tool that
raises, a tool that takes too long) never raise here: they come back as text
telling the model what to do next. Mistakes in *our* code, such as registering a
function without a docstring, raise `ToolDefinitionError` at registration time.

Every tool runs under a time limit (`DEFAULT_TIMEOUT`, or `timeout=` when it is
registered); a tool that overruns is abandoned, and must not act any more
(time_limits.py: `current_deadline()`, `CallDeadline.acting()`). How a function
becomes a schema is in tool_schema.py. Their names are imported here too, so
`from vibe_agent.registry import ToolRegistry, function_to_tool, current_deadline, ...`
keeps working.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .time_limits import (
    ACT_GRACE,
    CallAbandoned,
    CallDeadline,
    StillRunning,
    ToolTimeout,
    current_deadline,
    run_in_thread,
    run_with_time_limit,
)
from .tool_schema import (
    DEFAULT_TIMEOUT,
    Tool,
    ToolDefinitionError,
    function_to_tool,
    json_type,
    parse_docstring,
)

__all__ = [
    "ACT_GRACE", "DEFAULT_TIMEOUT", "CallAbandoned", "CallDeadline", "ErrorKind", "StillRunning",
    "Tool", "ToolDefinitionError", "ToolRegistry", "ToolResult", "ToolTimeout",
    "argument_problems", "as_text", "current_deadline", "function_to_tool", "json_type",
    "parse_arguments", "parse_docstring", "run_in_thread", "run_with_time_limit",
]

# What went wrong; `None` means the call succeeded. "tool_error": the tool ran and
# answered with its own "Error: ..." text (e.g. the calculator refusing 1/0);
# "timeout": it did not finish in time; "bad_result": it returned something that is
# neither text nor JSON data (a bug in the tool).
ErrorKind = Literal["unknown_tool", "invalid_json", "bad_arguments", "tool_raised",
                    "tool_error", "timeout", "bad_result"]


@dataclass
class ToolResult:
    """The outcome of one tool call: text for the model, details for the trace."""

    output: str
    error_kind: ErrorKind | None = None
    exception: BaseException | None = None
    output_type: str | None = None  # what the tool returned, when it was not a str

    @property
    def ok(self) -> bool:
        return self.error_kind is None


# ---------------------------------------------------------------------------
# Checking the model's arguments against the schema
# ---------------------------------------------------------------------------

_JSON_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _shown(value: Any, width: int = 100) -> str:
    """A value as JSON for an error text, shortened (the model may send anything)."""
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError):  # a number too long to print, nesting too deep
        return f"<{type(value).__name__}>"
    return text if len(text) <= width else text[: width - 1] + "…"


def _type_problem(name: str, value: Any, schema: dict[str, Any]) -> str | None:
    expected = schema.get("type")
    if expected and not _JSON_CHECKS[expected](value):
        return f"'{name}' must be {expected}, got {type(value).__name__} {_shown(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"'{name}' must be one of {json.dumps(schema['enum'], ensure_ascii=False)}"
    if expected == "array" and "items" in schema:
        for i, item in enumerate(value):
            problem = _type_problem(f"{name}[{i}]", item, schema["items"])
            if problem:
                return problem
    return None


def argument_problems(arguments: dict[str, Any], parameters: dict[str, Any]) -> list[str]:
    """List what is wrong with the model's arguments (empty when they fit the schema).

    Args:
        arguments: the decoded JSON object the model sent.
        parameters: the tool's JSON Schema for its parameters.
    """
    properties = parameters["properties"]
    problems = [f"missing required argument '{n}'" for n in parameters["required"]
                if arguments.get(n) is None]
    problems += [f"unexpected argument '{n}'" for n in arguments if n not in properties]
    for name, value in arguments.items():
        if value is None:  # null for an optional argument means "leave it out"
            continue
        if name in properties:
            problem = _type_problem(name, value, properties[name])
            if problem:
                problems.append(problem)
    return problems


def parse_arguments(arguments: str) -> Any:
    """Decode the model's argument text; empty text means no arguments.

    Raises:
        ValueError: the text is not JSON, or a number in it is too long for Python
            (more than 4300 digits); `json.JSONDecodeError` is a ValueError.
        RecursionError: the JSON is nested too deeply (e.g. 100,000 `[`).
    """
    return json.loads(arguments) if arguments and arguments.strip() else {}


def _signature_hint(tool: Tool) -> str:
    """A one-line reminder of the expected arguments, e.g. {"expression": string}."""
    fields = ", ".join(f'"{n}": {p.get("type", "any")}'
                       for n, p in tool.parameters["properties"].items())
    return "{" + fields + "}"


# ---------------------------------------------------------------------------
# What a tool returned, as text for the model
# ---------------------------------------------------------------------------


def _sorted(items: set[Any] | frozenset[Any]) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:  # mixed types: any fixed order will do
        return sorted(items, key=repr)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, set | frozenset):
        return _sorted(value)
    raise TypeError(f"{type(value).__name__} is neither text nor JSON data")


def as_text(value: Any) -> str:
    """What a tool returned, as text for the model.

    A str is kept, bytes are decoded as UTF-8, other data (numbers, lists, dicts,
    sets) becomes JSON.

    Raises:
        TypeError, ValueError, RecursionError: the value cannot be written as JSON
            (an arbitrary object, a circular list, nesting too deep).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return _json_default(value)
    return json.dumps(value, ensure_ascii=False, default=_json_default)


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


class ToolRegistry:
    """Maps tool names to functions and dispatches the model's tool calls safely."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, fn: Callable[..., Any], name: str | None = None, *,
                 timeout: float | None = DEFAULT_TIMEOUT) -> Callable[..., Any]:
        """Register a function as a tool and return it unchanged.

        Args:
            fn: the function (its signature and docstring become the schema).
            name: the name the model will use; defaults to the function's name.
            timeout: seconds the tool may run before the model gets an error text
                instead of its result (None: no limit, the tool runs in the caller).
        """
        tool = function_to_tool(fn, name, timeout)
        if tool.name in self._tools:
            raise ToolDefinitionError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return fn

    def tool(self, fn: Callable[..., Any] | None = None, *, name: str | None = None,
             timeout: float | None = DEFAULT_TIMEOUT) -> Any:
        """Decorator form of `register`: `@registry.tool` or `@registry.tool(timeout=5)`.

        Args:
            fn: the function, when used without parentheses.
            name: the name the model will use; defaults to the function's name.
            timeout: seconds the tool may run (None: no limit).
        """
        if fn is None:
            return lambda f: self.register(f, name, timeout=timeout)
        return self.register(fn, name, timeout=timeout)

    def add(self, tool: Tool) -> Tool:
        """Register a tool whose schema is already written (e.g. listed by an MCP server).

        Args:
            tool: the tool; its `parameters` must be an object schema with `properties`
                and `required`, the shape `call` checks arguments against.
        """
        parameters = tool.parameters
        if not (isinstance(parameters.get("properties"), dict)
                and isinstance(parameters.get("required"), list)):
            raise ToolDefinitionError(f"tool {tool.name!r}: parameters need 'properties' "
                                      "(an object) and 'required' (a list)")
        if tool.timeout is not None and not tool.timeout > 0:
            raise ToolDefinitionError(f"tool {tool.name!r}: timeout must be positive or None")
        if tool.name in self._tools:
            raise ToolDefinitionError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A new registry with only these of my tools (the same `Tool` objects), e.g.
        the read-only tools a sub-agent gets.

        Raises:
            KeyError: a name that is not registered here.
        """
        chosen = ToolRegistry()
        for name in names:
            chosen._tools[name] = self._tools[name]
        return chosen

    @classmethod
    def combine(cls, *registries: ToolRegistry) -> ToolRegistry:
        """One registry with the tools of all of these (the same `Tool` objects).

        Raises:
            ToolDefinitionError: two of them have a tool of the same name.
        """
        combined = cls()
        for registry in registries:
            for name, tool in registry._tools.items():
                if name in combined._tools:
                    raise ToolDefinitionError(f"two registries both have a tool named {name!r}")
                combined._tools[name] = tool
        return combined

    def to_schemas(self) -> list[dict[str, Any]]:
        """All tools in the OpenAI `tools` format, ready for `chat.completions.create`."""
        return [tool.schema() for tool in self._tools.values()]

    def call(self, name: str | None, arguments: str | dict[str, Any] | None) -> ToolResult:
        """Run a tool the model asked for; `.output` is the text to send back.

        Never raises for the model's mistakes: they come back as error text in
        `.output`, with `.error_kind` saying what went wrong and `.exception` keeping
        the exception for the trace.

        Args:
            name: the tool name the model sent.
            arguments: the model's JSON string (or an already decoded dict).
        """
        # 1. find the tool
        tool = self._tools.get(name or "")
        if tool is None:
            available = ", ".join(self._tools) or "(none)"
            what = f"unknown tool '{name}'" if name else "the tool call has no tool name"
            return ToolResult(
                f"Error: {what}. Available tools: {available}. "
                "Call one of these, or answer without a tool.",
                "unknown_tool",
            )
        # 2. decode the arguments (the model sends a JSON string)
        if isinstance(arguments, dict):
            args = arguments
        else:
            try:
                args = parse_arguments(arguments or "")
            except json.JSONDecodeError as exc:
                return ToolResult(
                    f"Error: the arguments for '{name}' are not valid JSON ({exc.msg} at "
                    f"position {exc.pos}). Send a JSON object like {_signature_hint(tool)} "
                    "and try again.",
                    "invalid_json",
                    exc,
                )
            except (ValueError, RecursionError) as exc:  # valid JSON, too big for Python
                what = "nested too deeply" if isinstance(exc, RecursionError) else "too large"
                return ToolResult(
                    f"Error: the arguments for '{name}' are {what} to read. Send a small "
                    f"JSON object like {_signature_hint(tool)} and try again.",
                    "invalid_json",
                    exc,
                )
            if not isinstance(args, dict):
                return ToolResult(
                    f"Error: the arguments for '{name}' must be a JSON object like "
                    f"{_signature_hint(tool)}, not {type(args).__name__}. Try again.",
                    "bad_arguments",
                )
        # 3. check them against the schema
        problems = argument_problems(args, tool.parameters)
        if problems:
            return ToolResult(
                f"Error: wrong arguments for '{name}': {'; '.join(problems)}. "
                f"Expected {_signature_hint(tool)}. Fix the arguments and call again.",
                "bad_arguments",
            )
        # 4. run it within its time limit; whatever goes wrong becomes text for the
        #    model, and the trace keeps the exception
        kwargs = {k: v for k, v in args.items() if v is not None}
        try:
            value = run_with_time_limit(tool.fn, kwargs, tool.timeout)
        except ToolTimeout as exc:
            limit = tool.timeout if tool.timeout is not None else exc.seconds
            within = f"within {limit:g} seconds" if limit is not None else "in time"
            return ToolResult(
                f"Error: tool '{name}' did not finish {within}, so its "
                "result was not waited for. Try simpler arguments, or answer without it.",
                "timeout",
                exc,
            )
        except Exception as exc:  # noqa: BLE001 - any tool failure goes back to the model
            return ToolResult(
                f"Error: tool '{name}' failed with {type(exc).__name__}: {exc}. "
                "Check the arguments and try again, or tell the user the tool failed.",
                "tool_raised",
                exc,
            )
        # 5. the model reads text: a tool may return data, which becomes JSON
        kind = None if isinstance(value, str) else type(value).__name__
        try:
            output = as_text(value)
        except (TypeError, ValueError, RecursionError) as exc:
            return ToolResult(
                f"Error: tool '{name}' returned a value of type {kind} that cannot be turned "
                "into text (a bug in the tool). Tell the user the tool failed.",
                "bad_result",
                exc,
                kind,
            )
        return ToolResult(output, "tool_error" if output.startswith("Error:") else None,
                          output_type=kind)
