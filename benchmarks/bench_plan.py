"""What do a plan, a finish check and memory cost and save? A benchmark script (not a test).

    python benchmarks/bench_plan.py [--only TASK ...] [--no-tokens]

On the bug-fix suite (`vibe_agent/data/tasks`), with lesson 12's scripted models (they
replay each task's known fix; they are programs, not LLMs, so the rounds they save are
the rounds they were written to save — this measures the mechanisms, not a model):

1. finish check: rounds and verdicts of the known-fix model and of the early claimer
   (answers "已修复" first), each without and with `finish_check=tests_gate`;
2. memory: rounds of a session without notes (it looks around first) and with notes;
3. a todo list: the tokens it adds to each round — the todo_write calls and results in
   the history plus the tool's schema — counted by SmolLM2's own tokenizer (llama.cpp's
   /tokenize on 127.0.0.1; `--no-tokens` skips this when the local model is missing).

Every verdict is the held-out tests on a pristine copy (`pristine_verdict`). Medians over
the tasks, and ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx2

from vibe_agent.coding import CODING_SYSTEM_PROMPT, coding_registry
from vibe_agent.course.known_fix import known_fix_model
from vibe_agent.course.planning import (
    claims_early,
    fresh_copy,
    planner_model,
    pristine_verdict,
    session_model,
)
from vibe_agent.course.tasks import BugFixTask, load_suite
from vibe_agent.loop import run_agent
from vibe_agent.memory import MemoryFile, coding_system_prompt
from vibe_agent.plan import FinishCheck, TodoList, tests_gate
from vibe_agent.registry import ToolRegistry

NOTE = "运行测试：python -m pytest -q（在项目根目录）"


def run(model, task: BugFixTask, registry=None, workspace: Path | None = None, *,
        gate: bool = False, system_prompt: str = CODING_SYSTEM_PROMPT):
    """One run on a fresh copy: (model calls, passed by the pristine tests, the result)."""
    workspace = workspace or fresh_copy(task)
    check = FinishCheck(lambda answer: tests_gate(workspace, task.test_command)) if gate else None
    result = run_agent(model.client(), task.prompt, registry or coding_registry(workspace),
                       model=model.name, system_prompt=system_prompt, max_iters=15,
                       layers=[check])
    return result.model_calls, pristine_verdict(task, workspace), result


def finish_check_rows(task: BugFixTask) -> dict[str, tuple[int, bool]]:
    rows = {}
    for label, factory in (("known fix", known_fix_model), ("claims early", claims_early)):
        for gate in (False, True):
            calls, passed, _ = run(factory(task), task, gate=gate)
            rows[f"{label}{' + check' if gate else ''}"] = (calls, passed)
    return rows


def memory_rows(task: BugFixTask, folder: Path) -> dict[str, tuple[int, bool]]:
    notes = MemoryFile(folder / task.name / "notes.md")
    notes.remember(NOTE)
    rows = {}
    for label, memory in (("no notes", None), ("notes", notes)):
        workspace = fresh_copy(task)
        spare = MemoryFile(folder / task.name / label / "notes.md")
        calls, passed, _ = run(session_model(task), task,
                               spare.register(coding_registry(workspace)), workspace,
                               system_prompt=coding_system_prompt(workspace, memory))
        rows[label] = (calls, passed)
    return rows


def tokenizer() -> tuple[Callable[[str], int], str]:
    from vibe_agent.course.local import LOCAL_MODEL_NAME, shared_server

    root = shared_server().base_url.rsplit("/v1", 1)[0]

    def count(text: str) -> int:
        reply = httpx2.post(f"{root}/tokenize", json={"content": text}, timeout=60)
        reply.raise_for_status()
        return len(reply.json()["tokens"])

    return count, LOCAL_MODEL_NAME


def todo_text(body: dict) -> str:
    """The parts of one request that the todo list put there: its calls and results."""
    ids = {c["id"] for m in body["messages"] for c in m.get("tool_calls") or []
           if c["function"]["name"] == "todo_write"}
    parts = [c["function"]["arguments"] for m in body["messages"]
             for c in m.get("tool_calls") or [] if c["id"] in ids]
    parts += [str(m["content"]) for m in body["messages"]
              if m["role"] == "tool" and m.get("tool_call_id") in ids]
    return "\n".join(parts)


def all_text(body: dict) -> str:
    """Every message text and call argument of one request, and its tool schemas."""
    parts = [str(m.get("content") or "") for m in body["messages"]]
    parts += [c["function"]["arguments"] for m in body["messages"] for c in m.get("tool_calls")
              or []]
    return "\n".join([*parts, json.dumps(body.get("tools", []), ensure_ascii=False)])


def todo_tokens(task: BugFixTask, count) -> tuple[list[int], int, int]:
    """Tokens the todo list adds to each request of the planner's run, the schema's, and
    the whole last request's (messages and schemas)."""
    workspace = fresh_copy(task)
    model = planner_model(task)
    run(model, task, TodoList().register(coding_registry(workspace)), workspace)
    schema = json.dumps(TodoList().register(ToolRegistry()).to_schemas(), ensure_ascii=False)
    return ([count(todo_text(body)) if todo_text(body) else 0 for body in model.requests],
            count(schema), count(all_text(model.requests[-1])))


