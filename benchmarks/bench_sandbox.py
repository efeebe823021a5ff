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
Medians, not means: one slow run on a busy machine should not move the result.
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


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm up: the first call also probes bubblewrap once
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="repetitions per measurement")
    runs = parser.parse_args().runs
    reason = why_not_isolated()
    if reason is not None and not unisolated_chosen():
        parser.exit(2, f"bubblewrap is not usable here ({reason}); set {SANDBOX_ENV}=none to "
                       "time the unisolated tool alone\n")

    with tempfile.TemporaryDirectory() as folder:
        tools = Workspace(folder, "allow-all")
        plain = median_ms(lambda: subprocess.run(["true"], check=True), runs)
        sandboxed = median_ms(lambda: tools.run_command("true"), runs)
        for number in range(200):
            Path(folder, f"pkg{number % 10}").mkdir(exist_ok=True)
            Path(folder, f"pkg{number % 10}", f"m{number}.py").write_text("x = 1\n")
        populated = median_ms(lambda: tools.run_command("true"), runs)
        os.environ[SANDBOX_ENV] = "none"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SandboxWarning)
            fallback = median_ms(lambda: tools.run_command("true"), runs)
        del os.environ[SANDBOX_ENV]

    label = "bubblewrap" if reason is None else f"NOT isolated: {reason}"
    table = [
        ('subprocess.run(["true"]) (median)', f"{plain:.2f} ms"),
        (f'run_command("true"), {label} (median)', f"{sandboxed:.2f} ms"),
        ('run_command("true"), VIBE_AGENT_SANDBOX=none (median)', f"{fallback:.2f} ms"),
        ("ratio sandboxed / plain", f"{sandboxed / plain:.1f}x"),
        ("ratio unisolated tool / plain", f"{fallback / plain:.1f}x"),
        (f'run_command("true"), {label}, 200 files (median)', f"{populated:.2f} ms"),
        ("runs", f"{runs} each, after one warm-up"),
    ]
    width = max(len(name) for name, _ in table)
    for name, value in table:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
