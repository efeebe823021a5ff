"""Compaction against trimming and nothing, under a small context window. A benchmark script.

    python benchmarks/bench_compaction.py [--window 4000] [--budget 0.5] [--keep 2] [--runs 3]

The known-fix model (`known_fix_model`: it replays each task's fix, it does not reason)
runs the long task (`data/tasks_long/`) and the bug-fix suite with a scripted context
window (`context_window`: tokens counted with o200k_base, answered like OpenAI when
exceeded). Four ways to run each task:

    full     no window at all: the history resent whole (the token baseline)
    nothing  the window, no strategy: the run ends with context_too_long once it is hit
    trim     the window, lesson 07's trim_old_tool_results as `prepare`
    compact  the window, Compaction(scripted_summarizer, budget=--budget x the window,
             keep_last_rounds=--keep)

Judged like the bench: the agent's changes outside tests/ are copied onto a pristine
copy, and the task's tests run there. Printed: tasks solved; prompt tokens per solved
task (the API's `usage`, summed over the run) as a ratio to `full`; summary calls per
task; median wall seconds per run. The scripted summariser makes no model call, so a
model summariser would add its own tokens to `compact` (one request per compaction).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from vibe_agent.coding import coding_registry
from vibe_agent.compact import Compaction, scripted_summarizer
from vibe_agent.context import trim_old_tool_results
from vibe_agent.course.known_fix import known_fix_model
from vibe_agent.course.tasks import (
    BugFixTask,
    command_argv,
    command_env,
    copy_repo,
    load_suite,
    load_task,
)
from vibe_agent.loop import AgentResult, run_agent

LONG_TASKS = Path(__file__).resolve().parent.parent / "vibe_agent" / "data" / "tasks_long"
WAYS = ("full", "nothing", "trim", "compact")


def judged(task: BugFixTask, workspace: Path, folder: Path) -> bool:
    """The task's tests on a pristine copy carrying the agent's changes outside tests/."""
    pristine = copy_repo(task, folder / "judge")
    for path in workspace.rglob("*"):
        relative = path.relative_to(workspace)
        if path.is_file() and relative.parts[0] not in ("tests", ".tool_results"):
            (pristine / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, pristine / relative)
    done = subprocess.run(command_argv(task), cwd=pristine, env=command_env(),
                          timeout=task.timeout_s, capture_output=True, text=True)
    return done.returncode == 0


def one_run(task: BugFixTask, way: str, window: int, budget: float = 0.5,
            keep: int = 2) -> tuple[AgentResult, bool, int, float]:
    with tempfile.TemporaryDirectory() as folder:
        workspace = copy_repo(task, Path(folder) / "ws")
        model = known_fix_model(task, context_window=10**9 if way == "full" else window)
        options: dict = {}
        compaction = None
        if way == "trim":
            options["prepare"] = trim_old_tool_results
        if way == "compact":
            compaction = options["compaction"] = Compaction(
                scripted_summarizer, budget=int(window * budget), keep_last_rounds=keep)
        started = time.perf_counter()
        result = run_agent(model.client(), task.prompt, coding_registry(workspace),
                           model="bench", max_iters=25, **options)
        seconds = time.perf_counter() - started
        summaries = len(compaction.events) if compaction else 0
        return result, judged(task, workspace, Path(folder)), summaries, seconds


def prompt_tokens(result: AgentResult) -> int:
    return sum(u["prompt_tokens"] for u in result.usage if u and "prompt_tokens" in u)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--budget", type=float, default=0.5, help="of the window")
    parser.add_argument("--keep", type=int, default=2, help="keep_last_rounds")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    suite, errors = load_suite()
    if errors:
        raise SystemExit(f"the suite has broken tasks: {errors}")
    long_tasks = [load_task(folder) for folder in sorted(LONG_TASKS.iterdir()) if folder.is_dir()]
    for label, tasks in (("long task", long_tasks), ("bug-fix suite", suite)):
        print(f"\n== {label}: {len(tasks)} task(s), window {args.window} tokens, compaction "
              f"budget {args.budget:.0%} keep {args.keep}, known-fix model, {args.runs} run(s) ==")
        rows = {}
        for way in WAYS:
            solved, tokens, summaries, seconds, stops, failed = 0, [], [], [], {}, []
            for task in tasks:
                for run in range(args.runs):
                    result, passed, calls, wall = one_run(task, way, args.window, args.budget,
                                                          args.keep)
                    seconds.append(wall)
                    if run == 0:  # deterministic: tokens and verdicts repeat
                        solved += passed
                        failed += [] if passed else [task.name]
                        tokens.append(prompt_tokens(result) if passed else None)
                        summaries.append(calls)
                        stops[result.stop_reason.value] = stops.get(result.stop_reason.value,
                                                                    0) + 1
            rows[way] = (solved, tokens, summaries, statistics.median(seconds), stops, failed)
        full_tokens = rows["full"][1]
        print(f"{'way':<8} {'solved':>7} {'prompt tokens/solved':>21} {'ratio to full':>14} "
              f"{'summary calls/task':>19} {'median s':>9}  stop reasons")
        for way, (solved, tokens, summaries, median, stops, failed) in rows.items():
            both = [(t, f) for t, f in zip(tokens, full_tokens, strict=True)
                    if t is not None and f is not None]
            per_solved = statistics.mean(t for t, _ in both) if both else float("nan")
            ratio = sum(t for t, _ in both) / sum(f for _, f in both) if both else float("nan")
            print(f"{way:<8} {solved:>4}/{len(tasks):<2} {per_solved:>21.0f} {ratio:>14.2f} "
                  f"{statistics.mean(summaries):>19.2f} {median:>9.2f}  {stops}"
                  + (f"  not solved: {', '.join(failed)}" if failed else ""))


if __name__ == "__main__":
    main()
