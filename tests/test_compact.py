"""Compaction (vibe_agent.compact): the pure function, the summarisers, the loop's hook."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vibe_agent.coding import coding_registry
from vibe_agent.compact import (
    MAX_NOTES,
    OFFLOAD_DIR,
    Compaction,
    archived_messages,
    compact,
    is_summary,
    model_summarizer,
    scripted_summarizer,
    split_rounds,
    summary_message,
    summary_request,
    transcript,
)
from vibe_agent.course.judge import judge
from vibe_agent.course.known_fix import known_fix_model
from vibe_agent.course.local import LocalServerError, context_size
from vibe_agent.course.reference import reference_model
from vibe_agent.course.scripted import (
    Reply,
    ScriptedModel,
    answer,
    call,
    calls,
    prompt_tokens,
    protocol_error,
)
from vibe_agent.course.tasks import (
    SUITE_DIR,
    apply_fix,
    command_argv,
    command_env,
    copy_repo,
    load_task,
)
from vibe_agent.loop import StopReason, run_agent
from vibe_agent.registry import ToolRegistry
from vibe_agent.reply import is_context_overflow

LONG_TASK = load_task(SUITE_DIR / "bulk_discount_threshold")  # lesson 11's long task

# ---------------------------------------------------------------------------
# Random histories: parallel calls, content None, reasoning_content, odd ids
# ---------------------------------------------------------------------------

ODD_IDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1,
                  max_size=12)
TEXT = st.one_of(st.none(), st.text(max_size=30))


@st.composite
def a_round(draw, ids: set[str]) -> list[dict]:
    kind = draw(st.sampled_from(["calls", "calls", "answer", "user"]))
    if kind == "user":
        return [{"role": "user", "content": draw(st.text(max_size=30))}]
    message = {"role": "assistant", "content": draw(TEXT)}
    if draw(st.booleans()):
        message["reasoning_content"] = draw(st.text(min_size=1, max_size=20))
    if kind == "answer":
        return [message]
    new = draw(st.lists(ODD_IDS.filter(lambda i: i not in ids), min_size=1, max_size=3,
                        unique=True))
    ids.update(new)
    message["tool_calls"] = [{"id": i, "type": "function", "function": {
        "name": draw(st.sampled_from(["read_file", "run_command", "search_code", ""])),
        "arguments": draw(st.sampled_from(['{"path": "a.py"}', "{}", "{not json"]))}}
        for i in new]
    answers = draw(st.permutations(new))  # results may come back in any order
    return [message, *({"role": "tool", "tool_call_id": i, "content": draw(st.text(max_size=40))}
                       for i in answers)]


@st.composite
def histories(draw) -> list[dict]:
    ids: set[str] = set()
    head = [{"role": "system", "content": "rules"}] if draw(st.booleans()) else []
    head.append({"role": "user", "content": draw(st.text(min_size=1, max_size=30))})
    rounds = draw(st.lists(a_round(ids), max_size=8))
    return [*head, *(m for r in rounds for m in r)]


class Recorder:
    """A summariser that remembers what it was given."""

    def __init__(self) -> None:
        self.calls: list[list[dict]] = []

    def __call__(self, messages: list[dict]) -> str:
        self.calls.append(copy.deepcopy(messages))
        return f"summary of {len(messages)} messages"


def head_length(messages: list[dict]) -> int:
    return next(i for i, m in enumerate(messages) if m["role"] == "user") + 1


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(0, 4))
def test_compact_invariants(messages, keep):
    before = copy.deepcopy(messages)
    summarize = Recorder()
    result = compact(messages, summarize, keep_last_rounds=keep)
    assert messages == before, "the input must not change"
    assert protocol_error({"messages": result}) is None
    head = head_length(messages)
    rounds = split_rounds(messages[head:])
    if len(rounds) <= keep:
        assert result == messages and result is not messages and summarize.calls == []
        return
    kept = [m for r in rounds[len(rounds) - keep:] for m in r]
    replaced = [m for r in rounds[:len(rounds) - keep] for m in r]
    assert summarize.calls == [replaced], "called once, with exactly the replaced messages"
    assert result[:head] == messages[:head]
    assert is_summary(result[head]) and "summary of" in result[head]["content"]
    assert result[head + 1:] == kept
    result[-1]["content"] = "changed"  # the result shares nothing with the input
    assert messages == before


@settings(max_examples=200, deadline=None)
@given(histories())
def test_rounds_join_back_into_the_history(messages):
    rounds = split_rounds(messages)
    assert [m for r in rounds for m in r] == messages
    for r in rounds:
        assert r[0]["role"] != "tool"
        assert all(m["role"] == "tool" for m in r[1:])


@pytest.mark.parametrize("history", [
    pytest.param([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "x",
                                                   "content": "r"}], id="orphan-tool"),
    pytest.param([{"role": "user", "content": "q"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "a", "type": "function", "function": {"name": "f",
                                                                   "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "b", "content": "r"}], id="wrong-id"),
])
def test_a_broken_history_is_refused(history):
    with pytest.raises(ValueError, match="tool message"):
        split_rounds(history)


def test_negative_keep_is_refused():
    with pytest.raises(ValueError, match="keep_last_rounds"):
        compact([{"role": "user", "content": "q"}], Recorder(), keep_last_rounds=-1)


# ---------------------------------------------------------------------------
# The scripted window and the stop reason
# ---------------------------------------------------------------------------

def openai_overflow() -> Reply:
    return Reply(status=400, raw={"error": {
        "message": "This model's maximum context length is 10 tokens.", "type":
        "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})


def llama_overflow() -> Reply:  # measured on llama.cpp (xllamacpp) with n_ctx=512
    return Reply(status=400, raw={"error": {
        "code": 400, "message": "request (831 tokens) exceeds the available context size "
        "(512 tokens), try increasing it", "type": "exceed_context_size_error",
        "n_prompt_tokens": 831, "n_ctx": 512}})


@pytest.mark.parametrize(("reply", "reason"), [
    pytest.param(openai_overflow(), StopReason.CONTEXT_TOO_LONG, id="openai"),
    pytest.param(llama_overflow(), StopReason.CONTEXT_TOO_LONG, id="llama.cpp"),
    pytest.param(Reply(status=400, raw={"error": {"message": "bad", "type": "x", "code": None}}),
                 StopReason.PROVIDER_ERROR, id="other-400"),
    pytest.param(Reply(status=500, raw={"error": {"code": "context_length_exceeded"}}),
                 StopReason.PROVIDER_ERROR, id="500-is-not-overflow"),
])
def test_an_overflow_has_its_own_stop_reason(reply, reason):
    model = ScriptedModel([reply])
    result = run_agent(model.client(), "q", ToolRegistry(), model="m")
    assert result.stop_reason is reason
    if reason is StopReason.CONTEXT_TOO_LONG:
        assert result.message.startswith("历史太长，超出了模型的上下文窗口") and "\n" not in \
            result.message


def test_the_scripted_window_answers_like_openai():
    model = ScriptedModel([answer("ok")], context_window=5)
    client = model.client()
    body = {"model": "m", "messages": [{"role": "user", "content": "hello " * 20}]}
    with pytest.raises(Exception) as raised:
        client.chat.completions.create(**body)
    assert raised.value.status_code == 400
    assert raised.value.body["code"] == "context_length_exceeded"
    assert is_context_overflow(raised.value)
    assert f"resulted in {prompt_tokens(body)} tokens" in raised.value.body["message"]


def test_the_reference_model_takes_a_window_too():
    client = reference_model(context_window=10).client()
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="m", messages=[
            {"role": "user", "content": "17 × 23 等于多少？请一步一步算清楚再回答。"}])
    assert is_context_overflow(raised.value)


def test_the_scripted_window_reports_the_tokens_it_counts():
    model = ScriptedModel([answer("fine")], context_window=1000)
    body = {"model": "m", "messages": [{"role": "user", "content": "你好，世界"}]}
    response = model.client().chat.completions.create(**body)
    assert response.usage.prompt_tokens == prompt_tokens(body) > 0
    assert response.usage.completion_tokens == 1  # "fine"


# ---------------------------------------------------------------------------
# Auto-compaction in the loop
# ---------------------------------------------------------------------------

def reader(count: int, size: int) -> tuple[ToolRegistry, list[Reply]]:
    """A tool returning `size` characters, and a script calling it `count` times."""
    registry = ToolRegistry()

    def read_page(number: int) -> str:
        """Read one page.

        Args:
            number: the page number.
        """
        return f"page {number}: " + "lorem ipsum " * (size // 12)

    registry.register(read_page)
    script = [calls(call("read_page", {"number": n})) for n in range(count)]
    return registry, [*script, answer("done")]


def responder_from(script: list[Reply]):
    """Each request is answered by the reply after the last read_page call it holds."""
    def respond(body):
        made = [m for m in body["messages"] if m.get("tool_calls")]
        if not made:
            return script[0]
        number = json.loads(made[-1]["tool_calls"][0]["function"]["arguments"])["number"]
        return script[number + 1]
    return respond


def test_without_compaction_the_window_ends_the_run():
    registry, script = reader(8, 600)
    model = ScriptedModel(responder_from(script), context_window=800)
    result = run_agent(model.client(), "read", registry, model="m", max_iters=12)
    assert result.stop_reason is StopReason.CONTEXT_TOO_LONG
    assert result.trace[-2].kind == "model" and result.trace[-2].decision == "error"


def test_compaction_on_overflow_retries_the_round_and_finishes(tmp_path):
    registry, script = reader(8, 600)
    model = ScriptedModel(responder_from(script), context_window=800)
    compaction = Compaction(scripted_summarizer, keep_last_rounds=1,
                            archive=tmp_path / "archive.jsonl")
    result = run_agent(model.client(), "read", registry, model="m", max_iters=12,
                       layers=[compaction])
    assert result.stop_reason is StopReason.ANSWERED
    steps = [s for s in result.trace if s.kind == "compact"]
    assert steps and all(s.trigger == "context_too_long" for s in steps)
    for step in steps:  # the failed call, the compaction, the retried call: same round
        i = result.trace.index(step)
        assert result.trace[i - 1].decision == "error" and result.trace[i + 1].kind == "model"
        assert result.trace[i + 1].round == step.round
    event = compaction.events[0]
    assert event.tokens_after is not None and event.tokens_after <= 800
    assert f"→ {event.tokens_after}" in event.step.content and event.step.result == event.summary


def test_the_retry_happens_once_then_the_run_stops():
    registry, script = reader(8, 600)
    model = ScriptedModel(responder_from(script), context_window=800)
    compaction = Compaction(lambda messages: "far too long " * 500, keep_last_rounds=1)
    result = run_agent(model.client(), "read", registry, model="m", max_iters=12,
                       layers=[compaction])
    assert result.stop_reason is StopReason.CONTEXT_TOO_LONG
    last_round = [s for s in result.trace if s.round == result.trace[-1].round]
    assert [s.kind for s in last_round] == ["model", "compact", "model", "stop"]


def test_a_failing_summary_request_ends_the_run_with_a_provider_error():
    registry, script = reader(8, 600)
    model = ScriptedModel(responder_from(script), context_window=800)
    broken = model_summarizer(ScriptedModel([Reply(status=500, raw={"error": {
        "message": "boom", "type": "server_error", "param": None, "code": None}})]).client(),
        model="m")
    result = run_agent(model.client(), "read", registry, model="m", max_iters=12,
                       layers=[Compaction(broken, keep_last_rounds=1)])
    assert result.stop_reason is StopReason.PROVIDER_ERROR
    assert result.message.startswith("压缩历史时摘要请求失败")


def test_a_budget_compacts_before_the_window_is_reached():
    registry, script = reader(8, 600)
    model = ScriptedModel(responder_from(script), context_window=2000)
    compaction = Compaction(scripted_summarizer, budget=700, keep_last_rounds=1)
    result = run_agent(model.client(), "read", registry, model="m", max_iters=12,
                       layers=[compaction])
    assert result.stop_reason is StopReason.ANSWERED
    assert compaction.events and all(e.reason == "budget" for e in compaction.events)
    assert not any(s.kind == "model" and s.decision == "error" for s in result.trace)
    assert all(e.tokens_after < e.tokens_before for e in compaction.events)


def all_messages_of(result) -> list[str]:
    return [json.dumps(m, sort_keys=True, ensure_ascii=False) for m in result.messages]


def test_the_archive_holds_every_message(tmp_path):
    registry, script = reader(8, 600)
    full = run_agent(ScriptedModel(responder_from(script), context_window=10**6).client(), "read",
                     registry, model="m", max_iters=12)
    archive = tmp_path / "a.jsonl"
    compacted = run_agent(ScriptedModel(responder_from(script), context_window=800).client(),
                          "read", registry, model="m", max_iters=12,
                          layers=[Compaction(scripted_summarizer, keep_last_rounds=1,
                                                archive=archive)])
    kept = {json.dumps(m, sort_keys=True, ensure_ascii=False)
            for history in [*archived_messages(archive), compacted.messages] for m in history}
    assert len(archived_messages(archive)) == sum(s.kind == "compact" for s in compacted.trace)
    assert set(all_messages_of(full)) <= kept


def test_a_long_result_is_offloaded_and_readable(tmp_path):
    registry = coding_registry(tmp_path)
    long_text = "".join(f"line {n}: {'x' * 40}\n" for n in range(200))
    (tmp_path / "big.txt").write_text(long_text, encoding="utf-8")
    script = [calls(call("read_file", {"path": "big.txt"}), content="read"), answer("ok")]
    compaction = Compaction(scripted_summarizer, workspace=tmp_path, offload_over=2000,
                            head_chars=300)
    result = run_agent(ScriptedModel(script).client(), "q", registry, model="m",
                       layers=[compaction])
    kept = result.messages[3]["content"]
    path = re.search(rf"{OFFLOAD_DIR}/\S+\.txt", kept).group(0)
    assert len(kept) < 800 and kept.startswith(result.trace[1].result[:300])
    assert (tmp_path / path).read_text(encoding="utf-8") == result.trace[1].result
    back = registry.call("read_file", json.dumps({"path": path}))
    assert back.ok and "line 199: " in back.output


@pytest.mark.parametrize("plant", ["link-to-folder", "file", "link-to-file"])
def test_offloading_never_writes_through_a_planted_link(tmp_path, plant):
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    if plant == "link-to-folder":
        (workspace / OFFLOAD_DIR).symlink_to(outside)
    elif plant == "file":
        (workspace / OFFLOAD_DIR).write_text("not a folder", encoding="utf-8")
    else:
        (workspace / OFFLOAD_DIR).mkdir()
        (workspace / OFFLOAD_DIR / "001_c1.txt").symlink_to(outside / "stolen.txt")
    compaction = Compaction(scripted_summarizer, workspace=workspace, offload_over=10)
    kept = compaction.offload("c1", "x" * 100, "capped text")
    assert kept == "capped text" and compaction.offloaded == []
    assert list(outside.iterdir()) == []


def test_lessons_before_11_see_no_change():
    """Without compaction the loop sends exactly the history, as before."""
    registry, script = reader(2, 100)
    model = ScriptedModel(script)
    result = run_agent(model.client(), "read", registry, model="m")
    assert result.ok and not any(s.kind == "compact" for s in result.trace)
    assert model.requests[-1]["messages"] == result.messages[:-1]


# ---------------------------------------------------------------------------
# Summarisers
# ---------------------------------------------------------------------------

def test_model_summarizer_sends_one_request_without_tools():
    model = ScriptedModel([Reply(content=" the summary ", usage={"prompt_tokens": 9,
                                                                "completion_tokens": 2,
                                                                "total_tokens": 11})])
    summarize = model_summarizer(model.client(), model="m", max_tokens=50)
    history = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file",
                                                      "arguments": '{"path": "a.py"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "def f(): pass"}]
    assert summarize(history) == "the summary"
    (request,) = model.requests
    assert "tools" not in request and request["max_tokens"] == 50
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert request["messages"] == summary_request(history)  # what the bench counts
    assert 'read_file({"path": "a.py"})' in request["messages"][1]["content"]
    assert "TOOL RESULT (read_file): def f(): pass" in request["messages"][1]["content"]
    assert summarize.usage == [{"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}]


PYTEST_OUTPUT = """exit code: 1
FAILED tests/test_receipt.py::test_ten_pens - AssertionError: assert 'x' in 'y'
E   AssertionError: assert 'x' in 'y'
1 failed, 2 passed in 0.05s"""


def test_the_scripted_summarizer_keeps_the_facts_and_says_it_is_scripted():
    history = [
        {"role": "user", "content": "fix it; do not touch tests/"},
        {"role": "assistant", "content": "run", "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "run_command",
                                                         "arguments": '{"command": "pytest"}'}},
            {"id": "2", "type": "function", "function": {"name": "read_file",
                                                         "arguments": '{"path": "shop/a.py"}'}}]},
        {"role": "tool", "tool_call_id": "1", "content": PYTEST_OUTPUT},
        {"role": "tool", "tool_call_id": "2", "content": "code"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "3", "type": "function", "function": {"name": "edit_file", "arguments":
                json.dumps({"path": "shop/a.py", "old": "a > b", "new": "a >= b"})}}]},
        {"role": "tool", "tool_call_id": "3", "content": "Edited"},
    ]
    text = scripted_summarizer(history)
    assert "not written by an LLM" in text.splitlines()[0]
    for fact in ("do not touch tests/", "shop/a.py", "tests/test_receipt.py::test_ten_pens",
                 "AssertionError: assert 'x' in 'y'", "- a > b / + a >= b", "1 failed, 2 passed"):
        assert fact in text, fact
    later = scripted_summarizer([summary_message(text, 6), {"role": "assistant",
                                                             "content": "next"}])
    assert "shop/a.py" in later and "1 failed, 2 passed" in later and "next" in later


def test_a_summary_of_summaries_keeps_only_the_newest_notes():
    text = scripted_summarizer([{"role": "user", "content": "the task"}])
    sizes = []
    for n in range(30):  # one compaction per round: each summary summarises the last one
        text = scripted_summarizer([summary_message(text, 2), {"role": "assistant",
                                                                "content": f"note {n:02d}"}])
        sizes.append(len(text))
    notes = next(line for line in text.splitlines() if line.startswith("Notes: "))
    assert notes == "Notes: " + " | ".join(f"note {n:02d}" for n in range(30 - MAX_NOTES, 30))
    assert "Task: the task" in text  # the facts themselves carry over
    assert len(set(sizes[MAX_NOTES:])) == 1  # bounded: it stops growing


def test_a_long_transcript_keeps_its_start_and_end():
    history = [{"role": "user", "content": "TASK " + "a" * 500},
               *({"role": "assistant", "content": f"note {n} " + "b" * 200} for n in range(50)),
               {"role": "assistant", "content": "LAST NOTE"}]
    text = transcript(history, max_chars=2000)
    assert len(text) < 2100 and text.startswith("USER: TASK") and text.endswith("LAST NOTE")
    assert "characters cut here" in text


@pytest.mark.parametrize(("value", "size"), [("", 8192), ("4096", 4096), (" 2048 ", 2048)])
def test_the_local_window_comes_from_the_environment(value, size):
    assert context_size({"VIBE_AGENT_LOCAL_CTX": value}) == size


@pytest.mark.parametrize("value", ["x", "100", "-5", "99999", "4k"])
def test_a_bad_local_window_is_refused(value):
    with pytest.raises(LocalServerError, match="VIBE_AGENT_LOCAL_CTX"):
        context_size({"VIBE_AGENT_LOCAL_CTX": value})


# ---------------------------------------------------------------------------
# The long task
# ---------------------------------------------------------------------------

def run_tests(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command_argv(LONG_TASK), cwd=project, env=command_env(),
                          timeout=LONG_TASK.timeout_s, capture_output=True, text=True)


def test_the_long_task_fails_as_shipped_and_passes_with_its_fix(tmp_path):
    project = copy_repo(LONG_TASK, tmp_path / "repo")
    assert 10 <= sum(1 for p in project.rglob("*") if p.is_file()) <= 20
    before = run_tests(project)
    assert before.returncode == 1 and len(re.findall("^FAILED ", before.stdout, re.M)) == 4
    apply_fix(LONG_TASK, project)
    after = run_tests(project)
    assert after.returncode == 0 and after.stdout.count(".") >= 27
    assert all((project / path).is_file() for path in LONG_TASK.metadata["explore"])


@pytest.mark.parametrize(("options", "reason", "offloads"), [
    pytest.param(None, StopReason.CONTEXT_TOO_LONG, False, id="nothing"),
    pytest.param({"budget": 2800}, StopReason.ANSWERED, False, id="compaction"),
    pytest.param({"budget": 2000, "keep_last_rounds": 1}, StopReason.ANSWERED, False,
                 id="the-lessons-compaction"),
    pytest.param({"budget": 2000, "keep_last_rounds": 1, "offload_over": 1500,
                  "head_chars": 300}, StopReason.ANSWERED, True, id="with-offloading"),
])
def test_the_long_task_under_a_small_window(tmp_path, options, reason, offloads):
    workspace = copy_repo(LONG_TASK, tmp_path / "ws")
    compaction = None if options is None else Compaction(
        scripted_summarizer, workspace=workspace if offloads else None, **options)
    model = known_fix_model(LONG_TASK, context_window=4000)
    result = run_agent(model.client(), LONG_TASK.prompt, coding_registry(workspace),
                       model="m", max_iters=20, layers=[compaction])
    assert result.stop_reason is reason
    verdict = judge(LONG_TASK, workspace)  # held out: FAIL_TO_PASS and PASS_TO_PASS
    assert verdict.resolved is (compaction is not None)
    if compaction is not None:
        assert compaction.events and bool(compaction.offloaded) is offloads
