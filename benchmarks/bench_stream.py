"""What does streaming cost, and what does it buy? A benchmark script (not a test).

    python benchmarks/bench_stream.py [--overhead-only]

(a) streaming overhead: the median time of one `run_agent` run (one tool round, then
    an answer) with `stream=True` divided by the same run unstreamed, both on the same
    scripted transport through the real SDK. The streamed reply arrives as server-sent
    events cut into 8-character pieces. The scripted model is the server: writing the
    events (a JSON text per piece) is its work, not ours, so the time it spends answering
    is measured too, and the second ratio leaves it out of both runs: what reading the
    events and joining them by index costs the client.
(b) the terminal agent: in a real pseudo-terminal, the time from sending a request
    to the first character the turn puts on the screen (streamed text or a tool step),
    versus the time to the end of the turn (offline mode: the scripted known-fix model, no
    waiting on a real model's generation; local: the real SmolLM2 when installed).
(c) start-up: `python -m vibe_agent code --help` versus `python -c "import openai"`,
    each a fresh interpreter (median of several).

Medians from one run, on a noisy machine: read the ratios, not the digits.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from vibe_agent import ToolRegistry, run_agent
from vibe_agent.course.scripted import Reply, ScriptedModel, answer, call, calls
from vibe_agent.stream import Streaming

REPS = 200
WARM_UP = 20
STARTS = 7
MODEL = "bench-model"
ANSWER = "17 × 23 = 391。这是一个足够长的回答，好让流式输出被切成好几块：" * 3


def ping() -> str:
    """Return "pong" (a tool that costs nothing)."""
    return "pong"


def script(body: dict[str, Any]) -> Reply:
    if body["messages"][-1]["role"] == "tool":
        return answer(ANSWER)
    return calls(call("ping"), content="先 ping 一下。")


class TimedServer(ScriptedModel):
    """The scripted model, keeping the time it spends answering (the server's share)."""

    served = 0.0

    def handle_request(self, request: Any) -> Any:
        started = time.perf_counter()
        try:
            return super().handle_request(request)
        finally:
            self.served += time.perf_counter() - started


def timed_run(stream: bool) -> tuple[float, float]:
    """(seconds of the whole run, seconds of it the server spent answering)."""
    registry = ToolRegistry()
    registry.register(ping)
    server = TimedServer(script, name="bench")
    client = server.client()
    started = time.perf_counter()
    run_agent(client, "问题", registry, model=MODEL, layers=[Streaming() if stream else None])
    return time.perf_counter() - started, server.served


def overhead() -> tuple[float, float, float, float]:
    """Medians (ms) of the streamed and the unstreamed run, then the same without the
    server's time, measured in turns, so that a busy moment slows both alike."""
    for _ in range(WARM_UP):
        timed_run(True), timed_run(False)
    pairs = [(timed_run(True), timed_run(False)) for _ in range(REPS)]
    streamed = statistics.median(s for (s, _), _ in pairs)
    plain = statistics.median(p for _, (p, _) in pairs)
    client_streamed = statistics.median(s - served for (s, served), _ in pairs)
    client_plain = statistics.median(p - served for _, (p, served) in pairs)
    return streamed * 1e3, plain * 1e3, client_streamed * 1e3, client_plain * 1e3


def first_character(mode: str) -> tuple[float, float] | None:
    """(ms to the first answer character, ms to the end of the turn) in a real pty."""
    import pexpect

    with tempfile.TemporaryDirectory() as state:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env |= {"XDG_STATE_HOME": state, "COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}
        child = pexpect.spawn(sys.executable, ["-m", "vibe_agent", "code", "--task",
                                               "weather_fahrenheit", "--mode", mode,
                                               "--approve", "yolo"],
                              env=env, encoding="utf-8", timeout=300, dimensions=(50, 200))
        try:
            child.expect_exact("› ")
            sent = time.perf_counter()
            child.sendline("/task")
            child.expect_exact("/task")  # the terminal's echo of what we typed
            child.expect_exact("只有华氏度错了。")  # the session shows the task it sends
            child.expect(r"[^\s\x1b]")  # the first visible character of the model's turn
            first = time.perf_counter() - sent
            child.expect("次模型调用")
            whole = time.perf_counter() - sent
            child.sendeof()
            child.expect(pexpect.EOF)
        except pexpect.ExceptionPexpect:
            return None
    return first * 1e3, whole * 1e3


def start_up(argv: list[str]) -> float:
    samples = []
    for _ in range(STARTS):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3


def main() -> None:
    streamed, plain, client_streamed, client_plain = overhead()
    print(f"(a) one run, streamed   {streamed:8.2f} ms (median of {REPS}, in turns)")
    print(f"    one run, unstreamed {plain:8.2f} ms")
    print(f"    ratio streamed / unstreamed: {streamed / plain:.2f}x")
    print(f"    without the scripted server's time: {client_streamed:.2f} ms / "
          f"{client_plain:.2f} ms = {client_streamed / client_plain:.2f}x (the client's own)")
    if "--overhead-only" in sys.argv[1:]:
        return
    for mode in ("offline", "local"):
        timing = first_character(mode)
        if timing:
            first, whole = timing
            print(f"(b) code, {mode} mode: first character after {first:.0f} ms, "
                  f"whole turn {whole:.0f} ms (ratio {first / whole:.2f})")
        else:
            print(f"(b) code, {mode} mode: no complete turn (not installed, or too slow)")
    code = start_up([sys.executable, "-m", "vibe_agent", "code", "--help"])
    sdk = start_up([sys.executable, "-c", "import openai"])
    print(f"(c) start-up: code --help {code:.0f} ms, import openai {sdk:.0f} ms "
          f"(ratio {code / sdk:.2f}x, medians of {STARTS})")


if __name__ == "__main__":
    main()
