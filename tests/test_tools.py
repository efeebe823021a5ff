"""Tests for the demo tools: the calculator against Python's own arithmetic, the clock
with a fixed time, and the fake data tools. The web fetcher behind fetch_url and
page_length is tested in test_web.py."""

from __future__ import annotations

import math
import operator
import time
from datetime import UTC, datetime

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vibe_agent.tools import DemoTools
from vibe_agent.world import World


def _no_network(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError(f"this test must not use the network: {request.url}")


def offline_world(now: datetime | None = None) -> World:
    """A world whose HTTP client fails the test if used (and is cheap to build)."""
    http = httpx2.Client(transport=httpx2.MockTransport(_no_network))
    return World(http=http) if now is None else World(now=lambda: now, http=http)


OFFLINE = DemoTools(offline_world())


# --- calculator -------------------------------------------------------------------


def assert_result(result: str, expected: int | float) -> None:
    """The calculator's answer (after the last ' = ') equals Python's value."""
    assert not result.startswith("Error:"), result
    answer = result.rpartition(" = ")[2]
    if isinstance(expected, int):
        assert answer == str(expected)
    else:  # floats are printed with 12 significant digits
        assert math.isclose(float(answer), expected, rel_tol=1e-11, abs_tol=1e-300)


GOOD = [
    # (expression, Python's value, id)
    ("17 × 23", 17 * 23, "times-sign"),
    ("17 * 23", 17 * 23, "multiply"),
    ("2 + 3 * 4", 2 + 3 * 4, "precedence"),
    ("(2 + 3) * 4", (2 + 3) * 4, "parentheses"),
    ("-5 + 2", -5 + 2, "unary-minus"),
    ("-(3 - 10)", -(3 - 10), "minus-parentheses"),
    ("-2 ** 2", -(2**2), "minus-binds-looser-than-power"),
    ("+7", +7, "unary-plus"),
    ("2 ** 3 ** 2", 2 ** (3**2), "power-right-associative"),
    ("2 ** 10", 2**10, "power"),
    ("2 ** -1", 2**-1, "negative-exponent"),
    ("2 ** 0.5", 2**0.5, "float-exponent"),
    ("2 ** 1000", 2**1000, "big-int"),
    ("10 / 4", 10 / 4, "true-division"),
    ("10 ÷ 4", 10 / 4, "division-sign"),
    ("1256 / 7", 1256 / 7, "page-length-over-7"),
    ("17 // 5", 17 // 5, "floor-division"),
    ("-17 // 5", -17 // 5, "floor-division-negative"),
    ("17 % 5", 17 % 5, "modulo"),
    ("-17 % 5", -17 % 5, "modulo-negative"),
    ("7.5 % 2", 7.5 % 2, "float-modulo"),
    ("1.5 * 4", 1.5 * 4, "float"),
    ("0.1 + 0.2", 0.1 + 0.2, "float-rounding"),
    ("1e3 + 1", 1e3 + 1, "scientific-notation"),
    ("（１＋２）×３", (1 + 2) * 3, "full-width"),
    ("  42  ", 42, "spaces"),
]


@pytest.mark.parametrize(
    ("expression", "expected"), [row[:2] for row in GOOD], ids=[row[2] for row in GOOD]
)
def test_calculator_matches_python(expression: str, expected: int | float) -> None:
    assert_result(OFFLINE.calculator(expression), expected)


def test_calculator_shows_the_expression() -> None:
    assert OFFLINE.calculator("17 × 23") == "17 * 23 = 391"


OPERATORS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
}
# An expression is a pair (text, value); value None means Python raised ZeroDivisionError.
Expr = tuple[str, int | float | None]


def _number(n: int) -> Expr:
    return (f"({n})" if n < 0 else str(n), n)


def _binary(parts: tuple[Expr, str, Expr]) -> Expr:
    (left_text, left), op, (right_text, right) = parts
    try:
        value = None if left is None or right is None else OPERATORS[op](left, right)
    except ZeroDivisionError:
        value = None
    return (f"({left_text} {op} {right_text})", value)


def _power(parts: tuple[Expr, int]) -> Expr:
    (text, base), exponent = parts
    return (f"({text} ** {exponent})", None if base is None else base**exponent)


def _combine(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    binary = st.tuples(children, st.sampled_from(list(OPERATORS)), children).map(_binary)
    return binary | st.tuples(children, st.integers(0, 4)).map(_power)


expressions = st.recursive(st.integers(-20, 20).map(_number), _combine, max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(expressions)
def test_calculator_property(expr: Expr) -> None:
    text, expected = expr
    result = OFFLINE.calculator(text)
    if expected is None:
        assert result.startswith("Error: division by zero"), result
    else:
        assert_result(result, expected)


REJECTED = [
    # (expression, a phrase the error must contain, id)
    ("__import__('os')", "function call", "dunder-import"),
    ("abs(-1)", "function call", "call"),
    ("().__class__", "attribute access", "attribute"),
    ("x[0]", "indexing", "subscript"),
    ("x + 1", "name 'x'", "name"),
    ("'abc' * 3", "value 'abc'", "string"),
    ("True + 1", "value True", "bool"),
    ("1j * 2", "value 1j", "complex"),
    ("1 < 2", "comparison", "comparison"),
    ("lambda: 1", "lambda", "lambda"),
    ("2 ^ 10", "**", "xor-hints-power"),
    ("1 << 3", "<<", "shift"),
    ("[1, 2]", "not allowed", "list"),
    ("9**9**9", "too large", "tower-9"),
    ("10**10**10", "too large", "tower-10"),
    ("2**100000", "too large", "big-power"),
    ("(2**5000) * (2**5001)", "too large", "big-product"),
    ("1e308 * 10", "too large", "float-overflow"),
    ("2**5000 * 1.0", "too large", "int-to-float-overflow"),
    ("10.0 ** 400", "too large", "float-power-overflow"),
    ("(-8) ** 0.5", "real number", "complex-result"),
    ("1/0", "division by zero", "divide-by-zero"),
    ("1//0", "division by zero", "floor-divide-by-zero"),
    ("1%0", "division by zero", "modulo-zero"),
    ("0 ** -1", "division by zero", "zero-negative-power"),
    ("", "empty", "empty"),
    ("   ", "empty", "blank"),
    ("1 +", "not a valid", "syntax-error"),
    ("1; 2", "not a valid", "two-statements"),
    ("1+" * 300 + "1", "longer than", "too-long"),
]


@pytest.mark.parametrize(
    ("expression", "phrase"), [row[:2] for row in REJECTED], ids=[row[2] for row in REJECTED]
)
def test_calculator_rejects(expression: str, phrase: str) -> None:
    result = OFFLINE.calculator(expression)
    assert result.startswith("Error:")
    assert phrase in result


def test_calculator_power_tower_returns_quickly() -> None:
    start = time.perf_counter()
    result = OFFLINE.calculator("9**9**9")
    print(f"9**9**9 took {(time.perf_counter() - start) * 1000:.3f} ms")
    assert result.startswith("Error:")


# --- current_time -----------------------------------------------------------------

FIXED = datetime(2026, 11, 30, 13, 13, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("Asia/Shanghai", "2026-11-30 21:13:05 Asia/Shanghai (UTC+08:00)"),
        ("America/New_York", "2026-11-30 08:13:05 America/New_York (UTC-05:00)"),
        ("Asia/Kolkata", "2026-11-30 18:43:05 Asia/Kolkata (UTC+05:30)"),
    ],
    ids=["shanghai", "new-york", "half-hour-offset"],
)
def test_current_time(zone: str, expected: str) -> None:
    assert DemoTools(offline_world(FIXED)).current_time(zone) == expected


def test_current_time_default_is_shanghai() -> None:
    assert DemoTools(offline_world(FIXED)).current_time().endswith("Asia/Shanghai (UTC+08:00)")


@pytest.mark.parametrize(
    "zone",
    ["Mars/Olympus", "Beijing", "", "../../etc/passwd"],
    ids=["unknown", "city", "empty", "path"],
)
def test_current_time_unknown_zone(zone: str) -> None:
    result = DemoTools(offline_world(FIXED)).current_time(zone)
    assert result.startswith("Error:")
    assert "Asia/Shanghai" in result  # the error shows valid examples


# --- the fake data tools ----------------------------------------------------------


@pytest.mark.parametrize(
    ("city", "expected"),
    [
        ("Beijing", "Beijing: "),
        ("北京", "Beijing: "),
        (" shanghai ", "Shanghai: "),
        ("上海", "Shanghai: "),
    ],
    ids=["english", "chinese", "lowercase-spaces", "chinese-shanghai"],
)
def test_get_weather_known(city: str, expected: str) -> None:
    result = OFFLINE.get_weather(city)
    assert result.startswith(expected)
    assert "not real" in result


@pytest.mark.parametrize(
    ("code", "expected"),
    [("600519", "600519 Kweichow Moutai"), ("AAPL", "AAPL Apple"), ("aapl", "AAPL Apple")],
    ids=["a-share", "ticker", "lowercase-ticker"],
)
def test_get_stock_known(code: str, expected: str) -> None:
    result = OFFLINE.get_stock(code)
    assert result.startswith(expected)
    assert "not real" in result


@pytest.mark.parametrize(
    ("tool", "argument", "known"),
    [("get_weather", "Atlantis", "Beijing"), ("get_stock", "XYZ", "600519")],
    ids=["weather", "stock"],
)
def test_fake_tools_unknown(tool: str, argument: str, known: str) -> None:
    result = getattr(OFFLINE, tool)(argument)
    assert result.startswith("Error:")
    assert known in result  # the error lists what is known


def test_fake_tools_are_deterministic() -> None:
    assert OFFLINE.get_weather("北京") == OFFLINE.get_weather("Beijing")
