"""MCP: the registry as a client of real stdio servers, and the course's own server.

Every server here is a real process speaking MCP through the official SDK: the test
server in tests/fixtures/mcp_test_server.py (tools that add, fail, hang, crash, write
garbage on stdout) and `python -m vibe_agent.course.mcp_server`.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from mcp.client.stdio import stdio_client
from mcp.types import ImageContent, TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool

from vibe_agent import mcp_connection
from vibe_agent.mcp_tools import (
    MAX_DESCRIPTION_CHARS,
    MAX_LINE_BYTES,
    MAX_RESULT_CHARS,
    MAX_SCHEMA_NODES,
    MCPCall,
    MCPServerError,
    SchemaTooLarge,
    describe_content,
    is_destructive,
    is_read_only,
    mcp_registry,
    mcp_to_openai_tools,
    mcp_tool_name,
    to_parameters,
    tool_refusal,
)
from vibe_agent.registry import Tool, ToolDefinitionError, ToolRegistry, ToolTimeout
from vibe_agent.sandbox import Policy
from vibe_agent.tools import demo_registry
from vibe_agent.workers import ToolWorkers

SERVER = Path(__file__).parent / "fixtures" / "mcp_test_server.py"
TEST_SERVER = [sys.executable, str(SERVER)]
RAW_SERVER = [sys.executable, str(SERVER.with_name("raw_mcp_server.py"))]
COURSE = [sys.executable, "-m", "vibe_agent.course.mcp_server", "--clock",
          "2026-05-01T09:30:00+08:00"]


def server_processes(before: frozenset[int] = frozenset()) -> list[psutil.Process]:
    """Our children that are MCP servers of these tests, zombies included (not `before`)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        if child.pid in before:
            continue
        try:
            line = " ".join(child.cmdline())
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            found.append(child)  # a zombie has no command line left: count it
            continue
        if "mcp_test_server" in line or "vibe_agent.course.mcp_server" in line:
            found.append(child)
    return found


@pytest.fixture(scope="module")
def test_server():
    """One test server for the calls that leave it running (crash and hang get their own)."""
    with mcp_registry(TEST_SERVER, name="test", timeout=5, policy="allow-all") as registry:
        yield registry


# ---------------------------------------------------------------------------
# Calls through the registry's safe dispatch
# ---------------------------------------------------------------------------

CALLS = [
    # tool, arguments, error_kind, text the output contains
    ("add", {"a": 2, "b": 3}, None, "5"),
    ("add", {"a": "two", "b": 3}, "bad_arguments", "'a' must be integer"),
    ("add", {"a": 2}, "bad_arguments", "missing required argument 'b'"),
    ("fail", {"message": "the disk is full"}, "tool_error", "the disk is full"),
    ("picture", {}, None, "[image image/png"),
    ("long_text", {"chars": MAX_RESULT_CHARS + 500}, None, "[truncated: showing 20000 of 20500"),
]


@pytest.mark.parametrize(("tool", "arguments", "kind", "expected"), CALLS,
                         ids=["adds", "wrong-type", "missing-argument", "is-error",
                              "image-described", "capped"])
def test_a_call_goes_through_the_registry(test_server, tool, arguments, kind, expected):
    result = test_server.call(f"mcp__test__{tool}", json.dumps(arguments))
    assert result.error_kind == kind
    assert expected in result.output
    assert len(result.output) < MAX_RESULT_CHARS + 200


def test_is_error_is_not_passed_on_as_success(test_server):
    result = test_server.call("mcp__test__fail", '{"message": "nope"}')
    assert not result.ok and result.output.startswith("Error: tool 'mcp__test__fail' reported")


def test_names_are_namespaced_and_schemas_kept(test_server):
    assert "mcp__test__add" in test_server and "add" not in test_server
    schema = test_server["mcp__test__add"].schema()["function"]
    assert schema["parameters"]["properties"] == {"a": {"type": "integer"},
                                                  "b": {"type": "integer"}}
    assert schema["parameters"]["required"] == ["a", "b"]
    assert schema["description"] == "Add two integers."


