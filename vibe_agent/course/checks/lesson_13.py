"""Lesson 13's checkers: one reply's calls run at the same time, and a minimal `delegate`."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ...loop import run_agent, run_tool, run_tools
from ...registry import ToolDefinitionError, ToolRegistry, ToolResult
from ...subagents import delegate_registry
from .. import scripted
from ..scripted import Reply, Responder, ScriptedModel, answer, call, calls
from . import MAX_REQUESTS, Report, attempt, checker, fail, short

# --- exercise 13.1: run_calls_concurrently ----------------------------------------------


class Probe:
    """Tools for the checks: each waits as told and notes how many run at once."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        self.barrier = barrier
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.threads: set[threading.Thread] = set()  # every thread a call ran in
        self.registry = ToolRegistry()
        self.registry.register(self.echo, timeout=None)
        self.registry.register(self.explode, timeout=None)

    def echo(self, text: str, seconds: float) -> str:
        """Wait, then return the text.

        Args:
            text: what to return.
            seconds: how long to wait first.
        """
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads.add(threading.current_thread())
        try:
            if self.barrier is not None:
                self.barrier.wait()
            time.sleep(seconds)
            return f"echo {text}"
        finally:
            with self.lock:
                self.running -= 1

    def explode(self, text: str) -> str:
        """Always raises.

        Args:
            text: shown in the error.
        """
        raise RuntimeError(f"boom {text}")


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One entry of an assistant message's `tool_calls`, with a fresh id."""
    return {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def _echoes(waits: list[float]) -> list[dict[str, Any]]:
    return [tool_call("echo", {"text": uuid.uuid4().hex[:6], "seconds": w}) for w in waits]


def _wanted(tool_calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["id"], "echo " + json.loads(c["function"]["arguments"])["text"])
            for c in tool_calls]


def _pairs(got: Any) -> list[tuple[Any, Any]]:
    if not isinstance(got, list) or not all(isinstance(m, dict) for m in got):
        fail(f"应该返回一个列表，每项是一条 tool 消息（字典），得到 {short(got)}",
             "返回 [{\"role\": \"tool\", \"tool_call_id\": ..., \"content\": ...}, ...]。")
    for message in got:
        if message.get("role") != "tool":
            fail(f"消息的 role 应该是 \"tool\"，得到 {short(message.get('role'))}",
                 "每条结果都是 {\"role\": \"tool\", \"tool_call_id\": 调用的 id, "
                 "\"content\": 文字}。")
    if any(isinstance(m.get("content"), ToolResult) for m in got):
        fail("content 放的是 ToolResult 对象，模型只读得懂文字。",
             "registry.call(...) 返回 ToolResult：交给模型的文字是它的 .output。")
    return [(m.get("tool_call_id"), m.get("content")) for m in got]


def _order_problem(pairs: list[tuple[Any, Any]], wanted: list[tuple[str, str]]) -> None:
    if pairs == wanted:
        return
    ids, contents = [p[0] for p in pairs], sorted(str(p[1]) for p in pairs)
    if ids == [w[0] for w in wanted] and contents == sorted(w[1] for w in wanted):
        fail("id 是按调用的位置配的，结果却是按完成的先后排的：好几个 id 配上了别的调用的结果。",
             "id 要跟着它自己的调用走：一个调用、它的 id、它的结果始终放在一起，"
             "不要按完成顺序重新配对。")
    if sorted(map(str, pairs)) == sorted(map(str, wanted)):
        fail("每条结果的 id 都对，可顺序是完成的先后，不是调用的顺序。",
             "结果要按 tool_calls 的顺序追加：先把 future 按调用顺序存进列表，再逐个 .result()，"
             "不要用 as_completed 的顺序。")
    fail(f"期望 {short(wanted, 160)}，得到 {short(pairs, 160)}",
         "每个调用一条 tool 消息：tool_call_id 是这个调用的 id，content 是它的结果，按调用的顺序。")


