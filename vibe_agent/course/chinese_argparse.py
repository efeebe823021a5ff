"""argparse in Chinese: the course's command lines speak one language to their reader.

argparse passes every message it prints (usage, section titles, the help option,
every error) through gettext: `argparse._(msgid)` and `argparse.ngettext(...)`. That
is the hook argparse offers for translation, so `ChineseArgumentParser` translates
those msgids from a small catalog, `ARGPARSE_ZH`. The catalog is installed only while
one of its parsers builds itself, parses or formats help, and removed afterwards: other
parsers in the same process (pytest's, a notebook's) keep their own language. A msgid
the catalog lacks (a future Python rewording one) falls back to argparse's English;
tests/test_cli.py runs every message a user can meet and fails on English words.

Python's own argparse does the parsing; only the words change.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

EXIT_USAGE = 2  # what argparse itself exits with on a command-line mistake

# argparse's msgids (Python 3.11–3.13) and their Chinese.
ARGPARSE_ZH = {
    "usage: ": "用法：",
    "positional arguments": "位置参数",
    "options": "选项",
    "subcommands": "子命令",
    "show this help message and exit": "显示这段帮助，然后退出",
    "argument %(argument_name)s: %(message)s": "参数 %(argument_name)s：%(message)s",
    "the following arguments are required: %s": "缺少必需的参数：%s",
    "unrecognized arguments: %s": "不认识的参数：%s",
    "invalid choice: %(value)r (choose from %(choices)s)":
        "没有 %(value)r 这个选项（可选：%(choices)s）",
    "invalid %(type)s value: %(value)r": "%(value)r 不是有效的值（应该是 %(type)s）",
    "expected one argument": "后面要跟一个值",
    "expected at most one argument": "后面最多跟一个值",
    "expected at least one argument": "后面至少要跟一个值",
    "expected %s argument": "后面要跟 %s 个值",
    "expected %s arguments": "后面要跟 %s 个值",
    "ambiguous option: %(option)s could match %(matches)s":
        "选项 %(option)s 不明确，可能是 %(matches)s",
    "not allowed with argument %s": "不能和参数 %s 一起用",
    "ignored explicit argument %r": "多余的值 %r",
    "one of the arguments %s is required": "参数 %s 里必须给出一个",
    "unexpected option string: %s": "意外的选项：%s",
    "unknown parser %(parser_name)r (choices: %(choices)s)":
        "没有子命令 %(parser_name)r（可选：%(choices)s）",
}

Method = TypeVar("Method", bound=Callable[..., Any])


@contextmanager
def argparse_in_chinese() -> Iterator[None]:
    """While inside, argparse's messages come from `ARGPARSE_ZH` (English if missing)."""
    english, english_plural = argparse._, argparse.ngettext  # type: ignore[attr-defined]

    def chinese(message: str) -> str:
        return ARGPARSE_ZH.get(message) or english(message)

    def chinese_plural(singular: str, plural: str, n: int) -> str:
        return ARGPARSE_ZH.get(singular if n == 1 else plural) or english_plural(
            singular, plural, n)

    argparse._ = chinese  # type: ignore[attr-defined]
    argparse.ngettext = chinese_plural  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._, argparse.ngettext = english, english_plural  # type: ignore[attr-defined]


def _in_chinese(method: Method) -> Method:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with argparse_in_chinese():
            return method(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


class ChineseArgumentParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose usage, help and errors are in Chinese.

    A command-line mistake ends with one Chinese line, where to read the usage, and
    exit code 2, never a traceback. Sub-parsers (`add_subparsers().add_parser`) are
    ChineseArgumentParsers too.
    """

    __init__ = _in_chinese(argparse.ArgumentParser.__init__)
    parse_args = _in_chinese(argparse.ArgumentParser.parse_args)
    parse_known_args = _in_chinese(argparse.ArgumentParser.parse_known_args)
    format_usage = _in_chinese(argparse.ArgumentParser.format_usage)
    format_help = _in_chinese(argparse.ArgumentParser.format_help)

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"命令行参数有误：{message}\n看用法：{self.prog} --help\n")


def positive_int_type(message: str) -> Callable[[str], int]:
    """An argparse `type=`: a whole number of at least 1, or `message` as the error.

    Args:
        message: what a wrong value is told, in Chinese; "{text!r}" in it stands for
            the value given.
    """

    def positive_int(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(message.format(text=text))
        return value

    return positive_int
