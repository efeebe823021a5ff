"""The scripted explorer (lesson 13's parent and child, not an LLM) on the shop project:
file after file without delegation, one line back with it, usage by its counting rule."""

from __future__ import annotations

import pytest

from vibe_agent.coding import coding_registry
from vibe_agent.course.explorer import (
    QUESTION,
    SHOPFRONT,
    TWO_FILE_QUESTION,
    count_tokens,
    explorer_model,
    explorer_reply,
    model_steps,
)
from vibe_agent.course.reference import reference_model
from vibe_agent.loop import run_agent
from vibe_agent.subagents import delegate_registry

MODEL = "vibe-reference"
PRICING_LINE = 27  # checked against the file itself below


def read_tools():
    return coding_registry(SHOPFRONT).subset(["list_files", "read_file"])


def alone(question=QUESTION, model=None):
    client = (model or reference_model()).client()
    return run_agent(client, question, read_tools(), model=MODEL, max_iters=20)


def delegating(question=QUESTION, model=None):
    client = (model or reference_model()).client()
    tools = delegate_registry(client, model=MODEL, tools=read_tools(), max_iters=20)
    return run_agent(client, question, tools, model=MODEL, max_iters=4)


def prompt_sum(result):
    return sum(u["prompt_tokens"] for u in result.usage)


def test_the_answer_is_the_real_line_of_the_project():
    line = (SHOPFRONT / "shop" / "pricing.py").read_text().splitlines()[PRICING_LINE - 1]
    assert "if coupon.expires_on < today:" in line
    result = alone()
    assert result.ok
    assert result.answer == (f"`expires_on` 在 shop/pricing.py 第 {PRICING_LINE} 行检查："
                             f"`{line.strip()}`")


def test_without_delegation_the_parent_reads_file_after_file():
    result = alone()
    reads = [s.arguments for s in result.trace if s.tool == "read_file"]
    assert reads[0] == '{"path": "app.py"}' and reads[-1] == '{"path": "shop/pricing.py"}'
    assert len(reads) == 12 and result.model_calls == 14
    prompts = [u["prompt_tokens"] for u in result.usage]
    assert prompts == sorted(prompts)  # the history only grows


def test_with_delegation_the_parent_gets_one_line():
    result = delegating()
    assert result.ok and result.model_calls == 2
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert len(tool_messages) == 1 and "\n" not in tool_messages[0]["content"]
    assert result.answer == alone().answer
    step = next(s for s in result.trace if s.tool == "delegate")
    assert sum(s.tool == "read_file" for s in step.children) == 12


def test_delegation_halves_the_parents_prompt_tokens_at_least():
    assert prompt_sum(delegating()) <= 0.5 * prompt_sum(alone())


def test_the_same_run_costs_the_same_tokens():
    assert alone().usage == alone().usage


def test_a_two_file_task_costs_more_with_delegation():
    plain, delegated = alone(TWO_FILE_QUESTION), delegating(TWO_FILE_QUESTION)
    assert [s.arguments for s in plain.trace if s.tool == "read_file"] == [
        '{"path": "shop/coupons.py"}', '{"path": "shop/pricing.py"}']
    child = next(s for s in delegated.trace if s.tool == "delegate").children
    assert sum(s.tool == "read_file" for s in child) == 2  # the task named the two files
    everything = model_steps(delegated.trace)
    assert len(everything) > plain.model_calls
    assert sum(s.total_tokens for s in everything) > plain.total_tokens


def test_a_transcript_child_hands_back_everything_it_read():
    result = delegating(model=explorer_model(transcript=True))
    [tool_message] = [m for m in result.messages if m["role"] == "tool"]
    assert tool_message["content"].count(" ==\n") == 12
    assert "def coupon_problem" in tool_message["content"]


@pytest.mark.parametrize(("text", "tokens"), [
    pytest.param("", 0, id="empty"),
    pytest.param("expires_on < today", 3, id="words-and-a-symbol"),
    pytest.param("优惠券", 3, id="one-per-chinese-character"),
    pytest.param("  \n\t", 0, id="white-space-is-free"),
    pytest.param('{"path": "a.py"}', 11, id="json"),
])
def test_the_counting_rule(text, tokens):
    assert count_tokens(text) == tokens


def body(question, tools):
    return {"model": MODEL, "messages": [{"role": "user", "content": question}],
            "tools": [{"type": "function", "function": {"name": n}} for n in tools]}


@pytest.mark.parametrize(("question", "tools"), [
    pytest.param("17 × 23 等于多少？", ["read_file"], id="not-an-exploration-question"),
    pytest.param(QUESTION, ["calculator"], id="no-reading-tool-no-delegate"),
    pytest.param("`expires_on` 是什么？", ["read_file"], id="no-where"),
])
def test_other_requests_are_left_to_the_reference_model(question, tools):
    assert explorer_reply(body(question, tools)) is None


def test_a_reader_without_list_files_says_so():
    reply = explorer_reply(body(QUESTION, ["read_file"]))
    assert "list_files" in reply.content and not reply.tool_calls


def history(*turns):
    """A request whose history holds these (tool, arguments text, result) calls."""
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": QUESTION}]
    for i, (name, arguments, result) in enumerate(turns):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": name, "arguments": arguments}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return {"model": MODEL, "messages": messages,
            "tools": [{"type": "function", "function": {"name": n}}
                      for n in ("list_files", "read_file")]}


@pytest.mark.parametrize(("turns", "wanted"), [
    pytest.param([("list_files", '{"path": "."}', "a.py\nb.py"),
                  ("read_file", '{"path": "a.py"}', "Error: there is no file 'a.py'.")],
                 '{"path": "b.py"}', id="a-failed-read-moves-on"),
    pytest.param([("list_files", "{not json", "a.py")], '{"path": "a.py"}',
                 id="broken-arguments-in-the-history"),
    pytest.param([("list_files", '{"path": "."}', "README.md\nshop/\nshop/x.py")],
                 '{"path": "shop/x.py"}', id="only-python-files"),
])
def test_hostile_histories(turns, wanted):
    reply = explorer_reply(history(*turns))
    assert [c.arguments for c in reply.tool_calls] == [wanted]
    assert reply.usage["prompt_tokens"] > 0


def test_nothing_found_is_said_plainly():
    reply = explorer_reply(history(("list_files", '{"path": "."}', "a.py"),
                                   ("read_file", '{"path": "a.py"}', "   1| x = 1")))
    assert not reply.tool_calls and "没有找到" in reply.content
