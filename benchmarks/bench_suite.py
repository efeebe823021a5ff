"""What do concurrent tasks buy, what does the harness cost? A benchmark script (not a test).

    python benchmarks/bench_suite.py [--latency 0.2] [--workers 4]

Four figures, from one run of this script:

1. Whole-suite wall time, serial / `--workers 4`, with a scripted model that waits
   `--latency` seconds per model call (the known-fix responder behind a sleep:
   a stand-in for a hosted model's latency; it is not an LLM).
2. Harness overhead per task: `run_task` with a model that answers at once (copy the
   project, snapshot, tools, one model call, held-out judging in the sandbox: a
   pristine copy + the source changes, pytest with its JUnit report and per-test time
   limit; diff) against the bare test command (`subprocess.run` in a ready copy, no
   sandbox), measured in turn on every task, `--rounds` times. FAIL_TO_PASS /
   PASS_TO_PASS are cached (computed once per task, before the timing starts). Medians,
   their ratio, and the median of the ratio taken per task and round (steadier).
   Beside them, the same steps judged the old way (the exit code in the agent's own
   workspace): their ratio is what held-out judging costs.
4. Test runs per offline-mode task: every sandboxed command counted while the
   known-fix model runs the suite, split into the agent's own `run_command`
   calls and the judge's runs: with the test ids the suite ships (test_ids.json), and
   for a suite without them on its first run (then they are cached on disk).
3. Memory: the peak resident memory of this process plus all its children (sampled
   every 20 ms with psutil: the bench threads, bwrap and the pytest runs they start)
   during the serial run and during the 4-worker run.

Medians, not means, for per-task figures: one slow run on a busy machine should not
move the result. The machine's core count is printed: the test runs are CPU-bound
subprocesses, so on 2 cores they cannot overlap as well as the model's waiting does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from vibe_agent import coding
from vibe_agent.course import judge
from vibe_agent.course.bench import (
    BENCH_SYSTEM_PROMPT,
    DEFAULT_MAX_ITERS,
    ModelFactory,
    TaskRecord,
    bench_registry,
    known_fix_factory,
    run_suite,
    run_task,
)
from vibe_agent.course.known_fix import KNOWN_FIX_MODEL_NAME, known_fix_responder
from vibe_agent.course.scripted import Reply, ScriptedModel, answer
from vibe_agent.course.tasks import BugFixTask, command_argv, command_env, copy_repo, load_suite
from vibe_agent.loop import run_agent
from vibe_agent.sandbox import run_in_sandbox, why_not_isolated


def slow_known_fix(latency: float) -> ModelFactory:
    """Each task: the known-fix responder, waiting `latency` seconds before every reply."""

    def factory(task: BugFixTask) -> tuple[Any, str]:
        respond = known_fix_responder([task])

        def slow(body: dict[str, Any]) -> Reply:
            time.sleep(latency)
            return respond(body)

        return ScriptedModel(slow, name="slow-known-fix").client(), KNOWN_FIX_MODEL_NAME

    return factory


class PeakRss:
    """Samples the RSS of this process and all its descendants; keeps the largest sum."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    total += process.memory_info().rss
                except psutil.Error:  # it ended between listing and reading
                    pass
            self.peak = max(self.peak, total)
            time.sleep(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def timed_suite(tasks: list[BugFixTask], factory: ModelFactory,
                workers: int) -> tuple[float, int, list[TaskRecord]]:
    """Wall seconds, peak RSS (bytes) and records of one whole-suite run."""
    with PeakRss() as memory:
        started = time.perf_counter()
        records = run_suite(tasks, factory, workers=workers)
        wall = time.perf_counter() - started
    return wall, memory.peak, records


def bare_test_run(task: BugFixTask) -> float:
    """Seconds of the task's test command alone, in a ready copy, without the sandbox."""
    with tempfile.TemporaryDirectory() as temp:
        workspace = copy_repo(task, Path(temp) / "workspace")
        started = time.perf_counter()
        subprocess.run(command_argv(task), cwd=workspace, env=command_env(),
                       capture_output=True, timeout=task.timeout_s)
        return time.perf_counter() - started


def harness_run(task: BugFixTask) -> float:
    """Seconds of `run_task` with a model that answers at once (no tool calls)."""
    client = ScriptedModel([answer("不改了。")], name="answers-at-once").client()
    started = time.perf_counter()
    run_task(task, client, "answers-at-once")
    return time.perf_counter() - started


def naive_harness_run(task: BugFixTask) -> float:
    """Seconds of the same steps judged the old way: the test command's exit code in the
    agent's own workspace (what the bench did before held-out judging; fooled by cheats)."""
    client = ScriptedModel([answer("不改了。")], name="answers-at-once").client()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as temp:
        workspace = copy_repo(task, Path(temp) / "workspace")
        before = coding.snapshot(workspace)
        run_agent(client, task.prompt, bench_registry(workspace, task), model="answers-at-once",
                  max_iters=DEFAULT_MAX_ITERS, system_prompt=BENCH_SYSTEM_PROMPT)
        run_in_sandbox(task.test_command, workspace, timeout=task.timeout_s)
        coding.workspace_diff(before, workspace)
    return time.perf_counter() - started


def paired_medians(tasks: list[BugFixTask], rounds: int) -> tuple[float, float, float, float]:
    """Medians of the bare run, the naive harness and the harness, measured in turn on
    every task (interleaved, so a change in the machine's load hits all alike), and the
    median of harness / bare taken per task and round: the tasks' test commands take from
    about 0.2 to 0.5 s, so a ratio of two medians over the mixed tasks moves with which
    task lands in the middle."""
    bare, naive, harness = [], [], []
    for _ in range(rounds):
        for task in tasks:
            bare.append(bare_test_run(task))
            naive.append(naive_harness_run(task))
            harness.append(harness_run(task))
    paired = statistics.median(h / b for h, b in zip(harness, bare, strict=True))
    return statistics.median(bare), statistics.median(naive), statistics.median(harness), paired


class CountRuns:
    """Counts sandboxed commands: the agent's (through coding.run_in_sandbox) and the
    judge's (through judge.run_in_sandbox), by patching the name each module calls."""

    def __init__(self) -> None:
        self.agent = self.judge = 0
        self._lock = threading.Lock()

    def __enter__(self) -> CountRuns:
        self._saved = coding.run_in_sandbox, judge.run_in_sandbox
        coding.run_in_sandbox = self._counting("agent", self._saved[0])
        judge.run_in_sandbox = self._counting("judge", self._saved[1])
        return self

    def _counting(self, who: str, real: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                setattr(self, who, getattr(self, who) + 1)
            return real(*args, **kwargs)

        return run

    def __exit__(self, *exc: object) -> None:
        coding.run_in_sandbox, judge.run_in_sandbox = self._saved


def runs_per_task(tasks: list[BugFixTask], cold: bool) -> tuple[float, float]:
    """(agent's, judge's) sandboxed runs per task in an offline-mode suite run.

    Cold: the suite copied without its test_ids.json files, with an empty disk cache
    (an outside suite's first run).
    """
    if cold:
        with tempfile.TemporaryDirectory() as temp:
            os.environ["XDG_CACHE_HOME"] = str(Path(temp) / "cache")
            for task in tasks:
                shutil.copytree(task.folder, Path(temp) / "suite" / task.name,
                                symlinks=True, ignore=shutil.ignore_patterns(judge.SHIPPED_IDS))
            copies, errors = load_suite(Path(temp) / "suite")
            assert not errors, errors
            judge._cache.clear()
            return runs_per_task(copies, cold=False)
    with CountRuns() as count:
        records = run_suite(tasks, known_fix_factory(tasks), workers=2)
    assert all(r.passed for r in records), "the known-fix run must pass"
    return count.agent / len(tasks), count.judge / len(tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2,
                        help="passes over the suite for the per-task overhead")
    parser.add_argument("--overhead-only", action="store_true",
                        help="measure figure 2 alone (the harness / bare test command ratio)")
    args = parser.parse_args()

    tasks, errors = load_suite()
    assert not errors, errors
    why_not_isolated()  # probe bubblewrap before timing anything
    if args.overhead_only:
        for task in tasks:  # FAIL_TO_PASS / PASS_TO_PASS, computed once (or read from disk)
            judge.test_ids(task)
        bare, naive, harness, paired = paired_medians(tasks, args.rounds)
        print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
              f"{len(tasks)} tasks x {args.rounds} rounds")
        print(f"bare test command per task (median)  {bare * 1000:.0f} ms")
        print(f"harness per task (median)            {harness * 1000:.0f} ms")
        print(f"ratio harness / bare test command    {harness / bare:.3f}x")
        print(f"  the same, paired per task (median) {paired:.3f}x")
        print(f"naive harness per task (median)      {naive * 1000:.0f} ms")
        return
    saved_cache = os.environ.get("XDG_CACHE_HOME")
    cold_agent, cold_judge = runs_per_task(tasks, cold=True)
    if saved_cache is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = saved_cache
    judge._cache.clear()
    for task in tasks:  # FAIL_TO_PASS / PASS_TO_PASS, computed once (or read from disk)
        judge.test_ids(task)
    warm_agent, warm_judge = runs_per_task(tasks, cold=False)
    factory = slow_known_fix(args.latency)
    serial, serial_rss, records = timed_suite(tasks, factory, workers=1)
    parallel, parallel_rss, parallel_records = timed_suite(tasks, factory, args.workers)
    assert all(r.passed for r in records + parallel_records), "the known-fix run must pass"
    calls = sum(r.model_calls for r in records)

    bare, naive, harness, paired = paired_medians(tasks, args.rounds)

    sandbox = "bubblewrap" if why_not_isolated() is None else f"NOT isolated: {why_not_isolated()}"
    mib = 1024 * 1024
    table = [
        ("machine", f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; sandbox {sandbox}"),
        ("suite", f"{len(tasks)} tasks, {calls} model calls, {args.latency * 1000:.0f} ms each"),
        ("whole suite, serial (wall)", f"{serial:.1f} s"),
        (f"whole suite, --workers {args.workers} (wall)", f"{parallel:.1f} s"),
        (f"ratio serial / {args.workers} workers", f"{serial / parallel:.2f}x"),
        ("model waiting alone, serial", f"{calls * args.latency:.1f} s"),
        ("bare test command per task (median)", f"{bare * 1000:.0f} ms"),
        ("harness per task: copy+tools+held-out judging+diff (median)",
         f"{harness * 1000:.0f} ms"),
        ("ratio harness / bare test command", f"{harness / bare:.2f}x"),
        ("  the same, paired per task and round (median)", f"{paired:.2f}x"),
        ("naive harness per task: judged in the agent's workspace (median)",
         f"{naive * 1000:.0f} ms"),
        ("ratio harness / naive harness (cost of held-out judging)", f"{harness / naive:.2f}x"),
        ("test runs per known-fix task, shipped test ids (agent + judge)",
         f"{warm_agent + warm_judge:.2f} ({warm_agent:.2f} + {warm_judge:.2f})"),
        ("test runs per task, outside suite's first run (agent + judge)",
         f"{cold_agent + cold_judge:.2f} ({cold_agent:.2f} + {cold_judge:.2f})"),
        ("peak RSS self+children, serial", f"{serial_rss / mib:.0f} MiB"),
        (f"peak RSS self+children, {args.workers} workers", f"{parallel_rss / mib:.0f} MiB"),
    ]
    width = max(len(name) for name, _ in table)
    for name, value in table:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
