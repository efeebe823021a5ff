"""Evaluate a coding agent on the bug-fix suite: `run_suite()` and `python -m vibe_agent bench`.

One task, start to finish (`run_task`):

    FAIL_TO_PASS / PASS_TO_PASS of the task     <- judge.test_ids: computed once, cached
    copy the task's repo/ into a fresh temporary folder ("workspace", never the task's name)
    the tools on that folder (`registry_factory`; by default the coding tools, commands
    from an allow-list, in the sandbox)
    run_agent(client, task.prompt, tools, system_prompt=...)   <- the loop, unchanged
    judge on a HELD-OUT copy: the pristine task + the agent's source changes only,
    one verdict per test (vibe_agent.course.judge)              <- the ONLY judge
    record: passed (= resolved), per-test verdicts, discarded edits, stop reason,
    model calls, tokens, seconds, diff, final answer

What the model says ("已修复") never decides anything, and neither does the state the
agent left its workspace in: tests, test data and pytest's configuration come from the
pristine task, as in SWE-bench. A task is resolved when every FAIL_TO_PASS test passes
and every PASS_TO_PASS test still passes.

An experiment changes what `run_suite` takes: the model (`model_factory`, or `model`
for the name sent), the system prompt, the tool set (`registry_factory`) and the request
options (`request_options`, e.g. {"temperature": 0.7, "max_tokens": 512}).

Which agent: lesson 09's by default (`bench_registry`, BENCH_SYSTEM_PROMPT), or with
`--agent code` the terminal agent of `python -m vibe_agent code` (`code_agent_factories`:
the same `vibe_agent.code_agent.code_agent` the terminal builds, so its tools todo_write,
remember and delegate, and its rules, CODING_SYSTEM_PROMPT). Only its coding tools
differ from the terminal's: nobody is there to approve, so commands follow the bench's
allow-list and the task's time limit. Its notes file is new for each task (a run learns
nothing from the one before), and the suite's tasks have no AGENTS.md.

Concurrency: tasks run on threads (`concurrent.futures.ThreadPoolExecutor`). A task
spends its time waiting: on the model (an HTTP request, or a local server in another
thread) and on subprocesses (the sandboxed test runs). Waiting threads release the GIL,
so threads overlap that waiting as well as processes would, without pickling clients
or starting interpreters. Nothing is shared between tasks: each gets its own client,
tool registry, workspace folder and trace. The clients are made by `model_factory` in
the calling thread, one task after another, before they are handed to the pool, so
a factory need not be thread-safe (`make_client` keeps module-level tables). Results
come back in the tasks' order, so a run with 4 workers gives the same records as a
serial one (only the seconds differ).

Ctrl-C: queued tasks are cancelled, running ones are told to stop (their sandboxed
commands are killed, their loop stops before its next model call) and get about a
second to clean up; `run_suite` then raises `BenchInterrupted` carrying the records so
far, and the CLI prints them (table and JSON) and exits with 130.

Recordings: one cassette per run (`--record`, e.g. notebooks/cassettes/bench_smollm2.json).
Requests of different tasks differ in their prompt, so replay finds each one whatever
the order the threads made them in; the cassette locks around its writes. Its
provenance holds the command, the tasks, `max_iters`, the system prompt and the request
options; replay uses them by default (another round, another task or another prompt
would be a request the cassette does not hold).

Errors: a malformed task folder becomes an error row (the Chinese `TaskError`, which
names the file) and the other tasks still run. So does a workspace the agent left past
the judge's bounds (folders nested too deep, too many files: `judge.WorkspaceUnjudgeable`):
the run is not resolved, and the record says why. An exception out of the harness (a
replay miss, a bug in our code) also becomes an error row, marked as a harness error,
and makes the command exit non-zero; the exception stays on the record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import openai
import psutil
from tqdm import tqdm

from ..code_agent import code_agent
from ..coding import CODING_SYSTEM_PROMPT, coding_registry, remove_tree, snapshot, workspace_diff
from ..loop import run_agent
from ..memory import MemoryFile
from ..registry import ToolRegistry
from ..sandbox import (
    DEFAULT_COMMANDS,
    NOT_ISOLATED,
    Policy,
    SandboxWarning,
    why_not_isolated,
)
from ..trace import Trace
from .cassette import Cassette, CassetteError
from .client import ConfigError, cassette_path, make_client, settings
from .judge import Verdict, WorkspaceUnjudgeable, judge, test_ids
from .known_fix import KNOWN_FIX_LABEL, KNOWN_FIX_MODEL_NAME, known_fix_model
from .tasks import BugFixTask, TaskError, copy_repo, load_suite_folders
from .text import width as text_width

ModelFactory = Callable[[BugFixTask], tuple[openai.OpenAI, str]]  # task -> (client, model name)
RegistryFactory = Callable[[Path, BugFixTask], ToolRegistry]  # (workspace, task) -> the tools

BENCH_MODES = ("offline", "local", "live", "replay")
DEFAULT_MAX_ITERS = 15
DEFAULT_CASSETTES = {"local": "bench_smollm2", "live": "bench_live"}  # --record, --mode replay
EXIT_OK, EXIT_TASK_ERRORS, EXIT_CONFIG, EXIT_HARNESS = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
STOP_GRACE_S = 1.0  # after Ctrl-C, how long running tasks get to stop and clean up

BENCH_SYSTEM_PROMPT = (
    "你是一个修 bug 的编程助手。工作区是一个小项目，用户描述了一个 bug。\n"
    "- 先用 list_files、search_code、read_file 找到相关代码。\n"
    "- 用 edit_file 修改代码（old 要从文件里原样复制）；不要修改或删除测试。\n"
    "- 用 run_command 运行测试（例如 python -m pytest -q），确认全部通过。\n"
    "- 修好后用一两句话说明改了什么。"
)
AGENTS = {  # --agent: which agent the suite measures
    "lesson09": "第 09 课的 agent（六个编程工具，BENCH_SYSTEM_PROMPT）",
    "code": "终端 agent（python -m vibe_agent code 的工具和规则：编程工具、todo_write、"
            "remember、delegate，CODING_SYSTEM_PROMPT）",
}
# Commands the agent may run: Python, pytest and a few read-only helpers, no shell syntax.
BENCH_POLICY = Policy(DEFAULT_COMMANDS)


def bench_registry(workspace: Path, task: BugFixTask) -> ToolRegistry:
    """The default tool set: the six coding tools on the workspace, commands limited to
    the allow-list and to the task's time limit."""
    return coding_registry(workspace, policy=BENCH_POLICY, command_timeout=task.timeout_s)


