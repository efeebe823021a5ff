"""Tools and the registry: plain functions the model can ask us to run.

A tool is an ordinary Python function. The model never sees the function, only
a JSON Schema that describes it, so the schema is generated from the function's
signature and its Google-style docstring (one source, no hand-written copy that
can drift). The registry maps the *name string* the model sends back to the real
function, and `invoke()` runs it safely:

    model says: {"name": "calculator", "arguments": "{\"expression\": \"17*23\"}"}
    registry:   find "calculator" -> parse JSON -> check against schema -> call
    result:     "17 * 23 = 391"            (or error text the model can act on)

The model's mistakes (unknown tool, invalid JSON, wrong arguments, a tool that
raises) never raise here: they come back as text telling the model what to do
next. Mistakes in *our* code, such as registering a function without a
docstring, raise `ToolDefinitionError` at registration time.
"""

from __future__ import annotations

import inspect
import json
import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints


class ToolDefinitionError(TypeError):
    """A function cannot be described to the model (our bug, raised at registration)."""


# What went wrong; `None` means the call succeeded. "tool_error": the tool ran and
# answered with its own "Error: ..." text (e.g. the calculator refusing 1/0).
ErrorKind = Literal["unknown_tool", "invalid_json", "bad_arguments", "tool_raised",
                    "tool_error"]


@dataclass
class ToolResult:
    """The outcome of one tool call: text for the model, details for the trace."""

    output: str
    error_kind: ErrorKind | None = None
    exception: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None


@dataclass
class Tool:
    """A function plus the JSON Schema the model reads."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]

    def schema(self) -> dict[str, Any]:
        """This tool in the OpenAI `tools` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


# ---------------------------------------------------------------------------
# From a Python function to a JSON Schema
# ---------------------------------------------------------------------------

_SIMPLE_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def json_type(annotation: Any) -> dict[str, Any]:
    """Translate one Python type annotation into a JSON Schema fragment.

    Args:
        annotation: a type such as `int`, `list[str]`, `Literal["a", "b"]` or `str | None`.

    Raises:
        ToolDefinitionError: for types the model could not fill in (e.g. a custom class).
    """
    if annotation in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[annotation]}
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is list or origin is list:
        return {"type": "array", "items": json_type(args[0])} if args else {"type": "array"}
    if origin is Literal:
        kinds = {type(value) for value in args}
        if len(kinds) != 1 or next(iter(kinds)) not in _SIMPLE_TYPES:
            raise ToolDefinitionError(f"Literal values must share one simple type: {annotation}")
        return {"type": _SIMPLE_TYPES[kinds.pop()], "enum": list(args)}
    if origin in (Union, types.UnionType):
        not_none = [arg for arg in args if arg is not type(None)]
        if len(not_none) == 1:  # Optional[X] is X that may be left out
            return json_type(not_none[0])
    raise ToolDefinitionError(f"unsupported parameter type for a tool: {annotation!r}")


