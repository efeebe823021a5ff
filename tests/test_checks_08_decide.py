"""Lesson 08, exercise 8.4 (my_decide): the right answer passes, each wrong rule engine
is refused with the hint for its very mistake."""

from __future__ import annotations

import pytest

from vibe_agent.course.checks import lesson_08
from vibe_agent.course.checks.lesson_08 import check_my_decide, decide_cases
from vibe_agent.permissions import Call, Rules, decide, matches

DECIDE_CASES = 19


def run_check(fn, capsys) -> tuple[bool, str]:
    verdict = check_my_decide(fn)
    return bool(verdict), capsys.readouterr().out


def in_order(order):
    def my_decide(rules, call, default):
        for kind in order:
            if any(matches(rule, call, kind) for rule in rules.get(kind, [])):
                return kind
        return default
    return my_decide


decide_right = in_order(("deny", "ask", "allow"))
decide_allow_first = in_order(("allow", "ask", "deny"))
decide_ask_before_deny = in_order(("ask", "deny", "allow"))
decide_allow_before_ask = in_order(("deny", "allow", "ask"))


def decide_ignores_default(rules, call, default):
    return decide_right(rules, call, "ask")


def decide_forgets_the_kind(rules, call, default):
    for kind in ("deny", "ask", "allow"):
        if any(matches(rule, call) for rule in rules.get(kind, [])):
            return kind
    return default


def decide_by_keywords(rules, call, default):
    if call.target and any(word in call.target for word in ("rm", "push", "sudo")):
        return "deny"
    return decide_right(rules, call, default)


def decide_with_the_package(rules, call, default):
    return decide(Rules(**rules), call, default)


def decide_with_the_checker(rules, call, default):
    return lesson_08._decision(rules, call, default)


def decide_returns_a_bool(rules, call, default):
    return decide_right(rules, call, default) != "deny"


def decide_unsolved(rules, call, default):
    raise NotImplementedError("练习还没完成")


def _fixed_table():
    import random

    table = {}
    for name, rules, call, default in decide_cases(random.Random(0)):
        if not name.endswith(lesson_08.FRESH):
            key = (repr(sorted((k, tuple(v)) for k, v in rules.items())), call, default)
            table[key] = decide_right(rules, call, default)
    return table


FIXED = _fixed_table()


def decide_hard_coded(rules, call, default):
    key = (repr(sorted((k, tuple(v)) for k, v in rules.items() if v)), call, default)
    return FIXED.get(key, "deny")


@pytest.mark.parametrize(("fn", "expected"), [
    pytest.param(decide_right, f"全部 {DECIDE_CASES} 项通过", id="right"),
    pytest.param(decide_allow_first, "你让 allow 赢了", id="allow-beats-deny"),
    pytest.param(decide_ask_before_deny, "deny 和 ask 都匹配，应该是 deny，你让 ask 赢了",
                 id="ask-beats-deny"),
    pytest.param(decide_allow_before_ask, "ask 和 allow 都匹配，应该是 ask，你让 allow 赢了",
                 id="allow-beats-ask"),
    pytest.param(decide_ignores_default, "没有规则匹配，应该是 default（allow）",
                 id="ignores-the-mode-default"),
    pytest.param(decide_forgets_the_kind, "要传上这条规则所在的列表名 kind", id="forgets-kind"),
    pytest.param(decide_by_keywords, "不要自己看命令里有没有 rm", id="keyword-test"),
    pytest.param(decide_with_the_package, "你的函数用了包里现成的 decide", id="package-decide"),
    pytest.param(decide_with_the_checker, "检查器自己的", id="checker-decision"),
    pytest.param(decide_returns_a_bool, "三个字符串之一", id="returns-a-bool"),
    pytest.param(decide_hard_coded, "不要照着检查器的例子写死答案", id="hard-coded"),
    pytest.param(decide_unsolved, "还没完成", id="unsolved"),
])
def test_check_my_decide(fn, expected, capsys):
    passed, out = run_check(fn, capsys)
    assert expected in out, out
    assert passed == expected.startswith("全部"), out


def test_the_checker_agrees_with_the_package_on_every_case():
    import random

    for _, rules, call, default in decide_cases(random.Random()):
        assert lesson_08._decision(rules, call, default) == decide(Rules(**rules), call, default)


def test_every_wrong_order_is_caught_by_a_fixed_case():
    """Not only by a fresh case: each order mistake has its own row in the lesson's table."""
    import itertools
    import random

    cases = [c for c in decide_cases(random.Random()) if not c[0].endswith(lesson_08.FRESH)]
    for order in itertools.permutations(("deny", "ask", "allow")):
        if order != ("deny", "ask", "allow"):
            wrong = in_order(order)
            assert any(wrong(rules, call, d) != decide_right(rules, call, d)
                       for _, rules, call, d in cases), order
    assert isinstance(Call("mcp__x__y"), Call)
