"""Lesson 11's checkers: a right answer passes, each typical mistake gets its own hint."""

from __future__ import annotations

import copy

import pytest

from vibe_agent.compact import compact as package_compact
from vibe_agent.compact import split_rounds as package_split_rounds
from vibe_agent.course.checks.lesson_11 import check_compact, check_split_rounds

# --- exercise 11.1: my_split_rounds -----------------------------------------------------------


def rounds_right(messages):
    rounds = []
    for m in messages:
        if m["role"] == "tool" and rounds:
            rounds[-1].append(m)
        else:
            rounds.append([m])
    return rounds


def rounds_unsolved(messages):
    raise NotImplementedError("练习还没完成")


def rounds_one_per_message(messages):
    return [[m] for m in messages]


def rounds_by_role_change(messages):  # a "turn": consecutive messages until the next user
    rounds = []
    for m in messages:
        if m["role"] in ("system", "user") or not rounds:
            rounds.append([m])
        else:
            rounds[-1].append(m)
    return rounds


def rounds_flat(messages):
    return list(messages)


def rounds_drops_tools(messages):
    return [[m] for m in messages if m["role"] != "tool"]


def rounds_calls_package(messages):
    return package_split_rounds(messages)


def rounds_mutates(messages):
    result = rounds_right(copy.deepcopy(messages))
    for m in messages:
        m.pop("reasoning_content", None)
    return result


def rounds_pairs(messages):  # one tool message per assistant: parallel calls split up
    rounds, i = [], 0
    while i < len(messages):
        takes = 2 if i + 1 < len(messages) and messages[i + 1]["role"] == "tool" else 1
        rounds.append(list(messages[i:i + takes]))
        i += takes
    return rounds


def rounds_tools_together(messages):  # consecutive messages of one role make a round
    rounds = []
    for m in messages:
        if rounds and m["role"] == "tool" and rounds[-1][-1]["role"] == "tool":
            rounds[-1].append(m)
        else:
            rounds.append([m])
    return rounds


def rounds_in_call_order(messages):  # tool messages put back in the order of the calls
    rounds = rounds_right(messages)
    for one in rounds:
        if one[0].get("tool_calls"):
            order = [c["id"] for c in one[0]["tool_calls"]]
            one[1:] = sorted(one[1:], key=lambda m: order.index(m["tool_call_id"]))
    return rounds


def rounds_assumes_a_first_message(messages):
    rounds = [[messages[0]]]
    for m in messages[1:]:
        if m["role"] == "tool":
            rounds[-1].append(m)
        else:
            rounds.append([m])
    return rounds


def rounds_as_tuples(messages):
    return [tuple(r) for r in rounds_right(messages)]


@pytest.mark.parametrize(("fn", "expected"), [
    (rounds_right, "全部 5 项通过"),
    (rounds_unsolved, "还没完成"),
    (rounds_one_per_message, "tool 消息不能自己成一轮"),
    (rounds_by_role_change, "每条 assistant 消息开始新的一轮"),
    (rounds_flat, "每一轮是一个消息列表"),
    (rounds_drops_tools, "一条不多、一条不少"),
    (rounds_calls_package, "包里现成的"),
    (package_split_rounds, "包里现成的"),
    (rounds_mutates, "被改动了"),
    (rounds_pairs, "tool 消息不能自己成一轮"),
    (rounds_tools_together, "tool 消息不能自己成一轮"),
    (rounds_in_call_order, "顺序不变"),
    (rounds_assumes_a_first_message, "没有消息时返回空列表"),
    (rounds_as_tuples, "每一轮是一个消息列表"),
], ids=lambda value: value.__name__ if callable(value) else "")
def test_split_rounds_checker(fn, expected, capsys):
    check_split_rounds(fn)
    out = capsys.readouterr().out
    assert expected in out
    assert "Traceback" not in out
    if fn is not rounds_right:
        assert "🎉" not in out


# --- exercise 11.2: my_compact ----------------------------------------------------------------


def head_of(messages):
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    return messages[:first_user + 1]


