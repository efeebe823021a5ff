"""Evaluate a coding agent on the bug-fix suite: `run_suite()` and `python -m vibe_agent bench`.

One task, start to finish (`run_task`):

    copy the task's repo/ into a fresh temporary folder ("workspace", never the task's name)
    coding tools on that folder (vibe_agent.coding; commands: an allow-list, in the sandbox)
    run_agent(client, task.prompt, tools)        <- the loop, unchanged
    run task.test_command in the sandbox         <- the ONLY judge: passed = exit code 0
    record: passed, stop reason, model calls, tokens, seconds, diff, final answer

What the model says ("已修复") never decides anything; the tests do.

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

Recordings: one cassette per run (`--record`, e.g. notebooks/cassettes/bench_smollm2.json).
Requests of different tasks differ in their prompt, so replay finds each one whatever
the order the threads made them in; the cassette locks around its writes. Its
provenance holds the command, the tasks and `max_iters`; replay uses them by default
(another round or another task would be a request the cassette does not hold).

Errors: a malformed task folder becomes an error row (the Chinese `TaskError`, which
names the file) and the other tasks still run. An exception out of the harness (a
replay miss, a bug in our code) also becomes an error row, marked as a harness error,
and makes the command exit non-zero; the exception stays on the record.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import openai
from tqdm import tqdm

from ..coding import coding_registry, snapshot, workspace_diff
from ..loop import run_agent
from ..sandbox import DEFAULT_COMMANDS, Policy, run_in_sandbox, why_not_isolated
from ..trace import Trace
from .cassette import Cassette, CassetteError
from .client import ConfigError, cassette_path, make_client, settings
from .known_fix import KNOWN_FIX_LABEL, KNOWN_FIX_MODEL_NAME, known_fix_model
from .tasks import SUITE_DIR, Task, TaskError, copy_repo, load_task

ModelFactory = Callable[[Task], tuple[openai.OpenAI, str]]  # task -> (client, model name)

BENCH_MODES = ("reference", "local", "live", "replay")
DEFAULT_MAX_ITERS = 15
DEFAULT_CASSETTES = {"local": "bench_smollm2", "live": "bench_live"}  # --record, --mode replay
TESTS_OUTPUT_CHARS = 2_000  # of the judging run's output kept on a record (its end)
EXIT_OK, EXIT_TASK_ERRORS, EXIT_CONFIG, EXIT_HARNESS = 0, 1, 2, 3

BENCH_SYSTEM_PROMPT = (
    "你是一个修 bug 的编程助手。工作区是一个小项目，用户描述了一个 bug。\n"
    "- 先用 list_files、search_code、read_file 找到相关代码。\n"
    "- 用 edit_file 修改代码（old 要从文件里原样复制）；不要修改或删除测试。\n"
    "- 用 run_command 运行测试（例如 python -m pytest -q），确认全部通过。\n"
    "- 修好后用一两句话说明改了什么。"
)
# Commands the agent may run: Python, pytest and a few read-only helpers, no shell syntax.
BENCH_POLICY = Policy(DEFAULT_COMMANDS)


@dataclass
class TaskRecord:
    """The outcome of one task. `passed` comes from the tests alone.

    `stop_reason` is the loop's `StopReason` value, or "error" when the task could not
    be run; then `error` says why and `error_kind` is "task" (a malformed task folder)
    or "harness" (an exception in our code, e.g. a replay miss).
    """

    task: str
    passed: bool
    stop_reason: str
    model_calls: int = 0
    tokens: int | None = None  # as reported by the API; None when any call reported none
    seconds: float = 0.0
    diff: str = ""
    answer: str | None = None
    tests_exit_code: int | None = None  # None: not judged, or the tests timed out
    tests_output: str = ""  # the end of the judging run's output
    tests_changed: bool = False  # the diff touches a test file (a fix must not need that)
    error: str | None = None
    error_kind: str | None = None
    trace: Trace = field(default_factory=Trace, repr=False)
    exception: BaseException | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (without the trace and the exception object)."""
        data = asdict(self, dict_factory=dict)
        del data["trace"], data["exception"]
        return data


# --- one task ------------------------------------------------------------------------