def code_agent_factories(model_factory: ModelFactory, model: str | None = None
                         ) -> tuple[ModelFactory, RegistryFactory]:
    """The terminal agent for `run_suite` (`--agent code`): `model_factory`, wrapped so
    that each task's registry gets that task's own client for its sub-agent, and the
    registry factory. Use CODING_SYSTEM_PROMPT as the system prompt.

    Args:
        model_factory: as for `run_suite`.
        model: the model name sent (`run_suite(model=...)`); None: the factory's.
    """
    clients: dict[str, tuple[openai.OpenAI, str]] = {}  # written before the task runs

    def models(task: BugFixTask) -> tuple[openai.OpenAI, str]:
        client, name = model_factory(task)
        clients[task.name] = client, model or name
        return client, name

    def registry(workspace: Path, task: BugFixTask) -> ToolRegistry:
        client, name = clients[task.name]
        notes = MemoryFile(workspace.parent / "notes.md")  # removed with the task's folder
        return code_agent(client, name, workspace, bench_registry(workspace, task),
                          memory=notes).registry

    return models, registry


class TaskStopped(Exception):
    """A running task was told to stop (Ctrl-C); it ends before its next model call."""


class BenchInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_suite`: carries the records of the tasks that did finish."""

    def __init__(self, records: list[TaskRecord], unfinished: list[str]) -> None:
        super().__init__(f"interrupted; {len(unfinished)} task(s) did not finish")
        self.records = records
        self.unfinished = unfinished


# Why a task was not judged: its folder is malformed, or the agent left its workspace
# past the judge's bounds (both "task": the run's own, not resolved), our code raised,
# e.g. a replay miss ("harness"), or Ctrl-C stopped it ("interrupted"). Not the same
# thing as a tool call's `ToolResult.error_kind`, which says why one call failed.
ErrorSource = Literal["task", "harness", "interrupted"]


@dataclass
class TaskRecord:
    """The outcome of one task. `passed` is SWE-bench's "resolved", from the tests alone.

    `passed` is True when every FAIL_TO_PASS test passes and every PASS_TO_PASS test
    still passes on the held-out copy (`fail_to_pass` / `pass_to_pass`: test id ->
    passes now). `discarded` lists the agent's changes the judge did not take (path ->
    why, e.g. "改了测试，已还原"); `tests_changed` is True when there is any.
    `stop_reason` is the loop's `StopReason` value, or "error" when the task could not
    be run; then `error` says why and `error_source` where it came from (`ErrorSource`).
    """

    task: str
    passed: bool
    stop_reason: str
    model_calls: int = 0
    tokens: int | None = None  # as reported by the API; None when any call reported none
    seconds: float = 0.0
    diff: str = ""
    answer: str | None = None
    fail_to_pass: dict[str, bool] = field(default_factory=dict)
    pass_to_pass: dict[str, bool] = field(default_factory=dict)
    discarded: dict[str, str] = field(default_factory=dict)
    tests_exit_code: int | None = None  # None: not judged, or the tests timed out
    tests_output: str = ""  # the end of the judging run's output
    tests_timed_out: bool = False  # the whole judging run hit the task's timeout_s
    tests_changed: bool = False  # the agent changed files the judge restored (see discarded)
    isolated: bool | None = None  # the judging run was inside bubblewrap; None: not judged
    error: str | None = None
    error_source: ErrorSource | None = None
    trace: Trace = field(default_factory=Trace, repr=False)
    exception: BaseException | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (without the trace and the exception object)."""
        data = asdict(self, dict_factory=dict)
        del data["trace"], data["exception"]
        return data

    def tests_cell(self) -> str:
        """The table's verdict cell, e.g. "2/2 修好，14/14 未破坏"."""
        if self.error_source is not None:
            return "-"
        fixed, broken_not = sum(self.fail_to_pass.values()), sum(self.pass_to_pass.values())
        return (f"{fixed}/{len(self.fail_to_pass)} 修好，"
                f"{broken_not}/{len(self.pass_to_pass)} 未破坏")


# --- one task ------------------------------------------------------------------------


def run_task(task: BugFixTask, client: openai.OpenAI, model: str, *,
             max_iters: int = DEFAULT_MAX_ITERS, system_prompt: str = BENCH_SYSTEM_PROMPT,
             registry_factory: RegistryFactory = bench_registry,
             request_options: dict[str, Any] | None = None,
             stop: threading.Event | None = None) -> TaskRecord:
    """Run the agent on one task in a fresh copy of its project, then judge it held-out.

    Args:
        task: the task (from `load_task` or `load_suite`).
        client: this task's own client; never share one between concurrent tasks.
        model: the model name sent with every request.
        max_iters: the round brake of the loop.
        system_prompt: the system prompt of the run.
        registry_factory: `(workspace, task) -> ToolRegistry`, the agent's tools.
        request_options: more fields for every request (e.g. {"temperature": 0.7}).
        stop: when set, the run stops before its next model call (raises TaskStopped).

    Raises:
        TaskError: the task cannot be judged (e.g. its fix makes no test pass).
        Exception: whatever the harness raises (e.g. `ReplayMiss`); `run_suite` turns
            it into an error row.
    """
    started = time.perf_counter()
    test_ids(task)  # before any model call: a task that cannot be judged costs nothing
    temp = Path(tempfile.mkdtemp(prefix="vibe-bench-"))
    try:
        # 1. a fresh copy, named so that it does not give the task's name away
        workspace = copy_repo(task, temp / "workspace")
        before = snapshot(workspace)
        # 2. the agent works on it with its own tools and trace
        trace = Trace()
        result = run_agent(client, task.prompt, registry_factory(workspace, task), model=model,
                           max_iters=max_iters, system_prompt=system_prompt, trace=trace,
                           prepare=_stop_check(stop), **(request_options or {}))
        _stop_check(stop)([])
        # 3. the held-out tests decide, on a pristine copy, after the agent has finished
        try:
            verdict: Verdict | None = judge(task, workspace)
        except WorkspaceUnjudgeable as exc:  # the agent's doing: not resolved, said why
            verdict, unjudged = None, str(exc)
        _stop_check(stop)([])  # a judging run killed by Ctrl-C is no verdict
        diff = workspace_diff(before, workspace)
    finally:  # not shutil.rmtree: it recurses, and the agent may have made a deep tree
        remove_tree(temp)
    record = TaskRecord(task=task.name, passed=False, stop_reason=result.stop_reason.value,
                        model_calls=result.model_calls, tokens=result.total_tokens,
                        seconds=time.perf_counter() - started, diff=diff,
                        answer=result.answer, trace=trace)
    if verdict is None:
        record.error, record.error_source = unjudged, "task"
        return record
    return replace(
        record,
        passed=verdict.resolved,
        fail_to_pass=verdict.fail_to_pass,
        pass_to_pass=verdict.pass_to_pass,
        discarded=verdict.discarded,
        tests_exit_code=verdict.run.exit_code,
        tests_output=verdict.run.output,
        tests_timed_out=verdict.run.timed_out,
        tests_changed=bool(verdict.discarded),
        isolated=verdict.run.isolated,
    )


def _stop_check(stop: threading.Event | None) -> Callable[[list[Any]], list[Any]]:
    """A `prepare` hook that passes the history on unchanged, unless `stop` is set."""

    def check(messages: list[Any]) -> list[Any]:
        if stop is not None and stop.is_set():
            raise TaskStopped("stopped by Ctrl-C")
        return messages

    return check


def _guarded(task: BugFixTask, client: openai.OpenAI, model: str, options: dict[str, Any]
             ) -> TaskRecord:
    """`run_task`, with a task, harness or stop exception turned into an error row."""
    started = time.perf_counter()
    try:
        return run_task(task, client, model, **options)
    except Exception as exc:
        if isinstance(exc, TaskStopped) or options["stop"].is_set():  # its commands were killed
            return TaskRecord(task=task.name, passed=False, stop_reason="error",
                              seconds=time.perf_counter() - started,
                              error="按了 Ctrl-C，任务没有跑完。", error_source="interrupted",
                              exception=exc)
        if isinstance(exc, TaskError):
            return task_error_record(task.name, exc)
        # a harness error: recorded, and the CLI exits non-zero
        name = type(exc).__name__
        text = " ".join(str(exc).split())  # a ReplayMiss's text already starts with its name
        text = text if text.startswith(name) else f"{name}: {text}"
        return TaskRecord(task=task.name, passed=False, stop_reason="error",
                          seconds=time.perf_counter() - started, error=text,
                          error_source="harness", exception=exc)


def task_error_record(name: str, error: TaskError) -> TaskRecord:
    """The error row of a task folder that could not be loaded or judged."""
    return TaskRecord(task=name, passed=False, stop_reason="error", error=str(error),
                      error_source="task", exception=error)


# --- a whole suite -------------------------------------------------------------------


def run_suite(tasks: Sequence[BugFixTask], model_factory: ModelFactory, *, workers: int = 1,
              max_iters: int = DEFAULT_MAX_ITERS, system_prompt: str = BENCH_SYSTEM_PROMPT,
              registry_factory: RegistryFactory = bench_registry, model: str | None = None,
              request_options: dict[str, Any] | None = None,
              on_done: Callable[[TaskRecord], None] | None = None) -> list[TaskRecord]:
    """Run every task, `workers` at a time, each with its own client; records in task order.

    Args:
        tasks: the tasks to run.
        model_factory: `task -> (client, model name)`, called once per task in this
            thread, e.g. `known_fix_factory(tasks)` or `client_factory("local")`.
        workers: how many tasks run at the same time (threads).
        max_iters: the round brake of each run.
        system_prompt: the system prompt of every run (default `BENCH_SYSTEM_PROMPT`).
        registry_factory: `(workspace, task) -> ToolRegistry`, the agent's tools
            (default `bench_registry`: the six coding tools).
        model: the model name sent with every request; None: the factory's.
        request_options: more fields for every request, e.g. {"temperature": 0.7}.
        on_done: called in this thread with each record as its task finishes (e.g. to
            move a progress bar).

    Raises:
        BenchInterrupted: Ctrl-C; it carries the records of the tasks that finished.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    why_not_isolated()  # probe bubblewrap once, here, rather than in every thread at once
    stop = threading.Event()
    options = {"max_iters": max_iters, "system_prompt": system_prompt,
               "registry_factory": registry_factory, "request_options": request_options,
               "stop": stop}
    records: dict[str, TaskRecord] = {}
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench")
    futures: list[Future[TaskRecord]] = []
    try:
        for task in tasks:
            client, name = model_factory(task)
            futures.append(pool.submit(_guarded, task, client, model or name, options))
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=futures.index):
                record = future.result()
                records[record.task] = record
                if on_done is not None:
                    on_done(record)
    except KeyboardInterrupt:
        raise _interrupted(pool, futures, stop, records, tasks) from None
    except BaseException:  # e.g. a factory that raises: nothing new starts, then re-raise
        stop.set()
        pool.shutdown(cancel_futures=True)
        raise
    pool.shutdown()
    return [records[task.name] for task in tasks]


def _interrupted(pool: ThreadPoolExecutor, futures: list[Future[TaskRecord]],
                 stop: threading.Event, records: dict[str, TaskRecord],
                 tasks: Sequence[BugFixTask]) -> BenchInterrupted:
    """Ctrl-C: cancel what is queued, stop what runs, keep what finished."""
    stop.set()
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + STOP_GRACE_S
    try:
        while time.monotonic() < deadline and not all(f.done() for f in futures):
            _kill_sandboxed_commands()  # again and again: a task may be starting one
            wait(futures, timeout=0.05)
    except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
        pass
    for future in futures:
        if future.done() and not future.cancelled():
            record = future.result()
            records.setdefault(record.task, record)
    done = [records[task.name] for task in tasks if task.name in records]
    return BenchInterrupted(done, [task.name for task in tasks if task.name not in records])


def _kill_sandboxed_commands() -> None:
    """Kill the commands this process runs in the sandbox (each leads its own session)."""
    for child in psutil.Process().children():
        try:
            if os.getsid(child.pid) == child.pid and child.name() in ("bwrap", "sh"):
                os.killpg(child.pid, signal.SIGKILL)
        except (psutil.Error, OSError):  # it ended meanwhile
            pass


def known_fix_factory(tasks: Sequence[BugFixTask] | None = None) -> ModelFactory:
    """Each task gets its own known-fix model (a script that replays the task's fix, not an LLM).

    Args:
        tasks: unused, accepted so every factory is built the same way.
    """
    del tasks

    def factory(task: BugFixTask) -> tuple[openai.OpenAI, str]:
        return known_fix_model(task).client(), KNOWN_FIX_MODEL_NAME

    return factory


def client_factory(mode: str, cassette: str | None = None, *,
                   source: str | None = None) -> ModelFactory:
    """Each task gets its own `make_client(mode, cassette, source=source)`.

    In record mode all the clients append to one cassette (one cassette per run: the
    requests of different tasks differ in their prompt, so replay finds each one).

    Args:
        mode: live, local, replay or record (see `vibe_agent.course.client`).
        cassette: the cassette for replay and record, e.g. "bench_smollm2".
        source: record mode: what to record from, "local" or "live".
    """

    def factory(task: BugFixTask) -> tuple[openai.OpenAI, str]:
        client = make_client(mode, cassette, source=source)
        return client, client.model

    return factory


def load_tasks(folder: str | Path | None = None) -> tuple[list[BugFixTask], list[TaskRecord]]:
    """The tasks of a suite folder, and an error row for each folder that is malformed.

    Args:
        folder: a folder of task folders; default the course's suite.
    """
    tasks, broken = load_suite_folders(folder)
    return tasks, [task_error_record(name, error) for name, error in broken.items()]


# --- the report ----------------------------------------------------------------------


def summary(records: Sequence[TaskRecord], wall_seconds: float) -> dict[str, Any]:
    """Totals of a run: resolved tasks, tokens (None if any task reported none), wall time.

    `isolated` is True when every judged task ran in bubblewrap, None if none was judged.
    """
    ran = [r for r in records if r.error_source is None]
    tokens = [r.tokens for r in ran]
    return {
        "tasks": len(records),
        "passed": sum(r.passed for r in records),
        "pass_rate": sum(r.passed for r in records) / len(records) if records else 0.0,
        "task_errors": sum(r.error_source == "task" for r in records),
        "harness_errors": sum(r.error_source == "harness" for r in records),
        "interrupted": sum(r.error_source == "interrupted" for r in records),
        "tests_changed": sum(r.tests_changed for r in records),
        "tokens": sum(tokens) if ran and None not in tokens else None,  # type: ignore[arg-type]
        "isolated": all(r.isolated for r in ran) if ran else None,
        "wall_seconds": wall_seconds,
    }


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - text_width(text))


ERROR_SOURCES = {"task": "无法判定", "harness": "评测框架出错", "interrupted": "已中断"}


def format_table(records: Sequence[TaskRecord], wall_seconds: float) -> str:
    """The table the CLI prints: one row per task, the judge's notes, then the totals."""
    header = ["任务", "通过", "测试", "还原", "停止原因", "模型调用", "tokens", "秒"]
    rows = [[r.task, "✓" if r.passed else "✗", r.tests_cell(),
             f"{len(r.discarded)} 处" if r.discarded else "-", r.stop_reason,
             str(r.model_calls), "n/a" if r.tokens is None else str(r.tokens),
             f"{r.seconds:.1f}"] for r in records]
    widths = [max(text_width(row[i]) for row in [header, *rows]) + 2 for i in range(len(header))]
    lines = ["".join(_pad(cell, w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *rows]]
    for r in records:
        if r.discarded:
            notes = "；".join(f"{path} {why}" for path, why in r.discarded.items())
            lines.append(f"判定时没有采用（{r.task}）：{notes}")
        if r.tests_timed_out:
            lines.append(f"测试超时（{r.task}）：整轮判定超过了 timeout_s，没有报告的测试算失败")
        if r.error:
            source = ERROR_SOURCES.get(r.error_source or "", "出错")
            lines.append(f"{source}（{r.task}）：{r.error}")
    totals = summary(records, wall_seconds)
    if totals["isolated"] is False:
        lines.append(f"{NOT_ISOLATED}：判定和 agent 的命令都没有隔离（{why_not_isolated()}）")
    tokens = "n/a" if totals["tokens"] is None else str(totals["tokens"])
    lines.append(f"通过 {totals['passed']}/{totals['tasks']}（{totals['pass_rate']:.0%}），"
                 f"tokens 合计 {tokens}，总耗时 {wall_seconds:.1f} 秒")
    return "\n".join(lines)


# --- the command line ----------------------------------------------------------------


def add_parser(sub: Any) -> None:
    """Add the `bench` command to the CLI's subparsers."""
    bench = sub.add_parser("bench", help="在修 bug 任务集上评测 coding agent（只看留出的测试）")
    bench.add_argument("--mode",
                       help="模型：offline（已知修复模型：重放已知修复的脚本，不是 LLM，不联网）、"
                            "local（SmolLM2）、live（在线服务）、replay（回放录制文件）；"
                            "默认：VIBE_AGENT_MODE，没有设置时有 key 用 live，否则 offline")
    bench.add_argument("--tasks", type=Path, help="任务集文件夹（默认：课程自带的任务集）")
    bench.add_argument("--only", nargs="+", metavar="NAME", help="只运行这些任务")
    bench.add_argument("--workers", default="1", help="同时运行几个任务（线程数，正整数）")
    bench.add_argument("--max-iters",
                       help=f"每个任务最多调用模型几轮（正整数，默认 {DEFAULT_MAX_ITERS}；"
                            "回放时默认用录制文件里的值）")
    bench.add_argument("--system-prompt", type=Path, metavar="FILE",
                       help="从这个 UTF-8 文本文件读 system prompt（默认：BENCH_SYSTEM_PROMPT；"
                            "回放时默认用录制时的）")
    bench.add_argument("--model", help="请求里发送的模型名（默认：模式自己的）")
    bench.add_argument("--agent", choices=list(AGENTS), help=(
        "评测哪个 agent：lesson09（第 09 课的 agent，默认）或 code（python -m vibe_agent code "
        "的终端 agent：同样的工具和 system prompt；回放时默认用录制时的）"))
    bench.add_argument("--temperature", help="采样温度（0 到 2 的数）")
    bench.add_argument("--max-tokens", help="每次回复最多多少 token（正整数）")
    bench.add_argument("--json", type=Path, metavar="PATH", help="把每个任务的结果写成 JSON")
    bench.add_argument("--record", action="store_true",
                       help="local/live 模式：把模型的回复录进 cassette（每次运行一个文件）")
    bench.add_argument("--cassette", help=(
        "录制或回放用的录制文件名（默认：local 录成 bench_smollm2，live 录成 bench_live；"
        "回放 bench_smollm2）"))
    bench.set_defaults(func=main)


def bench_mode(requested: str | None) -> str:
    """The bench's mode: --mode, else VIBE_AGENT_MODE, else live with a key, else offline.

    Raises:
        ConfigError: a mode the bench does not have (VIBE_AGENT_MODE=reference, the
            client's scripted model without a cassette, counts as offline here).
    """
    env = settings()
    mode = (requested or env.get("VIBE_AGENT_MODE") or "").strip().lower()
    if not mode:
        return "live" if env.get("OPENAI_API_KEY") else "offline"
    if mode == "reference" and not requested:  # the bench's scripted model is the known fix
        return "offline"
    if mode == "record":
        raise ConfigError("bench 的录制要写成 --mode local --record 或 --mode live --record。")
    if mode not in BENCH_MODES:
        raise ConfigError(f"bench 没有运行模式 {mode!r}，可选：{', '.join(BENCH_MODES)}"
                          "（也可以用 VIBE_AGENT_MODE 设置）。")
    return mode


def _whole(text: str | None, option: str) -> int | None:
    """A positive whole number from the command line, or ConfigError in Chinese."""
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{option} 要是正整数，现在是 {text!r}。") from None
    if value < 1:
        raise ConfigError(f"{option} 至少是 1，现在是 {value}。")
    return value


def _options(args: argparse.Namespace, recorded: dict[str, Any]) -> dict[str, Any]:
    """The experiment's settings from the command line (replay: what was recorded)."""
    options: dict[str, Any] = dict(recorded.get("request_options") or {})
    if args.temperature is not None:
        try:
            temperature = float(args.temperature)
        except ValueError:
            raise ConfigError(f"--temperature 要是数，现在是 {args.temperature!r}。") from None
        if not (math.isfinite(temperature) and 0 <= temperature <= 2):
            raise ConfigError(f"--temperature 要在 0 到 2 之间，现在是 {args.temperature}。")
        options["temperature"] = temperature
    if args.max_tokens is not None:
        options["max_tokens"] = _whole(args.max_tokens, "--max-tokens")
    return options


def _system_prompt(path: Path | None, recorded: dict[str, Any], agent: str = "lesson09") -> str:
    if path is None:
        return recorded.get("system_prompt") or (
            CODING_SYSTEM_PROMPT if agent == "code" else BENCH_SYSTEM_PROMPT)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"读不出 --system-prompt 的文件 {path}（{exc}）。") from exc
    if not text.strip():
        raise ConfigError(f"--system-prompt 的文件 {path} 是空的。")
    return text


def main(args: argparse.Namespace) -> int:
    """`python -m vibe_agent bench`: run, print the table, return the exit code."""
    try:
        return _main(args)
    except KeyboardInterrupt:  # before the run started (run_suite reports its own)
        print("已中断（Ctrl-C），还没有开始运行任务。", file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(args: argparse.Namespace) -> int:
    try:
        mode = bench_mode(args.mode)
        workers = _whole(args.workers, "--workers") or 1
        max_iters = _whole(args.max_iters, "--max-iters")
        recorded: dict[str, Any] = {}
        if mode == "replay":  # replay what was recorded: the same tasks, brake and prompt
            args.cassette = args.cassette or DEFAULT_CASSETTES["local"]
            recorded = recorded_options(args.cassette)
            args.only = args.only or recorded.get("tasks")
            max_iters = max_iters or recorded.get("max_iters")
        args.max_iters = max_iters or DEFAULT_MAX_ITERS
        args.agent = args.agent or recorded.get("agent") or "lesson09"
        args.workers = workers
        system_prompt = _system_prompt(args.system_prompt, recorded, args.agent)
        request_options = _options(args, recorded)
        tasks, errors = load_tasks(args.tasks)
    except (CassetteError, TaskError, ConfigError) as exc:
        return _config_error(str(exc))
    if args.only:
        known = {t.name for t in tasks} | {r.task for r in errors}
        unknown = [name for name in args.only if name not in known]
        if unknown:
            return _config_error(f"没有这些任务：{', '.join(unknown)}。"
                                 f"可用：{', '.join(sorted(known))}")
        tasks = [t for t in tasks if t.name in args.only]
        errors = [r for r in errors if r.task in args.only]
    experiment = {"system_prompt": system_prompt, "request_options": request_options}
    try:
        factory, about, tape = _factory(mode, args, tasks, experiment)
    except (ConfigError, CassetteError) as exc:
        return _config_error(str(exc))
    about = about if about.startswith("运行模式") else f"运行模式：{mode}｜{about}"
    about += f"\nagent：{AGENTS[args.agent]}"
    tools: dict[str, Any] = {}
    if args.agent == "code":
        factory, tools["registry_factory"] = code_agent_factories(factory, args.model)
    print(about, flush=True)  # the mode line, in every mode
    for record in errors:  # said before the run starts, and again under the table
        print(f"任务文件有误，跳过 {record.task}：{record.error}", file=sys.stderr)
    unisolated = why_not_isolated()
    if unisolated is not None:  # on its own line, before the progress bar starts
        print(f"{NOT_ISOLATED}（{unisolated}）。命令和判定能读写你能读写的一切。",
              file=sys.stderr, flush=True)

    started = time.perf_counter()
    interrupted: BenchInterrupted | None = None
    with warnings.catch_warnings(), \
            tqdm(total=len(tasks), desc="bench", unit="任务", file=sys.stderr) as bar:
        warnings.simplefilter("ignore", SandboxWarning)  # said above, once

        def done(record: TaskRecord) -> None:
            bar.set_postfix_str(f"{record.task} {'✓' if record.passed else '✗'}")
            bar.update()

        try:
            records = run_suite(tasks, factory, workers=args.workers, max_iters=args.max_iters,
                                model=args.model, on_done=done, **experiment, **tools)
        except BenchInterrupted as stopped:
            interrupted, records = stopped, stopped.records
    wall = time.perf_counter() - started
    records = sorted([*records, *errors], key=lambda r: r.task)
    if interrupted is not None:
        print(f"已中断（Ctrl-C）：{len(interrupted.unfinished)} 个任务没有跑完"
              f"（{', '.join(interrupted.unfinished)}），下面是已经跑完的。")
    print(format_table(records, wall), flush=True)
    if args.json:
        _write_json(args.json, records, wall, mode, about,
                    None if interrupted is None else interrupted.unfinished, args.agent)
    if interrupted is not None:
        return _exit_interrupted()
    if tape is not None:  # a recording replaces the cassette only when it is good
        try:
            print(f"已录制：{tape.finish()}")
        except CassetteError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_HARNESS
    if any(r.error_source == "harness" for r in records):
        return EXIT_HARNESS
    return EXIT_TASK_ERRORS if errors else EXIT_OK


def _exit_interrupted() -> int:
    """Exit code 130; a task still stuck (e.g. in a model's HTTP call) does not hold us."""
    if any(t.name.startswith("bench") and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)  # the pool's threads would be joined at exit otherwise
    return EXIT_INTERRUPTED


def _factory(mode: str, args: argparse.Namespace, tasks: Sequence[BugFixTask],
             experiment: dict[str, Any]) -> tuple[ModelFactory, str, Cassette | None]:
    """The model factory for a mode, a line that says honestly what the model is, and
    the cassette being recorded (None unless --record)."""
    if args.record and mode not in DEFAULT_CASSETTES:
        raise ConfigError("--record 只用于 local 和 live 模式"
                          "（已知修复模型是确定的程序，不需要录制）。")
    if mode == "offline":
        return (known_fix_factory(tasks), f"模型：{KNOWN_FIX_MODEL_NAME}（{KNOWN_FIX_LABEL}）",
                None)
    if mode == "replay":
        factory = client_factory("replay", args.cassette)
    elif args.record:
        factory = _recording_factory(mode, args, tasks, experiment)
    else:
        factory = client_factory(mode)
    if not tasks:
        return factory, "没有要运行的任务", None
    client, _ = factory(tasks[0])  # a first client says where the answers come from
    return factory, client.describe(), client.cassette if args.record else None


def _recording_factory(mode: str, args: argparse.Namespace, tasks: Sequence[BugFixTask],
                       experiment: dict[str, Any]) -> ModelFactory:
    """Record mode from `mode`; the cassette's provenance names this command and run."""
    name = args.cassette or DEFAULT_CASSETTES[mode]
    factory = client_factory("record", name, source=mode)
    if tasks:
        tape = factory(tasks[0])[0].cassette
        assert tape is not None
        command = ["python -m vibe_agent bench", f"--mode {mode} --record --cassette {name}",
                   f"--workers {args.workers} --max-iters {args.max_iters}"]
        for flag, value in (("--tasks", args.tasks), ("--system-prompt", args.system_prompt),
                            ("--agent", args.agent if args.agent != "lesson09" else None),
                            ("--model", args.model), ("--temperature", args.temperature),
                            ("--max-tokens", args.max_tokens)):
            if value is not None:  # every setting of the run, so the command reproduces it
                command.append(f"{flag} {shlex.quote(str(value))}")
        if args.only:
            command.append("--only " + " ".join(args.only))
        tape.provenance["recorded_with"] = " ".join(command)
        tape.provenance["bench"] = {"tasks": [t.name for t in tasks], "agent": args.agent,
                                    "max_iters": args.max_iters, **experiment}
    return factory


def recorded_options(cassette: str = "bench_smollm2") -> dict[str, Any]:
    """How a bench cassette was recorded: {"tasks": [...], "max_iters": n, ...}.

    Replay it with the same tasks, `max_iters`, system prompt and request options:
    another round, task or prompt is a request the cassette does not hold.

    Args:
        cassette: a cassette name (in the cassette folder) or a path to a .json file.
    """
    return dict(Cassette.load(cassette_path(cassette)).provenance.get("bench", {}))


def _write_json(path: Path, records: Sequence[TaskRecord], wall: float, mode: str,
                about: str, unfinished: list[str] | None, agent: str = "lesson09") -> None:
    data = {"mode": mode, "agent": agent, "about": about, "summary": summary(records, wall),
            "sandbox": why_not_isolated() or "bubblewrap",
            "interrupted": unfinished is not None, "unfinished": unfinished or [],
            "tasks": [r.to_dict() for r in records]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def _config_error(text: str) -> int:
    print(f"配置问题：{text}", file=sys.stderr)
    return EXIT_CONFIG
