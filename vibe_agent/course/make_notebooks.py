"""Generate the learners' notebooks from the solution notebooks: one source, two views.

    solutions/NN_name.ipynb  --(this script)-->  notebooks/NN_name.ipynb
    exercises solved,                            exercises replaced by a stub,
    outputs stored                               solution outputs cleared

Run `python -m vibe_agent.course.make_notebooks` after editing a solution notebook, and
`python -m vibe_agent.course.make_notebooks --check` to list what is out of date (CI does, through
tests/test_notebooks.py); `--execute` first re-runs solution notebooks in replay mode.
The rules, applied to each solution notebook:

1. A code cell's region between `### BEGIN SOLUTION` and `### END SOLUTION` (nbgrader's
   markers, each alone on its line) becomes a Chinese hint comment and
   `raise NotImplementedError(...)`, indented like the BEGIN marker, so a stub inside a
   function body is still valid Python. Lines outside the markers are kept.
2. A markdown cell's `<!-- BEGIN SOLUTION -->...<!-- END SOLUTION -->` regions are removed
   (a cell left empty is dropped).
3. Cells tagged `solution-only` are dropped.
4. Outputs and execution counts are cleared from the first code cell that holds a solution
   (a marked region or the `solution-only` tag) to the end of the notebook. Later output
   may depend on a solution in ways no tag would record, so learners see stored output only
   where no solution has run yet.
5. Widget state (`metadata.widgets`) is dropped from the notebook and its cells, and widget
   views from the outputs kept: without their state they cannot be displayed. So are the
   timings of the solution run (`metadata.execution`).

The generated notebooks are written with `nbformat.write`, so regenerating is byte-stable.
Solution notebooks must not carry widget state either; the plain run strips it from them.
"""

from __future__ import annotations

import copy
import io
import os
import re
import sys
from pathlib import Path
from unittest.mock import patch

import nbformat
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS_DIR = ROOT / "solutions"
NOTEBOOKS_DIR = ROOT / "notebooks"

SOLUTION_ONLY_TAG = "solution-only"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

BEGIN_CODE = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*$")
END_CODE = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")
MARKDOWN_SOLUTION = re.compile(r"<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->", re.DOTALL)
# Anything left of a marker after the rules ran means a malformed marker: fail, never leak.
LEFTOVER_MARKER = re.compile(r"(BEGIN|END) SOLUTION")
FIX_HINT = ("Run `python -m vibe_agent.course.make_notebooks` and commit the result "
            "(and delete any learners' notebook that has no solution notebook).")

STUB = (
    "{indent}# 练习：把你的代码写在这里，写好后删掉下面这一行。\n"
    '{indent}raise NotImplementedError("练习还没完成：补全这里的代码后，再运行一次。")'
)


class MarkerError(ValueError):
    """A solution marker without its partner, or one the rules could not remove."""


def stub_code(source: str) -> str:
    """Replace every marked solution region in a code cell's source with a stub."""
    lines = source.splitlines()
    if not any(BEGIN_CODE.match(line) or END_CODE.match(line) for line in lines):
        return source  # untouched, trailing newline and all
    lines_out: list[str] = []
    begin: re.Match[str] | None = None
    for line in lines:
        if begin is None:
            begin = BEGIN_CODE.match(line)
            if begin is None:
                if END_CODE.match(line):
                    raise MarkerError("`### END SOLUTION` without a `### BEGIN SOLUTION` before it")
                lines_out.append(line)
        elif BEGIN_CODE.match(line):
            raise MarkerError("`### BEGIN SOLUTION` inside another solution region")
        elif END_CODE.match(line):
            lines_out.append(STUB.format(indent=begin["indent"]))
            begin = None
    if begin is not None:
        raise MarkerError("`### BEGIN SOLUTION` without a `### END SOLUTION` after it")
    return "\n".join(lines_out)


