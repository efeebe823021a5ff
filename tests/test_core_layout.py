"""One idea per core file, each small enough to read: the code-line counter
(benchmarks/code_lines.py) and the bound, and the helpers the split left shared."""

from __future__ import annotations

import argparse
import functools
import importlib.util
from pathlib import Path

import pytest

from vibe_agent.course.chinese_argparse import positive_int_type

ROOT = Path(__file__).resolve().parents[1]
MAX_CODE_LINES = 350
# The core: every vibe_agent/*.py (what benchmarks/code_lines.py counts).
CORE = sorted(path.name for path in (ROOT / "vibe_agent").glob("*.py"))


@functools.cache
def counter():
    script = ROOT / "benchmarks" / "code_lines.py"
    spec = importlib.util.spec_from_file_location("code_lines", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def counts() -> dict[str, int]:
    return counter().core_counts()


def test_code_lines_leave_out_docstrings_comments_and_blank_lines():
    source = '''"""Module docstring,
over two lines."""
# a comment
import os  # a comment after code


def f(x):
    """f's docstring."""
    text = """not a docstring:
    # this line is in a string"""
    return (x +
            1)


class C:
    "a docstring in plain quotes"
    y = 1
'''
    assert counter().code_lines(source) == 8  # import, def, text x2, return x2, class, y


def test_the_core_is_every_file_directly_in_vibe_agent(counts):
    assert sorted(counts) == CORE and "terminal.py" in CORE and len(CORE) > 40


@pytest.mark.parametrize("name", CORE)
def test_each_core_file_is_at_most_350_code_lines(name, counts):
    count = counts[name]
    assert count <= MAX_CODE_LINES, f"vibe_agent/{name} has {count} code lines"


def test_the_package_map_names_every_core_file():
    doc = (ROOT / "vibe_agent" / "__init__.py").read_text(encoding="utf-8").split('"""')[1]
    missing = [path.name for path in sorted((ROOT / "vibe_agent").glob("*.py"))
               if not path.name.startswith("__") and f" {path.name} " not in doc]
    assert missing == []


@pytest.mark.parametrize("text", ["0", "-3", "x", "", "1.5", "ten"])
def test_positive_int_type_refuses_anything_but_a_whole_number_from_1(text):
    parse = positive_int_type("要写一个正整数，收到的是 {text!r}")
    with pytest.raises(argparse.ArgumentTypeError, match="正整数") as raised:
        parse(text)
    assert repr(text) in str(raised.value)


def test_positive_int_type_takes_a_whole_number_from_1():
    parse = positive_int_type("要写一个正整数，收到的是 {text!r}")
    assert parse("1") == 1 and parse(" 42 ") == 42