_ARG_LINE = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and its `Args:` descriptions.

    Args:
        doc: the function's docstring.
    """
    lines = inspect.cleandoc(doc).splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip():
            break
        summary_lines.append(line.strip())
    args: dict[str, str] = {}
    current: str | None = None
    in_args, args_indent = False, 0
    for line in lines:
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args, args_indent, current = True, indent, None
            continue
        if not in_args:
            continue
        if stripped and indent <= args_indent:  # the next section (Returns:, Raises:) starts
            break
        match = _ARG_LINE.match(stripped)
        if match and (current is None or indent <= args_indent + 4):
            current = match.group(1)
            args[current] = match.group(2).strip()
        elif current and stripped:  # a continuation line
            args[current] = f"{args[current]} {stripped}".strip()
    return " ".join(summary_lines), args


def function_to_tool(fn: Callable[..., Any], name: str | None = None) -> Tool:
    """Describe a function as a tool, failing loudly when the description is incomplete.

    Args:
        fn: a plain function or bound method with type hints and a Google-style docstring.
        name: the name the model will use; defaults to the function's name.
    """
    tool_name = name or fn.__name__
    # 1. read the docstring: the summary becomes the tool's description
    if not fn.__doc__ or not fn.__doc__.strip():
        raise ToolDefinitionError(f"tool {tool_name!r} has no docstring to describe it")
    summary, arg_docs = parse_docstring(fn.__doc__)
    # 2. read the signature and its type hints
    hints = get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {tool_name!r}: *args/**kwargs cannot be described")
        # 3. every parameter needs a type and a description
        if param.name not in hints:
            raise ToolDefinitionError(f"tool {tool_name!r}: parameter {param.name!r} has no type")
        if not arg_docs.get(param.name):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} is not described in 'Args:'"
            )
        prop = json_type(hints[param.name]) | {"description": arg_docs[param.name]}
        if param.default is param.empty:
            required.append(param.name)
        elif param.default is not None:
            prop["default"] = param.default
        properties[param.name] = prop
    # 4. build the schema: no arguments beyond the ones described
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return Tool(name=tool_name, description=summary, parameters=parameters, fn=fn)


# ---------------------------------------------------------------------------
# Checking the model's arguments against the schema
# ---------------------------------------------------------------------------

_JSON_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
}


def _type_problem(name: str, value: Any, schema: dict[str, Any]) -> str | None:
    expected = schema.get("type")
    if expected and not _JSON_CHECKS[expected](value):
        return f"'{name}' must be {expected}, got {type(value).__name__} {json.dumps(value)}"
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


def _signature_hint(tool: Tool) -> str:
    """A one-line reminder of the expected arguments, e.g. {"expression": string}."""
    fields = ", ".join(f'"{n}": {p.get("type", "any")}'
                       for n, p in tool.parameters["properties"].items())
    return "{" + fields + "}"


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


class ToolRegistry:
    """Maps tool names to functions and dispatches the model's tool calls safely."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, fn: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
        """Register a function as a tool and return it unchanged.

        Args:
            fn: the function (its signature and docstring become the schema).
            name: the name the model will use; defaults to the function's name.
        """
        tool = function_to_tool(fn, name)
        if tool.name in self._tools:
            raise ToolDefinitionError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return fn

    def tool(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator form of `register`: `@registry.tool` above a function."""
        return self.register(fn)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def to_schemas(self) -> list[dict[str, Any]]:
        """All tools in the OpenAI `tools` format, ready for `chat.completions.create`."""
        return [tool.schema() for tool in self._tools.values()]

    def invoke(self, name: str, arguments: str | dict[str, Any] | None) -> str:
        """Run a tool the model asked for and return the text to send back.

        Never raises for the model's mistakes; see `call` for the details.

        Args:
            name: the tool name the model sent.
            arguments: the model's JSON string (or an already decoded dict).
        """
        return self.call(name, arguments).output

    def call(self, name: str, arguments: str | dict[str, Any] | None) -> ToolResult:
        """Like `invoke`, but also returns what went wrong and the exception, for the trace.

        Args:
            name: the tool name the model sent.
            arguments: the model's JSON string (or an already decoded dict).
        """
        # 1. find the tool
        tool = self._tools.get(name)
        if tool is None:
            available = ", ".join(self._tools) or "(none)"
            return ToolResult(
                f"Error: unknown tool '{name}'. Available tools: {available}. "
                "Call one of these, or answer without a tool.",
                "unknown_tool",
            )
        # 2. decode the arguments (the model sends a JSON string)
        if isinstance(arguments, dict):
            args = arguments
        else:
            try:
                args = json.loads(arguments) if arguments and arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return ToolResult(
                    f"Error: the arguments for '{name}' are not valid JSON ({exc.msg} at "
                    f"position {exc.pos}). Send a JSON object like {_signature_hint(tool)} "
                    "and try again.",
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
        # 4. run it; an exception becomes text for the model, the trace keeps the exception
        try:
            output = tool.fn(**{k: v for k, v in args.items() if v is not None})
        except Exception as exc:  # noqa: BLE001 - any tool failure goes back to the model
            return ToolResult(
                f"Error: tool '{name}' failed with {type(exc).__name__}: {exc}. "
                "Check the arguments and try again, or tell the user the tool failed.",
                "tool_raised",
                exc,
            )
        if not isinstance(output, str):  # a tool may return data; the model reads text
            output = json.dumps(output, ensure_ascii=False)
        return ToolResult(output, "tool_error" if output.startswith("Error:") else None)
