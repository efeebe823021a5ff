"""Probe the coding tools the way a hostile model would, and print what got through.

    python benchmarks/probe_tools.py [--calls 1000]

1. A background process keeps swapping the workspace's folder d/ for a link to a
   folder outside. read_file, write_file, edit_file and search_code are called on
   d/... through the registry, with JSON arguments: how many calls per 1,000 read or
   changed a file outside?
2. search_code with catastrophic patterns under a 1 s tool limit: how long until the
   registry answered (the median of 3 runs)?
3. A command that outlives its call (tool limit 1.5 s, command limit 20 s, the command
   writes a file at 3 s), and an "ask" approval that comes after the tool limit: does
   anything happen after the model was told the call timed out?

Run it on two versions of the package (PYTHONPATH) to compare them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vibe_agent.coding import Workspace, coding_registry
from vibe_agent.registry import ToolRegistry
from vibe_agent.sandbox import Policy

RACER = Path(__file__).with_name("swap_racer.py")  # swaps d/ for a link out


def escapes(tool: str, calls: int) -> int:
    """Calls of `tool` (out of `calls`) that read or changed a file outside."""
    with tempfile.TemporaryDirectory() as temp:
        outside, root = Path(temp, "outside"), Path(temp, "ws")
        outside.mkdir()
        (root / "d").mkdir(parents=True)
        (outside / "f.txt").write_text("OUTSIDE-SECRET\n")
        (root / "d" / "f.txt").write_text("value = 1\n")
        registry = coding_registry(root, policy="allow-all")
        racer = subprocess.Popen([sys.executable, RACER, str(root), str(outside)],
                                 stdout=subprocess.PIPE, text=True)
        try:
            assert racer.stdout is not None and racer.stdout.readline() == "racing\n"
            count = 0
            for i in range(calls):
                if tool == "read_file":
                    out = registry.call(tool, json.dumps({"path": "d/f.txt"})).output
                    count += "OUTSIDE-SECRET" in out
                elif tool == "search_code":
                    out = registry.call(tool, json.dumps({"pattern": "SECRET", "path": "d"})).output
                    count += "OUTSIDE-SECRET" in out
                elif tool == "write_file":
                    registry.call(tool, json.dumps({"path": f"d/n{i}.txt", "content": "x"}))
                    count += Path(outside, f"n{i}.txt").exists()
                else:
                    registry.call(tool, json.dumps({"path": "d/f.txt", "old": "OUTSIDE",
                                                    "new": "PWNED"}))
                    changed = (outside / "f.txt").read_text() != "OUTSIDE-SECRET\n"
                    count += changed
                    if changed:
                        (outside / "f.txt").write_text("OUTSIDE-SECRET\n")
        finally:
            racer.kill()
            racer.wait()
        return count


def regex_seconds(pattern: str, line: str) -> float:
    """Seconds until the registry answered a search_code call under a 1 s limit."""
    with tempfile.TemporaryDirectory() as temp:
        Path(temp, "data.txt").write_text(line + "\n")
        registry = ToolRegistry()
        registry.register(Workspace(temp, "allow-all").search_code, timeout=1.0)
        started = time.monotonic()
        registry.call("search_code", json.dumps({"pattern": pattern, "path": "data.txt"}))
        return time.monotonic() - started


def acts_after_timeout(case: str) -> bool:
    """Whether a file appears after the registry told the model the call timed out."""
    with tempfile.TemporaryDirectory() as temp:
        registry = ToolRegistry()
        if case == "command":
            workspace = Workspace(temp, "allow-all", command_timeout=20)
            registry.register(workspace.run_command, timeout=1.5)
            arguments = {"command": "sleep 3; echo late > late.txt"}
        else:
            def late_yes(prompt: str) -> str:
                time.sleep(0.6)
                return "y"
            workspace = Workspace(temp, Policy("ask", ask=late_yes))
            registry.register(getattr(workspace, case), timeout=0.3)
            arguments = ({"command": "touch late.txt"} if case == "run_command"
                         else {"path": "late.txt", "content": "x"})
        result = registry.call(case if case != "command" else "run_command",
                               json.dumps(arguments))
        told_timeout = result.error_kind == "timeout" or "did not finish" in result.output
        time.sleep(3.5)
        return told_timeout and Path(temp, "late.txt").exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    calls = parser.parse_args().calls
    print(f"race: a folder swapped for a link, escapes per {calls} calls")
    for tool in ("read_file", "write_file", "edit_file", "search_code"):
        print(f"  {tool:12} {escapes(tool, calls)}")
    print("catastrophic regex under a 1 s tool limit: seconds until the registry answered "
          "(median of 3)")
    for pattern, line in [("(a+)+$", "a" * 25 + "b"), ("(x+x+)+y", "x" * 26),
                          ("(a|aa)+$", "a" * 34 + "b")]:
        median = statistics.median(regex_seconds(pattern, line) for _ in range(3))
        print(f"  {pattern:10} on {len(line)} characters: {median:.2f} s")
    print("something happens after the model was told the call timed out?")
    for case, label in [("command", "command outlives its call"),
                        ("write_file", "late approval of a write"),
                        ("run_command", "late approval of a command")]:
        print(f"  {label:28} {'yes' if acts_after_timeout(case) else 'no'}")


if __name__ == "__main__":
    main()