def run_task(task: Task, client: openai.OpenAI, model: str, *,
             max_iters: int = DEFAULT_MAX_ITERS) -> TaskRecord:
    """Run the agent on one task in a fresh copy of its project, then judge it by its tests.

    Args:
        task: the task (from `load_task` or `load_suite`).
        client: this task's own client; never share one between concurrent tasks.
        model: the model name sent with every request.
        max_iters: the round brake of the loop.

    Raises:
        Exception: whatever the harness raises (e.g. `ReplayMiss`); `run_suite` turns
            it into an error row.
    """
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vibe-bench-") as temp:
        # 1. a fresh copy, named so that it does not give the task's name away
        workspace = copy_repo(task, Path(temp) / "workspace")
        before = snapshot(workspace)
        # 2. the agent works on it with its own tools and trace
        tools = coding_registry(workspace, policy=BENCH_POLICY, command_timeout=task.timeout_s)
        trace = Trace()
        result = run_agent(client, task.prompt, tools, model=model, max_iters=max_iters,
                           system_prompt=BENCH_SYSTEM_PROMPT, trace=trace)
        # 3. the tests decide, in the sandbox, after the agent has finished
        judged = run_in_sandbox(task.test_command, workspace, timeout=task.timeout_s)
        diff = workspace_diff(before, workspace)
    return TaskRecord(
        task=task.name,
        passed=judged.exit_code == 0,
        stop_reason=result.stop_reason.value,
        model_calls=result.model_calls,
        tokens=result.total_tokens,
        seconds=time.perf_counter() - started,
        diff=diff,
        answer=result.answer,
        tests_exit_code=judged.exit_code,
        tests_output=judged.output[-TESTS_OUTPUT_CHARS:],
        tests_changed=_touches_tests(diff),
        trace=trace,
    )


def _touches_tests(diff: str) -> bool:
    """Whether a diff changes a file under tests/ or named test_*.py / *_test.py."""
    for line in diff.splitlines():
        if line.startswith(("--- a/", "+++ b/")):
            path = Path(line[6:])
            if "tests" in path.parts[:-1] or path.name.startswith("test_") \
                    or path.name.endswith("_test.py"):
                return True
    return False


def _guarded(task: Task, client: openai.OpenAI, model: str, max_iters: int) -> TaskRecord:
    """`run_task`, with a harness exception turned into an error row."""
    started = time.perf_counter()
    try:
        return run_task(task, client, model, max_iters=max_iters)
    except Exception as exc:  # a harness error: recorded, and the CLI exits non-zero
        name = type(exc).__name__
        text = " ".join(str(exc).split())  # a ReplayMiss's text already starts with its name
        text = text if text.startswith(name) else f"{name}: {text}"
        return TaskRecord(task=task.name, passed=False, stop_reason="error",
                          seconds=time.perf_counter() - started, error=text,
                          error_kind="harness", exception=exc)


def task_error_record(name: str, error: TaskError) -> TaskRecord:
    """The error row of a task folder that could not be loaded."""
    return TaskRecord(task=name, passed=False, stop_reason="error", error=str(error),
                      error_kind="task", exception=error)


# --- a whole suite -------------------------------------------------------------------


