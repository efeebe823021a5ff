"""Compaction against trimming and nothing, under a small context window. A benchmark script.

    python benchmarks/bench_compaction.py [--window 4000] [--budget 0.5] [--keep 1]
                                          [--offload-over 1500] [--head-chars 300] [--runs 3]
                                          [--out benchmarks/results/compaction.json]

The known-fix model (`known_fix_model`: it replays each task's fix, it does not reason)
runs the long task (`bulk_discount_threshold`) and, apart, the rest of the bug-fix suite
with a scripted context window (`context_window`: tokens counted with o200k_base,
answered like OpenAI when exceeded). Five ways to run each task:

    full             no window at all: the history resent whole (the token baseline)
    nothing          the window, no strategy: the run ends with context_too_long once hit
    trim             the window, lesson 07's trim_old_tool_results as `prepare`
    compact          the window, Compaction(scripted_summarizer, budget=--budget x the
                     window, keep_last_rounds=--keep)
    compact+offload  the same, and tool results longer than --offload-over characters go
                     to a file in the workspace (the history keeps --head-chars and the path)

Judged like the bench (`vibe_agent.course.judge`): the agent's source changes on a
pristine copy, the task's FAIL_TO_PASS and PASS_TO_PASS tests in the sandbox. Printed:
tasks solved; prompt tokens per solved task (the API's `usage`, summed over the run) as
a ratio to `full`; summary calls per task; the prompt tokens a model summariser would be
sent for those calls (`summary_request`, counted with the same tokenizer: the reference
summariser makes no model call, so its summaries cost nothing here) and the ratio with
them added; median wall seconds per run. The same figures, with when, where and how they
were measured, are written to --out as JSON (lesson 11's table is read from it).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vibe_agent.coding import coding_registry
from vibe_agent.compact import Compaction, Message, scripted_summarizer, summary_request
from vibe_agent.context import trim_old_tool_results
from vibe_agent.course.judge import judge
from vibe_agent.course.known_fix import known_fix_model
from vibe_agent.course.scripted import prompt_tokens as counted_tokens
from vibe_agent.course.tasks import BugFixTask, copy_repo, load_suite
from vibe_agent.loop import AgentResult, run_agent

LONG_TASK = "bulk_discount_threshold"  # lesson 11's long task, part of the suite
RESULTS = Path(__file__).with_name("results") / "compaction.json"
WAYS = ("full", "nothing", "trim", "compact", "compact+offload")


@dataclass
class Settings:
    """The window and the compaction settings of one benchmark run."""

    window: int = 4000
    budget: float = 0.5  # of the window
    keep: int = 1  # keep_last_rounds
    offload_over: int = 1500  # characters
    head_chars: int = 300


@dataclass
class Run:
    """One run of one task one way."""

    result: AgentResult
    solved: bool
    summaries: int  # summary calls
    summary_tokens: int  # what a model summariser would have been sent for them
    seconds: float


def one_run(task: BugFixTask, way: str, settings: Settings) -> Run:
    with tempfile.TemporaryDirectory() as folder:
        workspace = copy_repo(task, Path(folder) / "ws")
        model = known_fix_model(task, context_window=10**9 if way == "full"
                                else settings.window)
        sent: list[int] = []

        def summarize(replaced: list[Message]) -> str:
            sent.append(counted_tokens({"messages": summary_request(replaced)}))
            return scripted_summarizer(replaced)

        options: dict[str, Any] = {}
        if way == "trim":
            options["prepare"] = trim_old_tool_results
        if way.startswith("compact"):
            offload: dict[str, Any] = {} if not way.endswith("offload") else {
                "workspace": workspace, "offload_over": settings.offload_over,
                "head_chars": settings.head_chars}
            options["compaction"] = Compaction(
                summarize, budget=int(settings.window * settings.budget),
                keep_last_rounds=settings.keep, **offload)
        started = time.perf_counter()
        result = run_agent(model.client(), task.prompt, coding_registry(workspace),
                           model="bench", max_iters=25, **options)
        seconds = time.perf_counter() - started
        return Run(result, judge(task, workspace).resolved, len(sent), sum(sent), seconds)


def prompt_tokens_each(result: AgentResult) -> list[int]:
    return [u["prompt_tokens"] for u in result.usage if u and "prompt_tokens" in u]


def prompt_tokens(result: AgentResult) -> int:
    return sum(prompt_tokens_each(result))


def commit() -> str:
    """The commit the code was measured at ("+ changes" when the package or the benchmarks
    differed from it)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "../vibe_agent", ".")
    return head + (" + changes" if changed else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--budget", type=float, default=0.5, help="of the window")
    parser.add_argument("--keep", type=int, default=1, help="keep_last_rounds")
    parser.add_argument("--offload-over", type=int, default=1500, help="characters")
    parser.add_argument("--head-chars", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON record")
    args = parser.parse_args()
    settings = Settings(args.window, args.budget, args.keep, args.offload_over, args.head_chars)
    suite, errors = load_suite()
    if errors:
        raise SystemExit(f"broken tasks: {errors}")
    long_tasks = [task for task in suite if task.name == LONG_TASK]
    others = [task for task in suite if task.name != LONG_TASK]  # each task runs in one part
    parts: dict[str, Any] = {}
    for label, tasks in (("long task", long_tasks), ("the rest of the bug-fix suite", others)):
        print(f"\n== {label}: {len(tasks)} task(s), window {args.window} tokens, compaction "
              f"budget {args.budget:.0%} keep {args.keep}, offload over {args.offload_over} "
              f"characters, known-fix model, {args.runs} run(s) ==")
        rows = {}
        for way in WAYS:
            runs = [[one_run(task, way, settings) for _ in range(args.runs)] for task in tasks]
            first = [task_runs[0] for task_runs in runs]  # deterministic: the rest repeat it
            rows[way] = (first, statistics.median(r.seconds for rs in runs for r in rs))
        full = [run.result for run in rows["full"][0]]
        resent = sum(prompt_tokens_each(whole)[0] * len(prompt_tokens_each(whole))
                     for whole in full) / sum(prompt_tokens(whole) for whole in full)
        print(f"resent every round (tools, system prompt, task: the first round's prompt "
              f"x rounds), of full: {resent:.2f}")
        part = parts[label] = {"tasks": [task.name for task in tasks],
                               "resent_every_round_of_full": round(resent, 4), "ways": {}}
        print(f"{'way':<16} {'solved':>6} {'prompt tokens/solved':>20} {'ratio to full':>13} "
              f"{'summaries/task':>14} {'summary request tokens/task':>27} "
              f"{'ratio with them':>15} {'median s':>8}  stop reasons")
        for way, (first, median) in rows.items():
            both = [(run, whole) for run, whole in zip(first, full, strict=True)
                    if run.solved and whole.ok]
            tokens = sum(prompt_tokens(run.result) for run, _ in both)
            extra = sum(run.summary_tokens for run, _ in both)
            baseline = sum(prompt_tokens(whole) for _, whole in both)
            per_solved = tokens / len(both) if both else float("nan")
            ratio = tokens / baseline if both else float("nan")
            with_them = (tokens + extra) / baseline if both else float("nan")
            stops: dict[str, int] = {}
            for run in first:
                stops[run.result.stop_reason.value] = stops.get(run.result.stop_reason.value,
                                                                0) + 1
            failed = [task.name for task, run in zip(tasks, first, strict=True)
                      if not run.solved]
            print(f"{way:<16} {sum(r.solved for r in first):>3}/{len(tasks):<2} "
                  f"{per_solved:>20.0f} {ratio:>13.2f} "
                  f"{statistics.mean(r.summaries for r in first):>14.2f} "
                  f"{statistics.mean(r.summary_tokens for r in first):>27.0f} "
                  f"{with_them:>15.2f} {median:>8.2f}  {stops}"
                  + (f"  not solved: {', '.join(failed)}" if failed else ""))
            part["ways"][way] = {  # None where no task was solved: nothing to compare
                "solved": sum(r.solved for r in first), "tasks": len(tasks),
                "prompt_tokens_per_solved": round(per_solved) if both else None,
                "ratio_to_full": round(ratio, 4) if both else None,
                "summaries_per_task": statistics.mean(r.summaries for r in first),
                "summary_request_tokens_per_task": round(
                    statistics.mean(r.summary_tokens for r in first)),
                "ratio_with_summary_requests": round(with_them, 4) if both else None,
                "median_seconds": round(median, 2), "stop_reasons": stops, "not_solved": failed}
    record = {
        "benchmark": __doc__.splitlines()[0],
        "provenance": {
            "date": datetime.now(UTC).replace(microsecond=0).isoformat(),
            "command": "python benchmarks/bench_compaction.py " + " ".join(sys.argv[1:]),
            "commit": commit(),
            "machine": f"{platform.machine()}, {platform.system()}, Python "
                       f"{platform.python_version()}",
            "model": "known-fix model (vibe_agent.course.known_fix): replays each task's "
                     "fix.patch, not an LLM",
            "tokens": "usage counted by the scripted model with o200k_base (bpe-openai)",
            "note": "the test output carries pytest's timings, so two runs differ by a few "
                    "tokens (a ratio's last digit by 0.01 at times); ratios are over the "
                    "tasks solved both this way and with the full history",
        },
        "settings": {**asdict(settings), "runs": args.runs},
        "parts": parts,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n",
                        encoding="utf-8")
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
