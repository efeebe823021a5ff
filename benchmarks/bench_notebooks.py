"""How much the lessons cost beyond starting their kernels.

Executes an empty notebook a few times (the price of a kernel start, the floor of
any notebook test) and then every solution notebook once in replay mode, and prints
each lesson's time and the ratio

    whole course / (number of notebooks x empty-notebook kernel start)   (goal <= 2)

Run: python benchmarks/bench_notebooks.py      (medians; the machine is noisy)
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import nbformat

from vibe_agent.course.make_notebooks import SOLUTIONS_DIR, execute_notebook


def timed(path: Path) -> float:
    start = time.perf_counter()
    execute_notebook(path, {"VIBE_AGENT_MODE": "replay"})
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty.ipynb"
        nbformat.write(nbformat.v4.new_notebook(), empty)
        kernel_start = statistics.median(timed(empty) for _ in range(5))

    lessons = sorted(SOLUTIONS_DIR.glob("*.ipynb"))
    times = {path.stem: timed(path) for path in lessons}
    for name, seconds in times.items():
        print(f"{name:<20} {seconds:6.2f} s   ({seconds / kernel_start:4.1f}x a kernel start)")
    total = sum(times.values())
    print(f"\nempty-notebook kernel start (median of 5)   {kernel_start:6.2f} s")
    print(f"whole course, {len(lessons)} notebooks              {total:6.2f} s")
    ratio = total / (len(lessons) * kernel_start)
    print(f"course / (notebooks x kernel start)          {ratio:6.2f}x  (goal <= 2)")


if __name__ == "__main__":
    main()
