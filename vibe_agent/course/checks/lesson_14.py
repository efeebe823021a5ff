"""Checkers for lesson 14, MCP.

    check_mcp_to_openai_tools(fn)  fn(listing, server) -> list[dict]: an MCP tools/list
                                   answer as the `tools` the chat API takes
    check_result_to_text(fn)       fn(result, tool) -> str: a tools/call result as the
                                   text the model reads ("Error: ..." when isError)
    check_my_server(path)          path: the learner's server script; it is started as a
                                   real process and its tool is listed and called

The first two run the learner's function on MCP SDK objects built here (the SDK's own
types); the third starts the learner's file with `mcp_registry`, like any MCP server.
Each typical mistake gets its own hint: the inputSchema dropped or mangled (a parameter
named `title` deleted by a recursive strip, `required` left out), names not namespaced,
an error result passed on as a success (or a success that merely says "errors" taken
for one), blocks joined without newlines, `mime_type` read from a block that has none,
a Chinese count that takes kana or é for Chinese or stops at the old end U+9FA5, a
server that prints on stdout, the package's own version handed in.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp.types import Tool as MCPTool

from ...mcp_tools import (
    MCPServerError,
    describe_content,
    mcp_registry,
    mcp_to_openai_tools,
    mcp_tool_name,
    result_text,
    to_parameters,
)
from . import Report, Verdict, attempt, checker, fail, short

# ---------------------------------------------------------------------------
# Exercise 14.1: mcp_to_openai_tools
# ---------------------------------------------------------------------------

WEATHER = MCPTool(
    name="get_weather", description="Get today's weather for a city.",
    input_schema={"type": "object", "title": "get_weatherArguments",
                  "properties": {"city": {"type": "string", "title": "City",
                                          "description": "a city name, e.g. Beijing"},
                                 "unit": {"type": "string", "title": "Unit",
                                          "enum": ["celsius", "fahrenheit"],
                                          "default": "celsius"}},
                  "required": ["city"]})
NOW = MCPTool(name="now", description=None,
              input_schema={"type": "object", "properties": {}})
SEARCH_FS = MCPTool(name="search", description="Search the files.",
                    input_schema={"type": "object", "properties": {
                        "pattern": {"type": "string"}}, "required": ["pattern"]})
CREATE_ISSUE = MCPTool(  # GitHub's create_issue has a parameter called "title"
    name="create_issue", description="Create an issue in a repository.",
    input_schema={"type": "object", "title": "create_issueArguments", "properties": {
        "repo": {"type": "string", "title": "Repo", "description": "owner/name"},
        "title": {"type": "string", "title": "Title", "description": "the issue's title"},
        "body": {"type": "string", "title": "Body"}}, "required": ["repo", "title"]})
SEARCH_WEB = MCPTool(name="search", description="Search the web.",
                     input_schema={"type": "object", "properties": {
                         "query": {"type": "string"}, "limit": {"type": "integer"}},
                         "required": ["query"]})


def expected_tools(listing: list[MCPTool], server: str) -> list[dict[str, Any]]:
    """What exercise 14.1 asks for, written out (the checker's own model answer)."""
    return [{"type": "function", "function": {
        "name": f"mcp__{server}__{tool.name}",
        "description": tool.description or "",
        "parameters": {"type": "object",
                       "properties": {name: {k: v for k, v in prop.items() if k != "title"}
                                      for name, prop in tool.input_schema["properties"].items()},
                       "required": list(tool.input_schema.get("required", []))}}}
        for tool in listing]


# (case, listing, server, hint for a plain mismatch)
LISTING_CASES: list[tuple[str, list[MCPTool], str]] = [
    ("一个工具：名字、描述、参数", [WEATHER], "weather"),
    ("描述是 None、没有 required 的工具", [NOW], "clock"),
    ("两个服务器都有 search", [SEARCH_FS], "fs"),
    ("同一份列表里两个工具", [WEATHER, NOW], "demo"),
    ("有一个参数就叫 title（GitHub 的 create_issue）", [CREATE_ISSUE], "github"),
]
SEARCH_PAIR = ([SEARCH_FS], "fs"), ([SEARCH_WEB], "web")


def _function(entry: Any) -> dict[str, Any] | None:
    if isinstance(entry, dict) and isinstance(entry.get("function"), dict):
        return entry["function"]
    return None


def _listing_problem(got: Any, wanted: list[dict[str, Any]], listing: list[MCPTool],
                     server: str) -> tuple[str, str] | None:
    """The most specific (message, hint) for a wrong conversion, or None when right."""
    if not isinstance(got, list) or len(got) != len(wanted):
        return (f"期望 {len(wanted)} 个工具的 list，得到 {short(got)}",
                "列表里每个 MCP 工具对应一项，顺序不变。")
    for entry, want, tool in zip(got, wanted, listing, strict=True):
        function, wanted_fn = _function(entry), want["function"]
        if function is None or entry.get("type") != "function":
            return (f"这一项不是 {{'type': 'function', 'function': {{...}}}}：{short(entry)}",
                    "chat API 的 tools 里每一项都是 {\"type\": \"function\", \"function\": "
                    "{\"name\", \"description\", \"parameters\"}}。")
        name = function.get("name")
        if name == tool.name:
            return (f"工具名还是服务器自己的 {name!r}，没有加命名空间",
                    f"名字要写成 mcp__{{服务器名}}__{{工具名}}，例如 {wanted_fn['name']!r}："
                    "两个服务器都有 search、或者服务器自称 read_file 时，名字才不会撞车。")
        if name != wanted_fn["name"]:
            return (f"工具名是 {name!r}，期望 {wanted_fn['name']!r}",
                    "格式是 mcp__ + 服务器名 + __（两个下划线）+ 工具名，用传进来的 server。")
        if function.get("description") != wanted_fn["description"]:
            return (f"{name} 的描述是 {short(function.get('description'))}，"
                    f"期望 {short(wanted_fn['description'])}",
                    "description 用 tool.description；它可能是 None，这时写空字符串 \"\"。")
        parameters = function.get("parameters")
        problem = _parameters_problem(name, parameters, wanted_fn["parameters"], tool)
        if problem:
            return problem
    return None


def _parameters_problem(name: str, got: Any, wanted: dict[str, Any],
                        tool: MCPTool) -> tuple[str, str] | None:
    if got == wanted:
        return None
    if not isinstance(got, dict) or not got or got == {"type": "object"}:
        return (f"{name} 的 parameters 是 {short(got)}：inputSchema 丢了",
                "parameters 来自 tool.input_schema：模型只能从这里知道要传哪些参数。")
    if got.get("type") != "object" or not isinstance(got.get("properties"), dict):
        return (f"{name} 的 parameters 是 {short(got)}",
                "parameters 的最外层是 {\"type\": \"object\", \"properties\": {...}, "
                "\"required\": [...]}。")
    if "required" not in got:
        return (f"{name} 的 parameters 里没有 \"required\" 这个键",
                "总是写出 \"required\"：input_schema 里没有 required 时写 []"
                "（用 schema.get(\"required\", [])），有的服务商缺了它会拒收。")
    if got == tool.input_schema:
        return (f"{name} 的 parameters 原样照抄了 inputSchema（带着 title）",
                "去掉每个属性里的 \"title\"（它只是重复参数名）；其余保持原样。")
    if "title" in wanted["properties"] and "title" not in got["properties"]:
        return (f"{name} 的参数 title 不见了：它是一个真正的参数，不是说明",
                "只去掉每个属性自己的 \"title\" 键（{k: v for k, v in prop.items() if k != "
                "\"title\"}），不要递归地删掉所有叫 title 的键：properties 的键是参数名，"
                "GitHub 的 create_issue 就有一个参数叫 title。")
    if set(got["properties"]) != set(wanted["properties"]):
        return (f"{name} 的参数是 {sorted(got['properties'])}，期望 {sorted(wanted['properties'])}",
                "properties 的每个键都要保留：一个参数都不能少，也不要自己添。")
    for prop, schema in got["properties"].items():
        if isinstance(schema, dict) and "title" in schema:
            return (f"{name} 的参数 {prop} 还带着 title",
                    "去掉每个属性里的 \"title\"，其余字段（type、description、enum、default）"
                    "原样保留。")
        if schema != wanted["properties"][prop]:
            return (f"{name} 的参数 {prop} 是 {short(schema)}，期望 "
                    f"{short(wanted['properties'][prop])}",
                    "参数的说明要原样保留：type、description、enum、default 都不要改、不要丢。")
    if got.get("required") != wanted["required"]:
        return (f"{name} 的 required 是 {short(got.get('required'))}，期望 {wanted['required']}",
                "required 照 input_schema 里的写；没有 required 时写 []，不要省略这个键。")
    if got != wanted:
        return (f"{name} 的 parameters 是 {short(got)}，期望 {short(wanted)}",
                "只要 type、properties、required 三个键。")
    return None


@checker("练习 14.1：把 MCP 的工具列表换成 chat API 的 tools",
         mcp_to_openai_tools, to_parameters, mcp_tool_name, hint=(
             "这道题要你亲手写这一步：名字加上 mcp__{server}__ 前缀，描述照抄，"
             "parameters 由 tool.input_schema 得来。"))
def check_mcp_to_openai_tools(fn: Callable[[list[MCPTool], str], Any], report: Report) -> None:
    """Run the learner's conversion on the listings of the table."""
    for label, listing, server in LISTING_CASES:
        with report.case(label):
            before = [copy.deepcopy(tool.input_schema) for tool in listing]
            got = attempt(fn, listing, server).get(
                "tool 是 SDK 的对象：用 tool.name、tool.description、tool.input_schema 读它。")
            if problem := _listing_problem(got, expected_tools(listing, server), listing, server):
                fail(*problem)
            if [tool.input_schema for tool in listing] != before:
                fail("你的函数改动了服务器给的 input_schema",
                     "复制出新的 dict（例如 {k: v for k, v in ... if k != \"title\"}），"
                     "不要在原来的 dict 上 pop 或 del：同一份列表还会给别人用。")
    with report.case("两个服务器的 search 不撞名"):
        names = [(_function(entry) or {}).get("name") for listing, server in SEARCH_PAIR
                 for entry in (attempt(fn, listing, server).value or [])]
        if len(set(names)) != 2:
            fail(f"两个服务器的工具得到的名字是 {names}",
                 "名字里要有服务器名，两个 search 才分得开。")


# ---------------------------------------------------------------------------
# Exercise 14.2: result_to_text
# ---------------------------------------------------------------------------

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJ"
       "RU5ErkJggg==")  # a 1x1 PNG, base64

