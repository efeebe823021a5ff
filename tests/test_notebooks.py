"""The learners' notebooks: in sync with the solution notebooks, and runnable.

The solution notebooks are run by nbval, outputs compared (pyproject.toml's addopts).
A learners' notebook has its exercises unsolved, so it is only run, with nbclient, as
JupyterLab's "Run All" runs it: top to bottom, stopping at the first error. It must
reach the end. The only errors allowed are in cells tagged `raises-exception` (a cell
that demonstrates a failure); a demo cell that needs an exercise's answer uses the
package's version while the exercise is unfinished (`vibe_agent.course.fallback`).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell
from nbval.plugin import get_sanitize_patterns

from vibe_agent.course import make_notebooks

ROOT = Path(__file__).resolve().parent.parent
LEARNER_NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

# Learners' notebooks whose demo cells still call an unsolved exercise directly (Run All
# stops there). Strict: once a notebook runs through, its row fails until removed here.
STOPS_AT_AN_EXERCISE: dict[str, str] = {}


def run_all(path: Path) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel started in the notebook's folder, as Run All does:
    the first error outside a `raises-exception` cell raises CellExecutionError."""
    return make_notebooks.execute_notebook(path)


def error_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """Each error output outside a `raises-exception` cell, as `cell N (first line): …`."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "raises-exception" in cell.metadata.get("tags", []):
            continue
        for output in cell.outputs:
            if output.output_type == "error":
                first_line = cell.source.strip().splitlines()[0]
                found.append(f"cell {index} ({first_line}): {output.ename}: {output.evalue}")
    return found


def test_learner_notebooks_are_up_to_date():
    found = make_notebooks.problems(make_notebooks.SOLUTIONS_DIR, make_notebooks.NOTEBOOKS_DIR)
    assert not found, "\n".join(["Notebooks out of sync:", *found, make_notebooks.FIX_HINT])


def _learner_rows() -> list:
    rows = []
    for path in LEARNER_NOTEBOOKS:
        stops = STOPS_AT_AN_EXERCISE.get(path.name)
        marks = [pytest.mark.xfail(raises=CellExecutionError, strict=True,
                                   reason=f"Run All stops at an unsolved exercise: {stops}")
                 ] if stops else []
        rows.append(pytest.param(path, marks=marks, id=path.name))
    return rows


@pytest.mark.parametrize("path", _learner_rows())
def test_learner_notebook_runs_top_to_bottom(path):
    nb = run_all(path)
    assert not error_outputs(nb)


FIXTURE_CELLS = {
    "stub": 'def double(n):\n    raise NotImplementedError("练习还没完成")',
    "demo cell falls back": (
        "from vibe_agent.course.fallback import learner_or_package\n"
        "def twice(n):\n    return n * 2\n"
        'print(learner_or_package(double, twice, "练习 1")(21))'),
    "demonstrated failure": "1 / 0",
    "unsolved exercise called": "print(double(21))",
    "any other error": "print(undefined_name)",
}


@pytest.mark.parametrize(
    ("cells", "stops_at"),
    [
        pytest.param(["stub", "demo cell falls back", "demonstrated failure"], None,
                     id="falls-back-and-tagged-failure-run-through"),
        pytest.param(["stub", "unsolved exercise called", "demo cell falls back"],
                     "NotImplementedError", id="unsolved-exercise-stops-run-all"),
        pytest.param(["stub", "any other error"], "NameError", id="any-other-error-stops"),
    ],
)
def test_run_all_stops_at_the_first_error(tmp_path, cells, stops_at):
    """The runner itself: it stops where JupyterLab's Run All would."""
    nb = nbformat.v4.new_notebook(cells=[new_code_cell(FIXTURE_CELLS[name]) for name in cells])
    for cell, name in zip(nb.cells, cells, strict=True):
        if name == "demonstrated failure":
            cell.metadata["tags"] = ["raises-exception"]
    nbformat.write(nb, tmp_path / "mini.ipynb")
    if stops_at is None:
        ran = run_all(tmp_path / "mini.ipynb")
        assert error_outputs(ran) == []
        assert ran.cells[1].outputs[0].text == ("（练习 1 还没完成：这一格先用包里的 twice；"
                                                "完成练习后再运行这一格，就会用你的。）\n42\n")
    else:
        with pytest.raises(CellExecutionError, match=stops_at):
            run_all(tmp_path / "mini.ipynb")


def test_kernels_replay_and_start_in_the_notebook_folder(tmp_path):
    """Kernels inherit pytest's environment: conftest.py's replay mode reaches them."""
    nb = nbformat.v4.new_notebook(
        cells=[new_code_cell("import os\nprint(os.environ['VIBE_AGENT_MODE'], os.getcwd())")]
    )
    nbformat.write(nb, tmp_path / "env.ipynb")
    [output] = run_all(tmp_path / "env.ipynb").cells[0].outputs
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


# --- stored outputs name nothing of the machine that ran them ----------------------------

