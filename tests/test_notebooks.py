"""The learners' notebooks: in sync with the solution notebooks, and runnable.

The solution notebooks are run by nbval, outputs compared (pyproject.toml's addopts).
A learners' notebook has its exercises unsolved, so it is only run, with nbclient: the
sole error allowed is the `NotImplementedError` of an unsolved exercise, and anything
in a cell tagged `raises-exception` (a cell that demonstrates a failure).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell
from nbval.plugin import get_sanitize_patterns

from vibe_agent.course import make_notebooks

ROOT = Path(__file__).resolve().parent.parent
LEARNER_NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT = 120  # seconds, per cell


def run_notebook(path: Path) -> nbformat.NotebookNode:
    """Execute every cell in a fresh kernel started in the notebook's folder, errors kept."""
    return make_notebooks.execute_notebook(path, allow_errors=True)


def unexpected_errors(nb: nbformat.NotebookNode) -> list[str]:
    """Each error but an unsolved exercise's, as `cell N (first line): Name: message`."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "raises-exception" in cell.metadata.get("tags", []):
            continue
        for output in cell.outputs:
            if output.output_type == "error" and output.ename != "NotImplementedError":
                first_line = cell.source.strip().splitlines()[0]
                found.append(f"cell {index} ({first_line}): {output.ename}: {output.evalue}")
    return found


def test_learner_notebooks_are_up_to_date():
    found = make_notebooks.problems(make_notebooks.SOLUTIONS_DIR, make_notebooks.NOTEBOOKS_DIR)
    assert not found, "\n".join(["Notebooks out of sync:", *found, make_notebooks.FIX_HINT])


@pytest.mark.parametrize("path", LEARNER_NOTEBOOKS, ids=[path.name for path in LEARNER_NOTEBOOKS])
def test_learner_notebook_runs(path):
    errors = unexpected_errors(run_notebook(path))
    assert not errors, "\n".join([f"{path.name}: errors but an unsolved exercise's:", *errors])


def test_runner_allows_only_unsolved_exercises(tmp_path):
    """The runner itself, on the fixture's learners' view plus one broken cell."""
    nb = make_notebooks.learner_notebook(
        nbformat.read(ROOT / "tests" / "fixtures" / "mini_solution.ipynb", as_version=4)
    )
    nb.cells.append(new_code_cell("print(undefined_name)"))
    make_notebooks.write_notebook(nb, tmp_path / "broken.ipynb")
    ran = run_notebook(tmp_path / "broken.ipynb")
    raised = [out.ename for cell in ran.cells for out in cell.get("outputs", [])
              if out.output_type == "error"]
    assert raised == ["NotImplementedError", "ZeroDivisionError", "NotImplementedError",
                      "NameError"]
    assert unexpected_errors(ran) == [
        f"cell {len(nb.cells) - 1} (print(undefined_name)): "
        "NameError: name 'undefined_name' is not defined"
    ]


def test_kernels_replay_and_start_in_the_notebook_folder(tmp_path):
    """Kernels inherit pytest's environment: conftest.py's replay mode reaches them."""
    nb = nbformat.v4.new_notebook(
        cells=[new_code_cell("import os\nprint(os.environ['VIBE_AGENT_MODE'], os.getcwd())")]
    )
    nbformat.write(nb, tmp_path / "env.ipynb")
    [output] = run_notebook(tmp_path / "env.ipynb").cells[0].outputs
    assert output.text == f"replay {tmp_path}\n"


SANITIZE = get_sanitize_patterns((ROOT / "tests" / "sanitize.cfg").read_text(encoding="utf-8"))


def sanitize(text: str) -> str:
    """What nbval does to each output string before comparing."""
    for regex, replace in SANITIZE:
        text = re.sub(regex, replace, text)
    return text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("at 2026-11-30 13:23:48", "at DATETIME", id="datetime"),
        pytest.param("2026-11-30T13:23:48.050278Z", "DATETIMEZ", id="iso-utc"),
        pytest.param("2026-11-30T21:23:48+08:00", "DATETIME+08:00", id="offset-kept"),
        pytest.param("北京时间 (UTC+08:00)", "北京时间 (UTC+08:00)", id="utc-label-kept"),
        pytest.param("round 1: 12 ms, round 2: 3.5ms", "round 1: N ms, round 2: N ms",
                     id="milliseconds"),
        pytest.param("3 failed, 7 passed in 0.10s", "3 failed, 7 passed in N.NNs",
                     id="pytest-duration"),
        pytest.param("<function f at 0x7f3a2b1c0d40>", "<function f at 0xADDR>", id="address"),
        pytest.param(
            "/home/me/.venv/lib/python3.11/site-packages/openai/_client.py:120: UserWarning",
            "SITE-PACKAGES/openai/_client.py:N: UserWarning",
            id="site-packages",
        ),
        pytest.param("/tmp/ipykernel_4242/123456789.py:3: DeprecationWarning",
                     "KERNEL-CELL.py:N: DeprecationWarning", id="kernel-cell"),
        pytest.param("没有找到 /work/main/notebooks/cassettes/demo.json",
                     "没有找到 CASSETTES/demo.json", id="cassette-folder"),
        pytest.param("17 × 23 = 391", "17 × 23 = 391", id="numbers-untouched"),
    ],
)
def test_sanitizer(text, expected):
    assert sanitize(text) == expected


def test_sanitizer_file_is_read_whole():
    """A pair nbval's parser skips (a blank line between regex and replace) is lost."""
    text = (ROOT / "tests" / "sanitize.cfg").read_text(encoding="utf-8")
    assert len(SANITIZE) == text.count("\nregex: ")