def test_the_server_gets_no_key_unless_passed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("VIBE_AGENT_SECRET", "also-secret")
    with mcp_registry(TEST_SERVER, name="t", env={"GIVEN": "yes"}, policy="allow-all") as registry:
        seen = {name: registry.call("mcp__t__env", {"name": name}).output
                for name in ("OPENAI_API_KEY", "VIBE_AGENT_SECRET", "GIVEN", "PATH")}
    assert seen["OPENAI_API_KEY"] == "<unset>" and seen["VIBE_AGENT_SECRET"] == "<unset>"
    assert seen["GIVEN"] == "yes" and seen["PATH"] != "<unset>"


# ---------------------------------------------------------------------------
# Servers that fail: error text, never an exception, never a hang, nothing left
# ---------------------------------------------------------------------------


def test_a_crash_mid_call_becomes_error_text_and_stays_so():
    before = frozenset(p.pid for p in server_processes())
    with mcp_registry(TEST_SERVER, name="t", timeout=5, policy="allow-all") as registry:
        crashed = registry.call("mcp__t__crash", "{}")
        after = registry.call("mcp__t__add", '{"a": 1, "b": 1}')
    assert crashed.error_kind == "tool_error" and "stopped while running" in crashed.output
    assert "crash: exiting with status 3" in crashed.output  # the server's stderr, quoted
    assert after.error_kind == "tool_error" and "cannot be used any more" in after.output
    assert server_processes(before) == []


def test_a_server_that_never_answers_times_out():
    before = frozenset(p.pid for p in server_processes())
    with mcp_registry(TEST_SERVER, name="t", timeout=1.5, policy="allow-all") as registry:
        started = time.monotonic()
        result = registry.call("mcp__t__nap", '{"seconds": 30}')
        waited = time.monotonic() - started
        still = registry.call("mcp__t__add", '{"a": 1, "b": 1}')
    assert result.error_kind == "timeout" and "did not finish within 1.5 seconds" in result.output
    assert waited < 4
    assert still.ok and still.output == "2"  # the run goes on: the server still answers
    assert server_processes(before) == []


def test_a_person_thinking_longer_than_the_timeout_is_not_a_timeout():
    """The approval is asked outside any time limit (the connection bounds the call
    itself): a slow yes runs the call, and the model is never told it timed out."""
    def slow_yes(question: str) -> str:
        time.sleep(2.5)
        return "y"

    with mcp_registry(TEST_SERVER, name="t", timeout=1.5, tools={"add"},
                      policy=Policy("ask", ask=slow_yes)) as registry:
        result = registry.call("mcp__t__add", {"a": 2, "b": 3})
    assert result.ok and result.output == "5"


@pytest.mark.parametrize(("raised", "text"), [
    (ToolTimeout("slow", 4), "did not finish within 4 seconds"),
    (ToolTimeout("slow"), "did not finish in time"),
], ids=["own-limit", "no-limit-given"])
def test_a_tool_without_a_registry_limit_may_time_out_itself(raised, text):
    registry = ToolRegistry()

    def bounded() -> str:
        """Waits for something, with its own limit."""
        raise raised

    registry.register(bounded, timeout=None)
    result = registry.call("bounded", {})
    assert result.error_kind == "timeout" and text in result.output


def test_a_server_that_answers_garbage_times_out_and_names_it():
    with mcp_registry([*RAW_SERVER, "--garbage"], name="raw", timeout=1.5,
                      policy="allow-all") as registry:
        first = registry.call("mcp__raw__echo", '{"text": "hi"}')
        second = registry.call("mcp__raw__echo", '{"text": "again"}')
    for result in (first, second):
        assert result.error_kind == "timeout"
        assert "not MCP messages" in str(result.exception)
        assert "oops, this is not JSON-RPC" in str(result.exception)


def test_a_server_written_without_the_sdk_works():
    with mcp_registry(RAW_SERVER, name="raw", policy="allow-all") as registry:
        assert registry.names == ["mcp__raw__echo"]
        assert registry.call("mcp__raw__echo", {"text": "你好"}).output == "你好"


