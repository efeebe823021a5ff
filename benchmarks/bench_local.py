"""How fast is the local model on this machine? Load time, generation speed, memory.

    python benchmarks/bench_local.py [--runs 5]

Starts SmolLM2-135M-Instruct with llama.cpp (vibe_agent.course.local), sends the same
request a few times through the real OpenAI SDK and prints a plain table of medians.
"end to end" divides usage.completion_tokens by the wall time of the whole request
(prompt processing included); the llama.cpp columns come from the `timings` block the
server adds to each response. Peak RSS is this whole Python process.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time

import openai

from vibe_agent.course.local import LOCAL_MODEL_INFO, LOCAL_MODEL_NAME, LocalServer

PROMPT = "Write a long story about a dragon who learns to count."
MAX_TOKENS = 128


def peak_rss_mb() -> float:
    """Peak resident memory of this process (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def measure_loads(runs: int) -> list[float]:
    """Seconds from start() to ready, over `runs` fresh servers."""
    seconds = []
    for _ in range(runs):
        with LocalServer() as server:
            assert server.load_seconds is not None
            seconds.append(server.load_seconds)
    return seconds


def measure_generation(client: openai.OpenAI, runs: int) -> list[dict[str, float]]:
    """One row of speeds per request."""
    rows = []
    for _ in range(runs):
        started = time.perf_counter()
        reply = client.chat.completions.create(
            model=LOCAL_MODEL_NAME, temperature=0, max_tokens=MAX_TOKENS,
            messages=[{"role": "user", "content": PROMPT}])
        elapsed = time.perf_counter() - started
        assert reply.usage is not None
        timings = (reply.model_extra or {}).get("timings", {})
        rows.append({
            "completion_tokens": reply.usage.completion_tokens,
            "end_to_end": reply.usage.completion_tokens / elapsed,
            "decode": timings.get("predicted_per_second", float("nan")),
            "prompt": timings.get("prompt_per_second", float("nan")),
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="repetitions per measurement")
    runs = parser.parse_args().runs

    loads = measure_loads(min(runs, 3))
    with LocalServer() as server, openai.OpenAI(
        base_url=server.base_url, api_key="local", max_retries=0
    ) as client:
        rows = measure_generation(client, runs)

    def median(key: str) -> float:
        return statistics.median(row[key] for row in rows)

    table = [
        ("model", LOCAL_MODEL_NAME),
        ("runtime", LOCAL_MODEL_INFO["runtime"]),
        ("load time, start -> ready (median)", f"{statistics.median(loads):.2f} s"),
        ("completion tokens per request", f"{median('completion_tokens'):.0f}"),
        ("generation, end to end (median)", f"{median('end_to_end'):.1f} tokens/s"),
        ("generation, llama.cpp decode (median)", f"{median('decode'):.1f} tokens/s"),
        ("prompt processing, llama.cpp (median)", f"{median('prompt'):.1f} tokens/s"),
        ("peak RSS of this process", f"{peak_rss_mb():.0f} MB"),
        ("runs", f"{len(loads)} loads, {len(rows)} requests"),
    ]
    width = max(len(name) for name, _ in table)
    for name, value in table:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
