"""The generator of the learners' notebooks, on a tiny solution notebook (tests/fixtures).

The fixture was really executed: its outputs, execution counts and timings are a kernel's.
It carries widget state on purpose, in the notebook's and in a cell's metadata.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from vibe_agent.course import make_notebooks
from vibe_agent.course.make_notebooks import (
    MarkerError,
    build,
    has_widget_state,
    learner_notebook,
    notebook_text,
    problems,
    stub_code,
)

FIXTURE = Path(__file__).parent / "fixtures" / "mini_solution.ipynb"


@pytest.fixture
def solution() -> nbformat.NotebookNode:
    return nbformat.read(FIXTURE, as_version=4)


@pytest.fixture
def learner(solution) -> nbformat.NotebookNode:
    return learner_notebook(solution)


def cell_with(nb: nbformat.NotebookNode, text: str) -> nbformat.NotebookNode:
    [cell] = [cell for cell in nb.cells if text in cell.source]
    return cell


def run_cell(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<cell>", "exec"), namespace)
    return namespace


# --- code cells: the marked region becomes a stub --------------------------------------


def test_stub_inside_a_function_is_valid_and_raises(learner):
    source = cell_with(learner, "def double").source
    assert "return n * 2" not in source
    double = run_cell(source)["double"]  # defining the function works...
    with pytest.raises(NotImplementedError):
        double(21)  # ...calling it tells the learner the exercise is not done


def test_lines_around_the_region_are_kept(learner):
    lines = cell_with(learner, "numbers = [1, 2, 3]").source.splitlines()
    assert lines[0] == "numbers = [1, 2, 3]"
    assert lines[-1] == "print(total)"
    assert "sum(" not in "\n".join(lines)
    with pytest.raises(NotImplementedError):
        run_cell("\n".join(lines))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("x = 1\n", "x = 1\n", id="no-markers-unchanged"),
        pytest.param(
            "### BEGIN SOLUTION\nx = 1\n### END SOLUTION",
            f"{make_notebooks.STUB.format(indent='')}",
            id="whole-cell",
        ),
        pytest.param(
            "def f():\n        ### BEGIN SOLUTION\n        return 1\n        ### END SOLUTION",
            f"def f():\n{make_notebooks.STUB.format(indent='        ')}",
            id="indent-of-begin-marker",
        ),
        pytest.param(
            "a = 1\n### BEGIN SOLUTION\nb = 2\n### END SOLUTION\nc = 3\n"
            "### BEGIN SOLUTION\nd = 4\n### END SOLUTION",
            f"a = 1\n{make_notebooks.STUB.format(indent='')}\nc = 3\n"
            f"{make_notebooks.STUB.format(indent='')}",
            id="two-regions",
        ),
    ],
)
def test_stub_code(source, expected):
    assert stub_code(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("### BEGIN SOLUTION\nx = 1", id="begin-without-end"),
        pytest.param("x = 1\n### END SOLUTION", id="end-without-begin"),
        pytest.param("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", id="nested"),
        pytest.param("x = 1  ### BEGIN SOLUTION\n### END SOLUTION", id="not-alone-on-line"),
    ],
)
def test_malformed_markers_fail_instead_of_leaking(source):
    nb = new_notebook(cells=[new_markdown_cell("intro"), new_code_cell(source)])
    with pytest.raises(MarkerError, match="cell 1"):
        learner_notebook(nb)


# --- markdown, solution-only cells, outputs, widgets ----------------------------------


def test_markdown_solution_region_is_removed(learner):
    cell = cell_with(learner, "想一想")
    assert cell.source == "想一想：为什么把调用放在另一个单元格里？"
    assert not any("参考答案" in cell.source for cell in learner.cells)


def test_markdown_cell_that_was_only_a_solution_is_dropped():
    only_solution = "<!-- BEGIN SOLUTION -->\n答案\n<!-- END SOLUTION -->"
    nb = new_notebook(cells=[new_markdown_cell(only_solution)])
    assert learner_notebook(nb).cells == []


def test_solution_only_cell_is_dropped(solution, learner):
    assert len(learner.cells) == len(solution.cells) - 1
    assert not any("solution-only" in cell.metadata.get("tags", []) for cell in learner.cells)
    assert not any("参考答案通过检查" in cell.source for cell in learner.cells)


def test_outputs_are_cleared_from_the_first_exercise_on(learner):
    code = [cell for cell in learner.cells if cell.cell_type == "code"]
    before, from_exercise = code[0], code[1:]
    assert before.execution_count == 1
    assert [output.output_type for output in before.outputs] == ["stream", "display_data"]
    assert [(cell.outputs, cell.execution_count) for cell in from_exercise] == [([], None)] * 4


def test_a_solution_only_code_cell_also_starts_the_clearing():
    shown = new_code_cell("print(1)", execution_count=1,
                          outputs=[nbformat.v4.new_output("stream", text="1\n")])
    nb = new_notebook(cells=[new_code_cell("x = 1", metadata={"tags": ["solution-only"]}), shown])
    [cell] = learner_notebook(nb).cells
    assert (cell.outputs, cell.execution_count) == ([], None)


def test_widget_state_and_timings_are_stripped(solution, learner):
    assert has_widget_state(solution)  # the source is not changed...
    assert not has_widget_state(learner)  # ...its learners' view has none
    assert not any("execution" in cell.metadata for cell in learner.cells)
    [display] = [out for out in learner.cells[1].outputs if out.output_type == "display_data"]
    assert display.data == {"text/plain": "TraceViewer(0 steps)"}


def test_no_solution_text_reaches_the_learners_file(learner):
    text = notebook_text(learner)
    for leak in ("BEGIN SOLUTION", "END SOLUTION", "return n * 2", "参考答案", "widget-state"):
        assert leak not in text


# --- build and --check ------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path) -> tuple[Path, Path]:
    solutions, notebooks = tmp_path / "solutions", tmp_path / "notebooks"
    solutions.mkdir()
    shutil.copy(FIXTURE, solutions / "01_mini.ipynb")
    return solutions, notebooks


def test_check_lists_what_build_fixes(repo):
    solutions, notebooks = repo
    assert problems(*repo) == [
        f"{solutions / '01_mini.ipynb'}: carries widget state (metadata.widgets)",
        f"{notebooks / '01_mini.ipynb'}: missing",
    ]
    assert build(*repo) == [solutions / "01_mini.ipynb", notebooks / "01_mini.ipynb"]
    assert problems(*repo) == []


def test_build_is_byte_stable(repo):
    build(*repo)
    written = (repo[1] / "01_mini.ipynb").read_bytes()
    assert build(*repo) == []
    assert (repo[1] / "01_mini.ipynb").read_bytes() == written
    assert written.startswith(b'{\n "cells": [\n') and written.endswith(b"}\n")


def test_check_finds_a_stale_and_an_orphan_notebook(repo):
    solutions, notebooks = repo
    build(*repo)
    stale = nbformat.read(notebooks / "01_mini.ipynb", as_version=4)
    stale.cells[0].source += "\n\n旧的说明"
    nbformat.write(stale, notebooks / "01_mini.ipynb")
    shutil.copy(notebooks / "01_mini.ipynb", notebooks / "02_orphan.ipynb")
    assert problems(*repo) == [
        f"{notebooks / '01_mini.ipynb'}: out of date",
        f"{notebooks / '02_orphan.ipynb'}: "
        f"has no solution notebook {solutions / '02_orphan.ipynb'}",
    ]


def test_check_ignores_json_formatting(repo):
    build(*repo)
    path = repo[1] / "01_mini.ipynb"
    path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")), indent=4),
                    encoding="utf-8")
    assert problems(*repo) == []


def test_check_command_exits_1_and_says_what_to_run(repo, monkeypatch, capsys):
    monkeypatch.setattr(make_notebooks, "SOLUTIONS_DIR", repo[0])
    monkeypatch.setattr(make_notebooks, "NOTEBOOKS_DIR", repo[1])
    assert make_notebooks.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "01_mini.ipynb: missing" in err
    assert "python -m vibe_agent.course.make_notebooks" in err
    assert make_notebooks.main([]) == 0
    assert make_notebooks.main(["--check"]) == 0
