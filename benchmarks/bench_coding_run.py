"""Where does one coding run's wall time go? A benchmark script (not a test).

    python benchmarks/bench_coding_run.py [--task sales_report_total] [--runs 5]

Runs the known-fix model (`known_fix_model`: it replays the task's fix, it does not
reason) with the coding tools on a fresh copy of one task, several times, and splits
each run's wall time by the trace: model rounds (here a scripted responder behind the real
SDK, so this is the client and transport cost, not a hosted model's latency), file tools,
and `run_command`. The sandbox's start-up inside `run_command` is estimated as the
number of commands times the median of a sandboxed `true`. Medians over the runs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from vibe_agent.coding import Workspace, coding_registry
from vibe_agent.course.known_fix import KNOWN_FIX_MODEL_NAME, known_fix_model
from vibe_agent.course.tasks import copy_repo, load_suite
from vibe_agent.loop import run_agent


def sandbox_start_ms(runs: int = 20) -> float:
    with tempfile.TemporaryDirectory() as folder:
        tools = Workspace(folder)
        tools.run_command("true")  # the first call also probes bubblewrap
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            tools.run_command("true")
            samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def one_run(task_name: str) -> dict[str, float]:
    tasks, _ = load_suite()
    task = next(t for t in tasks if t.name == task_name)
    with tempfile.TemporaryDirectory() as folder:
        workspace = copy_repo(task, Path(folder) / "workspace")
        started = time.perf_counter()
        result = run_agent(known_fix_model(task).client(), task.prompt,
                           coding_registry(workspace), model=KNOWN_FIX_MODEL_NAME, max_iters=12)
        wall = (time.perf_counter() - started) * 1e3
    steps = result.trace
    return {
        "wall": wall,
        "model": sum(s.elapsed_ms for s in steps if s.kind == "model"),
        "file tools": sum(s.elapsed_ms for s in steps
                          if s.kind == "tool" and s.tool != "run_command"),
        "run_command": sum(s.elapsed_ms for s in steps if s.tool == "run_command"),
        "commands": sum(1 for s in steps if s.tool == "run_command"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="sales_report_total")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    runs = [one_run(args.task) for _ in range(args.runs)]
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    start = sandbox_start_ms()
    sandbox = median["commands"] * start
    print(f"task {args.task}, {args.runs} runs, medians (ms):")
    for key in ("model", "file tools", "run_command"):
        print(f"  {key:<12} {median[key]:8.1f}  {median[key] / median['wall']:6.1%} of wall")
    print(f"  {'wall':<12} {median['wall']:8.1f}")
    print(f"sandbox start-up: {median['commands']:.0f} commands x {start:.1f} ms = {sandbox:.1f} ms"
          f"  ({sandbox / median['run_command']:.1%} of run_command, "
          f"{sandbox / median['wall']:.1%} of wall); the rest of run_command is the tests")


if __name__ == "__main__":
    main()
