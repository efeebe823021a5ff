"""Time to first feedback in the terminal agent: from Enter to the first byte it shows.

    python benchmarks/bench_feedback.py [--runs N] [--modes offline,scripted-live,local]

`python -m vibe_agent code` runs in a real pseudo-terminal (pexpect, TERM=xterm, 100x30).
For each request the clock starts when Enter is sent and stops when the person can see
that something is happening: the spinner's text (`screen.THINKING`), or the turn's last
line if it ends before any spinner. (The prompt's own redraw of the typed line does not
count.) Start-up is the time from starting the process to its prompt. Medians of N, in
seconds. pexpect is no terminal that answers prompt_toolkit's cursor-position request,
so PROMPT_TOOLKIT_NO_CPR=1 is set (unanswered, prompt_toolkit waits 1 s for it).

Modes:
    offline        --task weather_fahrenheit --mode offline (the known-fix model, no LLM)
    scripted-live  a scripted model at the HTTP transport of a real OpenAI client that
                   waits 2 s before every reply, as a slow provider would (not an LLM)
    local          --mode local: the real SmolLM2 on this machine (slow: use --runs 1 or 2)

Run it with PYTHONPATH pointing at another checkout to measure that one (before/after).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import pexpect

PROMPT = "› "
THINKING = "等模型回复"  # vibe_agent.screen.THINKING: the spinner's words
SCRIPTED = """
import sys, time
from vibe_agent.course import code_command
from vibe_agent.course.cli import main
from vibe_agent.course.scripted import Reply, ScriptedModel

class Slow(ScriptedModel):
    def handle_request(self, request):
        time.sleep(2.0)
        return super().handle_request(request)

model = Slow([Reply(content="好的，我看一下。") for _ in range(100)])
code_command._client = lambda mode, task: (model.client(), "slow-scripted", "（不是 LLM）")
sys.exit(main(sys.argv[1:]))
"""
MODES = {
    "offline": ["-m", "vibe_agent", "code", "--task", "weather_fahrenheit", "--mode", "offline",
                "--approve", "yolo"],
    "scripted-live": ["-c", SCRIPTED, "code", "."],
    "local": ["-m", "vibe_agent", "code", ".", "--mode", "local", "--approve", "yolo"],
}


def measure(mode: str, runs: int) -> tuple[float, list[float]]:
    """(start-up seconds, seconds from Enter to the first byte after the echo, per run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    with tempfile.TemporaryDirectory(prefix="bench-feedback-") as home:
        env |= {"TERM": "xterm", "XDG_STATE_HOME": home, "COLUMNS": "100", "LINES": "30",
                "PROMPT_TOOLKIT_NO_CPR": "1"}
        started = time.perf_counter()
        child = pexpect.spawn(sys.executable, MODES[mode], env=env, cwd=home,
                              encoding="utf-8", timeout=600, dimensions=(30, 100))
        child.expect_exact(PROMPT)
        startup = time.perf_counter() - started
        waits = []
        for number in range(runs):
            line = f"你好 {number}"
            child.send(line + "\r")
            sent = time.perf_counter()
            if child.expect_exact([THINKING, "次模型调用"]) == 0:  # a sign of life
                waits.append(time.perf_counter() - sent)
                child.expect_exact("次模型调用")
            else:  # the turn ended before any spinner showed
                waits.append(time.perf_counter() - sent)
            child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()
    return startup, waits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--modes", default="offline,scripted-live")
    args = parser.parse_args()
    print(f"{'mode':<15}{'start-up s':>11}{'first feedback s (median)':>28}  runs")
    for mode in args.modes.split(","):
        startup, waits = measure(mode, args.runs)
        print(f"{mode:<15}{startup:>11.2f}{statistics.median(waits):>28.3f}  "
              + " ".join(f"{w:.3f}" for w in waits), flush=True)


if __name__ == "__main__":
    main()
