"""Replay cost: how much a replayed request costs beyond parsing its JSON.

Prints medians and ratios (not a test; the machine is noisy):
  1. replayed `chat.completions.create` / `ChatCompletion.model_validate` of the same JSON
     (goal <= 1.5x);
  2. replay lookup with 10 versus 1000 recorded interactions (should stay ~1x).

Run: python benchmarks/bench_replay.py
"""

from __future__ import annotations

import statistics
import time

import httpx2
import openai
from openai.types.chat import ChatCompletion

from vibe_agent.course.cassette import Cassette
from vibe_agent.course.scripted import ScriptedModel, answer
from vibe_agent.course.transports import ReplayTransport

REPEAT = 2000


def completion_json(n: int) -> dict:
    return ScriptedModel([]).completion("bench", answer(f"answer number {n}"))


def request(n: int) -> dict:
    return {"model": "bench", "messages": [{"role": "user", "content": f"question {n}"}],
            "temperature": 0}


def cassette(size: int) -> Cassette:
    return Cassette("bench", {"source": "scripted-reference"}, [
        {"kind": "chat", "request": request(n), "response": {"status": 200,
                                                             "body": completion_json(n)}}
        for n in range(size)])


def sdk_client(transport: httpx2.BaseTransport) -> openai.OpenAI:
    """The same client stack make_client builds for replay, over any transport."""
    return openai.OpenAI(api_key="none", base_url="http://replay.invalid/v1", max_retries=0,
                         http_client=openai.DefaultHttpxClient(transport=transport))


def median_us(fn, repeat: int = REPEAT) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> None:
    body = completion_json(0)
    validate = median_us(lambda: ChatCompletion.model_validate(body))

    # The SDK's own floor: the same client stack over a transport that returns fixed bytes.
    fixed = httpx2.MockTransport(lambda request: httpx2.Response(200, json=body))
    floor_client = sdk_client(fixed)
    floor = median_us(lambda: floor_client.chat.completions.create(**request(0)))

    rows = []
    for size in (10, 1000):
        tape = cassette(size)
        client = sdk_client(ReplayTransport(tape))
        ask = request(size // 2)
        create = median_us(lambda client=client, ask=ask: client.chat.completions.create(**ask))
        lookup = median_us(lambda tape=tape, ask=ask: tape.chat_response(ask))
        rows.append((size, create, lookup))

    print(f"ChatCompletion.model_validate          {validate:9.1f} µs")
    print(f"SDK create over a fixed transport       {floor:9.1f} µs  (the SDK's own floor)")
    for size, create, lookup in rows:
        print(f"replayed create, {size:>4} interactions  {create:9.1f} µs   "
              f"(cassette lookup alone {lookup:6.1f} µs)")
    print()
    create_10 = rows[0][1]
    print(f"replayed create / model_validate          {create_10 / validate:6.2f}x  (goal <= 1.5x)")
    print(f"replayed create / SDK floor               {create_10 / floor:6.2f}x")
    print(f"(lookup + validate) / model_validate      {(rows[0][2] + validate) / validate:6.2f}x"
          "  (replay's own work per response)")
    print(f"lookup 1000 / lookup 10 interactions      {rows[1][2] / rows[0][2]:6.2f}x")
    print(f"create 1000 / create 10 interactions      {rows[1][1] / rows[0][1]:6.2f}x")


if __name__ == "__main__":
    main()