NOTES = TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="买牛奶")

# (case, result, what the text must contain, must it start with "Error:")
RESULT_CASES: list[tuple[str, CallToolResult, list[str], bool]] = [
    ("一段文字", CallToolResult(content=[TextContent(type="text", text="17 * 23 = 391")]),
     ["17 * 23 = 391"], False),
    ("两段文字", CallToolResult(content=[TextContent(type="text", text="第一段"),
                                      TextContent(type="text", text="第二段")]),
     ["第一段", "第二段", "第一段\n第二段"], False),
    ("成功的结果里有 error 这个词", CallToolResult(content=[
        TextContent(type="text", text="lint: 0 errors, 2 warnings")]),
     ["lint: 0 errors, 2 warnings"], False),
    ("isError 的结果", CallToolResult(content=[TextContent(type="text", text="disk full")],
                                    is_error=True), ["disk full"], True),
    ("文字加一张图片", CallToolResult(content=[
        TextContent(type="text", text="a caption"),
        ImageContent(type="image", data=PNG, mime_type="image/png")]),
     ["a caption", "image/png"], False),
    ("只有一张图片", CallToolResult(content=[
        ImageContent(type="image", data=PNG, mime_type="image/png")]), ["image/png"], False),
    ("文字加一个嵌入的资源（没有 mime_type 的块）", CallToolResult(content=[
        TextContent(type="text", text="见附件"), EmbeddedResource(type="resource",
                                                                  resource=NOTES)]),
     ["见附件", "resource"], False),
]


