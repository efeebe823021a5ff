"""Checkers for lesson 03 (tools and the registry).

- `check_python_type_to_schema`: the learner's type translation, compared with the
  package's `vibe_agent.registry.json_type` on a table of annotations.
- `check_safe_invoke`: the learner's minimal safe dispatcher, run on a table of the
  model's typical mistakes; it must never raise, and must say what went wrong — each
  kind of mistake in its own words (one catch-all text for everything is refused).

The hint names the mistake the learner's function actually made (a bool read as
integer, an unknown tool that raises KeyError, one text for every error, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, get_origin

from vibe_agent.registry import json_type

from . import Report, attempt, checker, fail

# ---------------------------------------------------------------------------
# Exercise 3.1: python_type_to_schema
# ---------------------------------------------------------------------------

TYPE_CASES: list[tuple[str, Any]] = [
    ("str", str),
    ("int", int),
    ("float", float),
    ("bool", bool),
    ("list[str]", list[str]),
    ("list[int]", list[int]),
    ('Literal["celsius", "fahrenheit"]', Literal["celsius", "fahrenheit"]),
    ("Literal[1, 2, 3]", Literal[1, 2, 3]),
]

PYTHON_NAMES = {"str", "int", "float", "bool", "list", "tuple", "dict"}


def _type_hint(annotation: Any, got: Any, wanted: dict[str, Any],
               error: BaseException | None) -> str:
    """The most specific hint for what came back (or what was raised)."""
    origin = get_origin(annotation)
    if error is not None:
        if origin is list:
            return ("list[str] 不等于 list：用 get_origin(annotation) is list 认出它，"
                    "再用 get_args(annotation)[0] 取出元素类型。")
        if origin is Literal:
            return ("Literal[...] 要用 get_origin(annotation) is Literal 认出来，"
                    "取值用 get_args(annotation) 拿到。")
        return "先处理最简单的四种：str、int、float、bool，各对应一个 JSON Schema 类型名。"
    if not isinstance(got, dict):
        return '要返回一个 dict，例如 {"type": "string"}。'
    kind = got.get("type")
    if annotation is bool and kind == "integer":
        return ("bool 是 int 的子类（isinstance(True, int) 为 True）：先判断 bool，"
                "或者用 annotation is bool / 查字典，不要用 issubclass。")
    if kind in PYTHON_NAMES:
        return ("JSON Schema 有自己的类型名：string、integer、number、boolean、array，"
                "不是 Python 的 str、int、float、bool、list。")
    if annotation is float:
        return 'JSON Schema 里小数叫 "number"（"integer" 只表示整数）。'
    if origin is list:
        if "items" not in got:
            return ('list[X] 还要说明元素类型：get_args(annotation)[0] 取出 X，'
                    '递归调用你自己的函数，结果放进 "items"。')
        return '"items" 要由元素类型递归翻译出来，不要写死成 string。'
    if origin is Literal:
        if "enum" not in got:
            return ('Literal 的取值要放进 "enum"：get_origin(annotation) is Literal 时，'
                    "用 get_args(annotation) 取出取值。")
        if isinstance(got["enum"], tuple):
            return ('get_args 返回的是 tuple，JSON 里只有数组：'
                    '用 list(...) 转成 list 再放进 "enum"。')
        if kind != wanted["type"]:
            return ('"type" 要看取值本身的类型：Literal[1, 2, 3] 的取值是 int，'
                    '所以是 "integer"（可以对 type(取值) 递归调用你的函数）。')
    if set(got) - set(wanted):
        return "只返回类型相关的键（type、items、enum）；description 之类由别处添加。"
    return ""


@checker("练习 3.1：把 Python 类型翻译成 JSON Schema", json_type, hint=(
        "这道题要你亲手写出这张对照表：用 get_origin / get_args 认出 list[...] 和 "
        "Literal[...]，其余查一个小字典。"))
def check_python_type_to_schema(fn: Callable[[Any], dict[str, Any]], report: Report) -> None:
    """Compare the learner's translation with `json_type` on each annotation of the table."""
    for label, annotation in TYPE_CASES:
        with report.case(label):
            wanted = json_type(annotation)
            outcome = attempt(fn, annotation)
            hint = _type_hint(annotation, outcome.value, wanted, outcome.error)
            got = outcome.get(hint)
            if got != wanted:
                fail(f"期望 {_show(wanted)}，得到 {got!r}", hint)


# ---------------------------------------------------------------------------
# Exercise 3.2: safe_invoke
# ---------------------------------------------------------------------------


def add(a: int, b: int) -> int:
    """Add two integers (returns a number, not text)."""
    return a + b


def divide(a: float, b: float) -> str:
    """Divide a by b (raises ZeroDivisionError for b = 0)."""
    return str(a / b)


def read_file(path: str) -> str:
    """A tool that fails the way file tools do."""
    raise FileNotFoundError(f"No such file or directory: '{path}'")


CHECK_TOOLS: dict[str, Callable[..., Any]] = {"add": add, "divide": divide, "read_file": read_file}


def _tools() -> dict[str, Callable[..., Any]]:
    return dict(CHECK_TOOLS)  # a fresh copy: the learner's code cannot spoil the next case


