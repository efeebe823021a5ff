"""What does MCP cost per tool call, and to start a server? A benchmark script (not a test).

    python benchmarks/bench_mcp.py [--runs 200] [--starts 5]

Times one trivial tool call, `calculator("1 + 1")`, two ways through the same
`ToolRegistry.call` (argument checks, time limit, text): the function registered
locally, and the course's MCP server's tool (`mcp_registry`: policy check, a JSON-RPC
round trip over the server's stdin/stdout, the server's own validation). Then the
start-up of the server: process start, imports, initialize, tools/list. Medians, not
means: one slow run on a busy machine should not move the result.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from vibe_agent.mcp_tools import course_server_command, mcp_registry
from vibe_agent.tools import demo_registry


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm up
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def start_ms(starts: int) -> tuple[float, float]:
    """Median milliseconds to enter `mcp_registry` (start + list), and to leave it."""
    entered, left = [], []
    for _ in range(starts):
        started = time.perf_counter()
        with mcp_registry(course_server_command(), name="course"):
            entered.append(time.perf_counter() - started)
            started = time.perf_counter()
        left.append(time.perf_counter() - started)
    return statistics.median(entered) * 1e3, statistics.median(left) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="calls per measurement")
    parser.add_argument("--starts", type=int, default=5, help="server start-ups measured")
    args = parser.parse_args()

    local = demo_registry()
    arguments = '{"expression": "1 + 1"}'
    in_process = median_ms(lambda: local.call("calculator", arguments), args.runs)
    with mcp_registry(course_server_command(), name="course") as remote:
        assert remote.call("mcp__course__calculator", arguments).output == "1 + 1 = 2"
        over_mcp = median_ms(lambda: remote.call("mcp__course__calculator", arguments),
                             args.runs)
    entered, left = start_ms(args.starts)

    table = [
        ('calculator("1 + 1") in a ToolRegistry (median)', f"{in_process:.3f} ms"),
        ('the same tool through MCP, stdio (median)', f"{over_mcp:.3f} ms"),
        ("ratio MCP / in-process", f"{over_mcp / in_process:.0f}x"),
        ("server start-up: process, initialize, tools/list (median)", f"{entered:.0f} ms"),
        ("server shut-down: close stdin, wait for exit (median)", f"{left:.0f} ms"),
        ("runs", f"{args.runs} calls each after one warm-up; {args.starts} start-ups"),
    ]
    width = max(len(name) for name, _ in table)
    for name, value in table:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
