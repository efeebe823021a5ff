"""Lesson 03's checkers: a correct solution passes, each typical mistake gets its own hint."""

from __future__ import annotations

import json
from typing import Any, Literal, get_args, get_origin

import pytest

from vibe_agent.course.checks.lesson_03 import check_python_type_to_schema, check_safe_invoke

# ---------------------------------------------------------------------------
# Exercise 3.1: python_type_to_schema
# ---------------------------------------------------------------------------

SIMPLE = {bool: "boolean", int: "integer", float: "number", str: "string"}


def types_correct(annotation: Any) -> dict:
    if annotation in SIMPLE:
        return {"type": SIMPLE[annotation]}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list:
        return {"type": "array", "items": types_correct(args[0])}
    if origin is Literal:
        return {"type": SIMPLE[type(args[0])], "enum": list(args)}
    raise TypeError(annotation)


def types_bool_as_integer(annotation: Any) -> dict:
    for python, name in ((str, "string"), (int, "integer"), (float, "number"), (bool, "boolean")):
        if isinstance(annotation, type) and issubclass(annotation, python):
            return {"type": name}
    return types_correct(annotation)


def types_python_names(annotation: Any) -> dict:
    if annotation in SIMPLE:
        return {"type": annotation.__name__}
    return types_correct(annotation)


def types_float_as_integer(annotation: Any) -> dict:
    return {"type": "integer"} if annotation is float else types_correct(annotation)


def types_list_without_items(annotation: Any) -> dict:
    return {"type": "array"} if get_origin(annotation) is list else types_correct(annotation)


def types_items_hardcoded(annotation: Any) -> dict:
    if get_origin(annotation) is list:
        return {"type": "array", "items": {"type": "string"}}
    return types_correct(annotation)


def types_literal_without_enum(annotation: Any) -> dict:
    return {"type": "string"} if get_origin(annotation) is Literal else types_correct(annotation)


def types_enum_tuple(annotation: Any) -> dict:
    if get_origin(annotation) is Literal:
        args = get_args(annotation)
        return {"type": SIMPLE[type(args[0])], "enum": args}
    return types_correct(annotation)


def types_literal_always_string(annotation: Any) -> dict:
    if get_origin(annotation) is Literal:
        return {"type": "string", "enum": list(get_args(annotation))}
    return types_correct(annotation)


def types_only_simple(annotation: Any) -> dict:
    return {"type": SIMPLE[annotation]}  # KeyError for list[str] and Literal[...]


def types_with_description(annotation: Any) -> dict:
    return types_correct(annotation) | {"description": ""}


def types_borrows_json_type(annotation: Any) -> dict:
    from vibe_agent.registry import json_type
    return json_type(annotation)


def types_unsolved(annotation: Any) -> dict:
    raise NotImplementedError("练习还没完成")


@pytest.mark.parametrize(
    ("solution", "expected"),
    [
        pytest.param(types_correct, ["全部 8 项通过"], id="correct"),
        pytest.param(types_bool_as_integer, ["❌ bool", "bool 是 int 的子类"],
                     id="bool-as-integer"),
        pytest.param(types_python_names, ["❌ str", "JSON Schema 有自己的类型名"],
                     id="python-names"),
        pytest.param(types_float_as_integer, ["❌ float", '小数叫 "number"'],
                     id="float-as-integer"),
        pytest.param(types_list_without_items, ["❌ list[str]", '放进 "items"'],
                     id="list-without-items"),
        pytest.param(types_items_hardcoded, ["✅ list[str]", "❌ list[int]", "不要写死"],
                     id="items-hardcoded"),
        pytest.param(types_literal_without_enum, ['❌ Literal["celsius"', '放进 "enum"'],
                     id="literal-without-enum"),
        pytest.param(types_enum_tuple, ["get_args 返回的是 tuple"], id="enum-tuple"),
        pytest.param(types_literal_always_string, ["❌ Literal[1, 2, 3]", "取值本身的类型"],
                     id="literal-type-from-values"),
        pytest.param(types_only_simple, ["你的代码抛出了 KeyError",
                                         "get_origin(annotation) is list",
                                         "get_origin(annotation) is Literal"], id="only-simple"),
        pytest.param(types_with_description, ["只返回类型相关的键"], id="extra-keys"),
        pytest.param(types_borrows_json_type, ["用了包里现成的 json_type", "亲手写出这张对照表"],
                     id="calls-the-package-json-type"),
        pytest.param(types_unsolved, ["还没完成"], id="unsolved"),
    ],
)
def test_check_python_type_to_schema(solution, expected, capsys):
    check_python_type_to_schema(solution)
    out = capsys.readouterr().out
    for text in expected:
        assert text in out
    if solution is not types_correct:
        assert "🎉" not in out


def test_unsolved_type_exercise_says_only_that(capsys):
    check_python_type_to_schema(types_unsolved)
    out = capsys.readouterr().out
    assert "还没完成" in out and "❌" not in out and "✅" not in out


# ---------------------------------------------------------------------------
# Exercise 3.2: safe_invoke
# ---------------------------------------------------------------------------


def invoke_correct(tools, name, arguments):
    fn = tools.get(name)
    if fn is None:
        return f"Error: unknown tool '{name}'. Available tools: {', '.join(tools)}."
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return f"Error: the arguments are not valid JSON ({exc.msg}). Send valid JSON."
    try:
        return str(fn(**args))
    except Exception as exc:  # noqa: BLE001
        return f"Error: {name} failed with {type(exc).__name__}: {exc}"


