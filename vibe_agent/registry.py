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
registered). Python cannot kill a thread, so a tool that overruns is *abandoned*:
it keeps running in a background (daemon) thread until it returns by itself, and
the model gets an error text at once. An abandoned call must not act any more (the
model was told it timed out), so a tool that writes or starts processes asks
`current_deadline()` first:

    deadline = current_deadline()        # None outside a time-limited call
    deadline.remaining()                 # seconds left: a command gets no more
    with deadline.acting():              # raises CallAbandoned once the registry gave up;
        write the file / run it          # an act already under way is waited for

so what it does either happens before the model hears "timed out", or never.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import re
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints


class ToolDefinitionError(TypeError):
    """A function cannot be described to the model (our bug, raised at registration)."""


DEFAULT_TIMEOUT = 30.0  # seconds a tool may run before the model is told it took too long

# What went wrong; `None` means the call succeeded. "tool_error": the tool ran and
# answered with its own "Error: ..." text (e.g. the calculator refusing 1/0);
# "timeout": it did not finish in time; "bad_result": it returned something that is
# neither text nor JSON data (a bug in the tool).
ErrorKind = Literal["unknown_tool", "invalid_json", "bad_arguments", "tool_raised",
                    "tool_error", "timeout", "bad_result"]


class ToolTimeout(TimeoutError):
    """A tool did not finish within its time limit (it was abandoned, not stopped).

    Args:
        message: what happened, for the trace.
        seconds: the limit, when the tool keeps its own (one registered with
            `timeout=None` that bounds its waits itself, e.g. an MCP server's tool).
    """

    def __init__(self, message: str = "", seconds: float | None = None) -> None:
        super().__init__(message)
        self.seconds = seconds


class CallAbandoned(ToolTimeout):
    """Raised inside a tool that tries to act after the registry gave up on its call."""


ACT_GRACE = 2.0  # seconds the registry waits, at the time limit, for an act under way


class CallDeadline:
    """The time limit of one running tool call, as the tool sees it.

    The registry makes one per call and abandons it at the time limit. From then on
    `acting()` refuses, so a late approval or a slow start cannot make the tool act
    after the model was told the call timed out.

    Args:
        seconds: the call's time limit.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self._abandoned = threading.Event()
        self._lock = threading.Lock()  # held while the tool acts
        self.acted = False

    @property
    def abandoned(self) -> bool:
        return self._abandoned.is_set()

    def remaining(self) -> float:
        """Seconds until the registry gives up (0 once it has)."""
        return 0.0 if self.abandoned else max(0.0, self.ends - time.monotonic())

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """Hold this while doing what must not happen after the call was abandoned
        (keep it short, or bounded by `remaining()`).

        Raises:
            CallAbandoned: the registry has already given up on this call.
        """
        with self._lock:
            if self.abandoned:
                raise CallAbandoned("the registry gave up on this call; it must not act")
            self.acted = True
            yield

    def abandon(self, wait: float) -> bool:
        """Give up on the call: no act starts from now on. An act under way is waited
        for (at most `wait` seconds); True when the tool has acted."""
        self._abandoned.set()
        if self._lock.acquire(timeout=wait):
            self._lock.release()
        return self.acted


_deadline: contextvars.ContextVar[CallDeadline | None] = contextvars.ContextVar(
    "tool_call_deadline", default=None)


def current_deadline() -> CallDeadline | None:
    """The time limit of the tool call running in this thread (None: no limit)."""
    return _deadline.get()


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
# Running a tool: a time limit, and text for the model
# ---------------------------------------------------------------------------


T = TypeVar("T")


class StillRunning(Exception):
    """`run_in_thread` stopped waiting: the call goes on in its thread, abandoned."""


def run_in_thread(fn: Callable[[], T], seconds: float, name: str,
                  grace: Callable[[], float] = lambda: 0.0) -> T:
    """Call `fn()` in a new daemon thread and wait at most `seconds` for it.

    The thread runs with a copy of the caller's context variables. Python cannot
    kill a thread: one still running after `seconds` is left to finish by itself
    (being a daemon, it never keeps the program from exiting). The registry runs
    every tool this way; the course's recorder runs every page download this way.

    Args:
        fn: what to call, without arguments.
        seconds: how long to wait.
        name: the thread's name (shown by debuggers and in `StillRunning`).
        grace: asked once, when `seconds` have passed and `fn` still runs: how many
            seconds more to wait (0: none).

    Raises:
        StillRunning: `fn` had not returned in time.
        BaseException: whatever `fn` raised, re-raised here.
    """
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=contextvars.copy_context().run, args=(work,),
                              name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        worker.join(grace())
    if worker.is_alive():
        raise StillRunning(f"{name} did not finish within {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def run_with_time_limit(fn: Callable[..., Any], kwargs: dict[str, Any],
                        seconds: float | None) -> Any:
    """Call `fn(**kwargs)` and wait at most `seconds` for it (None: no limit).

    The call runs in its own thread (`run_in_thread`), with its `CallDeadline` as
    `current_deadline()`. If it is still running after `seconds`, the deadline is
    abandoned, `ToolTimeout` is raised and the thread is left to finish: it ends
    when `fn` returns. A tool that was in the middle of acting (`CallDeadline.acting`)
    is waited for a little longer, so its result is not reported as a time-out.

    Raises:
        ToolTimeout: `fn` did not finish in time.
        Exception: whatever `fn` raised, re-raised here.
    """
    if seconds is None:
        return fn(**kwargs)
    deadline = CallDeadline(seconds)

    def call() -> Any:
        _deadline.set(deadline)  # in the thread's own copy of the context
        return fn(**kwargs)

    def grace() -> float:  # it acted: wait for what it did
        return ACT_GRACE if deadline.abandon(ACT_GRACE) else 0.0

    try:
        return run_in_thread(call, seconds, f"tool-{getattr(fn, '__name__', 'fn')}", grace)
    except StillRunning:
        raise ToolTimeout(f"the tool did not finish within {seconds:g} s") from None


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
