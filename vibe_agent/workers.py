"""Running the tool calls of one reply: one after another, or several at the same time.

`run_tool` runs one call (its trace step) through the registry; `run_tools` runs a
batch, up to `workers` at once. The `ToolWorkers(n)` layer (lesson 13) hands the loop
a whole reply as one batch: the spinning brakes decide on every call, in the reply's
order, before any runs; the results come back in the reply's order, never in the
order the calls finished, so each is paired with its own id.
"""

from __future__ import annotations

import contextvars
import time
from concurrent.futures import ThreadPoolExecutor

from .layers import Layer
from .registry import ToolRegistry
from .reply import clean_text
from .trace import TraceStep, current_step


def run_tool(registry: ToolRegistry, step: TraceStep) -> bool:
    """Run a tool call (its step) through the registry, which never raises for the
    model's mistakes, and fill in the step; True when the tool succeeded."""
    started = time.perf_counter()
    token = current_step.set(step)  # a sub-agent run by the tool files its steps here
    try:
        result = registry.call(step.tool, step.arguments)
    finally:
        current_step.reset(token)
    step.result, step.outcome = clean_text(result.output), result.error_kind or "ok"
    step.result_type = result.output_type
    if result.exception is not None:  # the model gets text; the trace keeps the exception
        step.error = f"{type(result.exception).__name__}: {result.exception}"
        step.error_type = type(result.exception).__name__
    elif not result.ok:
        step.error = result.output
    step.elapsed_ms = (time.perf_counter() - started) * 1000
    return result.ok


def run_tools(registry: ToolRegistry, steps: list[TraceStep], workers: int) -> list[bool]:
    """Run the steps' calls, up to `workers` at the same time; whether each succeeded,
    in the steps' order (never in the order they finished). No thread outlives this."""
    if workers == 1 or len(steps) < 2:
        return [run_tool(registry, step) for step in steps]
    with ThreadPoolExecutor(max_workers=min(workers, len(steps)),
                            thread_name_prefix="tool-call") as pool:
        running = [pool.submit(contextvars.copy_context().run, run_tool, registry, step)
                   for step in steps]
        return [future.result() for future in running]


class ToolWorkers(Layer):
    """Run up to `workers` calls of one reply at the same time (events `batches` and
    `run_tools`). The tool-error brake counts the results in the reply's order once
    they are all in, so it stops the run after them, not between them."""

    def __init__(self, workers: int) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"ToolWorkers({workers!r}): at least 1 (1 runs calls one by one)")
        self.workers = workers

    def batches(self, steps: list[TraceStep]) -> list[list[TraceStep]] | None:
        return None if self.workers == 1 else [steps]

    def run_tools(self, registry: ToolRegistry, steps: list[TraceStep]) -> list[bool] | None:
        return run_tools(registry, steps, self.workers)
