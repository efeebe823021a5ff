"""Lesson 13's checkers: right answers pass; the mistakes a clever beginner makes fail with
their own hint (the hint's words are asserted)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor, as_completed

import pytest

from vibe_agent.course.checks.lesson_13 import check_delegate, check_run_calls_concurrently
from vibe_agent.layers import Conversation
from vibe_agent.loop import run_agent
from vibe_agent.registry import ToolRegistry

# --- 13.1 ---------------------------------------------------------------------------------


def good_concurrent(registry, tool_calls, workers):
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(registry.call, c["function"]["name"],
                               c["function"]["arguments"]) for c in tool_calls]
        return [{"role": "tool", "tool_call_id": c["id"], "content": f.result().output}
                for c, f in zip(tool_calls, futures, strict=True)]


def serial(registry, tool_calls, workers):
    return [{"role": "tool", "tool_call_id": c["id"],
             "content": registry.call(c["function"]["name"], c["function"]["arguments"]).output}
            for c in tool_calls]


def submit_then_wait_each(registry, tool_calls, workers):
    out = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for c in tool_calls:
            future = pool.submit(registry.call, c["function"]["name"],
                                 c["function"]["arguments"])
            out.append({"role": "tool", "tool_call_id": c["id"], "content": future.result().output})
    return out


def ids_by_position(registry, tool_calls, workers):
    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        futures = [pool.submit(registry.call, c["function"]["name"],
                               c["function"]["arguments"]) for c in tool_calls]
        results = [f.result().output for f in as_completed(futures)]
    return [{"role": "tool", "tool_call_id": c["id"], "content": r}
            for c, r in zip(tool_calls, results, strict=True)]


def completion_order(registry, tool_calls, workers):
    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        futures = {pool.submit(registry.call, c["function"]["name"],
                               c["function"]["arguments"]): c for c in tool_calls}
        return [{"role": "tool", "tool_call_id": futures[f]["id"], "content": f.result().output}
                for f in as_completed(futures)]


def tool_results_as_content(registry, tool_calls, workers):
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(registry.call, c["function"]["name"],
                               c["function"]["arguments"]) for c in tool_calls]
        return [{"role": "tool", "tool_call_id": c["id"], "content": f.result()}
                for c, f in zip(tool_calls, futures, strict=True)]


def calls_the_function(registry, tool_calls, workers):
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(registry[c["function"]["name"]].fn,
                               **json.loads(c["function"]["arguments"])) for c in tool_calls]
        return [{"role": "tool", "tool_call_id": c["id"], "content": f.result()}
                for c, f in zip(tool_calls, futures, strict=True)]


def ignores_workers(registry, tool_calls, workers):
    return good_concurrent(registry, tool_calls, max(len(tool_calls), 1))


POOL = ThreadPoolExecutor(max_workers=4)  # one pool for every call, never shut down


def never_shuts_down(registry, tool_calls, workers):
    pool = POOL
    futures = [pool.submit(registry.call, c["function"]["name"],
                           c["function"]["arguments"]) for c in tool_calls]
    return [{"role": "tool", "tool_call_id": c["id"], "content": f.result().output}
            for c, f in zip(tool_calls, futures, strict=True)]


def hard_coded(registry, tool_calls, workers):
    return [{"role": "tool", "tool_call_id": "call_1", "content": "echo 1"}]


def borrowed(registry, tool_calls, workers):
    from vibe_agent.loop import run_tools
    from vibe_agent.trace import TraceStep

    steps = [TraceStep(round=1, kind="tool", outcome="ok", tool_call_id=c["id"],
                       tool=c["function"]["name"], arguments=c["function"]["arguments"])
             for c in tool_calls]
    run_tools(registry, steps, workers)
    return [{"role": "tool", "tool_call_id": s.tool_call_id, "content": s.result} for s in steps]


def unsolved(*args):
    raise NotImplementedError("练习还没完成")


def run(check, fn, capsys):
    verdict = check(fn)
    return bool(verdict), capsys.readouterr().out


def test_the_right_concurrent_runner_passes(capsys):
    passed, out = run(check_run_calls_concurrently, good_concurrent, capsys)
    assert passed, out


@pytest.mark.parametrize(("fn", "hint"), [
    pytest.param(serial, "一个接一个地跑", id="serial"),
    pytest.param(submit_then_wait_each, "一个接一个地跑", id="submit-then-wait-each"),
    pytest.param(ids_by_position, "id 要跟着它自己的调用走", id="paired-by-completion-order"),
    pytest.param(completion_order, "不要用 as_completed 的顺序", id="appended-in-completion-order"),
    pytest.param(calls_the_function, "registry.call", id="exception-escapes-the-worker"),
    pytest.param(tool_results_as_content, "它的 .output", id="tool-result-as-content"),
    pytest.param(ignores_workers, "max_workers=workers", id="ignores-workers"),
    pytest.param(never_shuts_down, "离开 with 时", id="threads-left-running"),
    pytest.param(hard_coded, "每个调用一条 tool 消息", id="hard-coded"),
    pytest.param(borrowed, "不要调用包里的 run_tools", id="calls-the-package"),
    pytest.param(unsolved, "还没完成", id="unsolved"),
])
def test_wrong_concurrent_runners_fail_with_their_hint(fn, hint, capsys):
    passed, out = run(check_run_calls_concurrently, fn, capsys)
    assert not passed
    assert hint in out, out


# --- 13.2 ---------------------------------------------------------------------------------

CHILD_PROMPT = "你是子 agent：只回答结论。"


def without_delegate(tools):
    return tools.subset([name for name in tools.names if name != "delegate"])


def good_make_delegate(client, model, tools):
    child_tools = without_delegate(tools)

    def delegate(task: str) -> str:
        """Hand a sub-task to a helper agent; you get back only its conclusion.

        Args:
            task: what the helper should find out.
        """
        result = run_agent(client, task, child_tools, model=model, max_iters=6,
                           system_prompt=CHILD_PROMPT)
        if not result.ok:
            return f"Error: the helper stopped ({result.stop_reason.value}): {result.message}"
        return result.answer or ""

    return delegate


def whole_transcript(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        result = run_agent(client, task, without_delegate(tools), model=model)
        return json.dumps(result.messages, ensure_ascii=False)

    return delegate


def shared_history(client, model, tools):
    history: list = []

    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        result = run_agent(client, task, without_delegate(tools), model=model,
                           layers=[Conversation(history)])
        return result.answer if result.ok else f"Error: ({result.stop_reason.value})"

    return delegate


PARENT_MESSAGES = [{"role": "system", "content": "父 agent"},
                   {"role": "user", "content": "父 agent 的问题"}]


def parents_messages(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        messages = [dict(m) for m in PARENT_MESSAGES]  # the notebook's parent history
        result = run_agent(client, task, without_delegate(tools), model=model,
                           layers=[Conversation(messages)])
        return result.answer if result.ok else f"Error: ({result.stop_reason.value})"

    return delegate


def offers_delegate(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        result = run_agent(client, task, tools, model=model)
        return result.answer if result.ok else f"Error: ({result.stop_reason.value})"

    return delegate


def recursive(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        mine = ToolRegistry()
        mine.register(delegate, timeout=None)
        result = run_agent(client, task, ToolRegistry.combine(without_delegate(tools), mine),
                           model=model)
        return result.answer if result.ok else f"Error: ({result.stop_reason.value})"

    return delegate


def answer_even_when_stopped(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        return run_agent(client, task, without_delegate(tools), model=model).answer

    return delegate


def no_docstring(client, model, tools):
    def delegate(task: str) -> str:
        return good_make_delegate(client, model, tools)(task)

    return delegate


def hard_coded_delegate(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        return "查到了"

    return delegate


def hard_coded_model(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        result = run_agent(client, task, without_delegate(tools), model="gpt-4o-mini")
        if not result.ok:
            return f"Error: the helper stopped ({result.stop_reason.value}): {result.message}"
        return result.answer or ""

    return delegate


def error_without_the_reason(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        result = run_agent(client, task, without_delegate(tools), model=model)
        return (result.answer or "") if result.ok else "Error: the helper failed."

    return delegate


NOTEBOOK_TOOLS = ToolRegistry()  # a registry of the notebook's, not the one handed in


@NOTEBOOK_TOOLS.tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: which file.
    """
    return "x = 1"


