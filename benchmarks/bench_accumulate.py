"""Joining a streamed reply: does the time grow with the size of the reply, or faster?

    python benchmarks/bench_accumulate.py [--sizes 2 16] [--piece 32]

One tool call whose arguments arrive in `--piece`-character deltas (32: about what a
provider sends for a long `write_file`), `stream.assemble` joining them. The chunks are
plain dicts made on the fly (what a recording replays), so only the joining is timed,
not the SDK's JSON parsing. Each size is timed once (the largest take seconds); the
line to read is the last: the time ratio for the largest size over the smallest,
next to the data ratio. Linear joining keeps the two about equal; joining with
`str +=` makes the time ratio grow like the square of the data ratio.

The sizes are above the default cap on one call's arguments (`ReplyLimits`), so the
benchmark raises that cap: this is the setting a caller changes too.

Measured on the course machine (2 shared cores, busy): 2 MB took 34.7 s before the
pieces were joined once (`str +=`; 0.25 MB -> 2 MB: time x475), and 0.29 s after
(2 MB -> 16 MB: time x6.5).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

from vibe_agent import stream
from vibe_agent.course.sse import call_delta, chunk_body

MB = 1_000_000


def chunks(total: int, piece: int) -> Iterator[dict[str, Any]]:
    """One call, `total` characters of arguments in `piece`-character deltas."""
    yield chunk_body(call_delta(0, "call_big", "write_file", '{"content": "'))
    text = "x" * piece
    for _ in range(total // piece):
        yield chunk_body(call_delta(0, arguments=text))
    yield chunk_body(call_delta(0, arguments='"}'))
    yield chunk_body({}, "tool_calls")


def timed(total: int, piece: int) -> float:
    limits = stream.ReplyLimits(max_argument_chars=2 * total, max_bytes=4 * total)
    started = time.perf_counter()
    assembled = stream.assemble(chunks(total, piece), limits=limits)
    elapsed = time.perf_counter() - started
    assert len(assembled.message()["tool_calls"][0]["function"]["arguments"]) > total - piece
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[2, 16],
                        help="megabytes of arguments (10^6 characters)")
    parser.add_argument("--piece", type=int, default=32, help="characters per delta")
    args = parser.parse_args()
    times = []
    for size in args.sizes:
        seconds = timed(int(size * MB), args.piece)
        times.append(seconds)
        print(f"{size:6.2f} MB in {args.piece}-character pieces: {seconds:7.3f} s "
              f"({seconds / size:.3f} s per MB)")
    data = args.sizes[-1] / args.sizes[0]
    print(f"data x{data:.1f} -> time x{times[-1] / times[0]:.1f}")


if __name__ == "__main__":
    main()