def invoke_naive(tools, name, arguments):
    return str(tools[name](**json.loads(arguments)))


def invoke_no_str(tools, name, arguments):
    if name not in tools:
        return invoke_correct(tools, name, arguments)
    try:
        return tools[name](**json.loads(arguments))
    except Exception as exc:  # noqa: BLE001
        return invoke_correct(tools, name, arguments) if exc else ""


def invoke_unknown_without_list(tools, name, arguments):
    if name not in tools:
        return f"Error: unknown tool '{name}'."
    return invoke_correct(tools, name, arguments)


def invoke_chinese_error(tools, name, arguments):
    return invoke_correct(tools, name, arguments).replace("Error:", "错误：")


def invoke_only_zero_division(tools, name, arguments):
    if name not in tools:
        return invoke_correct(tools, name, arguments)
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError:
        return "Error: invalid JSON, send valid JSON."
    try:
        return str(tools[name](**args))
    except ZeroDivisionError as exc:
        return f"Error: ZeroDivisionError: {exc}"


def invoke_no_type_name(tools, name, arguments):
    if name not in tools:
        return invoke_correct(tools, name, arguments)
    try:
        return str(tools[name](**json.loads(arguments)))
    except json.JSONDecodeError:
        return "Error: invalid JSON, send valid JSON."
    except Exception as exc:  # noqa: BLE001
        return f"Error: {exc}"


def invoke_no_message(tools, name, arguments):
    if name not in tools:
        return invoke_correct(tools, name, arguments)
    try:
        return str(tools[name](**json.loads(arguments)))
    except json.JSONDecodeError:
        return "Error: invalid JSON, send valid JSON."
    except Exception as exc:  # noqa: BLE001
        return f"Error: the tool failed with {type(exc).__name__}."


def invoke_json_not_named(tools, name, arguments):
    try:
        json.loads(arguments)
    except json.JSONDecodeError:
        return "Error: bad arguments, try again."
    return invoke_correct(tools, name, arguments)


def invoke_prefixed(tools, name, arguments):
    result = invoke_correct(tools, name, arguments)
    return result if result.startswith("Error") else f"Result: {result}"


def invoke_catch_all_appended(tools, name, arguments):
    """One except for everything, the same advice appended to every error."""
    try:
        return str(tools[name](**json.loads(arguments)))
    except Exception as exc:  # noqa: BLE001
        return (f"Error: {type(exc).__name__}: {exc}. Available tools: {', '.join(tools)}. "
                "Check the tool name and send valid JSON arguments.")


def invoke_catch_all_generic(tools, name, arguments):
    """One except for everything, one generic sentence."""
    try:
        return str(tools[name](**json.loads(arguments)))
    except Exception:  # noqa: BLE001
        return "Error: the tool call failed. Check the name and the JSON arguments."


def invoke_unsolved(tools, name, arguments):
    raise NotImplementedError("练习还没完成")


@pytest.mark.parametrize(
    ("solution", "expected"),
    [
        pytest.param(invoke_correct, ["全部 8 项通过"], id="correct"),
        pytest.param(invoke_naive, ["你的代码抛出了 KeyError", "tools.get(name)",
                                    "你的代码抛出了 JSONDecodeError", "json.JSONDecodeError",
                                    "你的代码抛出了 ZeroDivisionError", "except Exception as exc"],
                     id="naive-raises"),
        pytest.param(invoke_no_str, ["❌ 正常调用，工具返回数字", "要返回 str",
                                     "✅ 正常调用，工具返回文字"], id="returns-int"),
        pytest.param(invoke_unknown_without_list, ["❌ 工具名不存在", "add, divide, read_file",
                                                   "把全部可用工具的名字列出来"],
                     id="unknown-without-list"),
        pytest.param(invoke_chinese_error, ["以 Error 开头"], id="chinese-error"),
        pytest.param(invoke_only_zero_division, ["✅ 工具内部 ZeroDivisionError",
                                                 "你的代码抛出了 FileNotFoundError",
                                                 "你的代码抛出了 TypeError", "不要只接某一种"],
                     id="only-zero-division"),
        pytest.param(invoke_no_type_name, ["缺少 ZeroDivisionError", "type(exc).__name__"],
                     id="no-type-name"),
        pytest.param(invoke_no_message, ["缺少 division by zero", "str(exc)"], id="no-message"),
        pytest.param(invoke_json_not_named, ["❌ JSON 只写了一半", "写出 JSON 这个词"],
                     id="json-not-named"),
        pytest.param(invoke_prefixed, ["❌ 正常调用", "原样返回工具的输出"], id="prefixed-output"),
        pytest.param(invoke_catch_all_appended, ["❌ 工具名不存在", "无关的 JSON, KeyError",
                                                 "三种错误要分开处理、分开说"],
                     id="one-catch-all-with-everything-appended"),
        pytest.param(invoke_catch_all_generic, ["❌ 工具名不存在", "❌ 工具内部 ZeroDivisionError",
                                                "三种错误要分开处理、分开说"],
                     id="one-catch-all-with-a-generic-text"),
        pytest.param(invoke_unsolved, ["还没完成"], id="unsolved"),
    ],
)
def test_check_safe_invoke(solution, expected, capsys):
    check_safe_invoke(solution)
    out = capsys.readouterr().out
    for text in expected:
        assert text in out
    if solution is not invoke_correct:
        assert "🎉" not in out


def test_unsolved_dispatcher_says_only_that(capsys):
    check_safe_invoke(invoke_unsolved)
    out = capsys.readouterr().out
    assert "还没完成" in out and "❌" not in out and "✅" not in out