def compact_right(messages, summarize, keep_last_rounds=2):
    head = head_of(messages)
    rounds = rounds_right(messages[len(head):])
    if len(rounds) <= keep_last_rounds:
        return copy.deepcopy(messages)
    cut = len(rounds) - keep_last_rounds
    replaced = [m for r in rounds[:cut] for m in r]
    summary = {"role": "user", "content": "之前的对话摘要：\n" + summarize(replaced)}
    return copy.deepcopy([*head, summary, *(m for r in rounds[cut:] for m in r)])


def compact_unsolved(messages, summarize, keep_last_rounds=2):
    raise NotImplementedError("练习还没完成")


def compact_by_message_count(messages, summarize, keep_last_rounds=2):
    """Orphaned tool messages: keeps the last 2 * keep messages, cut anywhere."""
    head = head_of(messages)
    rest = messages[len(head):]
    keep = 2 * keep_last_rounds
    if len(rest) <= keep:
        return copy.deepcopy(messages)
    cut = len(rest) - keep
    return copy.deepcopy([*head, {"role": "user", "content": summarize(rest[:cut])},
                          *rest[cut:]])


def compact_summary_first(messages, summarize, keep_last_rounds=2):
    result = compact_right(messages, summarize, keep_last_rounds)
    head = head_of(messages)
    if len(result) > len(head) and result != messages:
        summary = result.pop(len(head))
        result.insert(len(head) - 1, summary)
    return result


def compact_drops_system(messages, summarize, keep_last_rounds=2):
    return [m for m in compact_right(messages, summarize, keep_last_rounds)
            if m["role"] != "system"]


def compact_mutates(messages, summarize, keep_last_rounds=2):
    result = compact_right(messages, summarize, keep_last_rounds)
    messages[:] = result
    return result


def compact_whole_history(messages, summarize, keep_last_rounds=2):
    head = head_of(messages)
    rounds = rounds_right(messages[len(head):])
    if len(rounds) <= keep_last_rounds:
        return copy.deepcopy(messages)
    summary = summarize(messages)
    kept = [m for r in rounds[len(rounds) - keep_last_rounds:] for m in r]
    return copy.deepcopy([*head, {"role": "user", "content": summary}, *kept])


def compact_off_by_one(messages, summarize, keep_last_rounds=2):
    return compact_right(messages, summarize, keep_last_rounds + 1)


def compact_keeps_too_few(messages, summarize, keep_last_rounds=2):
    head = head_of(messages)
    rounds = rounds_right(messages[len(head):])
    if len(rounds) <= keep_last_rounds:
        return copy.deepcopy(messages)
    cut = len(rounds) - keep_last_rounds
    replaced = [m for r in rounds[:cut + 1] for m in r]
    summary = {"role": "user", "content": summarize(replaced)}
    return copy.deepcopy([*head, summary, *(m for r in rounds[cut + 1:] for m in r)])


def compact_calls_package(messages, summarize, keep_last_rounds=2):
    return package_compact(messages, summarize, keep_last_rounds=keep_last_rounds)


def compact_always_summarizes(messages, summarize, keep_last_rounds=2):
    head = head_of(messages)
    rounds = rounds_right(messages[len(head):])
    cut = max(0, len(rounds) - keep_last_rounds)
    replaced = [m for r in rounds[:cut] for m in r]
    summary = {"role": "user", "content": summarize(replaced)}
    return copy.deepcopy([*head, summary, *(m for r in rounds[cut:] for m in r)])


def compact_returns_input(messages, summarize, keep_last_rounds=2):
    result = compact_right(messages, summarize, keep_last_rounds)
    return messages if result == messages else result


def compact_less_than(messages, summarize, keep_last_rounds=2):
    """`<` instead of `<=`: with exactly keep rounds it summarises nothing, inserts a summary."""
    head = head_of(messages)
    rounds = rounds_right(messages[len(head):])
    if len(rounds) < keep_last_rounds:
        return copy.deepcopy(messages)
    cut = len(rounds) - keep_last_rounds
    replaced = [m for r in rounds[:cut] for m in r]
    summary = {"role": "user", "content": "之前的对话摘要：\n" + summarize(replaced)}
    return copy.deepcopy([*head, summary, *(m for r in rounds[cut:] for m in r)])


