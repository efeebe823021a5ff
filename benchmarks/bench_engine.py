"""How much does the engine cost? A benchmark script (not a test): run it and read the table.

    /tmp/v/bin/python benchmarks/bench_engine.py

(a) per-round overhead of `run_agent`: the median time of one model round inside
    `run_agent` (one tool round, then an answer; a trivial tool) divided by the
    median time of a bare `client.chat.completions.create` on the same scripted
    transport. Both go through the real `openai` SDK and a scripted model, so the
    ratio is what the loop, the registry and the trace add per round.
(b) import cost: `import vibe_agent` versus `import openai`, each timed in fresh
    interpreters with `python -X importtime` (the cumulative time of the package,
    without interpreter start-up). vibe_agent imports openai, so the ratio is at
    least about 1; the last row shows what vibe_agent adds on top of the SDK.
(c) the per-tool time limit: the median time of `registry.call` on a trivial tool
    under the default limit (the tool runs in a worker thread the registry waits
    for) divided by the same call with `timeout=None` (run in the caller's thread).
    The difference is what the limit costs per tool call.

Medians, not means: one slow run (a garbage collection, a busy machine) should not
move the result. Everything runs offline in well under a minute.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Any

from vibe_agent import ToolRegistry, run_agent
from vibe_agent.course.scripted import Reply, ScriptedModel, answer, call, calls
from vibe_agent.loop import DEFAULT_SYSTEM_PROMPT
from vibe_agent.registry import DEFAULT_TIMEOUT

ROUND_REPS = 200  # run_agent runs and bare create calls for (a)
CALL_REPS = 2000  # registry calls with and without a time limit for (c)
WARM_UP = 20
IMPORT_RUNS = 7  # fresh interpreters per import for (b)
MODEL = "bench-model"
QUESTION = "17 × 23 等于多少？"


def ping() -> str:
    """Return "pong" (a tool that costs nothing, so only the engine is measured)."""
    return "pong"


def one_tool_round(body: dict[str, Any]) -> Reply:
    """Call `ping` once, then answer as soon as its result is in the history."""
    if body["messages"][-1]["role"] == "tool":
        return answer("done")
    return calls(call("ping"))


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def round_overhead() -> tuple[float, float]:
    """Median µs per model round of run_agent, and per bare create call."""
    registry = ToolRegistry()
    registry.register(ping)
    client = ScriptedModel(one_tool_round, name="bench").client()
    # the bare call sends exactly what run_agent sends in its first round
    first_request: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
                     {"role": "user", "content": QUESTION}],
        "tools": registry.to_schemas(), "tool_choice": "auto", "temperature": 0,
    }

    def agent_run() -> float:
        started = time.perf_counter()
        result = run_agent(client, QUESTION, registry, model=MODEL)
        elapsed = time.perf_counter() - started
        assert result.ok and result.model_calls == 2, result.message
        return elapsed / result.model_calls

    def bare_create() -> float:
        started = time.perf_counter()
        client.chat.completions.create(**first_request)
        return time.perf_counter() - started

    for _ in range(WARM_UP):
        agent_run(), bare_create()
    per_round: list[float] = []
    bare: list[float] = []
    for _ in range(ROUND_REPS):  # interleaved, so drift hits both sides alike
        per_round.append(agent_run())
        bare.append(bare_create())
    return median_us(per_round), median_us(bare)


def time_limit_overhead() -> tuple[float, float]:
    """Median µs per registry.call of `ping` with the default time limit, and without one."""
    limited, unlimited = ToolRegistry(), ToolRegistry()
    limited.register(ping)  # DEFAULT_TIMEOUT
    unlimited.register(ping, timeout=None)

    def one_call(registry: ToolRegistry) -> float:
        started = time.perf_counter()
        result = registry.call("ping", "{}")
        elapsed = time.perf_counter() - started
        assert result.output == "pong", result.output
        return elapsed

    for _ in range(WARM_UP):
        one_call(limited), one_call(unlimited)
    with_limit: list[float] = []
    without: list[float] = []
    for _ in range(CALL_REPS):  # interleaved, so drift hits both sides alike
        with_limit.append(one_call(limited))
        without.append(one_call(unlimited))
    return median_us(with_limit), median_us(without)


def cumulative_import_ms(code: str, module: str) -> float:
    """Run `code` in a fresh interpreter with -X importtime; `module`'s cumulative ms."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, check=True)
    for line in done.stderr.splitlines():  # "import time: self | cumulative | name"
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[2].strip() == module:
            return int(parts[1]) / 1000
    raise RuntimeError(f"-X importtime did not report {module!r}")


def import_costs() -> dict[str, float]:
    """Median cumulative import time (ms) of each package, in fresh interpreters."""
    runs = {
        "vibe_agent": ("import vibe_agent", "vibe_agent"),
        "openai": ("import openai", "openai"),
        # what our package adds once the SDK is already loaded
        "vibe_agent after openai": ("import openai, vibe_agent", "vibe_agent"),
    }
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(IMPORT_RUNS):  # interleaved, like the rounds above
        for name, (code, module) in runs.items():
            samples[name].append(cumulative_import_ms(code, module))
    return {name: statistics.median(s) for name, s in samples.items()}


def table(rows: list[tuple[str, str]]) -> str:
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def main() -> None:
    agent_us, bare_us = round_overhead()
    limited_us, unlimited_us = time_limit_overhead()
    imports = import_costs()
    print(f"(a) per-round overhead, median of {ROUND_REPS} runs (scripted transport)")
    print(table([
        ("run_agent, per model round", f"{agent_us:9.1f} us"),
        ("bare chat.completions.create", f"{bare_us:9.1f} us"),
        ("ratio run_agent / bare", f"{agent_us / bare_us:9.2f} x"),
    ]))
    print()
    print(f"(b) import cost, median of {IMPORT_RUNS} fresh interpreters (python -X importtime)")
    print(table([
        ("import vibe_agent", f"{imports['vibe_agent']:9.1f} ms"),
        ("import openai", f"{imports['openai']:9.1f} ms"),
        ("ratio vibe_agent / openai", f"{imports['vibe_agent'] / imports['openai']:9.2f} x"),
        ("vibe_agent's own share", f"{imports['vibe_agent after openai']:9.1f} ms"
                                   "  (imported after openai)"),
    ]))
    print()
    print(f"(c) per-tool time limit, median of {CALL_REPS} registry calls of a trivial tool")
    print(table([
        (f"timeout={DEFAULT_TIMEOUT:g} s (worker thread)", f"{limited_us:9.1f} us"),
        ("timeout=None (caller's thread)", f"{unlimited_us:9.1f} us"),
        ("ratio with / without the limit", f"{limited_us / unlimited_us:9.2f} x"),
        ("added per tool call", f"{limited_us - unlimited_us:9.1f} us"),
    ]))


if __name__ == "__main__":
    main()