def strip_markdown(source: str) -> str:
    """Remove the solution regions of a markdown cell and the blank lines they leave."""
    if not MARKDOWN_SOLUTION.search(source):
        return source
    text = MARKDOWN_SOLUTION.sub("", source)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def strip_widgets(nb: NotebookNode) -> NotebookNode:
    """Drop widget state from the notebook's metadata and its cells' metadata, in place."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("widgets", None)
    return nb


def has_widget_state(nb: NotebookNode) -> bool:
    return "widgets" in nb.metadata or any("widgets" in cell.metadata for cell in nb.cells)


def holds_solution(cell: NotebookNode) -> bool:
    """True for a code cell with a marked solution region or the `solution-only` tag."""
    if cell.cell_type != "code":
        return False
    if SOLUTION_ONLY_TAG in cell.metadata.get("tags", []):
        return True
    return any(BEGIN_CODE.match(line) for line in cell.source.splitlines())


def drop_widget_views(outputs: list[NotebookNode]) -> list[NotebookNode]:
    """Keep each output's other formats; an output that was only a widget view goes."""
    kept = []
    for output in outputs:
        data = output.get("data")
        if data is not None:
            data.pop(WIDGET_VIEW, None)
            if not data:
                continue
        kept.append(output)
    return kept


def learner_notebook(solution: NotebookNode) -> NotebookNode:
    """The learners' view of a solution notebook (the solution itself is not changed)."""
    nb = strip_widgets(copy.deepcopy(solution))
    cells: list[NotebookNode] = []
    clearing = False
    for index, cell in enumerate(nb.cells):
        clearing = clearing or holds_solution(cell)
        if SOLUTION_ONLY_TAG in cell.metadata.get("tags", []):
            continue
        try:
            if cell.cell_type == "code":
                cell.source = stub_code(cell.source)
            elif cell.cell_type == "markdown":
                cell.source = strip_markdown(cell.source)
        except MarkerError as error:
            raise MarkerError(f"cell {index}: {error}") from None
        if LEFTOVER_MARKER.search(cell.source):
            raise MarkerError(f"cell {index}: a solution marker is unpaired or not on its own line")
        if cell.cell_type == "markdown" and not cell.source.strip():
            continue
        if cell.cell_type == "code":
            cell.metadata.pop("execution", None)  # timings of the solution run
            if clearing:
                cell.outputs = []
                cell.execution_count = None
            else:
                cell.outputs = drop_widget_views(cell.outputs)
        cells.append(cell)
    nb.cells = cells
    return nb


def notebook_text(nb: NotebookNode) -> str:
    """Exactly what `nbformat.write` puts in a file (v4 JSON, indent 1, final newline)."""
    buffer = io.StringIO()
    nbformat.write(nb, buffer)
    return buffer.getvalue()


def write_notebook(nb: NotebookNode, path: Path) -> None:
    path.write_text(notebook_text(nb), encoding="utf-8", newline="\n")


def read_solutions(solutions_dir: Path) -> dict[Path, NotebookNode]:
    paths = sorted(solutions_dir.glob("*.ipynb"))
    return {path: nbformat.read(path, as_version=4) for path in paths}


def generated(solutions: dict[Path, NotebookNode], notebooks_dir: Path) -> dict[Path, str]:
    """What each learners' notebook should contain, as the exact text to write."""
    result: dict[Path, str] = {}
    for solution_path, solution in solutions.items():
        try:
            learner = learner_notebook(solution)
        except MarkerError as error:
            raise MarkerError(f"{solution_path}: {error}") from None
        result[notebooks_dir / solution_path.name] = notebook_text(learner)
    return result


def problems(solutions_dir: Path, notebooks_dir: Path) -> list[str]:
    """Every way the notebooks are out of sync, one line each; empty when all is well."""
    solutions = read_solutions(solutions_dir)
    found = [f"{path}: carries widget state (metadata.widgets)"
             for path, solution in solutions.items() if has_widget_state(solution)]
    wanted = generated(solutions, notebooks_dir)
    for path, text in wanted.items():
        if not path.exists():
            found.append(f"{path}: missing")
            continue
        try:
            on_disk = notebook_text(nbformat.read(path, as_version=4))
        except ValueError:  # not JSON, or not a notebook
            on_disk = None
        if on_disk != text:
            found.append(f"{path}: out of date")
    for path in sorted(notebooks_dir.glob("*.ipynb")):
        if path not in wanted:
            found.append(f"{path}: has no solution notebook {solutions_dir / path.name}")
    return found