def median_of(rows: list[dict[str, tuple[int, bool]]], key: str) -> tuple[float, int]:
    return (statistics.median(r[key][0] for r in rows), sum(r[key][1] for r in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="task names (default: the whole suite)")
    parser.add_argument("--no-tokens", action="store_true", help="skip the tokenizer part")
    parser.add_argument("--tokens-only", action="store_true", help="only the tokenizer part")
    args = parser.parse_args()
    tasks, errors = load_suite()
    if errors:
        raise SystemExit(f"the suite has broken tasks: {errors}")
    tasks = [t for t in tasks if not args.only or t.name in args.only]
    print(f"{len(tasks)} tasks; scripted models (not LLMs); verdicts by the pristine tests")

    if not args.tokens_only:
        rounds(tasks)
    if not args.no_tokens:
        tokens(tasks)


def rounds(tasks: list[BugFixTask]) -> None:
    finish = [finish_check_rows(task) for task in tasks]
    print("\n1. finish check: median model calls per task, tasks passed")
    for key in finish[0]:
        calls, passed = median_of(finish, key)
        print(f"  {key:<24} {calls:5.1f} calls   {passed:2d}/{len(tasks)} passed")
    extra = [r["claims early + check"][0] - r["claims early"][0] for r in finish]
    print(f"  the check's extra rounds for the early claimer: median {statistics.median(extra)}")

    with tempfile.TemporaryDirectory(prefix="vibe-bench-memory-") as folder:
        memory = [memory_rows(task, Path(folder)) for task in tasks]
    print("\n2. memory: median model calls per task, tasks passed")
    for key in memory[0]:
        calls, passed = median_of(memory, key)
        print(f"  {key:<24} {calls:5.1f} calls   {passed:2d}/{len(tasks)} passed")
    ratio = statistics.median(r["notes"][0] / r["no notes"][0] for r in memory)
    print(f"  with / without notes: median ratio of calls {ratio:.2f}")



def tokens(tasks: list[BugFixTask]) -> None:
    count, tokenizer_name = tokenizer()
    per_task = [todo_tokens(task, count) for task in tasks]
    print(f"\n3. tokens a todo list adds per round ({tokenizer_name}'s tokenizer, /tokenize)")
    schema = per_task[0][1]
    last = [added[-1] for added, _, _ in per_task]
    mean_added = [statistics.mean(added) for added, _, _ in per_task]
    share = [added[-1] / whole for added, _, whole in per_task]
    print(f"  todo_write's schema, sent every round: {schema} tokens")
    print(f"  list in the history, last round: median {statistics.median(last)} tokens "
          f"(min {min(last)}, max {max(last)})")
    print(f"  share of the last request (all messages and schemas): median "
          f"{statistics.median(share):.0%}")
    print(f"  list in the history, mean over a run's rounds: median "
          f"{statistics.median(mean_added):.0f} tokens per round")
    total = [sum(added) + schema * len(added) for added, _, _ in per_task]
    print(f"  all rounds of a run together (history + schema): median "
          f"{statistics.median(total):.0f} tokens")
    note_prompt = coding_system_prompt(tasks[0].repo, _one_note())
    print(f"  one note in the system prompt ({NOTE!r}): "
          f"{count(note_prompt.removeprefix(CODING_SYSTEM_PROMPT))} tokens per round")


def _one_note() -> MemoryFile:
    notes = MemoryFile(Path(tempfile.mkdtemp(prefix="vibe-bench-note-")) / "notes.md")
    notes.remember(NOTE)
    return notes


if __name__ == "__main__":
    main()
