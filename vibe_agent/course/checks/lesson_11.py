"""Checkers for lesson 11, compaction.

    check_split_rounds(fn)  fn(messages) -> list[list[dict]]: the history cut into rounds
                            (an assistant message with the tool messages answering it,
                            or one message alone)
    check_compact(fn)       fn(messages, summarize, keep_last_rounds=2) -> list[dict]:
                            [system, first user, summary, *last rounds], input untouched

Both run the learner's function on fixed histories (parallel calls, results in another
order than the calls, content None, reasoning_content, odd ids, exactly
`keep_last_rounds` rounds) and compare with what the rules say; the summariser's text
carries a random mark, so a summary message that drops it is caught. `check_compact`
then hands the function to `run_agent(..., prepare=...)`
with a scripted model (a program, not an LLM) that answers HTTP 400 to a broken
history, as OpenAI does. Each typical mistake gets its own hint.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from typing import Any

from ...compact import compact, scripted_summarizer, split_rounds
from ...loop import run_agent
from ...registry import ToolRegistry
from .. import scripted
from ..scripted import ScriptedModel, answer, call, calls
from . import MAX_REQUESTS, MODEL, Problem, Report, attempt, checker, fail, short

Message = dict[str, Any]


def assistant(*ids: str, content: str | None = None, **extra: Any) -> Message:
    message: Message = {"role": "assistant", "content": content, **extra}
    if ids:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {
            "name": "read_file", "arguments": f'{{"path": "f{n}.py"}}'}}
            for n, i in enumerate(ids)]
    return message


def tool(call_id: str, text: str = "file text") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


SYSTEM = {"role": "system", "content": "你是修 bug 的助手。不许修改测试。"}
TASK = {"role": "user", "content": "修好 shop/discounts.py 里的折扣；不要修改 tests/。"}

# A history with every shape: parallel calls answered out of order, content None,
# reasoning_content, an assistant without calls, a later user message, odd ids.
HISTORY: list[Message] = [
    SYSTEM, TASK,
    assistant("call_1", content="先跑测试。"), tool("call_1", "4 failed"),
    assistant("b", "a", reasoning_content="两个文件一起读"), tool("a"), tool("b"),
    assistant(content="我先想一想。"),
    {"role": "user", "content": "继续。"},
    assistant("调用 3"), tool("调用 3", "def qualifies_for_bulk"),
    assistant("x-4", content="改这里。"), tool("x-4", "Edited"),
]

ROUND_CASES: list[tuple[str, list[Message], str]] = [
    ("system、user、一轮调用、最后的回答", [SYSTEM, TASK, assistant("c1"), tool("c1"),
                                          assistant(content="好了")], ""),
    ("一个回复里的两个调用，结果按另一种顺序回来", [TASK, assistant("p", "q"), tool("q"),
                                              tool("p")],
     "按 tool_call_id 把 tool 消息归到提出这个调用的 assistant 消息那一轮，不要按位置数。"),
    ("content 是 None、带 reasoning_content、奇怪的 id",
     [TASK, assistant("id with space", reasoning_content="想"), tool("id with space")], ""),
    ("中间插进来一条 user 消息", HISTORY,
     "user 消息自己就是一轮；没有 tool_calls 的 assistant 消息也自己一轮。"),
    ("空的历史", [], "没有消息时返回空列表。"),
]

ALONE_HINT = ("tool 消息不能自己成一轮：它和提出这个调用的 assistant 消息是一轮，"
              "拆开以后，压缩时就可能只留下 tool 消息、丢了 assistant 消息。")
MERGED_HINT = ("每条 assistant 消息开始新的一轮（连同回答它的 tool 消息）；"
               "system、user 和没有调用的 assistant 消息各自一轮，不要把几条合在一起。")
COPY_HINT = "不要改动传进来的 messages 和里面的字典：建新的列表。"


def _rounds_problem(messages: list[Message], got: Any) -> Problem:
    wanted = split_rounds(messages)
    if not isinstance(got, list) or not all(isinstance(r, list) for r in got):
        return f"要返回一个列表，每一轮是一个消息列表，得到 {short(got)}", ""
    if [m for r in got for m in r] != messages:
        return "把所有轮次按顺序接起来，应该正好是原来的历史（一条不多、一条不少、顺序不变）", ""
    if any(r and r[0].get("role") == "tool" for r in got):
        return "有一轮是以 tool 消息开头的", ALONE_HINT
    if len(got) < len(wanted):
        return f"应该是 {len(wanted)} 轮，你分成了 {len(got)} 轮", MERGED_HINT
    if got != wanted:
        return f"应该是 {len(wanted)} 轮，你分成了 {len(got)} 轮", MERGED_HINT
    return None


@checker("练习 11.1：my_split_rounds —— 把历史切成一轮一轮", split_rounds, compact, hint=(
        "这道题要你自己找出轮次的边界：每条 assistant 消息连同回答它的 tool 消息是一轮，"
        "其余消息各自一轮。"))
def check_split_rounds(fn: Callable[[list[Message]], Any], report: Report) -> None:
    """Exercise 11.1: the round boundaries of a history."""
    for name, messages, hint in ROUND_CASES:
        with report.case(name):
            given = copy.deepcopy(messages)
            got = attempt(fn, given).get(hint)
            if given != messages:
                fail("传进来的 messages 被改动了", COPY_HINT)
            if problem := _rounds_problem(messages, got):
                message, found = problem
                fail(message, found or hint)


# ---------------------------------------------------------------------------
# Exercise 2: your own compact
# ---------------------------------------------------------------------------


class Summarizer:
    """A summariser that writes down what it was given (a program, not an LLM). Its text
    carries a random mark, so the summary message can be told from any prefix the learner
    writes (the suggested 之前的对话摘要： too)."""

    def __init__(self) -> None:
        self.given: list[list[Message]] = []
        self.mark = secrets.token_hex(4)

    def __call__(self, messages: list[Message]) -> str:
        self.given.append(copy.deepcopy(messages))
        return self.text(len(messages))

    def text(self, count: int) -> str:
        """What it returns for `count` messages."""
        return f"（检查器的摘要器 {self.mark}：换掉了 {count} 条消息）"


COMPACT_CASES: list[tuple[str, list[Message], int]] = [
    ("保留最后 2 轮（默认）", HISTORY, 2),
    ("保留最后 1 轮", HISTORY, 1),
    ("保留 0 轮：全部换成摘要", HISTORY, 0),
    ("没有 system 消息的历史", HISTORY[1:], 2),
    ("轮数不多于 keep_last_rounds：原样返回一份副本，不调用 summarize", HISTORY[:7], 3),
    ("轮数正好等于 keep_last_rounds：也原样返回，不调用 summarize", HISTORY[:7], 2),
]

ORPHAN_HINT = ("按轮切，不要按消息条数切：保留的部分必须从一条 assistant 消息开始，"
               "它的每个 tool 消息都跟在它后面。先用练习 11.1 的函数把历史切成轮。")
ORDER_HINT = ("摘要放在 system 和第一条 user 消息（任务）的后面：[system, 任务, 摘要, 最后几轮]。"
              "任务和规则原样留在最前面，模型才知道自己在做什么。")
SYSTEM_HINT = "system 消息原样保留在最前面：它是每一轮都要遵守的规则，不能被摘要掉。"
TASK_HINT = "第一条 user 消息（任务和它的要求）原样保留，不交给 summarize。"
WHOLE_HINT = ("summarize 只拿到被换掉的那些消息：system、第一条 user 消息和最后几轮都不给它，"
              "按顺序调用一次。")
OFF_BY_ONE_HINT = ("数一数保留了几轮：应该正好是 keep_last_rounds 轮。"
                   "用 rounds[len(rounds) - keep:]，小心 keep=0 时 rounds[-0:] 是整个列表。")
SUMMARY_HINT = ("摘要是一条新消息（比如 role 为 user），它的 content 里要有 summarize "
                "返回的那段文字（前面可以加一句“之前的对话摘要：”）："
                "只写前缀，模型就看不到被换掉的那些轮里发生了什么。")
PLACE_HINT = ("摘要紧跟在第一条 user 消息（任务）后面，保留的几轮接在摘要后面："
              "[system, 任务, 摘要, 最后几轮]。")
EQUAL_HINT = ("轮数正好等于 keep_last_rounds 时也没有什么要压缩：判断条件是 "
              "len(rounds) <= keep_last_rounds，不是 <。写成 < 时 summarize 拿到一个空列表，"
              "历史里多出一条什么也没说的摘要。")
HEAD_HINT = ("没有 system 消息时，头部只有第一条 user 消息：找第一条 role 为 \"user\" 的消息，"
             "它和它前面的消息原样保留；不要写死 messages[:2]（那样会把第一轮的 assistant 消息"
             "算进头部，它的 tool 消息却被换掉了）。")


def _compact_problem(messages: list[Message], keep: int, got: Any,
                     summarizer: Summarizer) -> Problem:
    oracle = Summarizer()
    wanted = compact(messages, oracle, keep_last_rounds=keep)
    head = messages[:messages.index(TASK) + 1]
    if not isinstance(got, list) or not all(isinstance(m, dict) for m in got):
        return f"要返回一个消息列表，得到 {short(got)}", ""
    if head == [TASK] and got[:2] == messages[:2] and wanted[:2] != messages[:2]:
        return "头部多留了一条消息：第一条 user 消息后面紧跟的应该是摘要", HEAD_HINT
    if problem := scripted.protocol_error({"messages": got}):
        return f"返回的历史破坏了 tool_calls 协议：{short(problem, 140)}", ORPHAN_HINT
    if messages[0]["role"] == "system" and (not got or got[0] != messages[0]):
        return "返回的历史第一条不是原来的 system 消息", SYSTEM_HINT
    if summarizer.given and summarizer.given[0] == messages:
        return "summarize 拿到的是整段历史", WHOLE_HINT
    if not oracle.given and summarizer.given == [[]] \
            and len(split_rounds(messages[len(head):])) == keep:
        return "什么都不用压缩时，你还是用一个空列表调用了 summarize", EQUAL_HINT
    if len(summarizer.given) != len(oracle.given):
        return (f"summarize 应该调用 {len(oracle.given)} 次，你调用了 "
                f"{len(summarizer.given)} 次", WHOLE_HINT if oracle.given else
                "轮数不多于 keep_last_rounds 时什么都不用压缩，也就不调用 summarize。")
    texts = {summarizer.text(len(given)) for given in summarizer.given}
    summary_at = next((i for i, m in enumerate(got)
                       if any(text in str(m.get("content")) for text in texts)), None)
    if got[:len(head)] != head:
        if summary_at is not None and summary_at < len(head):
            return "摘要放在了任务（第一条 user 消息）前面", ORDER_HINT
        return "返回的历史开头不是原来的 system 和第一条 user 消息", TASK_HINT
    if oracle.given:
        if summary_at is None:
            return (f"摘要消息里没有 summarize 返回的文字：任务后面的那条是 "
                    f"{short(got[len(head)] if len(got) > len(head) else None, 80)}",
                    SUMMARY_HINT)
        if summary_at != len(head):
            return f"摘要是返回的第 {summary_at + 1} 条消息，应该是第 {len(head) + 1} 条", \
                PLACE_HINT
        kept = got[len(head) + 1:]
        wanted_kept = wanted[len(head) + 1:]
        if kept != wanted_kept:
            whole = scripted.protocol_error({"messages": kept}) is None
            rounds = len(split_rounds(kept)) if whole else "?"
            return f"应该保留最后 {keep} 轮，你保留了 {rounds} 轮", OFF_BY_ONE_HINT
        if summarizer.given != oracle.given:
            return "summarize 拿到的消息不对：应该正好是被换掉的那些，按原来的顺序", WHOLE_HINT
    elif got != wanted:
        return "没有需要压缩的轮次时，应该返回一份和原来相等的副本", ""
    return None


def notes_registry() -> ToolRegistry:
    registry = ToolRegistry()

    def read_notes(week: int) -> str:
        """Read the team's notes of one week.

        Args:
            week: the week number.
        """
        return f"Week {week}: the notes of that week."

    registry.register(read_notes)
    return registry


def _run_problem(fn: Callable[..., Any]) -> Problem:
    """The learner's compact as `prepare` (keep 1 round) with a strict scripted model."""
    model = ScriptedModel([*(calls(call("read_notes", {"week": w}), call(
        "read_notes", {"week": w + 10})) for w in range(1, 5)), answer("读完了。")],
        name="scripted-notes", max_requests=MAX_REQUESTS)
    result = run_agent(model.client(), "读一读 1 到 4 周和 11 到 14 周的笔记。", notes_registry(),
                       model=MODEL, prepare=lambda m: fn(m, scripted_summarizer,
                                                         keep_last_rounds=1))
    rejected = next((problem for body in model.requests
                     if (problem := scripted.protocol_error(body))), None)
    if rejected:
        return f"脚本模型拒绝了你发出的历史（HTTP 400）：{short(rejected, 160)}", ORPHAN_HINT
    if not result.ok:
        return f"run_agent 没有正常结束：{result.stop_reason.value}，{result.message}", ""
    if len(model.requests[-1]["messages"]) >= len(result.messages):
        return "最后一次请求没有变短：历史没有被压缩", ""
    return None


@checker("练习 11.2：my_compact —— 中间换成摘要，头和尾原样保留", compact, hint=(
        "这道题要你自己写 compact：切轮、留下 system 和任务、把中间交给 summarize、"
        "接上最后几轮。"))
def check_compact(fn: Callable[..., Any], report: Report) -> None:
    """Exercise 11.2: the learner's own compact."""
    for name, messages, keep in COMPACT_CASES:
        with report.case(name):
            given = copy.deepcopy(messages)
            summarizer = Summarizer()
            got = attempt(fn, given, summarizer, keep_last_rounds=keep).get()
            if given != messages:
                fail("传进来的 messages 被改动了", COPY_HINT)
            if got is given:
                fail("你返回的就是传进来的那个列表：要返回一个新列表", COPY_HINT)
            if problem := _compact_problem(messages, keep, got, summarizer):
                fail(*problem)
    with report.case("交给 run_agent(prepare=...) 跑一个脚本模型（不是 LLM）"):
        if problem := attempt(_run_problem, fn).get(ORPHAN_HINT):
            fail(*problem)