def _result_problem(got: Any, must: list[str], error: bool) -> tuple[str, str] | None:
    if not isinstance(got, str):
        return (f"返回了 {type(got).__name__} {short(got)}，不是 str",
                "要返回 str：它会放进 role=\"tool\" 消息的 content。")
    if error and not got.startswith("Error:"):
        return (f"isError 的结果被当成了成功：{short(got)}",
                "result.is_error 为 True 时，文字要以 \"Error:\" 开头：注册表和模型都靠它认出"
                "这次调用失败了，否则模型会把错误信息当成答案。")
    if not error and got.startswith("Error:"):
        if "error" in must[0].lower():
            return (f"成功的结果被当成了错误：{short(got)}",
                    "文字里有 error 这个词，不等于工具出错了（\"lint: 0 errors\" 是成功）："
                    "只看 result.is_error，不要在文字里找 error。")
        return (f"成功的结果被写成了错误：{short(got)}",
                "只有 result.is_error 为 True 时才加 \"Error:\"。")
    missing = [word for word in must if word not in got]
    if "image/png" in missing:
        return (f"图片被悄悄丢掉了：{short(got)}",
                "模型只读文字，图片不能原样给它，但要说明这里有一张什么图，例如 "
                "\"[image image/png, ... not shown]\"：读 block.type 和 block.mime_type。")
    if "resource" in missing:
        return (f"嵌入的资源被悄悄丢掉了：{short(got)}",
                "不是文字的块都要写一行说明，至少写出 block.type（这里是 \"resource\"）。")
    if missing == ["第一段\n第二段"]:
        return (f"两段文字连在了一起：{short(got)}",
                "文字块之间用换行连起来（\"\\n\".join(...)），不然模型读到的是一整句。")
    if missing:
        return (f"文字里少了 {missing}：{short(got)}",
                "把每个 type == \"text\" 的 block 的 block.text 都写进去，用换行连起来。")
    return None


