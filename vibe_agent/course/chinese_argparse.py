"""argparse in Chinese: the course's command lines speak one language to their reader.

argparse passes every message it prints (usage, section titles, the help option,
every error) through gettext: `argparse._(msgid)` and `argparse.ngettext(...)`. That
is the hook argparse offers for translation, so `ChineseArgumentParser` translates
those msgids from a small catalog, `ARGPARSE_ZH`. The catalog is installed only while
one of its parsers builds itself, parses or formats help, and removed afterwards: other
parsers in the same process (pytest's, a notebook's) keep their own language. A msgid
the catalog lacks (a future Python rewording one) falls back to argparse's English;
tests/test_cli.py runs every message a user can meet and fails on English words.

Python's own argparse does the parsing; only the words change. The help's layout is
`ChineseHelpFormatter`'s: argparse measures text with len(), so a Chinese metavar or
help line pushed the columns out of line (a CJK character takes two columns on a
terminal); it measures with `text.width` (rich's Unicode width table) instead, wraps
Chinese between any two characters but never inside an English word, an option or a
path, and ends a section title with the Chinese colon (Python 3.11's argparse writes
"选项:" with no gettext hook for the colon).
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

from .text import width

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


# A run of blanks, a run of printable ASCII (a word, an option, a path), or one other character
WRAP_TOKENS = re.compile(r"\s+|[!-~]+|.")
CLOSING = "，。、；：！？）」』》】"  # never the first character of a line
OPENING = "（「『《【"  # never the last


def wrap(text: str, columns: int) -> list[str]:
    """`text` as lines of at most `columns` terminal columns (an ASCII word longer than
    that stays whole): blanks become one space, Chinese breaks between any two
    characters, an English word never, and no line starts with closing punctuation or
    ends with opening punctuation (the character next to it moves along)."""
    lines, line = [], []
    for token in WRAP_TOKENS.findall(text.strip()):
        token = " " if token.isspace() else token
        if "".join(line).strip() and width("".join(line) + token) > columns:
            cut = len(line)
            while cut > 1 and (line[cut - 1] in OPENING
                               or (line[cut] if cut < len(line) else token) in CLOSING):
                cut -= 1
            if (line[cut] if cut < len(line) else token) in CLOSING:  # one long word: it hangs
                line.append(token)
                continue
            lines.append("".join(line[:cut]).rstrip())
            line = [*line[cut:], token]
            while line and line[0] == " ":
                line.pop(0)
        else:
            line.append(token)
    rest = "".join(line).rstrip()
    return [*lines, rest] if rest else lines


class ChineseHelpFormatter(argparse.HelpFormatter):
    """argparse's help layout, measured in terminal columns, with Chinese section titles."""

    def start_section(self, heading: str | None) -> None:
        super().start_section(None)  # argparse would write "heading:" itself
        section = self._current_section
        section.parent.items[-1] = (self._titled, [section, heading])

    def _titled(self, section: Any, heading: str | None) -> str:
        body = section.format_help()  # "\n" + the items + "\n", or "" when empty
        if not body or heading in (None, argparse.SUPPRESS):
            return str(body)
        return f"\n{' ' * self._current_indent}{heading}：{body}"

    def _format_usage(self, usage: str | None, actions: Any, groups: Any,
                      prefix: str | None) -> str:
        """argparse's usage; its continuation lines moved right by the columns that
        "用法：" takes beyond its len() (and wrapped that much narrower)."""
        shown = argparse._("usage: ") if prefix is None else prefix  # type: ignore[attr-defined]
        extra = width(shown) - len(shown)
        self._width -= extra
        try:
            text = super()._format_usage(usage, actions, groups, prefix)  # type: ignore[misc]
        finally:
            self._width += extra
        first, *rest = text.split("\n")
        return "\n".join([first, *(" " * extra + line if line.strip() else line
                                    for line in rest)])

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if action.help is not argparse.SUPPRESS:  # the invocations' widths, not len()
            names = [self._format_action_invocation(action)]
            names += [self._format_action_invocation(sub)
                      for sub in self._iter_indented_subactions(action)]
            self._action_max_length = max(self._action_max_length,
                                          max(map(width, names)) + self._current_indent)

    def _format_action(self, action: argparse.Action) -> str:
        """argparse's own layout (Python 3.11-3.13), with widths in columns."""
        help_position = min(self._action_max_length + 2, self._max_help_position)
        help_width = max(self._width - help_position, 11)
        header = self._format_action_invocation(action)
        indent = " " * self._current_indent
        padding = help_position - self._current_indent - 2 - width(header)
        help_text = self._expand_help(action) if action.help and action.help.strip() else ""
        lines = self._split_lines(help_text, help_width) if help_text else []
        if not lines:
            parts = [f"{indent}{header}\n"]
        elif padding >= 0:  # the help starts on the same line
            parts = [f"{indent}{header}{' ' * padding}  {lines[0]}\n"]
            lines = lines[1:]
        else:  # on the next line
            parts = [f"{indent}{header}\n"]
        parts += [f"{' ' * help_position}{line}\n" for line in lines]
        parts += [self._format_action(sub) for sub in self._iter_indented_subactions(action)]
        return self._join_parts(parts)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """A description or epilog: each paragraph (blank-line separated) wrapped."""
        paragraphs = [wrap(part, width - len(indent)) for part in re.split(r"\n\s*\n", text)]
        return "\n\n".join("\n".join(indent + line for line in lines) for lines in paragraphs)


class ChineseArgumentParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose usage, help and errors are in Chinese.

    A command-line mistake ends with one Chinese line, where to read the usage, and
    exit code 2, never a traceback. Sub-parsers (`add_subparsers().add_parser`) are
    ChineseArgumentParsers too.
    """

    @_in_chinese
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", ChineseHelpFormatter)
        super().__init__(*args, **kwargs)

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
