"""What an MCP server lists, as tools the chat API takes: names, schemas, descriptions.

A server's listing is the server's own, untrusted words, and it is sent with every
request, so it is bounded before it reaches one: a tool is named
`mcp__{server}__{tool}` (so it cannot shadow `read_file` or another server's tool);
its inputSchema is reduced to the JSON Schema core every provider accepts
(`KEPT_KEYWORDS`, local $refs inlined; what is dropped is recorded in `lost`); a
description is cut after `MAX_DESCRIPTION_CHARS`; and a tool whose schema expands past
`MAX_SCHEMA_NODES` nodes, `MAX_SCHEMA_CHARS` characters or `MAX_SCHEMA_SECONDS`, or has
an object of more than `MAX_PROPERTIES` properties, is left out (`leave_out_reason`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from mcp.types import Tool as MCPTool

MAX_NAME_CHARS = 64  # OpenAI: ^[a-zA-Z0-9_-]{1,64}$
MAX_DESCRIPTION_CHARS = 2_000  # a tool's description is cut after this (with a note)
MAX_SCHEMA_NODES = 2_000  # one tool's schema, $refs inlined: past this the tool is left out
MAX_SCHEMA_CHARS = 40_000  # one tool's parameters as JSON (sent with every request)
MAX_SCHEMA_SECONDS = 1.0  # converting one tool's schema
MAX_PROPERTIES = 100  # properties of one object in a schema
NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")

# The JSON Schema keywords sent to the model. Providers differ in what they accept
# (OpenAI takes most of JSON Schema; Gemini and several OpenAI-compatible servers
# reject $ref, anyOf, format, const, ...), so only this common core is sent.
KEPT_KEYWORDS = ("type", "description", "properties", "required", "items", "enum", "default",
                 "additionalProperties")
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")



class SchemaTooLarge(ValueError):
    """A tool's schema is past one of the bounds (MAX_SCHEMA_*, MAX_PROPERTIES)."""


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model sees for `tool` of `server`: `mcp__{server}__{tool}`.

    Characters a provider refuses in a name (anything but letters, digits, _ and -)
    become "_".

    Args:
        server: the server's name in our configuration (e.g. "course").
        tool: the tool's name as the server lists it.
    """
    return f"mcp__{server}__{NOT_IN_NAMES.sub('_', tool)}"



def to_parameters(input_schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Convert a tool's `inputSchema` to the `parameters` sent in `tools`, and say what was lost.

    Kept: `KEPT_KEYWORDS`, recursively. Rewritten: a local `$ref` is replaced by the
    definition it points to; `anyOf`/`oneOf` of one schema and null, or a type list
    with "null", become that one schema (null means "leave it out"). Dropped, each
    named in the returned list: any other keyword (`format`, `minimum`, `pattern`,
    `const`, ...), a real choice between schemas, a recursive `$ref`. `title` is
    dropped without a note (it repeats the property name). The server still checks
    the arguments against its own full schema.

    Inlining `$ref`s can multiply a small schema (five properties that each refer to
    the next of eleven definitions make 5**11 nodes), so the conversion is bounded:
    `MAX_SCHEMA_NODES` nodes, `MAX_SCHEMA_CHARS` characters of JSON, `MAX_SCHEMA_SECONDS`,
    and `MAX_PROPERTIES` properties in one object.

    Args:
        input_schema: the tool's JSON Schema, as the server listed it.

    Raises:
        SchemaTooLarge: the schema is past a bound (the registry leaves the tool out).
    """
    lost: list[str] = []
    definitions = input_schema.get("$defs") or input_schema.get("definitions") or {}
    budget = _Budget()
    converted = _convert(input_schema, definitions, "", lost, 0, budget)
    properties = converted.get("properties")
    if converted.get("type") != "object" or not isinstance(properties, dict):
        lost.append("the schema is not an object with properties: the tool takes no arguments")
        properties = {}
    listed = converted.get("required")
    required = [n for n in listed if n in properties] if isinstance(listed, list) else []
    parameters = {"type": "object", "properties": properties, "required": required}
    if isinstance(converted.get("additionalProperties"), bool):
        parameters["additionalProperties"] = converted["additionalProperties"]
    size = len(json.dumps(parameters, ensure_ascii=False))
    if size > MAX_SCHEMA_CHARS:
        raise SchemaTooLarge(f"its parameters are {size} characters of JSON (at most "
                             f"{MAX_SCHEMA_CHARS})")
    return parameters, lost


class _Budget:
    """What converting one schema may still spend: nodes, characters, time."""

    def __init__(self) -> None:
        self.nodes = 0
        self.chars = 0
        self.ends = time.monotonic() + MAX_SCHEMA_SECONDS

    def spend(self, nodes: int = 0, kept: Any = None) -> None:
        self.nodes += nodes
        if kept is not None:
            self.chars += len(json.dumps(kept, ensure_ascii=False, default=str))
        if self.nodes > MAX_SCHEMA_NODES:
            raise SchemaTooLarge(f"its schema expands to more than {MAX_SCHEMA_NODES} nodes "
                                 "once its $refs are inlined")
        if self.chars > MAX_SCHEMA_CHARS:
            raise SchemaTooLarge(f"its schema expands to more than {MAX_SCHEMA_CHARS} "
                                 "characters once its $refs are inlined")
        if time.monotonic() > self.ends:
            raise SchemaTooLarge(f"converting its schema took more than {MAX_SCHEMA_SECONDS:g} s")


