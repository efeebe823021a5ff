"""The solutions' own answers pass their checkers (and the rule every checker applies first).

Each answer is read from `solutions/NN_*.ipynb`: the cell holding `### BEGIN SOLUTION`, with
the imports, functions, classes and constants the notebook defines before it; the cell
after it names the checker and the answer (`check_x(answer)`).
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest
from test_checks_dialect import FILE_CHECKERS, every_checker

from vibe_agent.course.checks import Report

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"
CHECK_CALL = re.compile(r"^(check_\w+)\((\w+(?:, \w+)*)\)", re.MULTILINE)
SLOW_LESSONS = {"09", "10"}  # their checkers run tests in the sandbox


def _definitions(source: str) -> list[ast.Module]:
    """The imports, functions, classes and literal constants of a cell (nothing that runs),
    one statement each."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    kept = []
    for node in ast.parse("\n".join(lines)).body:
        if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef):
            kept.append(node)
        elif isinstance(node, ast.Assign):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            kept.append(node)
    return [ast.Module(body=[node], type_ignores=[]) for node in kept]


def solution_answers():
    for notebook in sorted(SOLUTIONS.glob("[0-9][0-9]_*.ipynb")):
        cells = [("".join(c["source"]), c["cell_type"])
                 for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]]
        code = [source for source, kind in cells if kind == "code"]
        for i, source in enumerate(code[:-1]):
            if "### BEGIN SOLUTION" not in source:
                continue
            found = CHECK_CALL.search(code[i + 1])
            if found and f"lesson_{notebook.name[:2]}.{found.group(1)}" not in FILE_CHECKERS:
                lesson = notebook.name[:2]
                marks = [pytest.mark.slow] if lesson in SLOW_LESSONS else []
                yield pytest.param(lesson, code[: i + 1], *found.groups(), marks=marks,
                                   id=f"{notebook.stem}.{found.group(2)}")


def load_answer(cells: list[str], name: str):
    namespace: dict = {"__name__": "__main__"}
    for number, source in enumerate(cells, 1):
        for statement in _definitions(source):
            try:
                exec(compile(statement, "<notebook>", "exec"), namespace)  # noqa: S102
            except NameError:  # e.g. a tool decorated with a registry built by running code
                if number == len(cells):  # the exercise's own cell must define its answer
                    raise
    return namespace[name]


ANSWERS = list(solution_answers())


def test_every_checker_is_tried_on_its_solution():
    tried = {(f"lesson_{p.values[0]}", p.values[2]) for p in ANSWERS}
    every = {tuple(p.id.split(".")) for p in every_checker(files=False)}
    assert tried == every


@pytest.mark.parametrize(("lesson", "cells", "check", "name"), ANSWERS)
def test_a_solution_is_not_refused_as_borrowed(lesson, cells, check, name, capsys):
    for each in name.split(", "):
        assert not Report("练习").borrows(load_answer(cells, each))


@pytest.mark.parametrize(("lesson", "cells", "check", "name"), ANSWERS)
def test_a_solution_passes_its_checker(lesson, cells, check, name, capsys):
    module = importlib.import_module(f"vibe_agent.course.checks.lesson_{lesson}")
    verdict = getattr(module, check)(*(load_answer(cells, each) for each in name.split(", ")))
    out = capsys.readouterr().out
    assert verdict, out
