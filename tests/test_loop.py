"""The loop: the protocol, each brake against each misbehaviour, provider failures."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vibe_agent.brakes import MAX_CALLS_PER_REPLY
from vibe_agent.course.reference import reference_model
from vibe_agent.course.scripted import (
    ScriptedModel,
    answer,
    call,
    calls,
    http_error,
    misbehaving,
    usage_of,
)
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.registry import ToolRegistry
from vibe_agent.trace import ANSWERED_BY, CUT_OFF, Trace
from vibe_agent.workers import ToolWorkers

MODEL = "test-model"


def make_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def calculator(expression: str) -> str:
        """Multiply or add two integers written like '17 * 23'.

        Args:
            expression: two integers and one operator.
        """
        a, op, b = expression.split()
        return f"{expression} = {int(a) * int(b) if op == '*' else int(a) + int(b)}"

    @registry.tool
    def current_time(timezone: str = "Asia/Shanghai") -> str:
        """The current time (fixed for tests).

        Args:
            timezone: an IANA timezone name.
        """
        return f"2026-11-30 21:00:00 {timezone}"

    @registry.tool
    def broken(path: str) -> str:
        """A tool that always raises.

        Args:
            path: anything.
        """
        raise OSError(f"disk on fire: {path}")

    return registry


def run(model: ScriptedModel, **kwargs):
    return run_agent(model.client(), "17 × 23 等于多少？", make_registry(), model=MODEL, **kwargs)


def test_ideal_path_appends_both_messages_and_exits_on_empty_tool_calls():
    model = ScriptedModel([
        calls(call("calculator", {"expression": "17 * 23"}, id="c1")),
        answer("17 × 23 = 391。"),
    ])
    result = run(model)
    model.assert_consumed()
    assert result.ok and result.answer == "17 × 23 = 391。"
    assert [m["role"] for m in result.messages] == [
        "system", "user", "assistant", "tool", "assistant"]
    assistant, tool = result.messages[2], result.messages[3]
    assert assistant["tool_calls"] == [{"id": "c1", "type": "function", "function": {
        "name": "calculator", "arguments": '{"expression": "17 * 23"}'}}]
    assert tool == {"role": "tool", "tool_call_id": "c1", "content": "17 * 23 = 391"}
    # the full history is resent: round 2 carries everything round 1 produced
    assert len(model.requests[0]["messages"]) == 2
    assert model.requests[1]["messages"] == result.messages[:4]
    assert model.requests[0]["temperature"] == 0
    assert model.requests[0]["tool_choice"] == "auto"


def test_done_in_content_does_not_stop_the_loop():
    model = misbehaving("says_done_while_calling")
    result = run(model)
    assert result.ok and result.model_calls == 2
    assert result.messages[2]["content"] == "完成！"  # the word was there, the loop went on


def test_parallel_calls_are_all_answered_by_id_before_the_next_round():
    model = misbehaving("parallel_calls")
    result = run(model)
    assert result.model_calls == 2
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_b", "call_a", "call_c"]
    assert tool_messages[0]["content"] == "17 * 23 = 391"  # answered by id, in call order
    assert [m["role"] for m in model.requests[1]["messages"]][-3:] == ["tool"] * 3


def test_no_tools_means_no_tools_field():
    model = ScriptedModel([answer("hi")])
    run_agent(model.client(), "hi", ToolRegistry(), model=MODEL)
    assert "tools" not in model.requests[0] and "tool_choice" not in model.requests[0]


# Each misbehaviour against each brake: (misbehaviour, settings, stop reason, requests sent).
BRAKE_MATRIX = [
    ("repeat_forever", {}, StopReason.REPEATED_CALL, 3),
    ("repeat_forever", {"max_repeats": 0}, StopReason.MAX_ITERS, 6),
    ("repeat_forever", {"max_repeats": 0, "max_iters": 2}, StopReason.MAX_ITERS, 2),
    ("invalid_json", {"max_repeats": 0}, StopReason.TOOL_ERRORS, 3),
    ("invalid_json", {"max_repeats": 0, "max_tool_errors": 0}, StopReason.MAX_ITERS, 6),
    ("invalid_json", {}, StopReason.REPEATED_CALL, 3),
    ("unknown_tool", {"max_repeats": 0}, StopReason.TOOL_ERRORS, 3),
    ("unknown_tool", {"max_repeats": 0, "max_tool_errors": 5}, StopReason.TOOL_ERRORS, 5),
    ("wrong_types", {"max_repeats": 0}, StopReason.TOOL_ERRORS, 3),
    ("wrong_types", {"max_repeats": 0, "max_tool_errors": 0, "max_iters": 4},
     StopReason.MAX_ITERS, 4),
    ("http_429", {}, StopReason.PROVIDER_ERROR, 1),
    ("http_500", {}, StopReason.PROVIDER_ERROR, 1),
    ("no_choices", {}, StopReason.PROVIDER_ERROR, 1),
]


@pytest.mark.parametrize(("name", "options", "reason", "requests"), BRAKE_MATRIX,
                         ids=[f"{row[0]}-{row[2].value}-{i}" for i, row in enumerate(BRAKE_MATRIX)])
def test_brake_matrix(name, options, reason, requests):
    model = misbehaving(name)
    result = run(model, **options)
    assert result.stop_reason is reason
    assert len(model.requests) == requests
    assert result.answer is None
    assert result.trace[-1].kind == "stop" and result.trace[-1].stop_reason is reason
    assert result.message == result.trace[-1].content


def test_repeated_call_is_answered_but_not_run_again():
    result = run(misbehaving("repeat_forever"))
    tool_steps = [s for s in result.trace if s.kind == "tool"]
    assert [s.outcome for s in tool_steps] == ["ok", "ok", "refused"]
    assert "not run again" in result.messages[-1]["content"]


def test_a_raising_tool_is_fed_back_and_the_model_can_recover():
    model = ScriptedModel([
        calls(call("broken", {"path": "/wrong"})),
        calls(call("calculator", {"expression": "17 * 23"})),
        answer("391"),
    ])
    result = run(model)
    assert result.ok and result.answer == "391"
    error_step = next(s for s in result.trace if s.kind == "tool")
    assert error_step.outcome == "tool_raised"
    assert error_step.error_type == "OSError" and "disk on fire" in error_step.error
    assert "OSError" in model.requests[1]["messages"][-1]["content"]


def test_tool_error_counter_resets_after_a_success():
    model = ScriptedModel([
        calls(call("broken", {"path": "a"})), calls(call("broken", {"path": "b"})),
        calls(call("calculator", {"expression": "1 + 1"})),
        calls(call("broken", {"path": "c"})), calls(call("broken", {"path": "d"})),
        answer("done"),
    ])
    assert run(model, max_iters=10).ok


def test_provider_error_message_names_the_status():
    result = run(ScriptedModel([http_error(429, "slow down")]))
    assert result.message == "模型服务返回 HTTP 429：slow down"


def test_usage_is_kept_per_round_and_absence_stays_absent():
    result = run(misbehaving("omits_usage"))
    assert result.usage[0] == usage_of(100, 10)
    assert result.usage[1] is None
    assert result.total_tokens is None
    model_steps = [s for s in result.trace if s.kind == "model"]
    assert (model_steps[0].prompt_tokens, model_steps[1].prompt_tokens) == (100, None)


def test_total_tokens_sums_reported_usage():
    model = ScriptedModel([calls(call("calculator", {"expression": "1 + 2"}),
                                 usage=usage_of(50, 5)), answer("3", usage=usage_of(70, 3))])
    assert run(model).total_tokens == 128


def test_a_harness_bug_raises_and_the_trace_is_still_complete():
    model = ScriptedModel([calls(call("calculator", {"expression": "1 + 2"}))])
    trace = Trace()
    with pytest.raises(RuntimeError, match="only 1 replies"):
        run(model, trace=trace)
    assert [s.kind for s in trace] == ["model", "tool", "stop"]
    assert trace[-1].stop_reason is None and trace[-1].error_type == "ScriptExhausted"


def test_max_iters_cannot_be_switched_off():
    with pytest.raises(ValueError):
        run(reference_model(), max_iters=0)


def test_on_step_sees_every_step_live():
    seen = []
    result = run(reference_model(), on_step=seen.append)
    assert seen == list(result.trace)


def test_trace_round_trips_through_json():
    result = run(misbehaving("parallel_calls"))
    assert Trace.from_json(result.trace.to_json()) == result.trace
    assert "calculator" in result.trace.render()


def test_reasoning_content_is_passed_back():
    model = ScriptedModel([
        calls(call("calculator", {"expression": "1 + 2"})),
        answer("3"),
    ])
    original = model.completion

    def with_reasoning(name, reply):
        body = original(name, reply)
        body["choices"][0]["message"]["reasoning_content"] = "think"
        return body

    model.completion = with_reasoning
    result = run(model)
    assert result.messages[2]["reasoning_content"] == "think"


# ---------------------------------------------------------------------------
# Property: whatever the model replies, the loop stays within its contract
# ---------------------------------------------------------------------------

tool_call_specs = st.builds(
    call,
    name=st.sampled_from(["calculator", "current_time", "broken", "missing_tool"]),
    arguments=st.one_of(
        st.just('{"expression": "2 * 3"}'), st.just("{}"), st.just('{"timezone": "UTC"}'),
        st.just('{"path": 1}'), st.text(max_size=12),
    ),
)
replies = st.one_of(
    st.builds(answer, st.text(max_size=20)),
    st.builds(lambda specs, text: calls(*specs, content=text),
              st.lists(tool_call_specs, min_size=1, max_size=3),
              st.none() | st.just("完成")),
    st.sampled_from([http_error(429), http_error(500)]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(replies, min_size=1, max_size=12), max_iters=st.integers(1, 8),
       max_repeats=st.sampled_from([0, 2, 3, 4]), max_tool_errors=st.integers(0, 4))
def test_any_script_stays_within_the_contract(script, max_iters, max_repeats, max_tool_errors):
    model = ScriptedModel(script + [answer("fallback")] * max_iters)
    result = run(model, max_iters=max_iters, max_repeats=max_repeats,
                 max_tool_errors=max_tool_errors)
    assert len(model.requests) <= max_iters
    assert result.stop_reason in StopReason
    # every tool_call id is answered exactly once, in the order it was requested
    requested = [tc["id"] for m in result.messages for tc in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert answered == requested
    # and each round's tool messages come right after their assistant message
    for i, m in enumerate(result.messages):
        for j, tc in enumerate(m.get("tool_calls") or []):
            assert result.messages[i + 1 + j]["tool_call_id"] == tc["id"]
    json.dumps(result.messages)  # the history stays plain JSON


# ---------------------------------------------------------------------------
# Scripted models enforce the history rules a provider enforces
# ---------------------------------------------------------------------------

ASK = {"role": "user", "content": "17 × 23?"}
CALLED = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "a", "type": "function", "function": {"name": "calculator", "arguments": "{}"}},
    {"id": "b", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]}


def tool_message(call_id: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": "391"}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([ASK, CALLED, tool_message("a"), tool_message("b")], None),
        ([ASK, CALLED, tool_message("b"), tool_message("a")], None),
        ([ASK, tool_message("a")], "must be a response to a preceding message"),
        ([ASK, CALLED, tool_message("a"), tool_message("x")], "'x' matches none"),
        ([ASK, CALLED, tool_message("a"), ASK], "Missing: b"),
        ([ASK, CALLED], "never answered: a, b"),
        ([ASK, CALLED, tool_message("a"), tool_message("a")], "'a' matches none"),
    ],
    ids=["complete", "any-order", "dropped-assistant", "wrong-id", "unanswered-then-user",
         "unanswered-at-end", "answered-twice"],
)
def test_protocol_errors(messages, problem):
    from vibe_agent.course.scripted import protocol_error

    found = protocol_error({"messages": messages})
    assert found is None if problem is None else problem in found


def test_a_broken_history_gets_http_400():
    import openai

    client = reference_model().client()
    with pytest.raises(openai.BadRequestError, match="preceding message with 'tool_calls'"):
        client.chat.completions.create(model="m", messages=[ASK, tool_message("a")])


def test_a_reply_cut_off_by_max_tokens_is_visible_in_the_trace():
    model = ScriptedModel([answer("17 × 23 = 3")])
    original = model.completion

    def cut_off(name, reply):
        body = original(name, reply)
        body["choices"][0]["finish_reason"] = "length"
        return body

    model.completion = cut_off
    result = run(model)
    assert result.trace[0].finish_reason == "length"
    assert CUT_OFF in result.trace.render()


# ---------------------------------------------------------------------------
# The brakes in lesson 05's words, and the cycle brake
# ---------------------------------------------------------------------------

A = ("calculator", '{"expression": "17 * 23"}')
A_REORDERED = ("calculator", '{ "expression":"17 * 23" }')
B = ("current_time", '{"timezone": "UTC"}')
C = ("calculator", '{"expression": "2 * 3"}')
BROKEN = ("calculator", '{"expression": ')
HUGE = ("calculator", "9" * 5000)
DEEP = ("calculator", "[" * 100_000)


@pytest.mark.parametrize(("previous", "this", "limit", "expected"), [
    ([], A, 3, False),
    ([A, A], A, 3, True),
    ([A], A, 3, False),
    ([A], A_REORDERED, 2, True),
    ([A, B], A, 2, False),
    ([A, A, A, A], A, 3, True),
    ([A, A], A, 0, False),
    ([BROKEN, BROKEN], BROKEN, 3, True),
    ([HUGE, HUGE], HUGE, 3, True),
    ([DEEP], DEEP, 2, True),
], ids=["first", "third-in-a-row", "second", "same-after-canonicalising", "interrupted",
        "long-run", "off", "invalid-json", "int-too-long", "nesting-too-deep"])
def test_is_repeat(previous, this, limit, expected):
    from vibe_agent.brakes import is_repeat

    assert is_repeat(previous, *this, limit) is expected


@pytest.mark.parametrize(("previous", "this", "longest", "cycle"), [
    ([A, B, A], B, 3, [A, B]),
    ([A, B, C, A, B], C, 3, [A, B, C]),
    ([A, B, C, A, B], C, 2, []),
    ([A, B, A], B, 0, []),
    ([A, A, A], A, 3, []),
    ([A, A, B], A, 3, []),
    ([A, B], A, 3, []),
    ([B, A, B, A_REORDERED], B, 2, [A_REORDERED, B]),
    ([A, A, B, A, A], B, 3, [A, A, B]),
    ([HUGE, DEEP, HUGE], DEEP, 2, [HUGE, DEEP]),
], ids=["ping-pong", "three-calls", "three-but-longest-2", "off", "one-call-is-a-repeat",
        "lesson-05-list-is-progress", "not-yet-twice", "canonical-arguments",
        "cycle-with-a-repeat-inside", "unparsable-arguments"])
def test_find_cycle(previous, this, longest, cycle):
    from vibe_agent.brakes import find_cycle

    assert find_cycle(previous, *this, longest) == cycle


def test_tool_error_brake_counts_failures_in_a_row():
    from vibe_agent.brakes import ToolErrorBrake

    brake = ToolErrorBrake(3)
    assert [brake.record(ok) for ok in (False, False, True, False, False, False)] == [
        False, False, False, False, False, True]
    assert not any(ToolErrorBrake(0).record(False) for _ in range(5))


def ping_pong(period: int):
    """A scripted responder that goes round `period` different calls forever."""
    def respond(body):
        step = sum(m["role"] == "assistant" for m in body["messages"]) % period
        return calls(call("calculator", {"expression": f"{step} + 1"}))
    return respond


# (responder, settings, stop reason, requests sent)
CYCLE_MATRIX = [
    (ping_pong(2), {}, StopReason.CYCLE, 4),
    (ping_pong(3), {}, StopReason.CYCLE, 6),
    (ping_pong(3), {"max_iters": 8, "max_cycle": 2}, StopReason.MAX_ITERS, 8),
    (ping_pong(2), {"max_cycle": 0}, StopReason.MAX_ITERS, 6),
    (ping_pong(4), {"max_iters": 10}, StopReason.MAX_ITERS, 10),
]


@pytest.mark.parametrize(("respond", "options", "reason", "requests"), CYCLE_MATRIX,
                         ids=["period-2", "period-3", "period-3-not-looked-for", "off",
                              "period-4-too-long"])
def test_cycle_brake(respond, options, reason, requests):
    model = ScriptedModel(respond)
    result = run(model, **options)
    assert (result.stop_reason, len(model.requests)) == (reason, requests)
    if reason is StopReason.CYCLE:
        refused = result.trace[-2]
        assert refused.outcome == "refused" and refused.result.startswith("Error:")
        assert "not run again" in result.messages[-1]["content"]
        assert "来回打转" in result.message and "calculator" in result.message


def test_a_cycle_inside_parallel_calls_is_caught_and_every_call_answered():
    a, b = call("calculator", {"expression": "1 + 1"}), call("current_time", {})
    model = ScriptedModel([calls(a, b), calls(a, b, call("calculator", {"expression": "2 * 2"}))])
    result = run(model)
    assert result.stop_reason is StopReason.CYCLE and len(model.requests) == 2
    outcomes = [s.outcome for s in result.trace if s.kind == "tool"]
    assert outcomes == ["ok", "ok", "ok", "refused", "not_run"]  # all answered, none run after
    assert [m["role"] for m in result.messages][-3:] == ["tool"] * 3
    assert result.messages[-1]["content"] == "Error: not run, the loop stopped (cycle)."


def counting_registry(runs: list[str]) -> ToolRegistry:
    """`work` records every real run in `runs`; `fail` always fails."""
    registry = ToolRegistry()

    @registry.tool
    def work(n: int) -> str:
        """Do some work.

        Args:
            n: which piece.
        """
        runs.append(f"work {n}")
        return f"did {n}"

    @registry.tool
    def fail(n: int) -> str:
        """Always fail.

        Args:
            n: which piece.
        """
        runs.append(f"fail {n}")
        raise RuntimeError("no")

    return registry


W = [call("work", {"n": i}) for i in range(4)]
F = [call("fail", {"n": i}) for i in range(4)]

# (first reply, second reply, settings, stop reason, runs, outcomes of round 2's calls)
BRAKE_MID_REPLY = [
    (calls(W[0], W[1]), calls(W[0], W[1], W[2], W[3]), {"max_repeats": 0}, StopReason.CYCLE,
     ["work 0", "work 1", "work 0"], ["ok", "refused", "not_run", "not_run"]),
    (calls(W[0]), calls(W[0], W[1], W[2]), {"max_repeats": 2}, StopReason.REPEATED_CALL,
     ["work 0"], ["refused", "not_run", "not_run"]),
    (calls(F[0]), calls(F[1], W[1], W[2]), {"max_tool_errors": 2}, StopReason.TOOL_ERRORS,
     ["fail 0", "fail 1"], ["tool_raised", "not_run", "not_run"]),
]


@pytest.mark.parametrize(("first", "second", "options", "reason", "runs", "outcomes"),
                         BRAKE_MID_REPLY, ids=["cycle", "repeat", "tool-errors"])
def test_after_a_brake_trips_no_later_call_of_the_reply_runs(first, second, options, reason,
                                                             runs, outcomes):
    ran: list[str] = []
    model = ScriptedModel([first, second])
    result = run_agent(model.client(), "work", counting_registry(ran), model=MODEL, **options)
    assert result.stop_reason is reason
    assert ran == runs  # lesson 05, exercise 5.3: the rest is answered, not run
    steps = [s for s in result.trace if s.kind == "tool" and s.round == 2]
    assert [s.outcome for s in steps] == outcomes
    not_run = [m["content"] for m, outcome in zip(result.messages[-len(outcomes):],
                                                  outcomes, strict=True)
               if outcome == "not_run"]
    assert not_run == [f"Error: not run, the loop stopped ({reason.value})."] * 2


@pytest.mark.parametrize("workers", [1, 8], ids=["one-by-one", "eight-workers"])
def test_a_reply_asking_for_1000_calls_runs_only_the_first_ones(workers):
    """The calls-per-reply brake: the calls past the limit are answered, not run, the
    history stays valid (every id answered) and the trace names the brake."""
    ran: list[str] = []
    thousand = calls(*(call("work", {"n": i}) for i in range(1000)))
    model = ScriptedModel([thousand, answer("never asked")])
    result = run_agent(model.client(), "work", counting_registry(ran), model=MODEL,
                       layers=[ToolWorkers(workers)])
    limit = MAX_CALLS_PER_REPLY
    assert result.stop_reason is StopReason.TOO_MANY_CALLS and len(model.requests) == 1
    assert sorted(ran) == sorted(f"work {i}" for i in range(limit))
    steps = [s for s in result.trace if s.kind == "tool"]
    assert [s.outcome for s in steps] == ["ok"] * limit + ["refused"] + ["not_run"] * (
        999 - limit)
    answered = [m for m in result.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answered] == [c["id"] for c in
                                                     result.messages[2]["tool_calls"]]
    assert answered[limit]["content"] == (
        f"Error: not run: this reply asks for 1000 tool calls, more than the {limit} one "
        "reply may ask for (max_calls_per_reply).")
    assert answered[-1]["content"] == "Error: not run, the loop stopped (too_many_calls)."
    assert "max_calls_per_reply" in result.message and "1000" in result.message
    assert result.trace[-1].stop_reason is StopReason.TOO_MANY_CALLS


@pytest.mark.parametrize(("limit", "asked", "reason", "ran"), [
    (3, 3, StopReason.ANSWERED, 3), (3, 4, StopReason.TOO_MANY_CALLS, 3),
    (0, 40, StopReason.ANSWERED, 40)], ids=["at-the-limit", "one-over", "off"])
def test_calls_per_reply_limit(limit, asked, reason, ran):
    runs: list[str] = []
    model = ScriptedModel([calls(*(call("work", {"n": i}) for i in range(asked))), answer("ok")])
    result = run_agent(model.client(), "work", counting_registry(runs), model=MODEL,
                       max_calls_per_reply=limit)
    assert result.stop_reason is reason and len(runs) == ran


def test_a_write_after_a_brake_never_reaches_the_workspace(tmp_path):
    from vibe_agent.coding import coding_registry

    registry = coding_registry(tmp_path, policy="allow-all")
    look = call("read_file", {"path": "missing.txt"})
    write = call("write_file", {"path": "after_the_brake.txt", "content": "x"})
    model = ScriptedModel([calls(look), calls(look, write)])
    result = run_agent(model.client(), "go", registry, model=MODEL, max_repeats=2)
    assert result.stop_reason is StopReason.REPEATED_CALL
    assert not (tmp_path / "after_the_brake.txt").exists()


@pytest.mark.parametrize(("max_repeats", "requests", "said"), [
    (2, 2, "already made 1 time in a row"),
    (3, 3, "already made 2 times in a row"),
    (4, 4, "already made 3 times in a row"),
], ids=["2", "3", "4"])
def test_the_nth_identical_call_is_refused(max_repeats, requests, said):
    model = misbehaving("repeat_forever")
    result = run(model, max_repeats=max_repeats)
    assert (result.stop_reason, len(model.requests)) == (StopReason.REPEATED_CALL, requests)
    assert said in result.messages[-1]["content"]
    assert f"连续出现 {max_repeats} 次" in result.message
    assert [s.outcome for s in result.trace if s.kind == "tool"][-1] == "refused"


@pytest.mark.parametrize(("options", "match"), [
    ({"max_repeats": 1}, "1 would refuse every call"),
    ({"max_repeats": -1}, "use 0 \\(off\\) or 2 or more"),
    ({"max_cycle": 1}, "a cycle has 2 or more calls"),
    ({"max_tool_errors": -1}, "0 \\(off\\) or more"),
    ({"max_result_chars": -5}, "0 \\(off\\) or more"),
    ({"max_iters": 0}, "cannot be switched off"),
], ids=["repeats-1", "repeats-negative", "cycle-1", "tool-errors-negative",
        "result-chars-negative", "max-iters-0"])
def test_brake_settings_that_are_harness_bugs_raise(options, match):
    model = reference_model()
    with pytest.raises(ValueError, match=match):
        run(model, **options)
    assert model.requests == []


# ---------------------------------------------------------------------------
# What the trace and the result derive from each other
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["no_choices", "http_429", "http_500", "repeat_forever",
                                  "parallel_calls", "omits_usage"])
def test_model_calls_are_the_model_steps_of_the_trace(name):
    model = misbehaving(name)
    result = run(model)
    model_steps = [s for s in result.trace if s.kind == "model"]
    assert result.model_calls == len(model_steps) == len(model.requests) == len(result.usage)


def test_a_failed_model_call_is_a_model_step_without_usage():
    model = ScriptedModel([calls(call("calculator", {"expression": "1 + 2"}),
                                 usage=usage_of(50, 5)), http_error(500)])
    result = run(model)
    assert [(s.decision, s.outcome, s.stop_reason) for s in result.trace] == [
        ("tool_calls", None, None), (None, "ok", None), ("error", None, None),
        (None, None, StopReason.PROVIDER_ERROR)]
    assert result.usage == [usage_of(50, 5), None] and result.total_tokens is None


def test_the_responding_model_is_recorded_and_shown_when_it_differs():
    model = ScriptedModel([answer("fallback says hi")])
    original = model.completion

    def from_a_fallback(name, reply):
        return original(name, reply) | {"model": "fallback-model"}

    model.completion = from_a_fallback
    result = run(model)
    assert result.trace[0].model == "fallback-model"
    assert ANSWERED_BY.format(model="fallback-model") in result.trace.render()
    same = run(ScriptedModel([answer("hi")]))
    assert same.trace[0].model == MODEL and "[model" not in same.trace.render()


@pytest.mark.parametrize(("max_result_chars", "sent"), [
    (20_000, 20_000), (100, 100), (0, 30_000)], ids=["default", "small", "off"])
def test_a_long_tool_result_is_cut_in_the_history_only(max_result_chars, sent):
    registry = ToolRegistry()

    @registry.tool
    def long_text() -> str:
        """Return 30,000 characters."""
        return "y" * 30_000

    model = ScriptedModel([calls(call("long_text")), answer("ok")])
    result = run_agent(model.client(), "long?", registry, model=MODEL,
                       max_result_chars=max_result_chars)
    content = model.requests[1]["messages"][-1]["content"]
    assert len(content) <= sent  # the note of what was cut included
    kept = len(content) - len(content.lstrip("y"))
    if max_result_chars:
        assert content.endswith(f"showing the first {kept} of 30000 characters, "
                                f"{30_000 - kept} cut]")
        assert sent - kept < 100  # the note takes what is left
    assert len(result.trace[1].result) == 30_000