def _convert(schema: Any, definitions: dict[str, Any], where: str, lost: list[str],
             depth: int, budget: _Budget) -> dict[str, Any]:
    """One schema node: follow $ref, fold nullable choices, keep KEPT_KEYWORDS."""
    at = where or "(top)"
    budget.spend(nodes=1)
    if not isinstance(schema, dict) or depth > 20:
        lost.append(f"{at}: a schema that is not an object, or nested too deeply")
        return {}
    schema = dict(schema)
    if "$ref" in schema:
        target = _local_definition(schema.pop("$ref"), definitions)
        if target is None or depth > 10:
            lost.append(f"{at}: $ref (not a local definition, or recursive)")
            return {k: v for k, v in schema.items() if k == "description"}
        schema = {**target, **schema}
    for choice in ("anyOf", "oneOf"):
        if choice in schema:
            options = [o for o in schema.pop(choice) if o != {"type": "null"}]
            if len(options) == 1 and isinstance(options[0], dict):
                schema = {**options[0], **schema}
            else:
                lost.append(f"{at}: {choice} with {len(options)} choices")
    if isinstance(schema.get("type"), list):
        kinds = [kind for kind in schema["type"] if kind != "null"]
        if len(kinds) == 1:
            schema["type"] = kinds[0]
        else:
            lost.append(f"{at}: type is one of {kinds}")
            del schema["type"]
    if "type" in schema and schema["type"] not in JSON_TYPES:
        lost.append(f"{at}: type {schema.pop('type')!r}")
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            if len(value) > MAX_PROPERTIES:
                raise SchemaTooLarge(f"{at} has {len(value)} properties (at most "
                                     f"{MAX_PROPERTIES})")
            budget.spend(kept=list(value))
            out[key] = {name: _convert(sub, definitions, f"{where}.{name}".lstrip("."), lost,
                                       depth + 1, budget) for name, sub in value.items()}
        elif key == "items":
            out[key] = _convert(value, definitions, f"{where}[]", lost, depth + 1, budget)
        elif key in KEPT_KEYWORDS:
            budget.spend(kept=value)
            out[key] = value
        elif key not in ("title", "$defs", "definitions", "$schema"):
            lost.append(f"{at}: {key}")
    return out


def _local_definition(ref: Any, definitions: dict[str, Any]) -> dict[str, Any] | None:
    """The definition a local "#/$defs/Name" reference points to, or None."""
    if not isinstance(ref, str):
        return None
    match = re.fullmatch(r"#/(?:\$defs|definitions)/([^/]+)", ref)
    target = definitions.get(match.group(1)) if match else None
    return target if isinstance(target, dict) else None


def capped_description(text: str | None) -> str:
    """A tool's description as the model gets it: cut after MAX_DESCRIPTION_CHARS, with a note.

    Args:
        text: the description the server listed (None: none).
    """
    text = text or ""
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    return (f"{text[:MAX_DESCRIPTION_CHARS]} [description truncated: {MAX_DESCRIPTION_CHARS} "
            f"of {len(text)} characters shown]")


def leave_out_reason(tool: MCPTool, server: str) -> str | None:
    """Why a listed tool cannot be offered to the model on its own terms, or None.

    Args:
        tool: one tool of the listing.
        server: the server's name in our configuration.
    """
    if not re.search(r"[A-Za-z0-9]", tool.name):
        return "the tool's name has no letter or digit"
    if len(mcp_tool_name(server, tool.name)) > MAX_NAME_CHARS:
        return f"the name is longer than {MAX_NAME_CHARS} characters"
    if tool.execution is not None and tool.execution.task_support == "required":
        return ("it requires task augmentation (execution.taskSupport: \"required\"), which "
                "this client does not support: every call would fail")
    return None


def mcp_to_openai_tools(listing: Sequence[MCPTool], server: str) -> list[dict[str, Any]]:
    """The tools of an MCP listing in the OpenAI `tools` format, with namespaced names.

    A tool `mcp_registry` would leave out (`leave_out_reason`, a schema past the bounds)
    is left out here too; descriptions are capped (`capped_description`).

    Args:
        listing: the `tools` of the server's tools/list answer.
        server: the server's name in our configuration.
    """
    tools = []
    for tool in listing:
        if leave_out_reason(tool, server) is not None:
            continue
        try:
            parameters = to_parameters(tool.input_schema)[0]
        except SchemaTooLarge:
            continue
        tools.append({"type": "function",
                      "function": {"name": mcp_tool_name(server, tool.name),
                                   "description": capped_description(tool.description),
                                   "parameters": parameters}})
    return tools
