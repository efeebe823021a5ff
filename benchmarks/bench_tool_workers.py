"""What do concurrent tool calls buy? A benchmark script (not a test).

    python benchmarks/bench_tool_workers.py

(a) one reply with 4 calls of a tool that waits 200 ms (like a slow API): the median
    wall time of the run with `tool_workers=4` divided by the same run serial.
(b) the overhead on trivial tools: the same 4-call reply of a tool that returns at
    once, `tool_workers=4` / serial (the thread pool's cost when there is nothing to
    wait for).

Both go through the real SDK and a scripted model. Medians of one run.
"""

from __future__ import annotations

import statistics
import time

from vibe_agent import ToolRegistry, run_agent
from vibe_agent.course.scripted import ScriptedModel, answer, call, calls
from vibe_agent.workers import ToolWorkers

SLOW_REPS = 15
FAST_REPS = 200


def registry(wait_s: float) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    def lookup(key: str) -> str:
        """Look a key up (waits like a remote service).

        Args:
            key: what to look up.
        """
        time.sleep(wait_s)
        return f"{key}: found"

    return tools


def timed(wait_s: float, workers: int) -> float:
    script = [calls(*(call("lookup", {"key": f"k{i}"}) for i in range(4))), answer("done")]
    client = ScriptedModel(script, name="bench").client()
    started = time.perf_counter()
    run_agent(client, "q", registry(wait_s), model="m", layers=[ToolWorkers(workers)])
    return time.perf_counter() - started


def ratio(wait_s: float, reps: int) -> tuple[float, float]:
    timed(wait_s, 4), timed(wait_s, 1)  # warm up
    together = statistics.median(timed(wait_s, 4) for _ in range(reps))
    serial = statistics.median(timed(wait_s, 1) for _ in range(reps))
    return together * 1e3, serial * 1e3


def main() -> None:
    together, serial = ratio(0.2, SLOW_REPS)
    print(f"(a) 4 calls x 200 ms: tool_workers=4 {together:.0f} ms, serial {serial:.0f} ms, "
          f"ratio {together / serial:.2f} (median of {SLOW_REPS})")
    together, serial = ratio(0.0, FAST_REPS)
    print(f"(b) 4 trivial calls: tool_workers=4 {together:.2f} ms, serial {serial:.2f} ms, "
          f"ratio {together / serial:.2f} (median of {FAST_REPS})")


if __name__ == "__main__":
    main()
