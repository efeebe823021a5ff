"""run_agent(layers=[ToolWorkers(N)]): the calls of one reply run at the same time, their results go
back in the reply's order paired by id, errors stay text, no thread outlives the run, and the
brakes decide as in a serial run."""

from __future__ import annotations

import threading
import time

import pytest

from vibe_agent.course.scripted import ScriptedModel, answer, call, calls
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.registry import ToolRegistry
from vibe_agent.workers import ToolWorkers

MODEL = "m"


def sleepy_registry(barrier: threading.Barrier | None = None) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def wait_then_echo(text: str, seconds: float) -> str:
        """Wait, then return the text.

        Args:
            text: what to return.
            seconds: how long to wait first.
        """
        if barrier is not None:
            barrier.wait()  # passes only when all the calls run at the same time
        time.sleep(seconds)
        return f"echo {text}"

    @registry.tool
    def explode(text: str) -> str:
        """Always raises.

        Args:
            text: ignored.
        """
        raise RuntimeError(f"boom {text}")

    @registry.tool(timeout=0.2)
    def hang(text: str) -> str:
        """Sleeps past its time limit.

        Args:
            text: ignored.
        """
        time.sleep(1)
        return "late"

    return registry


def four_calls(*, later_first: bool = True):
    # the first call waits longest, so the calls finish in the reverse of their order
    waits = [0.3, 0.2, 0.1, 0.0] if later_first else [0.0] * 4
    return calls(*(call("wait_then_echo", {"text": str(i), "seconds": waits[i]}, id=f"id-{i}")
                   for i in range(4)))


def run(script, registry, workers):
    model = ScriptedModel(script, name="workers")
    return run_agent(model.client(), "q", registry, model=MODEL, layers=[ToolWorkers(workers)],
                     max_iters=3)


def test_calls_run_at_the_same_time_and_come_back_in_the_replys_order():
    barrier = threading.Barrier(4, timeout=10)
    result = run([four_calls(), answer("ok")], sleepy_registry(barrier), 4)
    tools = [m for m in result.messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [
        (f"id-{i}", f"echo {i}") for i in range(4)]
    assert not barrier.broken


def test_serial_runs_cannot_pass_the_barrier():
    """The barrier test above means something: one at a time, the first call never gets past."""
    barrier = threading.Barrier(4, timeout=0.5)
    result = run([four_calls(), answer("ok")], sleepy_registry(barrier), 1)
    first = next(s for s in result.trace if s.kind == "tool")
    assert "BrokenBarrierError" in (first.error or "")


def test_errors_and_time_outs_stay_text():
    script = [calls(call("explode", {"text": "a"}, id="x"), call("hang", {"text": "b"}, id="y"),
                    call("wait_then_echo", {"text": "c", "seconds": 0}, id="z")),
              answer("ok")]
    result = run(script, sleepy_registry(), 3)
    assert result.stop_reason is StopReason.ANSWERED
    tools = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    assert "boom a" in tools["x"] and "0.2" in tools["y"] and tools["z"] == "echo c"


def test_no_worker_thread_outlives_the_run():
    run([four_calls(), answer("ok")], sleepy_registry(), 4)
    assert not [t for t in threading.enumerate() if t.name.startswith("tool-call")]


REPEATS = [calls(*(call("wait_then_echo", {"text": "same", "seconds": 0}) for _ in range(4)))]


@pytest.mark.parametrize("script", [
    pytest.param(REPEATS, id="repeats-in-one-reply"),
    pytest.param([calls(call("explode", {"text": "1"}), call("explode", {"text": "2"}),
                        call("explode", {"text": "3"}), call("wait_then_echo",
                                                             {"text": "4", "seconds": 0}))],
                 id="tool-errors"),
])
def test_the_spinning_brakes_decide_as_in_a_serial_run(script):
    serial = run(script, sleepy_registry(), 1)
    together = run(script, sleepy_registry(), 4)
    assert together.stop_reason == serial.stop_reason
    if serial.stop_reason is StopReason.REPEATED_CALL:
        outcomes = [s.outcome for s in serial.trace if s.kind == "tool"]
        assert [s.outcome for s in together.trace if s.kind == "tool"] == outcomes


def test_tool_workers_below_one_is_a_harness_error():
    with pytest.raises(ValueError, match="ToolWorkers"):
        run([answer("x")], sleepy_registry(), 0)