@checker("练习 14.2：把 tools/call 的结果换成模型读的文字", result_text, describe_content, hint=(
        "这道题要你亲手写这一步：逐个读 result.content，文字照抄、别的说明一下，"
        "is_error 时加 \"Error:\"。"))
def check_result_to_text(fn: Callable[[CallToolResult, str], Any], report: Report) -> None:
    """Run the learner's result conversion on the results of the table."""
    for label, result, must, error in RESULT_CASES:
        with report.case(label):
            called = attempt(fn, result, "mcp__demo__tool")
            if isinstance(called.error, AttributeError) and "mime_type" in str(called.error):
                fail(called.raised(), "不是每种块都有 mime_type（EmbeddedResource 的类型写在 "
                     "block.resource 里）：先看 block.type，或者用 getattr(block, "
                     "\"mime_type\", \"\")。")
            got = called.get("result 是 SDK 的 CallToolResult：result.content 是 block 的列表，"
                             "result.is_error 说明是不是出错。")
            if problem := _result_problem(got, must, error):
                fail(*problem)


# ---------------------------------------------------------------------------
# Exercise 14.3: my own MCP server
# ---------------------------------------------------------------------------

TOOL = "count_chinese"
SAMPLES = ["智能体循环", "MCP 服务器：一个进程", "no Chinese here", "", "你好，world！再见",
           "かな、café 和漢字", "鿏和鿔是新造的字"]  # kana and é; U+9FCF and U+9FD4
UNSOLVED = "NotImplementedError"


def chinese_characters(text: str, block: str = "\u4e00-\u9fff") -> int:
    """The checker's own count: characters in the CJK Unified Ideographs block."""
    return len(re.findall(f"[{block}]", text))


def _count_hint(text: str, got: str) -> str:
    """The hint for a wrong count of `text`, naming the mistake the number shows."""
    if got == str(chinese_characters(text, "\u4e00-\u9fa5")):
        return ("\\u9fa5 是旧标准里这一区的结尾：U+9FA6 到 U+9FFF 也是汉字（例如元素名 鿏、鿔），"
                "范围要写到 \\u9fff。")
    if got == str(sum(1 for char in text if not char.isascii() and char.isalpha())):
        return ("不是 ASCII 的字母不一定是汉字：假名（かな）、é 都不是。只数 \\u4e00 到 \\u9fff "
                "之间的字符。")
    return "只数汉字（\\u4e00 到 \\u9fff），返回一个整数；标点、空格、字母都不算。"