# (label, what kind of case, tool name, arguments, expected output or required words)
SAFE_CASES: list[tuple[str, str, str, str, Any]] = [
    ("正常调用，工具返回数字", "ok", "add", '{"a": 2, "b": 3}', "5"),
    ("正常调用，工具返回文字", "ok", "divide", '{"a": 1, "b": 4}', "0.25"),
    ("工具名不存在", "unknown", "search_web", '{"query": "weather"}', list(CHECK_TOOLS)),
    ("JSON 只写了一半", "json", "add", '{"a": 2, "b": ', ["JSON"]),
    ("单引号的 Python 字典（不是 JSON）", "json", "add", "{'a': 2, 'b': 3}", ["JSON"]),
    ("工具内部 ZeroDivisionError", "raised", "divide", '{"a": 1, "b": 0}',
     ["ZeroDivisionError", "division by zero"]),
    ("工具内部 FileNotFoundError", "raised", "read_file", '{"path": "notes.txt"}',
     ["FileNotFoundError", "notes.txt"]),
    ("参数名写错（x、y 而不是 a、b）", "raised", "add", '{"x": 2, "y": 3}', ["TypeError"]),
]

RAISED_HINTS = {
    "ok": "正常调用也抛了异常：检查 json.loads(arguments) 和 fn(**args) 的写法。",
    "unknown": ("tools[name] 找不到时会抛 KeyError：先用 tools.get(name) 或 name not in tools "
                "判断，返回一段列出可用工具的 Error 文字。"),
    "json": ("json.loads 遇到坏 JSON 会抛 json.JSONDecodeError：用 try/except 接住它，"
             "返回请模型发送合法 JSON 的 Error 文字。"),
    "raised": ("工具自己抛的异常也要接住：把 fn(**args) 放进 try，用 except Exception as exc "
               "接住所有异常，不要只接某一种。"),
}
CATCH_ALL_HINT = ("三种错误要分开处理、分开说：先用 name not in tools 判断工具在不在，再单独 "
                  "try json.loads(arguments)，最后 try 调用工具。一个 except 兜住所有、"
                  "再拼一段通用的文字，模型读到的多半和它犯的错无关"
                  "（工具名拼错了，却被要求“发送合法的 JSON”）。")
TOOL_LIST = ", ".join(CHECK_TOOLS)
# Words that do not belong in the text for a kind of error: they come from a catch-all
# `except` that says the same thing about every mistake.
OFF_TOPIC = {
    "unknown": ("JSON", "KeyError"),
    "json": ("KeyError", TOOL_LIST),
    "raised": ("JSON", TOOL_LIST),
}


def _safe_hint(kind: str, got: Any, expected: Any) -> str:
    """The most specific hint for one safe_invoke case that returned a wrong value."""
    if not isinstance(got, str):
        return ("要返回 str：工具结果会放进 role=tool 消息的 content，"
                "必须是文字（用 str(...) 转换）。")
    if kind == "ok":
        if got.startswith("Error"):
            return "正常调用不该返回 Error：检查 json.loads(arguments) 和 fn(**args) 的写法。"
        return "正常调用要原样返回工具的输出（只用 str() 转成文字），不要加前缀或改写。"
    if not got.startswith("Error"):
        return ("出错时返回的文字要以 Error 开头（英文，写给模型看的）："
                "模型和程序都靠它认出这次调用失败了。")
    missing = [word for word in expected if word not in got]
    if kind == "unknown":
        return (f"把全部可用工具的名字列出来（少了 {', '.join(missing)}），例如 "
                "', '.join(tools)：模型才知道该改叫哪一个。")
    if kind == "json":
        return "告诉模型问题出在 JSON 上（写出 JSON 这个词），并请它发送合法的 JSON 再试一次。"
    if any(word.endswith("Error") for word in missing):
        return "写出异常的类型名：type(exc).__name__，例如 ZeroDivisionError、TypeError。"
    return "把异常的消息也写进去：str(exc)，模型要靠它知道哪里错了。"


def _says_the_same_everywhere(fn: Callable[..., Any]) -> bool:
    """True when an unknown tool and broken JSON get the very same text (one catch-all)."""
    unknown = attempt(fn, _tools(), "search_web", '{"query": "weather"}').value
    broken = attempt(fn, _tools(), "add", '{"a": 2, "b": ').value
    return isinstance(unknown, str) and unknown == broken


def _safe_verdict(kind: str, got: Any, expected: Any, hint: str) -> None:
    if not isinstance(got, str):
        fail(f"返回了 {type(got).__name__} {got!r}，不是 str", hint)
    if kind == "ok":
        if got != expected:
            fail(f"期望 {expected!r}，得到 {got!r}", hint)
        return
    if not got.startswith("Error"):
        fail(f"返回的文字没有以 Error 开头：{got!r}", hint)
    missing = [word for word in expected if word not in got]
    if missing:
        fail(f"返回的文字里缺少 {', '.join(missing)}：{got!r}", hint)
    off_topic = [word for word in OFF_TOPIC[kind] if word in got]
    if off_topic:
        fail(f"这种错误的说明里出现了无关的 {', '.join(off_topic)}：{got!r}", CATCH_ALL_HINT)


@checker(f"练习 3.2：永不抛异常的分发器 safe_invoke（检查用的工具：{TOOL_LIST}）")
def check_safe_invoke(fn: Callable[[dict[str, Callable[..., Any]], str, str], str],
                      report: Report) -> None:
    """Run the learner's dispatcher on the model's typical mistakes; it must never raise."""
    for label, kind, name, arguments, expected in SAFE_CASES:
        with report.case(f"{label}：safe_invoke(tools, {name!r}, {arguments!r})"):
            got = attempt(fn, _tools(), name, arguments).get(RAISED_HINTS[kind])
            hint = _safe_hint(kind, got, expected)
            if kind != "ok" and _says_the_same_everywhere(fn):
                hint = CATCH_ALL_HINT
            _safe_verdict(kind, got, expected, hint)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
