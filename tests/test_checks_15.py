"""Lesson 15's checkers: right answers pass; the mistakes a clever beginner makes fail with
their own hint (the hint's words are asserted)."""

from __future__ import annotations

import difflib
import json

import pytest

from vibe_agent.coding import snapshot
from vibe_agent.course.checks.lesson_15 import check_accumulate, check_files_command


def good_accumulate(chunks):
    content, calls, last = None, {}, 0
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            content = (content or "") + delta.content
        for piece in delta.tool_calls or []:
            index = piece.index if piece.index is not None else last
            last = index
            call = calls.setdefault(index, {"id": "", "type": "function",
                                            "function": {"name": "", "arguments": ""}})
            if piece.id and not call["id"]:
                call["id"] = piece.id
            if piece.function:
                call["function"]["name"] += piece.function.name or ""
                call["function"]["arguments"] += piece.function.arguments or ""
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def by_arrival(chunks):
    content, calls = None, []
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            content = (content or "") + delta.content
        for piece in delta.tool_calls or []:
            if piece.id:
                calls.append({"id": piece.id, "type": "function",
                              "function": {"name": piece.function.name or "", "arguments": ""}})
            calls[-1]["function"]["arguments"] += piece.function.arguments or ""
    return {"role": "assistant", "content": content, "tool_calls": calls}


def id_overwritten(chunks):
    message = good_accumulate(chunks)
    for chunk in chunks:  # the beginner's version: every delta's id is taken as it is
        for choice in chunk.choices:
            for piece in choice.delta.tool_calls or []:
                if piece.id is not None:
                    message["tool_calls"][piece.index or 0]["id"] = piece.id
    return message


def parses_each_piece(chunks):
    message = good_accumulate(chunks)
    for chunk in chunks:
        for choice in chunk.choices:
            for piece in choice.delta.tool_calls or []:
                json.loads(piece.function.arguments or "{}")
    return message


def no_usage_skip(chunks):
    for chunk in chunks:
        chunk.choices[0]  # noqa: B018 - the usage-only chunk has no choices
    return good_accumulate(chunks)


def arrival_order(chunks):
    message = good_accumulate(chunks)
    ids = []
    for chunk in chunks:
        for choice in chunk.choices:
            ids += [p.id for p in choice.delta.tool_calls or [] if p.id]
    if "tool_calls" in message:
        by_id = {c["id"]: c for c in message["tool_calls"]}
        message["tool_calls"] = [by_id[i] for i in ids if i in by_id]
    return message


def no_type(chunks):
    message = good_accumulate(chunks)
    for call in message.get("tool_calls", []):
        del call["type"]
    return message


def hard_coded(chunks):
    return {"role": "assistant", "content": "17 × 23 = 391", "tool_calls": []}


def borrowed(chunks):
    from vibe_agent.stream import accumulate

    return accumulate(chunks)


def borrowed_private(chunks):
    from vibe_agent import stream

    return stream.assemble(chunks).message()


def unsolved(chunks):
    raise NotImplementedError("练习还没完成")


def run(check, fn, capsys):
    verdict = check(fn)
    return bool(verdict), capsys.readouterr().out


def test_the_right_accumulate_passes(capsys):
    passed, out = run(check_accumulate, good_accumulate, capsys)
    assert passed, out


@pytest.mark.parametrize(("fn", "hint"), [
    pytest.param(by_arrival, "按 delta 里的 index", id="joined-by-arrival"),
    pytest.param(id_overwritten, "别用空值覆盖", id="id-overwritten-by-empty"),
    pytest.param(parses_each_piece, "不要 json.loads", id="json-loads-each-piece"),
    pytest.param(no_usage_skip, "跳过它", id="usage-chunk-not-skipped"),
    pytest.param(arrival_order, "按 index 从小到大", id="calls-in-arrival-order"),
    pytest.param(no_type, "type", id="type-missing"),
    pytest.param(hard_coded, "接起来", id="hard-coded"),
    pytest.param(borrowed, "不要调用包里的 accumulate", id="calls-the-package"),
    pytest.param(borrowed_private, "accumulate", id="calls-assemble-through-module"),
    pytest.param(unsolved, "还没完成", id="unsolved"),
])
def test_wrong_accumulates_fail_with_their_hint(fn, hint, capsys):
    passed, out = run(check_accumulate, fn, capsys)
    assert not passed
    assert hint in out, out


def _rows(session):
    before, now = session.start, snapshot(session.root)
    rows = []
    for path in sorted(before.keys() | now.keys()):
        if before.get(path) == now.get(path):
            continue
        lines = list(difflib.unified_diff(before.get(path, "").splitlines(),
                                          now.get(path, "").splitlines(), lineterm=""))[2:]
        added = sum(1 for line in lines if line.startswith("+"))
        removed = sum(1 for line in lines if line.startswith("-"))
        rows.append(f"{path} +{added} -{removed}")
    return rows


def good_files(session, argument):
    rows = _rows(session)
    for row in rows or ["没有改动的文件。"]:
        session.console.print(row)


def skips_plus_headers(session, argument):
    from vibe_agent.coding import workspace_diff

    counts: dict[str, list[int]] = {}
    name = None
    for line in workspace_diff(session.start, session.root).splitlines():
        if line.startswith("+++ ") or line.startswith("--- "):
            name = line[6:] if line[4:6] in ("a/", "b/") else name
            counts.setdefault(name, [0, 0]) if name else None
            continue
        if name and line.startswith("+"):
            counts[name][0] += 1
        elif name and line.startswith("-"):
            counts[name][1] += 1
    rows = [f"{n} +{a} -{r}" for n, (a, r) in sorted(counts.items())]
    for row in rows or ["没有改动的文件。"]:
        session.console.print(row)


def since_last_turn(session, argument):
    start = session.undo[-1] if session.undo else session.start
    session.start, saved = start, session.start
    try:
        good_files(session, argument)
    finally:
        session.start = saved


def prints(session, argument):
    for row in _rows(session) or ["没有改动的文件。"]:
        print(row)


def restores(session, argument):  # writes every file back as it was at the start
    good_files(session, argument)
    for path, text in session.start.items():
        (session.root / path).write_text(text)


def files_hard_coded(session, argument):
    session.console.print("app.py +2 -1")


@pytest.mark.parametrize(("fn", "hint"), [
    pytest.param(skips_plus_headers, "别靠跳过 '+++'", id="skips-lines-starting-with-+++"),
    pytest.param(since_last_turn, "session.start", id="compares-with-the-last-turn"),
    pytest.param(prints, "session.console.print", id="print-instead-of-console"),
    pytest.param(restores, "只看不改", id="changes-the-workspace"),
    pytest.param(files_hard_coded, "没变", id="hard-coded"),
])
def test_wrong_files_commands_fail_with_their_hint(fn, hint, capsys):
    passed, out = run(check_files_command, fn, capsys)
    assert not passed
    assert hint in out, out


def test_the_right_files_command_passes(capsys):
    passed, out = run(check_files_command, good_files, capsys)
    assert passed, out