def check_my_server(path: str | Path) -> Verdict:
    """Start the learner's server script as a real MCP server and call its tool."""
    report = Report(f"练习 14.3：把 {TOOL} 打包成 MCP 服务器")
    source = Path(path).read_text(encoding="utf-8") if Path(path).is_file() else ""
    if not source:
        with report.case("服务器文件"):
            fail(f"找不到文件 {path}", "先运行上面写文件的那一格（%%writefile）。")
        return report.verdict()
    try:
        # allow-all: the checker is the only one calling (no person to ask). Unbuffered:
        # a print() reaches stdout at once, not whenever Python flushes its buffer.
        with mcp_registry([sys.executable, str(path)], name="mine", timeout=10,
                          env={"PYTHONUNBUFFERED": "1"}, policy="allow-all") as tools:
            _check_listing(report, tools)
            _check_calls(report, tools)
            _check_stdout(report, tools)
    except MCPServerError as exc:
        if UNSOLVED in str(exc):
            report.unsolved = True
        else:
            with report.case("服务器能启动"):
                fail(f"服务器没有启动起来：{' '.join(str(exc).split())[:300]}",
                     _start_hint(source))
    return report.verdict()


def _start_hint(source: str) -> str:
    if "run(" not in source:
        return ("文件末尾要启动服务器：if __name__ == \"__main__\": server.run()。"
                "没有它，进程一启动就退出了。")
    return "看上面服务器的 stderr：先在终端里运行 python 你的文件.py，看它报什么错。"


def _check_listing(report: Report, tools: Any) -> None:
    listed = {tool.name: tool for tool in tools.listing}
    with report.case(f"列出了工具 {TOOL}"):
        if TOOL not in listed:
            fail(f"服务器列出的工具是 {sorted(listed)}",
                 f"用 server.add_tool(count_chinese) 或 @server.tool() 注册，工具名就是 {TOOL}。")
    tool = listed.get(TOOL)
    with report.case("有描述"):
        if tool is None or not (tool.description or "").strip():
            fail("工具没有描述",
                 "add_tool(..., description=\"...\")，或者给函数写 docstring：模型只能靠描述"
                 "知道这个工具是做什么的。")
    with report.case("参数 text 是必填的字符串"):
        schema = tool.input_schema if tool else {}
        prop = (schema.get("properties") or {}).get("text") or {}
        if prop.get("type") != "string" or "text" not in (schema.get("required") or []):
            fail(f"input_schema 是 {short(schema)}",
                 "函数签名写成 def count_chinese(text: str) -> int："
                 "SDK 由类型标注生成 inputSchema。")
    with report.case("标注为只读"):
        hints = tool.annotations if tool else None
        if not isinstance(hints, ToolAnnotations) or hints.read_only_hint is not True:
            fail(f"annotations 是 {short(hints)}",
                 "数字符不改动任何东西：annotations=ToolAnnotations(read_only_hint=True)。"
                 "标注是写给客户端和人看的说明（客户端可以不信它），如实写上。")


def _check_calls(report: Report, tools: Any) -> None:
    name = f"mcp__mine__{TOOL}"
    if name not in tools:
        return
    for text in SAMPLES:
        with report.case(f"数 {text!r}"):
            result = tools.call(name, {"text": text})
            wanted = str(chinese_characters(text))
            if not result.ok:
                fail(f"调用出错：{result.output[:200]}",
                     "在 notebook 里直接调用 count_chinese(...) 试试，先让函数本身对。")
            if result.output.strip() != wanted:
                fail(f"得到 {result.output!r}，期望 {wanted}",
                     _count_hint(text, result.output.strip()))


def _check_stdout(report: Report, tools: Any) -> None:
    with report.case("stdout 上只有 MCP 消息"):
        if tools.garbage:
            fail(f"服务器往 stdout 写了一行不是 MCP 消息的字：{tools.garbage[0]!r}",
                 "stdout 是协议管道：server.run() 之前不要 print（run() 之后 SDK 才把 stdout "
                 "改接到 stderr）。要打印就写到 stderr：print(..., file=sys.stderr)。"
                 "这次客户端碰巧跳过了这一行，换一个客户端可能就连不上。")
