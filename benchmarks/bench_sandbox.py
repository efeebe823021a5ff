"""What does the sandbox cost per command? A benchmark script (not a test).

    python benchmarks/bench_sandbox.py [--runs 50]

Times `Workspace.run_command("true")` (the coding agent's tool: policy check,
bubblewrap start-up, namespaces, output capture, process-group cleanup) against a
bare `subprocess.run(["true"])`, and prints the medians and their ratio. The
unisolated choice (VIBE_AGENT_SANDBOX=none: the same tool, `sh -c` under a Python
supervisor that kills what the command leaves behind) is shown too, so the table
separates what the tool adds from what bubblewrap adds. As root, every sandboxed
command lends the workspace to uid 65534 and takes it back (two walks over its
files): the last row times that in a workspace of 200 files.
Medians, not means: one slow run on a busy machine should not move the result; and
the three first rows are measured in turns, so that a busy minute slows them alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from vibe_agent.coding import Workspace
from vibe_agent.sandbox import SANDBOX_ENV, SandboxWarning, unisolated_chosen, why_not_isolated


def medians_ms(runs: int, **cases: Callable[[], object]) -> dict[str, float]:
    """The median milliseconds of each case, measured in turns (one run of each per round).

    Taking turns keeps the ratios fair on a busy machine: a slow minute slows every case
    alike, instead of only the one measured then.
    """
    for fn in cases.values():
        fn()  # warm up: the first call also probes bubblewrap once
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, fn in cases.items():
            started = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(times) * 1e3 for name, times in samples.items()}


def unisolated(fn: Callable[[], object]) -> Callable[[], object]:
    """`fn`, called with VIBE_AGENT_SANDBOX=none (and its notice silenced)."""
    def call() -> object:
        os.environ[SANDBOX_ENV] = "none"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SandboxWarning)
                return fn()
        finally:
            del os.environ[SANDBOX_ENV]
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="rounds (one run of each per round)")
    runs = parser.parse_args().runs
    reason = why_not_isolated()
    if reason is not None and not unisolated_chosen():
        parser.exit(2, f"bubblewrap is not usable here ({reason}); set {SANDBOX_ENV}=none to "
                       "time the unisolated tool alone\n")

    with tempfile.TemporaryDirectory() as folder:
        tools = Workspace(folder, "allow-all")
        times = medians_ms(runs, plain=lambda: subprocess.run(["true"], check=True),
                           sandboxed=lambda: tools.run_command("true"),
                           fallback=unisolated(lambda: tools.run_command("true")))
        plain, sandboxed, fallback = times["plain"], times["sandboxed"], times["fallback"]
        for number in range(200):
            Path(folder, f"pkg{number % 10}").mkdir(exist_ok=True)
            Path(folder, f"pkg{number % 10}", f"m{number}.py").write_text("x = 1\n")
        populated = medians_ms(runs, populated=lambda: tools.run_command("true"))["populated"]

    label = "bubblewrap" if reason is None else f"NOT isolated: {reason}"
    table = [
        ('subprocess.run(["true"]) (median)', f"{plain:.2f} ms"),
        (f'run_command("true"), {label} (median)', f"{sandboxed:.2f} ms"),
        ('run_command("true"), VIBE_AGENT_SANDBOX=none (median)', f"{fallback:.2f} ms"),
        ("ratio sandboxed / plain", f"{sandboxed / plain:.1f}x"),
        ("ratio unisolated tool / plain", f"{fallback / plain:.1f}x"),
        (f'run_command("true"), {label}, 200 files (median)', f"{populated:.2f} ms"),
        ("runs", f"{runs} rounds, the first three in turns, after one warm-up"),
    ]
    width = max(len(name) for name, _ in table)
    for name, value in table:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