def _threads_left(probe: Probe) -> list[threading.Thread]:
    """The threads the calls ran in that are still alive (a second to wind down)."""
    deadline = time.monotonic() + 1.0
    while True:
        left = [t for t in probe.threads if t is not threading.main_thread() and t.is_alive()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


@checker("练习 13.1：run_calls_concurrently —— 同时执行、按调用顺序、按 id 配对",
         run_tools, run_tool, run_agent, hint=(
             "这个练习就是自己写出并发执行：用 ThreadPoolExecutor 和 "
             "registry.call，不要调用包里的 run_tools / run_agent。"))
def check_run_calls_concurrently(fn: Callable[..., Any], report: Report) -> None:
    """Exercise 13.1: `run_calls_concurrently(registry, tool_calls, workers) -> list[dict]`."""
    with report.case("先完成的排在后面：结果仍按调用的顺序、配着各自的 id"):
        probe = Probe()
        tool_calls = _echoes([0.3, 0.2, 0.1, 0.0])
        got = attempt(fn, probe.registry, tool_calls, 4).get("这个函数不应该抛异常。")
        _order_problem(_pairs(got), _wanted(tool_calls))
    with report.case("真的同时运行"):
        probe = Probe(threading.Barrier(3, timeout=2))
        tool_calls = _echoes([0.0, 0.0, 0.0])
        pairs = _pairs(attempt(fn, probe.registry, tool_calls, 3).get(
            "这个函数不应该抛异常。"))
        if probe.most < 3 or pairs != _wanted(tool_calls):
            fail(f"3 个调用最多只有 {probe.most} 个同时在跑。",
                 "把所有调用先提交给线程池（pool.submit），全部提交完再等结果；"
                 "提交一个就 .result() 一个，等于一个接一个地跑。")
    with report.case("最多 workers 个同时运行"):
        probe = Probe()
        tool_calls = _echoes([0.05] * 6)
        pairs = _pairs(attempt(fn, probe.registry, tool_calls, 2).get("这个函数不应该抛异常。"))
        if probe.most > 2:
            fail(f"workers=2，却有 {probe.most} 个调用同时在跑。",
                 "ThreadPoolExecutor(max_workers=workers)：线程数就是上限。")
        _order_problem(pairs, _wanted(tool_calls))
    with report.case("一个工具抛了异常：变成它自己的错误文字，其他结果照常"):
        probe = Probe()
        word = uuid.uuid4().hex[:6]
        tool_calls = [*_echoes([0.05]), tool_call("explode", {"text": word}), *_echoes([0.0])]
        result = attempt(fn, probe.registry, tool_calls, 3)
        if result.error is not None:
            fail(f"异常从工作线程里跑了出来：{result.raised()}",
                 "future.result() 会把工作线程里的异常原样抛出来。用 registry.call(name, "
                 "arguments)：它从不抛异常，工具的异常会变成模型读得懂的错误文字（.output）。")
        pairs = _pairs(result.value)
        wanted = _wanted([tool_calls[0], tool_calls[2]])
        if len(pairs) != 3 or [pairs[0], pairs[2]] != wanted:
            fail(f"期望其他两个调用照常有结果，得到 {short(pairs, 160)}",
                 "一个调用出错不影响别的调用：每个调用都有自己的一条 tool 消息。")
        if pairs[1][0] != tool_calls[1]["id"] or "Error" not in str(pairs[1][1]) \
                or word not in str(pairs[1][1]):
            fail(f"出错的那个调用得到的是 {short(pairs[1])}",
                 "出错的调用也要有一条 tool 消息，配着它的 id，"
                 "内容是 registry.call 给的错误文字（它的 .output）。")
    with report.case("没有调用"):
        got = attempt(fn, Probe().registry, [], 4).get("没有调用时直接返回空列表。")
        if got != []:
            fail(f"期望 []，得到 {short(got)}", "没有调用时返回空列表。")
    with report.case("返回以后不留下线程"):
        probe = Probe()
        attempt(fn, probe.registry, _echoes([0.0, 0.0]), 2).get("这个函数不应该抛异常。")
        left = _threads_left(probe)
        if left:
            fail(f"返回以后还有 {len(left)} 个线程活着（{short([t.name for t in left])}）。",
                 "用 with ThreadPoolExecutor(...) as pool:：离开 with 时"
                 "线程池会等所有线程结束并关掉它们。")


# --- exercise 13.2: a minimal delegate ----------------------------------------------------


def _child_tools() -> tuple[ToolRegistry, str]:
    """A lookup tool with a fresh secret, and a `delegate` the child must not be offered."""
    secret = uuid.uuid4().hex[:8]
    tools = ToolRegistry()

    @tools.tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: what to look up.
        """
        return f"{key} = {secret}"

    @tools.tool(name="delegate")
    def nested(task: str) -> str:
        """Start another helper.

        Args:
            task: what it should do.
        """
        return "a grandchild ran"

    return tools, secret


def _looks_up_then_answers(final: str) -> Responder:
    def respond(body: dict[str, Any]) -> Reply:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if not results:
            return calls(call("lookup", {"key": "answer"}))
        return answer(final)

    return respond


def _make(fn: Callable[..., Any], model: ScriptedModel, tools: ToolRegistry,
          name: str = "checker") -> Any:
    """The learner's `delegate`, made for `model` (played by a script) under the name `name`."""
    delegate = attempt(fn, model.client(), name, tools).get(
        "make_delegate(client, model, tools) 只负责造出 delegate 函数并返回它。")
    if not callable(delegate):
        fail(f"make_delegate 应该返回一个函数，得到 {short(delegate)}",
             "在 make_delegate 里定义 def delegate(task: str) -> str，最后 return delegate。")
    try:
        ToolRegistry().register(delegate, "delegate", timeout=None)
    except ToolDefinitionError as exc:
        fail(f"delegate 不能注册成工具：{exc}",
             "delegate 要有类型标注和 Google 风格的 docstring（Args: task: ...），"
             "模型靠它知道怎么用。")
    return delegate


def _first_requests(model: ScriptedModel) -> list[dict[str, Any]]:
    """The first request of every child run: the one whose history has no assistant yet."""
    return [b for b in model.requests if not any(m["role"] == "assistant"
                                                  for m in b["messages"])]


@checker("练习 13.2：delegate —— 子 agent：新的历史、更少的工具、只交回结论", delegate_registry,
         hint="这个练习就是自己写出 delegate：用 run_agent，不要调用包里的 delegate_registry。")
def check_delegate(fn: Callable[..., Any], report: Report) -> None:
    """Exercise 13.2: `make_delegate(client, model, tools)` returns `delegate(task) -> str`."""
    with report.case("只交回子 agent 的最终回答"):
        final = f"查到了：{uuid.uuid4().hex[:10]}"
        model = ScriptedModel(_looks_up_then_answers(final), max_requests=MAX_REQUESTS)
        tools, secret = _child_tools()
        got = attempt(_make(fn, model, tools), "查一下 answer").get("delegate 不应该抛异常。")
        if got != final:
            hint = ("只返回子 agent 的最终回答（result.answer）：它的整段对话留在它自己那里，"
                    "不进父 agent 的历史，否则什么也没省下。") if secret in str(got) else \
                "返回 run_agent(...) 的 result.answer，原样的字符串。"
            fail(f"期望 {short(final)}，得到 {short(got, 160)}", hint)
    with report.case("每个子 agent 都从全新的历史开始"):
        model = ScriptedModel(_looks_up_then_answers("好"), max_requests=MAX_REQUESTS)
        delegate = _make(fn, model, _child_tools()[0])
        tasks = [f"第一件事 {uuid.uuid4().hex[:6]}", f"第二件事 {uuid.uuid4().hex[:6]}"]
        for task in tasks:
            attempt(delegate, task).get("delegate 不应该抛异常。")
        firsts = _first_requests(model)
        shapes = [[m["role"] for m in b["messages"]] for b in model.requests]
        if len(firsts) != 2 or any([m["role"] for m in b["messages"]] != ["system", "user"]
                                   or b["messages"][1]["content"] != task
                                   for b, task in zip(firsts, tasks, strict=False)):
            fail(f"子 agent 收到的历史是 {short(shapes, 160)}",
                 "每次 delegate 都调用 run_agent(client, task, ...)，不传 Conversation 层："
                 "子 agent 只看到它的 system prompt 和这件任务，"
                 "看不到父 agent 的对话，也看不到上一个子 agent 的。")
    with report.case("子 agent 拿不到 delegate，只有给它的工具"):
        model = ScriptedModel(_looks_up_then_answers("好"), max_requests=MAX_REQUESTS)
        attempt(_make(fn, model, _child_tools()[0]), "查一下").get("delegate 不应该抛异常。")
        offered = sorted({name for b in model.requests for name in scripted.offered_tools(b)})
        if "delegate" in offered:
            fail(f"子 agent 被提供了这些工具：{offered}",
                 "把 delegate 从子 agent 的工具里去掉（tools.subset([n for n in tools.names "
                 "if n != \"delegate\"])）：不然子 agent 会再派子 agent，一层套一层停不下来。")
        if offered != ["lookup"]:
            fail(f"子 agent 被提供了这些工具：{offered}，期望只有 ['lookup']",
                 "子 agent 只拿给它的 tools（去掉 delegate），不多给。")
    with report.case("子 agent 用传进来的 model 发请求"):
        # A scripted model answers whatever name a request carries: read the names sent.
        name = f"checker-model-{uuid.uuid4().hex[:6]}"
        model = ScriptedModel(_looks_up_then_answers("好"), max_requests=MAX_REQUESTS)
        attempt(_make(fn, model, _child_tools()[0], name), "查一下").get(
            "delegate 不应该抛异常。")
        sent = sorted({str(body.get("model")) for body in model.requests})
        if sent != [name]:
            fail(f"子 agent 的请求里 model 是 {short(sent)}，传给 make_delegate 的是 {name!r}",
                 "run_agent(client, task, ..., model=model)：用 make_delegate 收到的 model，"
                 "不要写死一个模型名——换了服务商或模型，子 agent 还在请求写死的那个。")
    with report.case("子 agent 被刹车停下：返回说明原因的错误文字"):
        model = ScriptedModel(lambda body: calls(call("lookup", {"key": "again"})),
                              max_requests=MAX_REQUESTS)
        got = attempt(_make(fn, model, _child_tools()[0]), "查一下").get(
            "子 agent 停下不是异常：看 result.ok 和 result.stop_reason，返回一段文字。")
        if not isinstance(got, str) or not got.startswith("Error") or "repeated_call" not in got:
            fail(f"得到 {short(got)}",
                 "result.ok 为 False 时返回 "
                 "f\"Error: the helper stopped ({result.stop_reason.value})"
                 ": {result.message}\"：父 agent 的模型读得懂，可以换个办法。")
    with report.case("子 agent 调用了没给它的工具：它读到错误文字，照样能回答"):
        final = f"写不了 {uuid.uuid4().hex[:6]}"

        def writes_first(body: dict[str, Any]) -> Reply:
            if not any(m["role"] == "tool" for m in body["messages"]):
                return calls(call("write_file", {"path": "x.py", "content": "x"}))
            return answer(final)

        model = ScriptedModel(writes_first, max_requests=MAX_REQUESTS)
        got = attempt(_make(fn, model, _child_tools()[0]), "改一下 x.py").get(
            "一个不存在的工具不该让 delegate 抛异常：用 run_agent，它的注册表会把它变成文字。")
        if got != final:
            fail(f"期望 {short(final)}，得到 {short(got)}",
                 "子 agent 用 run_agent 和给它的工具跑：没给的工具由注册表回答错误文字。")
