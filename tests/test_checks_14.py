"""Lesson 14's checkers: a correct solution passes, each typical mistake gets its own hint."""

from __future__ import annotations

import textwrap

import pytest

from vibe_agent.course.checks.lesson_14 import (
    check_mcp_to_openai_tools,
    check_my_server,
    check_result_to_text,
)
from vibe_agent.mcp_tools import mcp_to_openai_tools, result_text

# ---------------------------------------------------------------------------
# Exercise 14.1: mcp_to_openai_tools
# ---------------------------------------------------------------------------


def _params(tool) -> dict:
    schema = tool.input_schema
    return {"type": "object",
            "properties": {n: {k: v for k, v in p.items() if k != "title"}
                           for n, p in schema["properties"].items()},
            "required": list(schema.get("required", []))}


def _entry(name: str, tool, parameters: dict | None = None) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": tool.description or "",
        "parameters": _params(tool) if parameters is None else parameters}}


def convert_correct(listing, server):
    return [_entry(f"mcp__{server}__{tool.name}", tool) for tool in listing]


def convert_not_namespaced(listing, server):
    return [_entry(tool.name, tool) for tool in listing]


def convert_single_underscores(listing, server):
    return [_entry(f"mcp_{server}_{tool.name}", tool) for tool in listing]


def convert_server_hard_coded(listing, server):
    return [_entry(f"mcp__server__{tool.name}", tool) for tool in listing]


def convert_schema_dropped(listing, server):
    return [_entry(f"mcp__{server}__{tool.name}", tool, {}) for tool in listing]


def convert_schema_verbatim(listing, server):
    return [_entry(f"mcp__{server}__{tool.name}", tool, tool.input_schema) for tool in listing]


def convert_required_assumed(listing, server):
    return [_entry(f"mcp__{server}__{tool.name}", tool,
                   {**_params(tool), "required": tool.input_schema["required"]})
            for tool in listing]


def convert_description_none(listing, server):
    out = convert_correct(listing, server)
    for entry, tool in zip(out, listing, strict=True):
        entry["function"]["description"] = tool.description
    return out


def convert_drops_property_details(listing, server):
    out = convert_correct(listing, server)
    for entry in out:
        props = entry["function"]["parameters"]["properties"]
        for name in props:
            props[name] = {"type": props[name].get("type", "string")}
    return out


def convert_mutates(listing, server):
    for tool in listing:
        for prop in tool.input_schema["properties"].values():
            prop.pop("title", None)
    return convert_correct(listing, server)


def convert_no_wrapper(listing, server):
    return [entry["function"] for entry in convert_correct(listing, server)]


def _strip_titles(value):
    if isinstance(value, dict):
        return {k: _strip_titles(v) for k, v in value.items() if k != "title"}
    if isinstance(value, list):
        return [_strip_titles(v) for v in value]
    return value


def convert_recursive_title_strip(listing, server):
    """Every key called "title" removed, at every depth: the parameter `title` too."""
    return [_entry(f"mcp__{server}__{tool.name}", tool, {
        "type": "object", "properties": _strip_titles(tool.input_schema["properties"]),
        "required": list(tool.input_schema.get("required", []))}) for tool in listing]


def convert_required_only_when_present(listing, server):
    out = convert_correct(listing, server)
    for entry, tool in zip(out, listing, strict=True):
        if "required" not in tool.input_schema:
            del entry["function"]["parameters"]["required"]
    return out


def convert_with_package(listing, server):
    return mcp_to_openai_tools(listing, server)


def convert_unsolved(listing, server):
    raise NotImplementedError("练习还没完成")


CONVERT_ROWS = [
    (convert_correct, True, "全部"),
    (convert_not_namespaced, False, "没有加命名空间"),
    (convert_single_underscores, False, "两个下划线"),
    (convert_server_hard_coded, False, "用传进来的 server"),
    (convert_schema_dropped, False, "inputSchema 丢了"),
    (convert_schema_verbatim, False, "原样照抄了 inputSchema"),
    (convert_required_assumed, False, "KeyError"),
    (convert_description_none, False, "写空字符串"),
    (convert_drops_property_details, False, "原样保留"),
    (convert_mutates, False, "改动了服务器给的 input_schema"),
    (convert_no_wrapper, False, "\"type\": \"function\""),
    (convert_recursive_title_strip, False, "不要递归地删掉所有叫 title 的键"),
    (convert_required_only_when_present, False, "没有 \"required\" 这个键"),
    (convert_with_package, False, "包里现成的"),
    (convert_unsolved, False, "还没完成"),
]


@pytest.mark.parametrize(("fn", "passes", "words"), CONVERT_ROWS,
                         ids=[row[0].__name__.removeprefix("convert_") for row in CONVERT_ROWS])
def test_check_mcp_to_openai_tools(fn, passes, words, capsys):
    verdict = check_mcp_to_openai_tools(fn)
    out = capsys.readouterr().out
    assert bool(verdict) is passes
    assert words in out


# ---------------------------------------------------------------------------
# Exercise 14.2: result_to_text
# ---------------------------------------------------------------------------


def _block(block) -> str:
    if block.type == "text":
        return block.text
    return f"[{block.type} {getattr(block, 'mime_type', '')}: not shown]"


def text_correct(result, tool):
    text = "\n".join(_block(b) for b in result.content)
    return f"Error: {tool} failed: {text}" if result.is_error else text


def text_error_as_success(result, tool):
    return "\n".join(_block(b) for b in result.content)


