"""The loop's one extension point: layers with named events (vibe_agent.layers).

The events fire in the documented order; a layer that raises is a harness bug (it
raises, the trace says so); the five mechanisms plug in as layers and can be combined;
run_agent stays lesson 04's loop in size and never names a mechanism."""

from __future__ import annotations

import ast
import inspect
import threading

import pytest

from vibe_agent import loop
from vibe_agent.compact import Compaction, scripted_summarizer
from vibe_agent.course.scripted import ScriptedModel, answer, call, calls
from vibe_agent.layers import Conversation, Layer, Layers
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.plan import FinishCheck
from vibe_agent.registry import ToolRegistry
from vibe_agent.stream import Streaming
from vibe_agent.trace import Trace
from vibe_agent.workers import ToolWorkers

MODEL = "test-model"


def echo_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def echo(text: str) -> str:
        """Echo the text.

        Args:
            text: what to echo.
        """
        return text

    return registry


class Recorder(Layer):
    """Writes down every event, in the order the loop fires them."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def start(self, messages):
        self.events.append("start")
        return messages

    def request(self, fields):
        self.events.append("request")
        return fields

    def before_model(self, messages, round_no, record):
        self.events.append(f"before_model {round_no}")

    def text_piece(self, piece):
        self.events.append("text_piece")

    def model_failed(self, failed, messages, round_no, record):
        self.events.append("model_failed")
        return False

    def recorded(self, step):
        self.events.append(f"recorded {step.kind}")

    def on_stop(self, answer_text):
        self.events.append("on_stop")
        return None

    def batches(self, steps):
        self.events.append(f"batches {len(steps)}")
        return None

    def run_tools(self, registry, steps):
        self.events.append(f"run_tools {len(steps)}")
        return None

    def tool_result(self, step, content):
        self.events.append("tool_result")
        return content


def one_call_then_answer() -> ScriptedModel:
    return ScriptedModel([calls(call("echo", {"text": "a"}), call("echo", {"text": "b"})),
                          answer("done")])


def test_the_events_fire_in_the_documented_order():
    recorder = Recorder()
    result = run_agent(one_call_then_answer().client(), "q", echo_registry(), model=MODEL,
                       layers=[recorder])
    assert result.ok and result.answer == "done"
    assert recorder.events == [
        "start", "request",
        "before_model 1", "recorded model",
        "batches 2", "run_tools 1", "tool_result", "recorded tool",  # one call after the other
        "run_tools 1", "tool_result", "recorded tool",
        "before_model 2", "recorded model", "on_stop", "recorded stop"]


def test_a_streamed_reply_fires_on_text_before_its_model_step_is_recorded():
    recorder = Recorder()
    run_agent(ScriptedModel([answer("好的")]).client(), "q", ToolRegistry(), model=MODEL,
              layers=[Streaming(), recorder])
    assert recorder.events.index("text_piece") < recorder.events.index("recorded model")


def test_a_failed_call_asks_the_layers_before_the_run_stops():
    recorder = Recorder()
    registry = ToolRegistry()

    @registry.tool
    def read_page(number: int) -> str:
        """Read one page.

        Args:
            number: the page number.
        """
        return "lorem ipsum " * 100

    model = ScriptedModel([calls(call("read_page", {"number": n})) for n in range(5)],
                          context_window=300)
    result = run_agent(model.client(), "q", registry, model=MODEL, layers=[recorder])
    assert result.stop_reason is StopReason.CONTEXT_TOO_LONG
    assert recorder.events[-3:] == ["recorded model", "model_failed", "recorded stop"]


EVENTS = ["start", "request", "before_model", "recorded", "on_stop", "batches", "run_tools",
          "tool_result"]


@pytest.mark.parametrize("event", EVENTS)
def test_a_layer_that_raises_is_a_harness_bug_and_the_trace_says_so(event):
    class Broken(Layer):
        pass

    def broken(*_args):
        raise RuntimeError(f"the layer broke in {event}")

    setattr(Broken, event, broken)
    trace = Trace()
    with pytest.raises(RuntimeError, match=f"broke in {event}"):
        run_agent(one_call_then_answer().client(), "q", echo_registry(), model=MODEL,
                  trace=trace, layers=[Broken()])
    if event == "start":  # before the run begins: nothing happened yet
        assert trace == []
        return
    assert trace[-1].kind == "stop" and trace[-1].error_type == "RuntimeError"
    assert trace[-1].stop_reason is None


@pytest.mark.parametrize("refusal", [False, True, "", " \n", 0])
def test_a_refusal_that_says_nothing_is_a_harness_bug(refusal):
    class Says(Layer):
        def on_stop(self, answer_text):
            return refusal

    with pytest.raises(TypeError, match="finish check returns None"):
        run_agent(ScriptedModel([answer("x")]).client(), "q", ToolRegistry(), model=MODEL,
                  layers=[Says()])


def test_the_first_refusal_wins_and_later_layers_are_not_asked():
    asked: list[str] = []

    class Refuses(Layer):
        def __init__(self, name: str, times: int) -> None:
            self.name, self.times = name, times

        def on_stop(self, answer_text):
            asked.append(self.name)
            self.times -= 1
            return f"{self.name} says no" if self.times >= 0 else None

    model = ScriptedModel([answer("x"), answer("y")])
    result = run_agent(model.client(), "q", ToolRegistry(), model=MODEL,
                       layers=[Refuses("first", 1), Refuses("second", 0)])
    assert result.ok and result.answer == "y"
    assert asked == ["first", "first", "second"]
    assert model.requests[1]["messages"][-1] == {"role": "user", "content": "first says no"}


@pytest.mark.parametrize("thing", [print, "Compaction", 3, Compaction])
def test_layers_takes_layer_objects_only(thing):
    with pytest.raises(TypeError, match="layers takes Layer objects"):
        run_agent(ScriptedModel([answer("x")]).client(), "q", ToolRegistry(), model=MODEL,
                  layers=[thing])


def test_none_in_layers_is_a_layer_switched_off():
    result = run_agent(ScriptedModel([answer("x")]).client(), "q", ToolRegistry(), model=MODEL,
                       layers=[None, None])
    assert result.ok and Layers([None]).layers == []


@pytest.mark.parametrize(("keyword", "value", "layer"), [
    ("compaction", Compaction(scripted_summarizer), "Compaction(...)"),
    ("finish_check", lambda answer_text: None, "FinishCheck(check)"),
    ("stream", True, "Streaming()"),
    ("on_text", print, "Streaming(on_text=...)"),
    ("tool_workers", 4, "ToolWorkers(n)"),
    ("messages", [], "Conversation(messages)"),
])
def test_an_old_keyword_names_its_layer_before_any_request(keyword, value, layer):
    model = ScriptedModel([answer("x")])
    with pytest.raises(TypeError, match=rf"run_agent\({keyword}=\.\.\.\) is now a layer") as got:
        run_agent(model.client(), "q", ToolRegistry(), model=MODEL, **{keyword: value})
    assert f"layers=[{layer}]" in str(got.value) and model.requests == []


def test_lesson_04s_call_still_works():
    model = ScriptedModel([calls(call("echo", {"text": str(n)})) for n in range(3)])
    result = run_agent(model.client(), "q", echo_registry(), model=MODEL, max_iters=2)
    assert result.stop_reason is StopReason.MAX_ITERS and result.model_calls == 2


# --- the layers of the course ------------------------------------------------------


def test_a_conversation_goes_on_in_the_callers_list():
    history: list[dict] = []
    model = ScriptedModel([answer("one"), answer("two")])
    first = run_agent(model.client(), "q1", ToolRegistry(), model=MODEL, system_prompt="S",
                      layers=[Conversation(history)])
    second = run_agent(model.client(), "q2", ToolRegistry(), model=MODEL, system_prompt="other",
                       layers=[Conversation(history)])
    assert first.messages is history and second.messages is history
    assert [(m["role"], m["content"]) for m in history] == [
        ("system", "S"), ("user", "q1"), ("assistant", "one"), ("user", "q2"),
        ("assistant", "two")]  # the system prompt only when the list was empty


@pytest.mark.parametrize("messages", [None, (), "history", {"role": "user"}])
def test_a_conversation_takes_a_list(messages):
    with pytest.raises(TypeError, match="Conversation takes the list"):
        Conversation(messages)


@pytest.mark.parametrize("workers", [0, -1, True, 2.5, "4"])
def test_tool_workers_takes_a_positive_whole_number(workers):
    with pytest.raises(ValueError, match="ToolWorkers"):
        ToolWorkers(workers)


@pytest.mark.parametrize("check", [None, "tests_gate", 3])
def test_a_finish_check_takes_a_function(check):
    with pytest.raises(TypeError, match="FinishCheck takes a function"):
        FinishCheck(check)


def test_compaction_finish_check_tool_workers_and_streaming_in_one_run():
    both_running = threading.Barrier(2, timeout=5)  # a reply's two calls meet: they overlap
    registry = ToolRegistry()

    @registry.tool
    def meet(text: str) -> str:
        """Wait for the other call of the reply, then echo.

        Args:
            text: what to echo.
        """
        both_running.wait()
        return text

    model = ScriptedModel([
        calls(call("meet", {"text": "a"}, id="c1"), call("meet", {"text": "b"}, id="c2")),
        calls(call("meet", {"text": "c"}, id="c3"), call("meet", {"text": "d"}, id="c4")),
        answer("已修复"), answer("真的修好了")], context_window=10**6)
    refusals = iter(["not yet", None])
    compaction = Compaction(scripted_summarizer, budget=1, keep_last_rounds=1)
    pieces: list[str] = []
    result = run_agent(model.client(), "q", registry, model=MODEL, max_iters=6, layers=[
        compaction, FinishCheck(lambda answer_text: next(refusals)), ToolWorkers(2),
        Streaming(on_text=pieces.append)])
    model.assert_consumed()
    assert result.ok and result.answer == "真的修好了"
    assert [s.kind for s in result.trace].count("check") == 1  # the finish check refused once
    assert compaction.events and any(s.kind == "compact" for s in result.trace)
    assert all(body["stream"] is True for body in model.requests)
    assert "".join(pieces) == "已修复真的修好了"
    tools = [s for s in result.trace if s.kind == "tool"]
    assert [(s.tool_call_id, s.result, s.outcome) for s in tools] == [
        ("c1", "a", "ok"), ("c2", "b", "ok"), ("c3", "c", "ok"), ("c4", "d", "ok")]
    assert model.requests[-1]["messages"][-1] == {"role": "user", "content": "not yet"}


# --- run_agent itself ----------------------------------------------------------------

MECHANISMS = {"compaction", "compact", "Compaction", "finish_check", "FinishCheck", "stream",
              "Streaming", "on_text", "tool_workers", "ToolWorkers", "workers", "Conversation",
              "conversation"}


def run_agent_tree() -> ast.FunctionDef:
    tree = ast.parse(inspect.getsource(loop.run_agent)).body[0]
    assert isinstance(tree, ast.FunctionDef)
    return tree


def test_run_agent_is_at_most_50_code_lines():
    source = inspect.getsource(loop.run_agent)
    docstring = run_agent_tree().body[0]
    lines = [line for number, line in enumerate(source.splitlines(), 1)
             if not docstring.lineno <= number <= docstring.end_lineno
             and line.strip() and not line.strip().startswith("#")]
    assert len(lines) <= 50, len(lines)


def test_run_agent_names_no_mechanism():
    body = ast.Module(body=run_agent_tree().body[1:], type_ignores=[])
    names = {node.id for node in ast.walk(body) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(body) if isinstance(node, ast.Attribute)}
    names |= {node.arg for node in ast.walk(body) if isinstance(node, ast.keyword | ast.arg)}
    names |= {node.name for node in ast.walk(body) if isinstance(node, ast.FunctionDef)}
    assert not names & MECHANISMS, names & MECHANISMS
    assert not set(inspect.signature(loop.run_agent).parameters) & MECHANISMS
