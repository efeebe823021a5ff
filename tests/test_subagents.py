"""Sub-agents: a child run started by the `delegate` tool, isolated from its parent's history,
nested in its trace, limited in depth and sharing one token budget (scripted models)."""

from __future__ import annotations

import json

import pytest
from test_loop import MODEL, make_registry

from vibe_agent.course.scripted import (
    ScriptedModel,
    answer,
    call,
    calls,
    offered_tools,
    usage_of,
)
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.registry import ToolRegistry
from vibe_agent.subagents import delegate_registry
from vibe_agent.trace import Trace


def rounds(body) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def family(child_script, *, child_usage=None):
    """One scripted model playing parent and child: the parent is offered `delegate`."""

    def respond(body):
        if "delegate" in offered_tools(body) and body["messages"][1]["content"] == "父任务":
            if rounds(body) == 0:
                return calls(call("delegate", {"task": "算一算 17 * 23"}), usage=usage_of(50, 5))
            return answer("子 agent 说：" + body["messages"][-1]["content"], usage_of(70, 5))
        step = child_script[min(rounds(body), len(child_script) - 1)]
        return step(body) if callable(step) else step

    return ScriptedModel(respond, name="family")


def run_parent(model, tools: ToolRegistry, **options):
    registry = delegate_registry(model.client(), model=MODEL, tools=tools, **options)
    return run_agent(model.client(), "父任务", registry, model=MODEL, max_iters=4)


CHILD_OK = [calls(call("calculator", {"expression": "17 * 23"}), usage=usage_of(30, 5)),
            answer("391", usage_of(40, 2))]


def test_only_the_childs_answer_enters_the_parents_history():
    model = family(CHILD_OK)
    result = run_parent(model, make_registry())
    assert result.answer == "子 agent 说：391"
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["391"]
    assert "17 * 23 = 391" not in json.dumps(result.messages, ensure_ascii=False)
    child_requests = [b for b in model.requests if b["messages"][1]["content"] != "父任务"]
    assert child_requests[0]["messages"][1]["content"] == "算一算 17 * 23"  # a fresh history
    assert len(child_requests[0]["messages"]) == 2


def test_the_child_is_never_offered_delegate():
    model = family(CHILD_OK)
    tools = make_registry()

    @tools.tool(name="delegate")  # even if the caller hands one over
    def sneaky(task: str) -> str:
        """Start a helper.

        Args:
            task: what to do.
        """
        return "x"

    run_parent(model, tools)
    child_requests = [b for b in model.requests if b["messages"][1]["content"] != "父任务"]
    assert child_requests and all("delegate" not in offered_tools(b) for b in child_requests)


def test_depth_two_gives_the_child_a_delegate_but_not_the_grandchild():
    seen: list[list[str]] = []

    def record(body):
        seen.append(offered_tools(body))
        return answer("好")

    model = family([record])
    run_parent(model, make_registry(), depth=2)
    assert seen and "delegate" in seen[0]


def test_a_tool_the_child_was_not_given_is_error_text():
    script = [calls(call("write_file", {"path": "x", "content": "y"})), answer("写不了")]
    model = family(script)
    result = run_parent(model, make_registry())
    assert result.ok
    child_step = next(s for s in result.trace if s.tool == "delegate").children
    refused = next(s for s in child_step if s.tool == "write_file")
    assert refused.outcome != "ok" and "calculator" in refused.result


def test_childs_steps_are_nested_under_the_delegate_step():
    result = run_parent(family(CHILD_OK), make_registry())
    step = next(s for s in result.trace if s.tool == "delegate")
    assert [s.kind for s in step.children] == ["model", "tool", "model", "stop"]
    again = Trace.from_json(result.trace.to_json())
    assert next(s for s in again if s.tool == "delegate").children == step.children
    assert "│ " in result.trace.render()


def test_a_child_stopped_by_a_brake_is_error_text_for_the_parent():
    script = [calls(call("calculator", {"expression": "1 + 1"}))]  # forever: repeat brake
    result = run_parent(family(script), make_registry())
    step = next(s for s in result.trace if s.tool == "delegate")
    assert step.outcome != "ok"
    assert "without an answer (repeated_call)" in step.result


def test_children_share_one_budget():
    usage = usage_of(400, 200)
    script = [calls(call("calculator", {"expression": "2 + 2"}), usage=usage),
              answer("4", usage)]

    def parent_twice(body):
        if "delegate" in offered_tools(body) and body["messages"][1]["content"] == "父任务":
            done = rounds(body)
            if done < 2:
                return calls(call("delegate", {"task": f"第 {done} 件事"}))
            return answer("完")
        return script[min(rounds(body), 1)]

    model = ScriptedModel(parent_twice, name="budget")
    result = run_parent(model, make_registry(), budget_tokens=1000)
    delegations = [s for s in result.trace if s.tool == "delegate"]
    assert "stopped" in delegations[0].result and "budget" in delegations[0].result
    assert "no helper was started" in delegations[1].result
    assert result.stop_reason is StopReason.ANSWERED


LEVELS = ["父任务", "子任务", "孙任务", "曾孙任务"]  # each level's task, as its first user message


def generations(depth: int):
    """Parent, child, grandchild ...: each delegates once, then answers; the deepest one
    works on and on.
    Every reply reports 500 tokens of usage; `spent` counts the sub-agents' (levels 1+)."""
    spent: list[int] = []

    def respond(body):
        level = LEVELS.index(body["messages"][1]["content"])
        done, usage = rounds(body), usage_of(400, 100)
        spent.extend([usage["total_tokens"]] if level else [])
        if level == depth:
            return calls(call("calculator", {"expression": f"{done} + 1"}), usage=usage)
        if done == 0:
            return calls(call("delegate", {"task": LEVELS[level + 1]}), usage=usage)
        return answer("完", usage)

    return ScriptedModel(respond, name="generations"), spent


@pytest.mark.parametrize("depth", [2, 3])
def test_one_budget_for_every_depth(depth):
    """A grandchild spends from the same budget as the children (lesson 13: 所有子 agent
    一个共同的预算); past it, every level stops before its next request."""
    model, spent = generations(depth)
    registry = delegate_registry(model.client(), model=MODEL, tools=make_registry(),
                                 depth=depth, budget_tokens=1200, max_iters=30)
    result = run_agent(model.client(), "父任务", registry, model=MODEL, max_iters=4,
                       max_repeats=0, max_cycle=0)
    assert sum(spent) == 1500  # the call that crossed 1,200 is the last one: 3 of 500
    step = next(s for s in result.trace if s.tool == "delegate")
    assert "stopped" in step.result and "budget of 1200 is used up" in step.result
    assert result.stop_reason is StopReason.ANSWERED


@pytest.mark.parametrize("depth", [0, -1])
def test_depth_below_one_is_a_harness_error(depth):
    with pytest.raises(ValueError):
        delegate_registry(ScriptedModel([]).client(), model=MODEL, tools=make_registry(),
                          depth=depth)