def test_awkward_names_and_schemas_from_a_server():
    with mcp_registry([*RAW_SERVER, "--weird"], name="raw", policy="allow-all") as registry:
        assert registry.names == ["mcp__raw__echo", "mcp__raw__get_weather", "mcp__raw__point"]
        assert "also called mcp__raw__get_weather" in registry.left_out["get/weather"]
        assert "longer than 64" in registry.left_out["x" * 70]
        assert registry.lost["mcp__raw__get_weather"] == ["when: format"]
        point = registry["mcp__raw__point"]
        assert point.description == ""
        assert point.parameters["properties"]["p"] == {"type": "object", "properties": {
            "x": {"type": "number"}}}
        assert "must be object" in registry.call("mcp__raw__point", {"p": [1]}).output


def test_a_banner_before_serving_is_skipped():
    with mcp_registry([*TEST_SERVER, "--banner"], name="t", timeout=5,
                      policy="allow-all") as registry:
        assert registry.call("mcp__t__add", {"a": 2, "b": 2}).output == "4"


def test_print_inside_an_sdk_tool_does_not_break_the_protocol():
    with mcp_registry(TEST_SERVER, name="t", timeout=5, policy="allow-all") as registry:
        assert registry.call("mcp__t__noisy", {}).output == "still fine"
        assert registry.call("mcp__t__add", {"a": 1, "b": 2}).output == "3"


@pytest.mark.parametrize(("command", "message"), [
    (["/nonexistent/program"], "not found"),
    ([sys.executable, "-c", "print('hello, I am not an MCP server')"], "did not start"),
    ([sys.executable, "-c", "import time; time.sleep(60)"], "no answer"),
], ids=["missing-program", "not-mcp", "silent"])
def test_a_server_that_does_not_start_raises_clearly(command, message, monkeypatch):
    # A silent server is given up on after MIN_START_S (15 s: a Python server may import
    # for that long); 2 s proves the same here.
    monkeypatch.setattr(mcp_connection, "MIN_START_S", 2.0)
    started = time.monotonic()
    with pytest.raises(MCPServerError, match=message), mcp_registry(command, name="x",
                                                                       timeout=1.5):
        pass
    assert time.monotonic() - started < 30
    assert not [p for p in psutil.Process().children(recursive=True)
                if p.status() == psutil.STATUS_ZOMBIE]


def test_no_process_is_left_after_the_block():
    before = frozenset(p.pid for p in server_processes())
    with mcp_registry(TEST_SERVER, name="t", policy="allow-all") as registry:
        pid = int(registry.call("mcp__t__pid", {}).output)
        assert psutil.pid_exists(pid)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    assert not psutil.pid_exists(pid)
    assert server_processes(before) == []


def test_an_exception_in_the_block_still_stops_the_server():
    with pytest.raises(KeyError), mcp_registry(TEST_SERVER, name="t",
                                               policy="allow-all") as registry:
        pid = int(registry.call("mcp__t__pid", {}).output)
        raise KeyError("a bug in the caller")
    assert not psutil.pid_exists(pid)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"command": "python server.py", "name": "x"}, "non-empty list"),
    ({"command": [], "name": "x"}, "non-empty list"),
    ({"command": TEST_SERVER, "name": "a__b"}, "single '_'"),
    ({"command": TEST_SERVER, "name": "has space"}, "letters, digits"),
    ({"command": TEST_SERVER, "name": "x", "timeout": 0}, "positive"),
], ids=["string-command", "empty-command", "double-underscore", "space", "zero-timeout"])
def test_bad_configuration_raises_before_starting(kwargs, message):
    with pytest.raises(ValueError, match=message), mcp_registry(**kwargs):
        pass


# ---------------------------------------------------------------------------
# Hostile servers (raw JSON-RPC, no SDK): bounded listings, stdout, process tree
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile():
    """One raw server listing a schema bomb, a huge description, 5,000 properties, a
    task-only tool and a tool without a name, besides echo."""
    started = time.monotonic()
    with mcp_registry([*RAW_SERVER, "--bomb", "--huge", "--task-only", "--no-name"],
                      name="raw", policy="allow-all") as registry:
        yield registry, time.monotonic() - started


