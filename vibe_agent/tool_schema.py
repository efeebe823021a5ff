"""A tool is a plain function: its JSON Schema comes from its signature and docstring.

The model never sees the function, only a JSON Schema that describes it, so the
schema is generated from the function's type hints and its Google-style docstring
(one source, no hand-written copy that can drift). A function that cannot be
described (no docstring, a parameter without a type, a type the model could not fill
in) is our bug: `ToolDefinitionError`, raised when it is registered.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints


class ToolDefinitionError(TypeError):
    """A function cannot be described to the model (our bug, raised at registration)."""


DEFAULT_TIMEOUT = 30.0  # seconds a tool may run before the model is told it took too long


@dataclass
class Tool:
    """A function plus the JSON Schema the model reads."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    timeout: float | None = DEFAULT_TIMEOUT  # seconds; None: no limit (runs in the caller)

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


def function_to_tool(fn: Callable[..., Any], name: str | None = None,
                     timeout: float | None = DEFAULT_TIMEOUT) -> Tool:
    """Describe a function as a tool, failing loudly when the description is incomplete.

    Args:
        fn: a plain function or bound method with type hints and a Google-style docstring.
        name: the name the model will use; defaults to the function's name.
        timeout: seconds the tool may run (None: no limit).
    """
    tool_name = name or fn.__name__
    if timeout is not None and not timeout > 0:
        raise ToolDefinitionError(f"tool {tool_name!r}: timeout must be a positive number of "
                                  f"seconds, or None for no limit (got {timeout!r})")
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
    return Tool(name=tool_name, description=summary, parameters=parameters, fn=fn,
                timeout=timeout)