TRACKED_NOTEBOOKS = sorted([*(ROOT / "notebooks").glob("*.ipynb"),
                            *(ROOT / "solutions").glob("*.ipynb")])
START = r"(?<![\w.:/~-])~?"  # a path starts here: not inside a word, a URL or another path
FOLDERS = r"(?:/[\w.@+-]+)+"
TEMP = tempfile.gettempdir()
# What marks a path as the executing machine's (legitimate course text such as /workspace,
# ~/.ssh, /etc/passwd or the sandbox's /tmp/.ssh matches none of these):
MACHINE_PATHS = {
    # (not the documented state folder ~/.local/state/vibe_agent/, course text)
    "the project's own folder on that machine": r"(?!~/\.local/state/)" + START
    + r"(?!/workspace/)" + FOLDERS
    + r"/(?:notebooks|solutions|vibe_agent|benchmarks|tests)/",
    "a Python installation": START + FOLDERS + r"/(?:lib/python3\.\d+|(?:site|dist)-packages)/",
    "a home folder": r"(?<![\w.:/~-])(?:/home/[^/\s'\"]+/|/Users/[^/\s'\"]+/|/root/)"
    r"|\b[A-Za-z]:\\",
    "a temporary folder": r"(?<![\w.:/~-])(?:/tmp/(?:tmp|[\w.-]*-)[a-z0-9_]{8}/|/tmp/pytest-of-"
    r"|(?:/private)?/var/folders/)|ipykernel_\d+"
    + (rf"|{re.escape(TEMP)}/" if TEMP != "/tmp" else ""),
    "this checkout or one next to it": "|".join(
        re.escape(str(folder)) + "/" for folder in (ROOT, ROOT.parent)
        if len(folder.parts) > 2),
}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def machine_paths(text: str) -> list[str]:
    """Each machine path in `text`, as `what it is: …excerpt…`."""
    text = ANSI.sub("", text)
    return [f"{label}: …{text[max(0, m.start() - 20):m.end() + 20]!r}…"
            for label, pattern in MACHINE_PATHS.items() if pattern
            for m in re.finditer(pattern, text)]


def cell_texts(cell: nbformat.NotebookNode) -> list[str]:
    """A cell's source and every text its stored outputs hold."""
    texts = [cell.source]
    for output in cell.get("outputs", []):
        texts += [output.get("text", ""), output.get("evalue", ""), *output.get("traceback", [])]
        texts += [value for value in output.get("data", {}).values() if isinstance(value, str)]
    return texts


@pytest.mark.parametrize("text", [
    "录制文件：notebooks/cassettes/00_setup_reference.json",
    "cat: /tmp/.ssh/id_rsa: No such file or directory",  # the sandbox's home
    "read_file('~/.ssh/id_rsa')", "~/.bashrc", "/etc/passwd", "/proc/sys/kernel/core_pattern",
    "/workspace/tests/test_cart.py", "/dev/null", "/usr/hacked.txt", "/bin/sh",
    "vibe_agent/registry.py:514", "https://github.com/openai/openai-python/tree/main/tests/",
    "运行记录存在 `~/.local/state/vibe_agent/sessions/`",
    "python -m pytest -q tests/test_money.py", "src/../../secret.txt", "12/24 tests",
])
def test_course_text_is_not_a_machine_path(text):
    assert machine_paths(text) == []


@pytest.mark.parametrize("text", [
    "录制文件：/work/wt/integ/notebooks/cassettes/00_setup_reference.json",
    "File /home/me/vibe-agent/vibe_agent/registry.py:514, in ToolRegistry.tool",
    "File ~/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py:337",
    "/opt/venv/lib/python3.11/site-packages/openai/_client.py:120: UserWarning",
    "python /tmp/vibe-lesson14-dw4ipqtl/evil_server.py",
    "/tmp/ipykernel_4242/123456789.py:3: DeprecationWarning",
    "/Users/me/", "/root/project", "C:\\Users\\me\\vibe\\notebooks\\x.json",
    "/var/folders/xy/abc/T/vibe-ws-1/project", "/tmp/pytest-of-root/pytest-3/x",
    f"{ROOT}/notebooks",
    # a checkout next to this one, unless this one lies in a top-level folder (/work/main):
    # every path under /work would then count as the machine's
    *([f"{ROOT.parent}/another-checkout/x"] if len(ROOT.parent.parts) > 2 else []),
])
def test_a_machine_path_is_recognised(text):
    assert machine_paths(text)


@pytest.mark.parametrize("path", TRACKED_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_tracked_notebook_names_no_path_of_the_machine_that_ran_it(path):
    """Stored outputs are the same on every machine: describe(), ReplayMiss and tracebacks
    name files relative to the project (re-execute a notebook that fails here)."""
    nb = nbformat.read(path, as_version=4)
    found = [f"cell {index}: {where}" for index, cell in enumerate(nb.cells)
             for text in cell_texts(cell) for where in machine_paths(text)]
    assert not found, "\n".join(found)