def text_images_dropped(result, tool):
    text = "\n".join(b.text for b in result.content if b.type == "text")
    return f"Error: {text}" if result.is_error else text


def text_first_block_only(result, tool):
    text = _block(result.content[0])
    return f"Error: {text}" if result.is_error else text


def text_every_result_an_error(result, tool):
    return "Error: " + "\n".join(_block(b) for b in result.content)


def text_returns_list(result, tool):
    return [_block(b) for b in result.content]


def text_joined_without_newline(result, tool):
    text = "".join(_block(b) for b in result.content)
    return f"Error: {text}" if result.is_error else text


def text_mime_type_everywhere(result, tool):
    parts = [b.text if b.type == "text" else f"[{b.type} {b.mime_type}: not shown]"
             for b in result.content]
    text = "\n".join(parts)
    return f"Error: {text}" if result.is_error else text


def text_error_by_word(result, tool):
    text = "\n".join(_block(b) for b in result.content)
    return f"Error: {text}" if result.is_error or "error" in text.lower() else text


def text_with_package(result, tool):
    return result_text(result, tool)


TEXT_ROWS = [
    (text_correct, True, "全部"),
    (text_error_as_success, False, "isError 的结果被当成了成功"),
    (text_images_dropped, False, "图片被悄悄丢掉了"),
    (text_first_block_only, False, "少了"),
    (text_every_result_an_error, False, "成功的结果被写成了错误"),
    (text_returns_list, False, "不是 str"),
    (text_joined_without_newline, False, "用换行连起来"),
    (text_mime_type_everywhere, False, "不是每种块都有 mime_type"),
    (text_error_by_word, False, "只看 result.is_error"),
    (text_with_package, False, "包里现成的"),
]


@pytest.mark.parametrize(("fn", "passes", "words"), TEXT_ROWS,
                         ids=[row[0].__name__.removeprefix("text_") for row in TEXT_ROWS])
def test_check_result_to_text(fn, passes, words, capsys):
    verdict = check_result_to_text(fn)
    out = capsys.readouterr().out
    assert bool(verdict) is passes
    assert words in out


# ---------------------------------------------------------------------------
# Exercise 14.3: the learner's own server, started as a real process
# ---------------------------------------------------------------------------

HEADER = '''\
"""My own MCP server."""
import re

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
'''

COUNT = '''
def count_chinese(text: str) -> int:
    """Count the Chinese characters in a text."""
    return len(re.findall(r"[\\u4e00-\\u9fff]", text))
'''

SERVE = '''
server = MCPServer("my-tools")
server.add_tool(count_chinese, annotations=ToolAnnotations(read_only_hint=True))

if __name__ == "__main__":
    server.run()
'''

SERVERS = {
    "correct": HEADER + COUNT + SERVE,
    "no-run": HEADER + COUNT + SERVE.split("if __name__")[0],
    "no-description": HEADER + COUNT.replace(
        '    """Count the Chinese characters in a text."""\n', "") + SERVE,
    "not-read-only": HEADER + COUNT + SERVE.replace(
        ", annotations=ToolAnnotations(read_only_hint=True)", ""),
    "counts-everything": HEADER + COUNT.replace(
        'len(re.findall(r"[\\u4e00-\\u9fff]", text))', "len(text)") + SERVE,
    "returns-a-list": HEADER + COUNT.replace(
        'len(re.findall(r"[\\u4e00-\\u9fff]", text))',
        're.findall(r"[\\u4e00-\\u9fff]", text)').replace("-> int", "-> list") + SERVE,
    "wrong-name": HEADER + COUNT + SERVE.replace(
        "add_tool(count_chinese,", "add_tool(count_chinese, name=\"count\","),
    "counts-non-ascii-letters": HEADER + COUNT.replace(
        'len(re.findall(r"[\\u4e00-\\u9fff]", text))',
        "sum(1 for char in text if char.isalpha() and not char.isascii())") + SERVE,
    "old-range": HEADER + COUNT.replace("\\u9fff", "\\u9fa5") + SERVE,
    "prints-before-run": HEADER + COUNT + SERVE.replace(
        "    server.run()", "    print(\"my-tools: starting\")\n    server.run()"),
    "unsolved": HEADER + textwrap.dedent('''
        # 练习：把你的代码写在这里，写好后删掉下面这一行。
        raise NotImplementedError("练习还没完成：补全这里的代码后，再运行一次。")
        '''),
}

SERVER_ROWS = [
    ("correct", True, "全部"),
    ("no-run", False, "server.run()"),
    ("no-description", False, "工具没有描述"),
    ("not-read-only", False, "read_only_hint=True"),
    ("counts-everything", False, "只数汉字"),
    ("returns-a-list", False, "只数汉字"),
    ("wrong-name", False, "工具名就是 count_chinese"),
    ("counts-non-ascii-letters", False, "假名（かな）、é 都不是"),
    ("old-range", False, "\\u9fa5 是旧标准"),
    ("prints-before-run", False, "run() 之前不要 print"),
    ("unsolved", False, "还没完成"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("server", "passes", "words"), SERVER_ROWS,
                         ids=[row[0] for row in SERVER_ROWS])
def test_check_my_server(server, passes, words, tmp_path, capsys):
    path = tmp_path / "my_server.py"
    path.write_text(SERVERS[server], encoding="utf-8")
    verdict = check_my_server(path)
    out = capsys.readouterr().out
    assert bool(verdict) is passes, out
    assert words in out


def test_check_my_server_without_the_file(tmp_path, capsys):
    assert not check_my_server(tmp_path / "missing.py")
    assert "%%writefile" in capsys.readouterr().out
