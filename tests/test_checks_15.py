"""Lesson 15's checkers: right answers pass; the mistakes a clever beginner makes fail with
their own hint (the hint's words are asserted)."""

from __future__ import annotations

import difflib
import json

import pytest

from vibe_agent.coding import snapshot
from vibe_agent.course.checks.lesson_15 import check_accumulate, check_files_command
from vibe_agent.terminal import COMMANDS


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
                if piece.function.name and not call["function"]["name"]:
                    call["function"]["name"] = piece.function.name
                call["function"]["arguments"] += piece.function.arguments or ""
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def accumulate_like(chunks, *, join_ids=False, join_names=False, first_piece_only=False,
                    raw_index=False):
    """good_accumulate with one of the mistakes a beginner makes switched on."""
    content, calls, last = None, {}, 0
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            content = (content or "") + delta.content
        pieces = (delta.tool_calls or [])[:1] if first_piece_only else delta.tool_calls or []
        for piece in pieces:
            if raw_index:
                index = piece.index
            else:
                index = piece.index if piece.index is not None else last
                last = index
            call = calls.setdefault(index, {"id": "", "type": "function",
                                            "function": {"name": "", "arguments": ""}})
            if join_ids:
                call["id"] += piece.id or ""
            elif piece.id and not call["id"]:
                call["id"] = piece.id
            if piece.function:
                if join_names:
                    call["function"]["name"] += piece.function.name or ""
                elif piece.function.name and not call["function"]["name"]:
                    call["function"]["name"] = piece.function.name
                call["function"]["arguments"] += piece.function.arguments or ""
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def ids_joined(chunks):
    return accumulate_like(chunks, join_ids=True)


def names_joined(chunks):
    return accumulate_like(chunks, join_names=True)


def first_piece_only(chunks):
    return accumulate_like(chunks, first_piece_only=True)


def keyed_by_raw_index(chunks):
    return accumulate_like(chunks, raw_index=True)


def keyed_by_raw_index_sorted_safely(chunks):
    """Keys by the raw index too, but sorts None first instead of raising."""
    message = accumulate_like(chunks[:0])
    calls = {}
    for chunk in chunks:
        for choice in chunk.choices:
            if choice.delta.content:
                message["content"] = (message["content"] or "") + choice.delta.content
            for piece in choice.delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": "", "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                call["id"] = call["id"] or piece.id or ""
                call["function"]["name"] = call["function"]["name"] or piece.function.name or ""
                call["function"]["arguments"] += piece.function.arguments or ""
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls, key=lambda i: (i is not None,
                                                                                 i or 0))]
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
    pytest.param(ids_joined, "别接起来", id="ids-concatenated-when-repeated"),
    pytest.param(names_joined, "calculatorcalculator", id="names-concatenated-when-repeated"),
    pytest.param(first_piece_only, "不能只看第一项", id="only-the-first-piece-of-a-chunk"),
    pytest.param(keyed_by_raw_index, "TypeError", id="keyed-by-raw-index-raises"),
    pytest.param(keyed_by_raw_index_sorted_safely, "先把 None 换成上一个 index",
                 id="keyed-by-raw-index-extra-call"),
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


def print_rows(session, rows):
    for row in rows or ["没有改动的文件。"]:
        session.console.print(row)


def set_difference(session, argument):
    """Counts lines that are new as a set: a repeated line is not counted."""
    before, now = session.start, snapshot(session.root)
    rows = []
    for path in sorted(before.keys() | now.keys()):
        if before.get(path) != now.get(path):
            old, new = set(before.get(path, "").splitlines()), set(now.get(path, "").splitlines())
            rows.append(f"{path} +{len(new - old)} -{len(old - new)}")
    print_rows(session, rows)


def net_line_counts(session, argument):
    """Only the difference in the number of lines: an edited line counts as nothing."""
    before, now = session.start, snapshot(session.root)
    rows = []
    for path in sorted(before.keys() | now.keys()):
        if before.get(path) != now.get(path):
            grown = len(now.get(path, "").splitlines()) - len(before.get(path, "").splitlines())
            rows.append(f"{path} +{max(grown, 0)} -{max(-grown, 0)}")
    print_rows(session, rows)


def only_files_still_there(session, argument):
    """Walks the files of now only: a deleted file is missed."""
    rows = [row for row in _rows(session) if row.split()[0] in snapshot(session.root)]
    print_rows(session, rows)


def only_files_from_the_start(session, argument):
    """Walks the files of the start only: a new file is missed."""
    rows = [row for row in _rows(session) if row.split()[0] in session.start]
    print_rows(session, rows)


def grouped_by_kind(session, argument):
    """Changed files first, then new ones, then deleted ones."""
    rows = _rows(session)
    start, now = session.start, snapshot(session.root)

    def kind(row):
        path = row.split()[0]
        return 0 if path in start and path in now else 1 if path in now else 2
    print_rows(session, sorted(rows, key=kind))


def counts_the_headers(session, argument):
    """Counts every line of workspace_diff that starts with + or -, headers included."""
    from vibe_agent.coding import workspace_diff

    counts: dict[str, list[int]] = {}
    name = None
    lines = workspace_diff(session.start, session.root).splitlines()
    for i, line in enumerate(lines):
        if line.startswith("--- ") and lines[i + 1:i + 2] and lines[i + 1].startswith("+++ "):
            old, new = line[4:], lines[i + 1][4:]
            name = (new if new != "/dev/null" else old)[2:]
            counts[name] = [0, 0]
        if name and line.startswith("+"):
            counts[name][0] += 1
        elif name and line.startswith("-"):
            counts[name][1] += 1
    print_rows(session, [f"{n} +{a} -{r}" for n, (a, r) in sorted(counts.items())])




@pytest.mark.parametrize(("fn", "hint"), [
    pytest.param(skips_plus_headers, "别靠跳过 '+++'", id="skips-lines-starting-with-+++"),
    pytest.param(since_last_turn, "session.start", id="compares-with-the-last-turn"),
    pytest.param(prints, "session.console.print", id="print-instead-of-console"),
    pytest.param(restores, "只看不改", id="changes-the-workspace"),
    pytest.param(files_hard_coded, "没变", id="hard-coded"),
    pytest.param(set_difference, "用集合求差", id="set-difference-of-lines"),
    pytest.param(net_line_counts, "每个改过的文件一行", id="net-difference-in-line-counts"),
    pytest.param(only_files_still_there, "删掉的文件：所有行都是删的",
                 id="misses-deleted-files"),
    pytest.param(only_files_from_the_start, "新文件：所有行都是加的", id="misses-new-files"),
    pytest.param(grouped_by_kind, "不按改动的种类分组", id="grouped-by-kind-not-sorted"),
    pytest.param(counts_the_headers, "是文件头，不是改动的行", id="counts-the-file-headers"),
    pytest.param(COMMANDS["/diff"].run, "包里现成的 _diff", id="hands-in-the-diff-command"),
])
def test_wrong_files_commands_fail_with_their_hint(fn, hint, capsys):
    passed, out = run(check_files_command, fn, capsys)
    assert not passed
    assert hint in out, out


def test_the_right_files_command_passes(capsys):
    passed, out = run(check_files_command, good_files, capsys)
    assert passed, out
