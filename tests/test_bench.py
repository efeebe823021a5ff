"""The bench: tasks judged only by their tests, concurrent runs equal to serial ones,
broken task folders reported without stopping the others, harness errors exit non-zero."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from vibe_agent.course import bench, cli
from vibe_agent.course.bench import TaskRecord, reference_factory, run_suite
from vibe_agent.course.cassette import Cassette, ReplayMiss
from vibe_agent.course.known_fix import known_fix_model
from vibe_agent.course.scripted import ScriptedModel, answer, call, calls
from vibe_agent.course.tasks import SUITE_DIR, load_suite
from vibe_agent.sandbox import run_in_sandbox

TASKS, _ = load_suite()
BY_NAME = {task.name: task for task in TASKS}
TWO = ["weather_fahrenheit", "login_username_case"]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    return subprocess.run([sys.executable, "-m", "vibe_agent", "bench", *args],
                          capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=clean | {"PYTHONPATH": str(Path(bench.__file__).parents[2])})


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The table's task rows by task name: [passed, stop reason, calls, tokens, seconds]."""
    rows = [line.split() for line in stdout.splitlines()]
    return {row[0]: row[1:] for row in rows if len(row) == 6 and row[1] in ("✓", "✗")}


def scripted_factory(*replies):
    """Each task gets a fresh scripted model playing `replies` (a test double, not an LLM)."""
    return lambda task: (ScriptedModel(list(replies), name="scripted").client(), "scripted")


def fields(record: TaskRecord) -> tuple:
    return (record.task, record.passed, record.stop_reason, record.model_calls, record.diff,
            record.answer, record.tests_exit_code)


# --- the command line ----------------------------------------------------------------