def run_suite(tasks: Sequence[Task], model_factory: ModelFactory, *, workers: int = 1,
              max_iters: int = DEFAULT_MAX_ITERS,
              on_done: Callable[[TaskRecord], None] | None = None) -> list[TaskRecord]:
    """Run every task, `workers` at a time, each with its own client; records in task order.

    Args:
        tasks: the tasks to run.
        model_factory: `task -> (client, model name)`, called once per task in this
            thread, e.g. `reference_factory(tasks)` or `client_factory("local")`.
        workers: how many tasks run at the same time (threads).
        max_iters: the round brake of each run.
        on_done: called in this thread with each record as its task finishes (e.g. to
            move a progress bar).
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    why_not_isolated()  # probe bubblewrap once, here, rather than in every thread at once
    records: dict[str, TaskRecord] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench") as pool:
        futures = [pool.submit(_guarded, task, *model_factory(task), max_iters)
                   for task in tasks]
        for future in as_completed(futures):
            record = future.result()
            records[record.task] = record
            if on_done is not None:
                on_done(record)
    return [records[task.name] for task in tasks]


def reference_factory(tasks: Sequence[Task] | None = None) -> ModelFactory:
    """Each task gets its own known-fix reference model (a script, not an LLM).

    Args:
        tasks: unused, accepted so every factory is built the same way.
    """
    del tasks

    def factory(task: Task) -> tuple[openai.OpenAI, str]:
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

    def factory(task: Task) -> tuple[openai.OpenAI, str]:
        client = make_client(mode, cassette, source=source)
        return client, client.model

    return factory


def load_tasks(folder: str | Path | None = None) -> tuple[list[Task], list[TaskRecord]]:
    """The tasks of a suite folder, and an error row for each folder that is malformed.

    Args:
        folder: a folder of task folders; default the course's suite.
    """
    root = SUITE_DIR if folder is None else Path(folder)
    if not root.is_dir():
        raise TaskError(f"{root}：任务集文件夹不存在，请检查路径。")
    tasks: list[Task] = []
    errors: list[TaskRecord] = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith((".", "_")):  # as load_suite does
            continue
        try:
            tasks.append(load_task(child))
        except TaskError as error:
            errors.append(task_error_record(child.name, error))
    return tasks, errors


# --- the report ----------------------------------------------------------------------


def summary(records: Sequence[TaskRecord], wall_seconds: float) -> dict[str, Any]:
    """Totals of a run: pass rate, tokens (None if any task reported none), wall time."""
    ran = [r for r in records if r.error_kind is None]
    tokens = [r.tokens for r in ran]
    return {
        "tasks": len(records),
        "passed": sum(r.passed for r in records),
        "pass_rate": sum(r.passed for r in records) / len(records) if records else 0.0,
        "task_errors": sum(r.error_kind == "task" for r in records),
        "harness_errors": sum(r.error_kind == "harness" for r in records),
        "tokens": sum(tokens) if ran and None not in tokens else None,  # type: ignore[arg-type]
        "wall_seconds": wall_seconds,
    }


def _width(text: str) -> int:
    """Columns a string takes in a terminal: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def format_table(records: Sequence[TaskRecord], wall_seconds: float) -> str:
    """The table the CLI prints: one row per task, then the totals."""
    header = ["任务", "通过", "停止原因", "模型调用", "tokens", "秒"]
    rows = [[r.task, "✓" if r.passed else "✗", r.stop_reason, str(r.model_calls),
             "n/a" if r.tokens is None else str(r.tokens), f"{r.seconds:.1f}"] for r in records]
    widths = [max(_width(row[i]) for row in [header, *rows]) + 2 for i in range(len(header))]
    lines = ["".join(_pad(cell, w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *rows]]
    for r in records:
        if r.error:
            kind = "任务文件有误" if r.error_kind == "task" else "评测框架出错"
            lines.append(f"{kind}（{r.task}）：{r.error}")
    totals = summary(records, wall_seconds)
    tokens = "n/a" if totals["tokens"] is None else str(totals["tokens"])
    lines.append(f"通过 {totals['passed']}/{totals['tasks']}（{totals['pass_rate']:.0%}），"
                 f"tokens 合计 {tokens}，总耗时 {wall_seconds:.1f} 秒")
    return "\n".join(lines)


# --- the command line ----------------------------------------------------------------


def add_parser(sub: Any) -> None:
    """Add the `bench` command to the CLI's subparsers."""
    bench = sub.add_parser("bench", help="在修 bug 任务集上评测 coding agent（只看测试是否通过）")
    bench.add_argument("--mode", choices=BENCH_MODES,
                       help="模型：reference（重放已知修复的脚本，不是 LLM）、local（SmolLM2）、"
                            "live（在线服务）、replay（回放录制文件）；"
                            "默认：有 key 时 live，否则 reference")
    bench.add_argument("--tasks", type=Path, help="任务集文件夹（默认：课程自带的任务集）")
    bench.add_argument("--only", nargs="+", metavar="NAME", help="只运行这些任务")
    bench.add_argument("--workers", type=int, default=1, help="同时运行几个任务（线程数）")
    bench.add_argument("--max-iters", type=int,
                       help=f"每个任务最多调用模型几轮（默认 {DEFAULT_MAX_ITERS}；"
                            "回放时默认用录制文件里的值）")
    bench.add_argument("--json", type=Path, metavar="PATH", help="把每个任务的结果写成 JSON")
    bench.add_argument("--record", action="store_true",
                       help="local/live 模式：把模型的回复录进 cassette（每次运行一个文件）")
    bench.add_argument("--cassette", help=(
        "录制或回放用的录制文件名（默认：local 录成 bench_smollm2，live 录成 bench_live；"
        "回放 bench_smollm2）"))
    bench.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """`python -m vibe_agent bench`: run, print the table, return the exit code."""
    mode = args.mode or ("live" if settings().get("OPENAI_API_KEY") else "reference")
    try:
        if mode == "replay":  # replay what was recorded: the same tasks, the same brake
            args.cassette = args.cassette or DEFAULT_CASSETTES["local"]
            recorded = recorded_options(args.cassette)
            args.only = args.only or recorded.get("tasks")
            args.max_iters = args.max_iters or recorded.get("max_iters")
        tasks, errors = load_tasks(args.tasks)
    except (CassetteError, TaskError) as exc:
        return _config_error(str(exc))
    args.max_iters = args.max_iters or DEFAULT_MAX_ITERS
    if args.workers < 1 or args.max_iters < 1:
        return _config_error("--workers 和 --max-iters 都至少是 1。")
    if args.only:
        known = {t.name for t in tasks} | {r.task for r in errors}
        unknown = [name for name in args.only if name not in known]
        if unknown:
            return _config_error(f"没有这些任务：{', '.join(unknown)}。"
                                 f"可用：{', '.join(sorted(known))}")
        tasks = [t for t in tasks if t.name in args.only]
        errors = [r for r in errors if r.task in args.only]
    try:
        factory, about, tape = _factory(mode, args, tasks)
    except (ConfigError, CassetteError) as exc:
        return _config_error(str(exc))
    print(about)
    for record in errors:  # said before the run starts, and again under the table
        print(f"任务文件有误，跳过 {record.task}：{record.error}", file=sys.stderr)

    started = time.perf_counter()
    with tqdm(total=len(tasks), desc="bench", unit="任务", file=sys.stderr) as bar:
        def done(record: TaskRecord) -> None:
            bar.set_postfix_str(f"{record.task} {'✓' if record.passed else '✗'}")
            bar.update()

        records = run_suite(tasks, factory, workers=args.workers, max_iters=args.max_iters,
                            on_done=done)
    wall = time.perf_counter() - started
    records = sorted([*records, *errors], key=lambda r: r.task)
    print(format_table(records, wall))
    if args.json:
        _write_json(args.json, records, wall, mode, about)
    if tape is not None:  # a recording replaces the cassette only when it is good
        try:
            print(f"已录制：{tape.finish()}")
        except CassetteError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_HARNESS
    if any(r.error_kind == "harness" for r in records):
        return EXIT_HARNESS
    return EXIT_TASK_ERRORS if errors else EXIT_OK


def _factory(mode: str, args: argparse.Namespace,
             tasks: Sequence[Task]) -> tuple[ModelFactory, str, Cassette | None]:
    """The model factory for a mode, a line that says honestly what the model is, and
    the cassette being recorded (None unless --record)."""
    if args.record and mode not in DEFAULT_CASSETTES:
        raise ConfigError("--record 只用于 local 和 live 模式"
                          "（参考模型是确定的程序，不需要录制）。")
    if mode == "reference":
        return (reference_factory(tasks), f"模型：{KNOWN_FIX_MODEL_NAME}（{KNOWN_FIX_LABEL}）",
                None)
    if mode == "replay":
        factory = client_factory("replay", args.cassette)
    elif args.record:
        factory = _recording_factory(mode, args, tasks)
    else:
        factory = client_factory(mode)
    if not tasks:
        return factory, f"运行模式：{mode}", None
    client, _ = factory(tasks[0])  # a first client says where the answers come from
    return factory, client.describe(), client.cassette if args.record else None


def _recording_factory(mode: str, args: argparse.Namespace,
                       tasks: Sequence[Task]) -> ModelFactory:
    """Record mode from `mode`; the cassette's provenance names this command and run."""
    name = args.cassette or DEFAULT_CASSETTES[mode]
    factory = client_factory("record", name, source=mode)
    if tasks:
        tape = factory(tasks[0])[0].cassette
        assert tape is not None
        command = ["python -m vibe_agent bench", f"--mode {mode} --record --cassette {name}",
                   f"--workers {args.workers} --max-iters {args.max_iters}"]
        if args.only:
            command.append("--only " + " ".join(args.only))
        tape.provenance["recorded_with"] = " ".join(command)
        tape.provenance["bench"] = {"tasks": [t.name for t in tasks],
                                    "max_iters": args.max_iters,
                                    "system_prompt": BENCH_SYSTEM_PROMPT}
    return factory


def recorded_options(cassette: str = "bench_smollm2") -> dict[str, Any]:
    """How a bench cassette was recorded: {"tasks": [...], "max_iters": n, ...}.

    Replay it with the same tasks and `max_iters`: another round, or another task,
    is a request the cassette does not hold.

    Args:
        cassette: a cassette name (in the cassette folder) or a path to a .json file.
    """
    return dict(Cassette.load(cassette_path(cassette)).provenance.get("bench", {}))


def _write_json(path: Path, records: Sequence[TaskRecord], wall: float, mode: str,
                about: str) -> None:
    data = {"mode": mode, "about": about, "summary": summary(records, wall),
            "tasks": [r.to_dict() for r in records]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def _config_error(text: str) -> int:
    print(f"配置问题：{text}", file=sys.stderr)
    return EXIT_CONFIG
