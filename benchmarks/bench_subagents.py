"""What does delegation save the parent? A benchmark script (not a test).

    python benchmarks/bench_subagents.py

The exploration task of lesson 13 ("where is `expires_on` checked?" in the 18-file
shop project, vibe_agent/data/explore/shopfront), run by the scripted explorer
(`vibe_agent.course.explorer`: a program, not an LLM) through the real SDK:

(a) the parent's prompt tokens summed over its rounds, with `delegate` / without
    (the parent reads file after file itself); aim <= 0.5;
(b) the parent's rounds, and everything the run cost (parent and child together);
(c) the two-file task: the same, where delegation costs more than it saves.

Tokens are the explorer's `usage`, counted by its fixed rule (`explorer.COUNTING_RULE`),
not by a real tokenizer; the rule is deterministic, so every run prints the same numbers.
"""

from __future__ import annotations

from vibe_agent import run_agent
from vibe_agent.coding import coding_registry
from vibe_agent.course.explorer import (
    QUESTION,
    SHOPFRONT,
    TWO_FILE_QUESTION,
    explorer_model,
    model_steps,
)
from vibe_agent.subagents import delegate_registry

MODEL = "scripted-explorer"


def run(question: str, delegate: bool) -> dict[str, int]:
    client = explorer_model().client()
    tools = coding_registry(SHOPFRONT).subset(["list_files", "read_file"])
    if delegate:
        tools = delegate_registry(client, model=MODEL, tools=tools, max_iters=20)
    result = run_agent(client, question, tools, model=MODEL, max_iters=20)
    assert result.ok, result.message
    everything = model_steps(result.trace)
    return {"parent_prompt": sum(u["prompt_tokens"] for u in result.usage),
            "parent_rounds": result.model_calls,
            "all_calls": len(everything),
            "all_tokens": sum(step.total_tokens for step in everything)}


def main() -> None:
    for title, question in (("exploration (18 files)", QUESTION),
                            ("two-file task", TWO_FILE_QUESTION)):
        plain, delegated = run(question, False), run(question, True)
        print(f"{title}:")
        ratio = delegated["parent_prompt"] / plain["parent_prompt"]
        print(f"  parent prompt tokens: delegate {delegated['parent_prompt']} / alone "
              f"{plain['parent_prompt']} = ratio {ratio:.2f}")
        print(f"  parent rounds: delegate {delegated['parent_rounds']}, alone "
              f"{plain['parent_rounds']}")
        print(f"  whole run (parent + child): {delegated['all_calls']} calls, "
              f"{delegated['all_tokens']} tokens / alone {plain['all_calls']} calls, "
              f"{plain['all_tokens']} tokens = ratio "
              f"{delegated['all_tokens'] / plain['all_tokens']:.2f}")


if __name__ == "__main__":
    main()