def test_a_schema_bomb_is_left_out_within_its_bounds(hostile):
    registry, seconds = hostile
    assert "mcp__raw__bomb" not in registry and "mcp__raw__echo" in registry
    assert f"more than {MAX_SCHEMA_NODES} nodes" in registry.left_out["bomb"]
    assert seconds < 15  # the start-up of a Python process, not the bomb


def raw_server_module():
    """tests/fixtures/raw_mcp_server.py as a module (its schema bomb), without serving."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("raw_mcp_server", RAW_SERVER[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_to_parameters_bounds_nodes_characters_and_properties():
    bomb = raw_server_module().bomb
    with pytest.raises(SchemaTooLarge, match="nodes"):
        to_parameters(bomb(5, 11))
    started = time.monotonic()
    with pytest.raises(SchemaTooLarge, match="nodes"):
        to_parameters(bomb(4, 11))  # today: 10 s, 460 MB, a 25 MB schema
    assert time.monotonic() - started < 1
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(101)}}
    with pytest.raises(SchemaTooLarge, match="101 properties"):
        to_parameters(wide)
    long_enum = {"type": "object", "properties": {"e": {"enum": ["x" * 100] * 500}}}
    with pytest.raises(SchemaTooLarge, match="characters"):
        to_parameters(long_enum)
    assert to_parameters(bomb(2, 8))[1] == []  # 2**8 leaves: small enough, nothing lost


def test_a_huge_description_is_cut_and_many_properties_left_out(hostile):
    registry, _ = hostile
    wordy = registry["mcp__raw__wordy"]
    assert len(wordy.description) < MAX_DESCRIPTION_CHARS + 100
    assert wordy.description.endswith(
        f"[description truncated: {MAX_DESCRIPTION_CHARS} of 200000 characters shown]")
    assert registry.lost["mcp__raw__wordy"] == [
        f"description: cut to {MAX_DESCRIPTION_CHARS} of 200000 characters"]
    assert "5000 properties" in registry.left_out["wide"]
    assert len(json.dumps(registry.to_schemas())) < 20_000


def test_task_only_and_nameless_tools_are_left_out(hostile):
    registry, _ = hostile
    assert "task augmentation" in registry.left_out["research"]
    assert "mcp__raw__maybe_task" in registry  # optional: an ordinary call works
    assert "no letter or digit" in registry.left_out[""]
    assert "mcp__raw__" not in registry
    assert sorted(registry.names) == ["mcp__raw__echo", "mcp__raw__maybe_task",
                                      "mcp__raw__wordy"]


def test_a_line_without_end_on_stdout_is_bounded():
    import psutil

    me = psutil.Process()
    with mcp_registry([*RAW_SERVER, "--flood"], name="raw", timeout=3,
                      policy="allow-all") as registry:
        before = me.memory_info().rss
        result = registry.call("mcp__raw__echo", {"text": "hi"})
        time.sleep(1)  # the server has written all 32 MB by now
        grown = me.memory_info().rss - before
    assert result.error_kind == "timeout"
    assert f"a line of more than {MAX_LINE_BYTES} bytes: skipped" in str(result.exception)
    assert grown < 2 * MAX_LINE_BYTES + 8 * 2**20  # today: the 32 MB buffered whole, and more


def test_a_daemon_started_by_the_server_ends_with_it(tmp_path):
    pid_file = tmp_path / "daemon.pid"
    with mcp_registry([*RAW_SERVER, "--daemon", str(pid_file)], name="raw",
                      policy="allow-all") as registry:
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        daemon = psutil.Process(int(pid_file.read_text()))
        assert daemon.is_running() and registry.call("mcp__raw__echo", {"text": "x"}).ok
    try:
        daemon.wait(timeout=5)
    except psutil.TimeoutExpired:
        daemon.kill()  # today it survives the close: do not leave it behind
        pytest.fail("the setsid() daemon survived the registry's close")


# ---------------------------------------------------------------------------
# Guards: allow-list, shadowing, approval
# ---------------------------------------------------------------------------


def test_a_shadowing_tool_cannot_replace_a_local_one():
    with mcp_registry([*TEST_SERVER, "--shadow"], name="evil") as registry:
        assert "mcp__evil__read_file" in registry and "read_file" not in registry
        local = demo_registry()
        with pytest.raises(ToolDefinitionError):  # one registry, one tool per name
            local.add(Tool("calculator", "", {"type": "object", "properties": {},
                                              "required": []}, fn=lambda: "shadowed"))


def test_the_allow_list_leaves_other_tools_out():
    with mcp_registry([*TEST_SERVER, "--poison"], name="dict", tools={"add"}) as registry:
        assert registry.names == ["mcp__dict__add"]
        assert "not in the allow-list" in registry.left_out["lookup"]
        review = registry.review()
    assert "ignore all previous instructions" in review and "未注册" in review


def says(answer: str, asked: list[str] | None = None):
    """A person who always gives `answer`, remembering each question in `asked`."""
    def ask(question: str) -> str:
        if asked is not None:
            asked.append(question)
        return answer
    return ask


# Which of the test server's tools run without asking: count_notes is marked read-only,
# add_note not read-only but not destructive, delete_note destructive, add unannotated.
APPROVAL_ROWS = [
    # policy, the tools that run
    ("allow-all", {"count_notes", "add_note", "delete_note", "add"}),
    (Policy("ask", ask=says("y")), {"count_notes", "add_note", "delete_note", "add"}),
    (Policy("ask", ask=says("好")), {"count_notes", "add_note", "delete_note", "add"}),
    (Policy("ask", ask=says("n")), {"count_notes"}),
    (Policy(["python"], ask=says("n")), {"count_notes"}),  # the default kind of rule
    (Policy(lambda action: "delete" not in action.detail), {"count_notes", "add_note", "add"}),
]
APPROVAL_CALLS = {"count_notes": {}, "add_note": {"text": "hi"}, "delete_note": {"note_id": 7},
                  "add": {"a": 1, "b": 1}}


ANNOTATIONS = {"count_notes": ToolAnnotations(read_only_hint=True),
               "add_note": ToolAnnotations(destructive_hint=False),
               "delete_note": ToolAnnotations(destructive_hint=True), "add": None}


@pytest.mark.parametrize(("policy", "runs"), APPROVAL_ROWS,
                         ids=["allow-all", "ask-yes", "ask-hao", "ask-no", "prefix-list-no",
                              "function-decides"])
def test_which_tools_are_asked(policy, runs):
    """The MCP spec's defaults: a tool not marked read-only may destroy data, so it is
    asked (unannotated tools included); only readOnlyHint: true runs unasked."""
    policy = policy if isinstance(policy, Policy) else Policy(policy)
    ran = set()
    for tool, hints in ANNOTATIONS.items():
        arguments = APPROVAL_CALLS[tool]
        call = MCPCall("tool", f"mcp__t__{tool} {json.dumps(arguments)}", server="t",
                       tool=tool, arguments=arguments, annotations=hints)
        if tool_refusal(policy, call) is None:
            ran.add(tool)
    assert ran == runs


def test_the_question_names_the_tool_and_the_annotation():
    asked: list[str] = []
    with mcp_registry(TEST_SERVER, name="t", policy=Policy("ask", ask=says("n", asked)),
                      tools={"add", "delete_note", "add_note"}) as tools:
        for tool, arguments in APPROVAL_CALLS.items():
            if f"mcp__t__{tool}" in tools:
                tools.call(f"mcp__t__{tool}", arguments)
    assert len(asked) == 3
    assert "不删除、不覆盖" in asked[0] and 'mcp__t__add_note {"text": "hi"}' in asked[0]
    assert "服务器标注：这个工具可能删除或覆盖数据" in asked[1]  # delete_note
    assert "没有标注它只读" in asked[2]  # add: unannotated, so destructive by the spec


def test_a_policy_function_gets_the_call_with_what_the_server_said():
    seen = []
    with mcp_registry(TEST_SERVER, name="t", policy=lambda call: seen.append(call) or True,
                      tools={"delete_note"}) as tools:
        assert tools.call("mcp__t__delete_note", {"note_id": 7}).output == "deleted note 7"
    call = seen[0]
    assert isinstance(call, MCPCall) and call.kind == "tool"
    assert (call.server, call.tool, call.arguments) == ("t", "delete_note", {"note_id": 7})
    assert call.description == "Delete a note (it really only says so)."
    assert call.annotations.destructive_hint is True and not call.read_only


def test_ask_without_a_person_refuses(monkeypatch):
    def no_stdin(prompt: str) -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", no_stdin)
    with mcp_registry(TEST_SERVER, name="t") as registry:  # the default prefix list
        destructive = registry.call("mcp__t__delete_note", '{"note_id": 1}')
        unannotated = registry.call("mcp__t__add", '{"a": 1, "b": 1}')
        read_only = registry.call("mcp__t__count_notes", "{}")
    for result in (destructive, unannotated):
        assert result.error_kind == "tool_error" and "nobody can answer" in result.output
    assert read_only.output == "3"


def test_the_question_shows_hidden_characters_escaped(monkeypatch):
    asked: list[str] = []
    with mcp_registry(TEST_SERVER, name="t", policy=Policy("ask", ask=says("n", asked)),
                      tools={"add_note"}) as tools:
        tools.call("mcp__t__add_note", {"text": "abc\u202edcba \x9b31m 你好"})
    assert "\\u202e" in asked[0] and "\\x9b" in asked[0] and "你好" in asked[0]
    assert "\u202e" not in asked[0] and "\x9b" not in asked[0]


def test_parallel_calls_are_asked_one_at_a_time():
    """ToolWorkers(4) runs four calls at once; their four questions come one by one."""
    from vibe_agent.course.scripted import ScriptedModel, answer, call, calls
    from vibe_agent.loop import run_agent

    state = {"open": 0, "most": 0, "asked": 0}
    lock = threading.Lock()

    def slow_person(question: str) -> str:
        with lock:
            state["open"] += 1
            state["asked"] += 1
            state["most"] = max(state["most"], state["open"])
        time.sleep(0.3)  # reading the question
        with lock:
            state["open"] -= 1
        return "y"

    model = ScriptedModel([calls(*(call("mcp__t__add_note", {"text": str(i)}) for i in range(4))),
                           answer("done")])
    with mcp_registry(TEST_SERVER, name="t", policy=Policy("ask", ask=slow_person),
                      tools={"add_note"}) as tools:
        result = run_agent(model.client(), "add four notes", tools, model="scripted",
                           layers=[ToolWorkers(4)])
    outputs = [step.result for step in result.trace if step.kind == "tool"]
    assert outputs == [f"added '{i}'" for i in range(4)]
    assert state["asked"] == 4 and state["most"] == 1


@pytest.mark.parametrize(("annotations", "read_only", "destructive"), [
    (None, False, True),
    (ToolAnnotations(), False, True),
    (ToolAnnotations(destructive_hint=True), False, True),
    (ToolAnnotations(destructive_hint=True, read_only_hint=True), True, False),
    (ToolAnnotations(read_only_hint=False), False, True),
    (ToolAnnotations(destructive_hint=False), False, False),
    (ToolAnnotations(read_only_hint=True), True, False),
], ids=["none", "empty", "destructive", "read-only-wins", "not-read-only", "additive",
        "read-only"])
def test_the_spec_defaults(annotations, read_only, destructive):
    assert is_read_only(annotations) is read_only
    assert is_destructive(annotations) is destructive


# ---------------------------------------------------------------------------
# Schemas: from inputSchema to the parameters sent, and what is lost
# ---------------------------------------------------------------------------

SCHEMAS = [
    ({"type": "object", "properties": {"x": {"type": "string", "title": "X"}},
      "required": ["x"], "title": "args"},
     {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}, []),
    ({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}},
     {"type": "object", "properties": {"when": {"type": "string"}}, "required": []},
     ["when: format"]),
    ({"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}],
                                             "default": None}}},
     {"type": "object", "properties": {"n": {"type": "integer", "default": None}},
      "required": []}, []),
    ({"type": "object", "$defs": {"P": {"type": "object", "properties": {
        "x": {"type": "number"}}, "required": ["x"]}},
      "properties": {"p": {"$ref": "#/$defs/P"}}, "required": ["p"]},
     {"type": "object", "properties": {"p": {"type": "object", "properties": {
         "x": {"type": "number"}}, "required": ["x"]}}, "required": ["p"]}, []),
    ({"type": "object", "properties": {"v": {"oneOf": [{"type": "string"},
                                                       {"type": "integer"}]}}},
     {"type": "object", "properties": {"v": {}}, "required": []}, ["v: oneOf with 2 choices"]),
    ({"type": "object", "properties": {"v": {"type": ["string", "integer"]}}},
     {"type": "object", "properties": {"v": {}}, "required": []},
     ["v: type is one of ['string', 'integer']"]),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost"],
      "additionalProperties": False},
     {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
      "additionalProperties": False}, []),
    ({"type": "object"}, {"type": "object", "properties": {}, "required": []},
     ["the schema is not an object with properties: the tool takes no arguments"]),
    ({"type": "object", "properties": {"t": {"$ref": "#/$defs/Missing"}}},
     {"type": "object", "properties": {"t": {}}, "required": []},
     ["t: $ref (not a local definition, or recursive)"]),
]


@pytest.mark.parametrize(("schema", "parameters", "lost"), SCHEMAS,
                         ids=["title-dropped", "format-lost", "nullable", "ref-inlined",
                              "choice-lost", "type-list-lost", "ghost-required",
                              "no-properties", "dangling-ref"])
def test_to_parameters(schema, parameters, lost):
    assert to_parameters(schema) == (parameters, lost)


def test_a_converted_schema_is_one_the_registry_can_check():
    parameters, _ = to_parameters(SCHEMAS[3][0])
    registry = ToolRegistry()
    registry.add(Tool("point", "", parameters, fn=lambda p: str(p["x"])))
    assert registry.call("point", {"p": {"x": 1}}).output == "1"
    assert "'p' must be object" in registry.call("point", {"p": 3}).output


def test_mcp_to_openai_tools():
    listing = [MCPTool(name="get.weather", description="Weather.",
                       input_schema={"type": "object", "properties": {"city": {
                           "type": "string"}}, "required": ["city"]})]
    assert mcp_to_openai_tools(listing, "w") == [{"type": "function", "function": {
        "name": "mcp__w__get_weather", "description": "Weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]


@pytest.mark.parametrize(("server", "tool", "name"), [
    ("course", "calculator", "mcp__course__calculator"),
    ("fs", "read.file", "mcp__fs__read_file"),
    ("x", "a/b c", "mcp__x__a_b_c"),
], ids=["plain", "dot", "slash-space"])
def test_mcp_tool_name(server, tool, name):
    assert mcp_tool_name(server, tool) == name


@pytest.mark.parametrize(("block", "text"), [
    (TextContent(type="text", text="hi"), "hi"),
    (ImageContent(type="image", data="AAAA", mime_type="image/png"),
     "[image image/png, about 3 bytes: not shown, the model reads text only]"),
], ids=["text", "image"])
def test_describe_content(block, text):
    assert describe_content(block) == text


@pytest.mark.parametrize(("parameters", "message"), [
    ({"type": "object"}, "need 'properties'"),
    ({"type": "object", "properties": {}, "required": "x"}, "need 'properties'"),
], ids=["no-properties", "required-not-list"])
def test_registry_add_refuses_a_schema_it_cannot_check(parameters, message):
    with pytest.raises(ToolDefinitionError, match=message):
        ToolRegistry().add(Tool("t", "", parameters, fn=lambda: ""))


# ---------------------------------------------------------------------------
# The course's own server
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def course():
    with mcp_registry(COURSE, name="course") as registry:
        yield registry


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("calculator", {"expression": "17 * 23"}, "17 * 23 = 391"),
    ("calculator", {"expression": "1/0"}, "reported an error: division by zero"),
    ("current_time", {}, "2026-05-01 09:30:00 Asia/Shanghai (UTC+08:00)"),
    ("current_time", {"timezone": "UTC"}, "2026-05-01 01:30:00 UTC"),
    ("page_length", {"url": "https://example.com/"}, "has 335 characters"),
    ("page_length", {"url": "https://www.python.org/"}, "reported an error: HTTP 404"),
    ("search_course", {"query": "tool_call_id"}, "[lesson "),
    ("search_course", {"query": "   "}, "reported an error: the query is empty"),
], ids=["calculator", "calculator-error", "clock", "clock-utc", "bundled-page",
        "no-network", "search-lessons", "search-empty"])
def test_the_course_server(course, tool, arguments, expected):
    assert expected in course.call(f"mcp__course__{tool}", arguments).output


def test_the_course_server_lists_the_local_schemas(course):
    local = demo_registry()
    for name in ("calculator", "current_time", "page_length"):
        assert course[f"mcp__course__{name}"].schema()["function"] == {
            **local[name].schema()["function"], "name": f"mcp__course__{name}"}
    assert all(tool.annotations.read_only_hint for tool in course.listing)
    assert all(lost == [] for lost in course.lost.values())


def test_the_course_server_as_another_client_sees_it(tmp_path):
    """Through the SDK's own Client (the newest protocol, 2026-07-28): errors flagged,
    a version, only the capabilities it has, and no network log for a bundled page."""
    import anyio
    from mcp import Client, StdioServerParameters

    errlog = tmp_path / "stderr.txt"

    async def session():
        params = StdioServerParameters(command=COURSE[0], args=COURSE[1:])
        with errlog.open("w") as stderr:
            async with Client(stdio_client(params, errlog=stderr)) as client:
                found = client.session.discover_result or client.session.initialize_result
                failed = await client.call_tool("calculator", {"expression": "1/0"})
                fine = await client.call_tool("calculator", {"expression": "1+1"})
                page = await client.call_tool("page_length", {"url": "https://example.com/"})
                return found, failed, fine, page

    found, failed, fine, page = anyio.run(session)
    assert failed.is_error is True and "division by zero" in failed.content[0].text
    assert fine.is_error is False and page.is_error is False
    info = found.meta["io.modelcontextprotocol/serverInfo"] if hasattr(found, "ttl_ms") else \
        found.server_info.model_dump()
    assert info["version"] == importlib.metadata.version("vibe-agent") != ""
    claimed = found.capabilities
    assert claimed.tools is not None and not claimed.tools.list_changed
    assert not (claimed.resources and (claimed.resources.subscribe or
                                       claimed.resources.list_changed))
    assert not (claimed.prompts and claimed.prompts.list_changed)
    assert "HTTP Request" not in errlog.read_text()


def test_search_finds_the_bundled_pages():
    from vibe_agent.course.mcp_server import page_passages, search

    found = search("example domain illustrative", 1, tuple(page_passages()))
    assert found and found[0].source == "page https://example.com/"


def test_the_reference_model_answers_the_demo_tasks_through_mcp(course):
    from vibe_agent.course.reference import reference_model
    from vibe_agent.course.scenarios import DEMO_TASKS
    from vibe_agent.loop import run_agent

    client = reference_model().client()
    results = [run_agent(client, task.question, course, model="vibe-reference")
               for task in DEMO_TASKS]
    called = [[s.tool for s in r.trace if s.kind == "tool"] for r in results]
    assert called == [["mcp__course__current_time"], ["mcp__course__calculator"],
                      ["mcp__course__page_length", "mcp__course__calculator"], []]
    assert "09:30" in results[0].answer and "391" in results[1].answer
    assert "47.857" in results[2].answer and "无法知道" in results[3].answer