def test_cli_two_tasks_prints_a_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = run_cli("--mode", "reference", "--only", *TWO, "--workers", "2", "--json", str(out),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "不是 LLM" in done.stdout  # the reference model is labelled as what it is
    rows = table_rows(done.stdout)
    assert sorted(rows) == sorted(TWO)
    assert all(row[:2] == ["✓", "answered"] and row[3] == "n/a" for row in rows.values())
    assert "通过 2/2（100%）" in done.stdout
    assert "bench" in done.stderr and "2/2" in done.stderr  # the tqdm progress bar
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["summary"]["passed"] == 2 and data["summary"]["pass_rate"] == 1.0
    by_task = {record["task"]: record for record in data["tasks"]}
    assert sorted(by_task) == sorted(TWO)
    for name, record in by_task.items():
        assert {"passed", "stop_reason", "model_calls", "tokens", "seconds", "diff",
                "answer"} <= record.keys()
        assert record["passed"] is True and record["tokens"] is None
        assert record["model_calls"] == int(rows[name][2])
        assert record["diff"].startswith("--- a/") and "已知修复" in record["answer"]
        assert record["tests_changed"] is False


@pytest.mark.parametrize(("task_json", "problem"), [
    ("{not json", "不是合法的 JSON"),
    ('{"prompt": "修一下", "timeout_s": 10}', '缺少字段 "test_command"'),
], ids=["invalid-json", "missing-field"])
def test_a_malformed_task_is_reported_and_the_good_one_still_runs(
        tmp_path: Path, task_json: str, problem: str) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(BY_NAME["weather_fahrenheit"].folder, suite / "good_task")
    broken = suite / "broken_task"
    shutil.copytree(BY_NAME["empty_class_scores"].folder, broken)
    (broken / "task.json").write_text(task_json, encoding="utf-8")

    done = run_cli("--tasks", str(suite), "--mode", "reference", cwd=tmp_path)

    assert done.returncode == bench.EXIT_TASK_ERRORS  # documented: 1, the run still completed
    rows = table_rows(done.stdout)
    assert rows["good_task"][:2] == ["✓", "answered"]
    assert rows["broken_task"][:2] == ["✗", "error"]
    named = str(broken / "task.json")
    assert named in done.stdout and problem in done.stdout  # under the table
    assert named in done.stderr  # and before the run


@pytest.mark.parametrize(("args", "problem"), [
    (["--only", "no_such_task"], "没有这些任务"),
    (["--workers", "0"], "至少是 1"),
    (["--mode", "reference", "--record"], "--record"),
], ids=["unknown-task", "zero-workers", "record-reference"])
def test_configuration_problems_exit_2(tapes: Path, args: list[str], problem: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--mode", "reference", *args]) == bench.EXIT_CONFIG
    assert problem in capsys.readouterr().err


def test_a_replay_miss_is_a_harness_error_and_exits_non_zero(
        tapes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Cassette("empty", {"source": "scripted-reference", "model": "m"}).save(tapes / "e.json")
    code = cli.main(["bench", "--mode", "replay", "--cassette", str(tapes / "e.json"),
                     "--only", "weather_fahrenheit"])
    assert code == bench.EXIT_HARNESS
    assert "评测框架出错（weather_fahrenheit）：ReplayMiss" in capsys.readouterr().out


@pytest.fixture
def known_fix_provider(serve_model):
    """An OpenAI-compatible server on 127.0.0.1 playing the known-fix reference model."""
    return serve_model(known_fix_model(TASKS))


def test_record_a_run_then_replay_it_with_the_recorded_options(
        tapes: Path, known_fix_provider: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", known_fix_provider)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("VIBE_AGENT_MODEL", "known-fix-over-http")
    # provenance names the package version; the test venv may run it uninstalled
    monkeypatch.setattr("vibe_agent.course.client.version", lambda name: "test")

    assert cli.main(["bench", "--mode", "live", "--record", "--only", *TWO,
                     "--workers", "2", "--max-iters", "9"]) == 0
    recorded = table_rows(capsys.readouterr().out)
    tape = Cassette.load(tapes / "bench_live.json")
    assert tape.provenance["bench"]["tasks"] == sorted(TWO)
    assert tape.provenance["bench"]["max_iters"] == 9
    assert "bench --mode live --record" in tape.provenance["recorded_with"]

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VIBE_AGENT_MODEL"):
        monkeypatch.delenv(name)
    assert cli.main(["bench", "--mode", "replay", "--cassette", "bench_live"]) == 0
    replayed = table_rows(capsys.readouterr().out)
    assert sorted(replayed) == sorted(TWO)
    assert {k: v[:3] for k, v in replayed.items()} == {k: v[:3] for k, v in recorded.items()}
    assert all(row[:2] == ["✓", "answered"] for row in replayed.values())


# --- judging -------------------------------------------------------------------------

BROKEN_TESTS = "def test_broken(:\n"


@pytest.mark.parametrize(("replies", "stop_reason", "tests_changed"), [
    ([answer("已修复，所有测试都通过了。")], "answered", False),
    ([calls(call("write_file", {"path": "tests/test_weather.py", "content": BROKEN_TESTS})),
      answer("已修复。")], "answered", True),
    ([calls(call("list_files", {"path": "."})), calls(call("read_file", {"path": "weather.py"})),
      calls(call("run_command", {"command": "python -m pytest -q"}))], "max_iters", False),
], ids=["claims-success-without-fixing", "breaks-the-test-file", "never-answers"])
def test_only_the_tests_decide(replies, stop_reason: str, tests_changed: bool) -> None:
    task = BY_NAME["weather_fahrenheit"]
    assert (SUITE_DIR / task.name / "repo" / "tests" / "test_weather.py").is_file()
    [record] = run_suite([task], scripted_factory(*replies), max_iters=3)
    assert record.passed is False and record.tests_exit_code not in (0, None)
    assert record.stop_reason == stop_reason and record.error is None
    assert record.tests_changed is tests_changed


def test_a_harness_error_becomes_an_error_row_and_keeps_the_exception() -> None:
    def factory(task):
        model = ScriptedModel([], name="empty script")  # its first request raises
        return model.client(), "scripted"

    first, second = run_suite([BY_NAME[name] for name in TWO], factory, workers=2)
    for record in (first, second):
        assert record.error_kind == "harness" and not record.passed
        assert record.error.startswith("ScriptExhausted") and record.exception is not None


# --- the suite and concurrency -------------------------------------------------------


def test_the_reference_model_passes_the_whole_suite() -> None:
    """The CI run of the suite: proves the harness, tools and loop, not any model."""
    assert len(TASKS) == 18
    records = run_suite(TASKS, reference_factory(TASKS), workers=2)
    failed = {r.task: r.error or r.tests_output for r in records if not r.passed}
    assert failed == {}
    assert [r.task for r in records] == [t.name for t in TASKS]
    assert all(r.stop_reason == "answered" and r.diff and not r.tests_changed for r in records)


def test_four_workers_give_the_same_records_as_one() -> None:
    tasks = [BY_NAME[name] for name in [*TWO, "sales_report_total", "note_tags_shared"]]
    serial = run_suite(tasks, reference_factory(tasks), workers=1)
    finished: list[str] = []
    parallel = run_suite(tasks, reference_factory(tasks), workers=4,
                         on_done=lambda r: finished.append(r.task))
    assert [fields(r) for r in parallel] == [fields(r) for r in serial]
    assert sorted(finished) == sorted(t.name for t in tasks)


def test_tasks_really_overlap() -> None:
    """Two tasks whose model waits 0.5 s per call take about half as long on 2 workers."""
    def slow_factory(task):
        model = ScriptedModel(lambda body: (time.sleep(0.5), answer("好了"))[1], name="slow")
        return model.client(), "slow"

    tasks = [BY_NAME[name] for name in TWO]
    started = time.perf_counter()
    records = run_suite(tasks, slow_factory, workers=2)
    assert time.perf_counter() - started < 2 * 0.5 + 1.5  # serial waiting alone is 1.0 s
    assert [r.model_calls for r in records] == [1, 1]


# --- the cassette under concurrent use -----------------------------------------------


class SlowCounts(defaultdict):
    """Widens the window between reading and writing a replay counter."""

    def __getitem__(self, key):
        value = super().__getitem__(key)
        time.sleep(0.0005)
        return value


def in_threads(work, threads: int = 4) -> None:
    barrier = threading.Barrier(threads)

    def run(k: int) -> None:
        barrier.wait()
        work(k)

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_concurrent_replays_of_one_request_get_each_recording_once() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "同一个问题"}]}
    tape = Cassette("t", {"source": "scripted-reference"}, [
        {"kind": "chat", "request": body, "response": {"status": 200, "body": {"n": n}}}
        for n in range(40)])
    tape._served = SlowCounts(int)
    served: list[int] = []
    in_threads(lambda k: served.extend(tape.chat_response(body)["body"]["n"] for _ in range(10)))
    assert sorted(served) == list(range(40))


def test_concurrent_recording_saves_one_at_a_time_and_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tape = Cassette("t", {"source": "scripted-reference"}, [], tmp_path / "t.json", autosave=True)
    to_json = Cassette.to_json
    saving, most = [0], [0]
    count = threading.Lock()

    def slow_to_json(self: Cassette) -> str:
        with count:
            saving[0] += 1
            most[0] = max(most[0], saving[0])
        time.sleep(0.001)
        text = to_json(self)
        with count:
            saving[0] -= 1
        return text

    monkeypatch.setattr(Cassette, "to_json", slow_to_json)
    in_threads(lambda k: [tape.add({"kind": "clock",
                                    "value": f"2026-01-0{k + 1}T00:00:{i:02d}+00:00"})
                          for i in range(10)])
    assert most[0] == 1
    assert len(Cassette.load(tape.partial_path).interactions) == 40


@pytest.mark.parametrize(("recorded", "now", "hit"), [
    ("13 failed, 1 passed in 0.16s", "13 failed, 1 passed in 0.10s", True),
    ("14 passed in 61.20s (0:01:01)", "14 passed in 59.87s (0:00:59)", True),
    ("Ran 3 tests in 0.001s\n\nOK", "Ran 3 tests in 0.013s\n\nOK", True),
    ("store = <Store object at 0x7f8a88cd5710>", "store = <Store object at 0x7f847bfcc5d0>", True),
    ("13 failed, 1 passed in 0.16s", "12 failed, 2 passed in 0.16s", False),
    ("join in 2 steps", "join in 3 steps", False),
], ids=["pytest-duration", "long-duration", "unittest-duration", "object-address",
        "other-counts-miss", "not-a-duration"])
def test_replay_ignores_what_is_never_the_same_twice(recorded: str, now: str, hit: bool) -> None:
    def body(tool_result: str) -> dict:
        return {"model": "m", "messages": [
            {"role": "user", "content": "修一下"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "run_command", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": tool_result}]}

    tape = Cassette("t", {"source": "scripted-reference"}, [
        {"kind": "chat", "request": body(recorded), "response": {"status": 200, "body": {}}}])
    if hit:
        assert tape.chat_response(body(now)) == {"status": 200, "body": {}}
    else:
        with pytest.raises(ReplayMiss, match=r"messages\[2\]\.content"):
            tape.chat_response(body(now))


def test_sandboxed_commands_print_sets_in_the_same_order(tmp_path: Path) -> None:
    """A fixed hash seed: a failing test's set diff reads the same in every run."""
    command = "python -c \"print({'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'})\""
    outputs = {run_in_sandbox(command, tmp_path, timeout=30).output for _ in range(4)}
    assert len(outputs) == 1


def test_the_recorded_smollm2_run_replays(tapes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Lesson 10 shows this recording: every task, replayed offline with its recorded options."""
    cassette = str(SUITE_DIR.parents[2] / "notebooks" / "cassettes" / "bench_smollm2.json")
    recorded = bench.recorded_options(cassette)
    assert sorted(recorded["tasks"]) == sorted(BY_NAME) and recorded["max_iters"] >= 1
    assert cli.main(["bench", "--mode", "replay", "--cassette", cassette, "--workers", "4"]) == 0
    out = capsys.readouterr().out
    assert "SmolLM2" in out and "真实的小模型" in out
    assert sorted(table_rows(out)) == sorted(BY_NAME)