def compact_drops_the_summary(messages, summarize, keep_last_rounds=2):
    """Calls summarize, then writes only the suggested prefix into the summary message."""
    result = compact_right(messages, summarize, keep_last_rounds)
    head = head_of(messages)
    if len(result) > len(head) and result != messages:
        result[len(head)] = {"role": "user", "content": "之前的对话摘要：（略）"}
    return result


def compact_summary_last(messages, summarize, keep_last_rounds=2):
    result = compact_right(messages, summarize, keep_last_rounds)
    head = head_of(messages)
    if len(result) > len(head) and result != messages:
        result.append(result.pop(len(head)))
    return result


def compact_negative_slice(messages, summarize, keep_last_rounds=2):
    """rounds[-keep:]: with keep=0 that is every round, and nothing is summarised."""
    head = head_of(messages)
    rounds = rounds_right(messages[len(head):])
    if len(rounds) <= keep_last_rounds:
        return copy.deepcopy(messages)
    replaced = [m for r in rounds[:-keep_last_rounds or None] for m in r] \
        if keep_last_rounds else []
    kept = [m for r in rounds[-keep_last_rounds:] for m in r]
    summary = {"role": "user", "content": "之前的对话摘要：\n" + summarize(replaced)}
    return copy.deepcopy([*head, summary, *kept])


def compact_head_of_two(messages, summarize, keep_last_rounds=2):
    """Takes messages[:2] as system + task: without a system message that is one too many."""
    head, rest = messages[:2], messages[2:]
    rounds = rounds_right(rest)
    if len(rounds) <= keep_last_rounds:
        return copy.deepcopy(messages)
    cut = len(rounds) - keep_last_rounds
    replaced = [m for r in rounds[:cut] for m in r]
    summary = {"role": "user", "content": "之前的对话摘要：\n" + summarize(replaced)}
    return copy.deepcopy([*head, summary, *(m for r in rounds[cut:] for m in r)])


def compact_summary_per_round(messages, summarize, keep_last_rounds=2):
    head = head_of(messages)
    rounds = rounds_right(messages[len(head):])
    if len(rounds) <= keep_last_rounds:
        return copy.deepcopy(messages)
    cut = len(rounds) - keep_last_rounds
    text = "\n".join(summarize(r) for r in rounds[:cut])
    summary = {"role": "user", "content": "之前的对话摘要：\n" + text}
    return copy.deepcopy([*head, summary, *(m for r in rounds[cut:] for m in r)])


@pytest.mark.parametrize(("fn", "expected"), [
    (compact_right, "全部 7 项通过"),
    (compact_unsolved, "还没完成"),
    (compact_by_message_count, "按轮切，不要按消息条数切"),
    (compact_summary_first, "摘要放在了任务"),
    (compact_drops_system, "system 消息原样保留"),
    (compact_mutates, "被改动了"),
    (compact_whole_history, "summarize 拿到的是整段历史"),
    (compact_off_by_one, "应该保留最后"),
    (compact_keeps_too_few, "应该保留最后"),
    (compact_calls_package, "包里现成的"),
    (package_compact, "包里现成的"),
    (compact_always_summarizes, "也就不调用 summarize"),
    (compact_returns_input, "要返回一个新列表"),
    (compact_less_than, "不是 <"),
    (compact_drops_the_summary, "摘要消息里没有 summarize 返回的文字"),
    (compact_summary_last, "摘要紧跟在第一条 user 消息（任务）后面"),
    (compact_negative_slice, "rounds[-0:] 是整个列表"),
    (compact_head_of_two, "不要写死 messages[:2]"),
    (compact_summary_per_round, "调用 1 次"),
], ids=lambda value: value.__name__ if callable(value) else "")
def test_compact_checker(fn, expected, capsys):
    check_compact(fn)
    out = capsys.readouterr().out
    assert expected in out, out
    assert "Traceback" not in out
    if fn is not compact_right:
        assert "🎉" not in out