def build(solutions_dir: Path, notebooks_dir: Path) -> list[Path]:
    """Strip widget state from the solutions, write the learners' notebooks; what changed."""
    solutions = read_solutions(solutions_dir)
    changed: list[Path] = []
    for path, solution in solutions.items():
        if has_widget_state(solution):
            write_notebook(strip_widgets(solution), path)
            changed.append(path)
    for path, text in generated(solutions, notebooks_dir).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8", newline="\n")
            changed.append(path)
    return changed


# ---------------------------------------------------------------------------
# Executing notebooks (tests, refreshing stored outputs, recording)
# ---------------------------------------------------------------------------

CELL_TIMEOUT = 600  # seconds per cell: a local model may take a while


def execute_notebook(path: Path, env: dict[str, str] | None = None,
                     allow_errors: bool = False) -> NotebookNode:
    """Run every cell in a fresh kernel of THIS interpreter, started in the notebook's folder.

    Args:
        path: the notebook.
        env: environment variables for the kernel (e.g. VIBE_AGENT_MODE=record).
        allow_errors: keep going after a failing cell (errors stay in the outputs).
    """
    from ipykernel.kernelspec import RESOURCES, get_kernel_dict
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from nbclient import NotebookClient

    class CurrentEnvKernelSpecs(KernelSpecManager):
        """`python3` is always this interpreter, as with nbval's --nbval-current-env."""

        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return self.kernel_spec_class(resource_dir=RESOURCES, **get_kernel_dict())

    nb = nbformat.read(path, as_version=4)
    kernel = KernelManager(kernel_name="python3", kernel_spec_manager=CurrentEnvKernelSpecs())
    with patch.dict(os.environ, env or {}):
        NotebookClient(nb, km=kernel, timeout=CELL_TIMEOUT, allow_errors=allow_errors,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb


def refresh(names: list[str], solutions_dir: Path = SOLUTIONS_DIR) -> list[Path]:
    """Re-run solution notebooks in replay mode and store their outputs.

    Args:
        names: notebook stems such as "02_protocol"; empty means all of them.
        solutions_dir: where the solution notebooks are.
    """
    paths = [solutions_dir / f"{n}.ipynb" for n in names] or sorted(solutions_dir.glob("*.ipynb"))
    for path in paths:
        nb = execute_notebook(path, {"VIBE_AGENT_MODE": "replay"})
        for cell in nb.cells:  # per-run timestamps would only add noise to the diff
            cell.metadata.pop("execution", None)
        write_notebook(strip_widgets(nb), path)
    return paths


def main(argv: list[str] | None = None) -> int:
    from .chinese_argparse import ChineseArgumentParser

    parser = ChineseArgumentParser(
        prog="python -m vibe_agent.course.make_notebooks",
        description="由 solutions/*.ipynb（答案笔记本）生成 notebooks/*.ipynb（学员版笔记本）。",
    )
    parser.add_argument("--check", action="store_true",
                        help="什么也不写；有学员版笔记本过时的话，列出来并以退出码 1 结束")
    parser.add_argument("--execute", nargs="*", metavar="课名",
                        help="先在严格回放模式（replay）下重新运行这些答案笔记本"
                             "（不写课名就是全部），把输出存回去")
    args = parser.parse_args(argv)
    if args.execute is not None:
        for path in refresh(args.execute):
            print(f"已运行并保存输出：{path}")
    if args.check:
        found = problems(SOLUTIONS_DIR, NOTEBOOKS_DIR)
        if found:
            print("学员版笔记本和 solutions/ 不一致：", file=sys.stderr)
            for line in found:
                print(f"  {line}", file=sys.stderr)
            print("运行 python -m vibe_agent.course.make_notebooks 重新生成，再提交结果"
                  "（没有对应答案笔记本的学员版笔记本要删掉）。", file=sys.stderr)
            return 1
        print("学员版笔记本都是最新的。")
        return 0
    for path in build(SOLUTIONS_DIR, NOTEBOOKS_DIR):
        print(f"已写入：{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