def global_tools(client, model, tools):
    def delegate(task: str) -> str:
        """Hand a sub-task to a helper.

        Args:
            task: what to do.
        """
        result = run_agent(client, task, NOTEBOOK_TOOLS, model=model)
        if not result.ok:
            return f"Error: the helper stopped ({result.stop_reason.value}): {result.message}"
        return result.answer or ""

    return delegate


def borrowed_delegate(client, model, tools):
    from vibe_agent.subagents import delegate_registry

    registry = delegate_registry(client, model=model, tools=tools)
    return registry["delegate"].fn


def test_the_right_delegate_passes(capsys):
    passed, out = run(check_delegate, good_make_delegate, capsys)
    assert passed, out


@pytest.mark.parametrize(("fn", "hint"), [
    pytest.param(whole_transcript, "整段对话留在它自己那里", id="returns-the-whole-transcript"),
    pytest.param(shared_history, "不传 Conversation 层", id="children-share-one-history"),
    pytest.param(parents_messages, "看不到父 agent 的对话", id="child-gets-the-parents-messages"),
    pytest.param(offers_delegate, "把 delegate 从子 agent 的工具里去掉",
                 id="child-offered-delegate"),
    pytest.param(recursive, "一层套一层", id="child-given-its-own-delegate"),
    pytest.param(answer_even_when_stopped, "result.ok 为 False", id="brake-stop-returns-none"),
    pytest.param(no_docstring, "docstring", id="not-registrable"),
    pytest.param(hard_coded_delegate, "result.answer", id="hard-coded"),
    pytest.param(hard_coded_model, "不要写死一个模型名", id="hard-coded-model-name"),
    pytest.param(error_without_the_reason, "result.stop_reason.value",
                 id="error-without-the-stop-reason"),
    pytest.param(global_tools, "期望只有 ['lookup']", id="the-notebooks-tools-not-the-given-ones"),
    pytest.param(borrowed_delegate, "不要调用包里的 delegate_registry", id="calls-the-package"),
    pytest.param(unsolved, "还没完成", id="unsolved"),
])
def test_wrong_delegates_fail_with_their_hint(fn, hint, capsys):
    passed, out = run(check_delegate, fn, capsys)
    assert not passed
    assert hint in out, out
