"""The bench: tasks judged only by held-out tests (per-test FAIL_TO_PASS / PASS_TO_PASS
on a pristine copy), cheats that fool a naive judge counted as not resolved, concurrent
runs equal to serial ones, broken task folders reported without stopping the others,
harness errors exit non-zero, Ctrl-C stops at once with a partial report."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from forkserver import ForkServerPopen, forked_run

from vibe_agent.coding import Workspace, remove_tree
from vibe_agent.course import bench, cli, judge
from vibe_agent.course.bench import TaskRecord, known_fix_factory, run_suite
from vibe_agent.course.cassette import Cassette, ReplayMiss
from vibe_agent.course.known_fix import known_fix_model
from vibe_agent.course.scripted import ScriptedModel, answer, call, calls
from vibe_agent.course.tasks import SUITE_DIR, copy_repo, load_suite, load_task
from vibe_agent.registry import ToolRegistry
from vibe_agent.sandbox import NOT_ISOLATED, run_in_sandbox

TASKS, _ = load_suite()
BY_NAME = {task.name: task for task in TASKS}
TWO = ["weather_fahrenheit", "login_username_case"]


def cli_env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    return clean | {"PYTHONPATH": str(Path(bench.__file__).parents[2])} | extra


def run_cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return forked_run([sys.executable, "-m", "vibe_agent", "bench", *args],
                      capture_output=True, text=True, timeout=300, cwd=cwd,
                      env=cli_env(**env))


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The table's task rows by task name:
    [passed, tests, discarded, stop reason, calls, tokens, seconds]."""
    rows = [re.split(r"\s{2,}", line.strip()) for line in stdout.splitlines()]
    return {row[0]: row[1:] for row in rows if len(row) == 8 and row[1] in ("✓", "✗")}


def scripted_factory(*replies):
    """Each task gets a fresh scripted model playing `replies` (a test double, not an LLM)."""
    return lambda task: (ScriptedModel(list(replies), name="scripted").client(), "scripted")


def fields(record: TaskRecord) -> tuple:
    return (record.task, record.passed, record.stop_reason, record.model_calls, record.diff,
            record.answer, record.tests_exit_code, record.fail_to_pass, record.pass_to_pass,
            record.discarded)


# --- the command line ----------------------------------------------------------------


def test_cli_two_tasks_prints_a_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = run_cli("--mode", "offline", "--only", *TWO, "--workers", "2", "--json", str(out),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("运行模式：offline")  # the mode line, in every mode
    assert "不是 LLM" in done.stdout  # the known-fix model is labelled as what it is
    rows = table_rows(done.stdout)
    assert sorted(rows) == sorted(TWO)
    assert rows["weather_fahrenheit"][1] == "13/13 修好，1/1 未破坏"
    assert rows["login_username_case"][1] == "11/11 修好，3/3 未破坏"
    assert all(row[0] == "✓" and row[2:4] == ["-", "answered"] and row[5] == "n/a"
               for row in rows.values())
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
        assert record["model_calls"] == int(rows[name][4])
        assert record["diff"].startswith("--- a/") and "已知修复" in record["answer"]
        assert record["tests_changed"] is False and record["discarded"] == {}
        assert all(record["fail_to_pass"].values()) and all(record["pass_to_pass"].values())
        assert record["isolated"] is True
    assert data["summary"]["isolated"] is True and data["interrupted"] is False


@pytest.mark.parametrize(("task_json", "problem"), [
    ("{not json", "不是合法的 JSON"),
    ('{"prompt": "修一下", "timeout_s": 10}', '缺少字段 "test_command"'),
    ('{"prompt": "修一下", "test_command": "python -m pytest", "timeout_s": Infinity}',
     "有限的正数"),
    ('{"prompt": "修一下", "test_command": "python -m pytest\\u0000 -q", "timeout_s": 10}',
     "NUL"),
], ids=["invalid-json", "missing-field", "infinite-timeout", "nul-in-command"])
def test_a_malformed_task_is_reported_and_the_good_one_still_runs(
        tmp_path: Path, task_json: str, problem: str) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(BY_NAME["weather_fahrenheit"].folder, suite / "good_task")
    broken = suite / "broken_task"
    shutil.copytree(BY_NAME["empty_class_scores"].folder, broken)
    (broken / "task.json").write_text(task_json, encoding="utf-8")

    done = run_cli("--tasks", str(suite), "--mode", "offline", cwd=tmp_path)

    assert done.returncode == bench.EXIT_TASK_ERRORS  # documented: 1, the run still completed
    rows = table_rows(done.stdout)
    assert rows["good_task"][0] == "✓" and rows["good_task"][3] == "answered"
    assert rows["broken_task"] == ["✗", "-", "-", "error", "0", "n/a", "0.0"]
    named = str(broken / "task.json")
    assert named in done.stdout and problem in done.stdout  # under the table
    assert named in done.stderr  # and before the run


@pytest.mark.parametrize(("args", "problem"), [
    (["--only", "no_such_task"], "没有这些任务"),
    (["--workers", "0"], "--workers 至少是 1"),
    (["--workers", "abc"], "--workers 要是正整数，现在是 'abc'"),
    (["--max-iters", "0"], "--max-iters 至少是 1"),
    (["--max-iters", "2.5"], "--max-iters 要是正整数"),
    (["--temperature", "warm"], "--temperature 要是数"),
    (["--temperature", "nan"], "--temperature 要在 0 到 2 之间"),
    (["--max-tokens", "-5"], "--max-tokens 至少是 1"),
    (["--system-prompt", "no/such/prompt.txt"], "读不出 --system-prompt"),
    (["--mode", "offline", "--record"], "--record"),
    (["--mode", "fast"], "bench 没有运行模式 'fast'"),
    (["--mode", "reference"], "bench 没有运行模式 'reference'"),
], ids=["unknown-task", "zero-workers", "workers-not-a-number", "zero-max-iters",
        "max-iters-not-whole", "temperature-not-a-number", "temperature-nan",
        "negative-max-tokens", "missing-prompt-file", "record-offline", "unknown-mode",
        "reference-is-not-a-bench-mode"])
def test_configuration_problems_exit_2(tapes: Path, args: list[str], problem: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--mode", "offline", *args]) == bench.EXIT_CONFIG
    err = capsys.readouterr().err
    assert err.startswith("配置问题：") and problem in err


@pytest.mark.parametrize(("mode", "code", "said"), [
    ("live", bench.EXIT_CONFIG, "在线模式需要"),  # not silently the known-fix model
    ("offline", bench.EXIT_OK, "运行模式：offline"),
    ("reference", bench.EXIT_OK, "运行模式：offline"),  # the client's scripted mode
    ("record", bench.EXIT_CONFIG, "--mode local --record"),
], ids=["live-without-settings", "offline", "reference-is-offline", "record"])
def test_the_environments_mode_is_honoured(tapes: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str], mode: str,
                                           code: int, said: str) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VIBE_AGENT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VIBE_AGENT_MODE", mode)
    assert cli.main(["bench", "--only", "weather_fahrenheit"]) == code
    out = capsys.readouterr()
    assert said in out.out + out.err


def test_an_unisolated_run_is_marked_in_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = run_cli("--mode", "offline", "--only", "weather_fahrenheit", "--json", str(out),
                   cwd=tmp_path, VIBE_AGENT_SANDBOX="none")
    assert done.returncode == 0, done.stderr
    assert any(line.startswith(NOT_ISOLATED) for line in done.stdout.splitlines())
    assert any(line.startswith(NOT_ISOLATED) for line in done.stderr.splitlines())  # own line
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["summary"]["isolated"] is False and data["tasks"][0]["isolated"] is False
    assert "VIBE_AGENT_SANDBOX=none" in data["sandbox"]


def test_ctrl_c_stops_at_once_with_the_partial_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    proc = ForkServerPopen([sys.executable, "-m", "vibe_agent", "bench", "--mode", "offline",
                            "--json", str(out)], cwd=tmp_path, env=cli_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    progress, deadline = b"", time.monotonic() + 120
    while "✓".encode() not in progress and time.monotonic() < deadline:  # a task is done
        if select.select([proc.stderr], [], [], 0.05)[0]:
            progress += os.read(proc.stderr.fileno(), 65536)
    assert "✓".encode() in progress, progress.decode()
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out_bytes, _ = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    stdout = out_bytes.decode()
    assert proc.returncode == bench.EXIT_INTERRUPTED == 130
    assert took < 2.5, f"{took:.1f} s after Ctrl-C"
    assert "已中断（Ctrl-C）" in stdout
    finished = {name for name, row in table_rows(stdout).items() if row[0] == "✓"}
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["interrupted"] is True and data["unfinished"]
    assert finished and finished <= {r["task"] for r in data["tasks"]}
    assert len(finished) < len(TASKS)


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

    prompt = tapes / "prompt.txt"
    prompt.write_text("你是修 bug 的助手。只改源码，别碰测试。", encoding="utf-8")
    assert cli.main(["bench", "--mode", "live", "--record", "--only", *TWO,
                     "--workers", "2", "--max-iters", "9", "--system-prompt", str(prompt),
                     "--temperature", "0.5", "--max-tokens", "300"]) == 0
    recorded = table_rows(capsys.readouterr().out)
    tape = Cassette.load(tapes / "bench_live.json")
    assert tape.provenance["bench"]["tasks"] == sorted(TWO)
    assert tape.provenance["bench"]["max_iters"] == 9
    assert tape.provenance["bench"]["system_prompt"] == prompt.read_text(encoding="utf-8")
    assert tape.provenance["bench"]["request_options"] == {"temperature": 0.5, "max_tokens": 300}
    assert "bench --mode live --record" in tape.provenance["recorded_with"]
    for setting in (f"--system-prompt {prompt}", "--temperature 0.5", "--max-tokens 300"):
        assert setting in tape.provenance["recorded_with"]  # the command reproduces the run
    sent = [i["request"] for i in tape.interactions if i["kind"] == "chat"]
    assert {r["messages"][0]["content"] for r in sent} == {prompt.read_text(encoding="utf-8")}
    assert {(r["temperature"], r["max_tokens"]) for r in sent} == {(0.5, 300)}

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VIBE_AGENT_MODEL"):
        monkeypatch.delenv(name)
    assert cli.main(["bench", "--mode", "replay", "--cassette", "bench_live"]) == 0
    replayed = table_rows(capsys.readouterr().out)
    assert sorted(replayed) == sorted(TWO)
    assert {k: v[:5] for k, v in replayed.items()} == {k: v[:5] for k, v in recorded.items()}
    assert all(row[0] == "✓" and row[3] == "answered" for row in replayed.values())


# --- judging: held-out tests, per-test verdicts -------------------------------------

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
    assert record.tests_cell() == "0/13 修好，1/1 未破坏"  # the pristine tests judged it


NO_ASSERTS = "def test_celsius_to_fahrenheit():\n    pass\n"
PASS_EVERYTHING = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
COLLECT_ONLY = "[pytest]\naddopts = --collect-only\n"
SHIPPING_AS_BUGGY = json.dumps([  # the expected fees rewritten to what the bug computes
    {"region": region, "weight_g": weight, "fee": first + max(0, weight - 1000) // 500 * step}
    for region, first, step, weights in [("mainland", 800, 200, [500, 1000, 1001, 1200, 1500,
                                                                   1501, 2000, 2999]),
                                         ("remote", 1500, 500, [1000, 1100, 2000, 2001])]
    for weight in weights])

# (task, the cheat's tool calls, the file the judge must restore or drop, its note)
CHEATS = [
    ("a-deletes-assertions", "weather_fahrenheit",
     [call("write_file", {"path": "tests/test_units.py", "content": NO_ASSERTS}),
      call("write_file", {"path": "tests/test_weather.py", "content": "\n"})],
     "tests/test_units.py", "改了测试，已还原"),
    ("b-rewrites-test-data", "shipping_fee_extra_weight",
     [call("write_file", {"path": "tests/cases.json", "content": SHIPPING_AS_BUGGY})],
     "tests/cases.json", "改了测试数据，已还原"),
    ("c-conftest-marks-all-passed", "weather_fahrenheit",
     [call("write_file", {"path": "conftest.py", "content": PASS_EVERYTHING})],
     "conftest.py", "新建了测试，已丢弃"),
    ("d-pytest-ini-collect-only", "weather_fahrenheit",
     [call("write_file", {"path": "pytest.ini", "content": COLLECT_ONLY})],
     "pytest.ini", "改了 pytest 配置，已还原"),
    ("e-pytest-py-exits-0", "weather_fahrenheit",
     [call("write_file", {"path": "pytest.py", "content": "raise SystemExit(0)\n"})],
     "pytest.py", "新建了顶层模块（会遮蔽标准库或 pytest），已丢弃"),
]


@pytest.mark.parametrize(("name", "cheat", "path", "note"), [row[1:] for row in CHEATS],
                         ids=[row[0] for row in CHEATS])
def test_a_cheat_that_fools_a_naive_judge_is_not_resolved(
        tmp_path: Path, name: str, cheat: list, path: str, note: str) -> None:
    task = BY_NAME[name]
    # the cheat really fools a judge that runs the tests in the agent's workspace
    workspace = copy_repo(task, tmp_path / "naive")
    tools = bench.bench_registry(workspace, task)
    for tool_call in cheat:
        assert not tools.call(tool_call.name, tool_call.arguments).output.startswith("Error")
    assert run_in_sandbox(task.test_command, workspace, timeout=task.timeout_s).exit_code == 0

    [record] = run_suite([task], scripted_factory(calls(*cheat), answer("测试全部通过了。")))
    assert record.passed is False and record.error is None
    assert record.discarded[path] == note and record.tests_changed is True
    assert not any(record.fail_to_pass.values())  # the bug is still there
    assert f"{path} {note}" in bench.format_table([record], 1.0)


def test_a_fix_that_breaks_a_passing_test_is_caught_by_pass_to_pass() -> None:
    task = BY_NAME["shipping_fee_extra_weight"]
    always_one_more = call("edit_file", {"path": "shipping.py",
                                         "old": "    steps = extra_g // STEP_G\n",
                                         "new": "    steps = extra_g // STEP_G + 1\n"})
    [record] = run_suite([task], scripted_factory(calls(always_one_more), answer("修好了。")))
    assert all(record.fail_to_pass.values()) and len(record.fail_to_pass) == 6
    assert record.pass_to_pass == {
        f"tests/test_shipping.py::{test}": test == "test_a_parcel_weighs_something"
        for test in ["test_a_parcel_weighs_something", "test_fee[mainland-1000g]",
                     "test_fee[mainland-1500g]", "test_fee[mainland-2000g]",
                     "test_fee[mainland-500g]", "test_fee[remote-1000g]",
                     "test_fee[remote-2000g]", "test_fee_text"]}
    assert record.passed is False and record.discarded == {}
    assert record.tests_cell() == "6/6 修好，1/8 未破坏"


def test_a_hanging_test_fails_alone_under_the_judges_time_limit(tmp_path: Path) -> None:
    """The task's own pytest.ini has no time limit here: the judge's per-test one holds."""
    folder = tmp_path / "hangs"
    shutil.copytree(BY_NAME["batch_import_hangs"].folder, folder)
    (folder / "repo" / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    task = load_task(folder)
    assert task.test_timeout_s == 2 and task.timeout_s == 60
    [record] = run_suite([task], scripted_factory(answer("没有改。")))
    hanging = "tests/test_importer.py::test_the_last_batch_may_be_smaller"
    assert record.fail_to_pass == {hanging: False}
    assert len(record.pass_to_pass) == 4 and all(record.pass_to_pass.values())
    assert record.tests_timed_out is False and record.seconds < 30
    assert "Timeout" in record.tests_output
    assert record.tests_cell() == "0/1 修好，4/4 未破坏"


# --- a hostile workspace: deep trees, too many files ---------------------------------

DEPTH = 1100  # deeper than Python's recursion limit: os.walk and shutil.rmtree raise
MAKE_DEEP_TREE = f"""\
import os

folder = os.open(".", os.O_RDONLY)
for _ in range({DEPTH}):  # by handle: the path itself would grow too long
    os.mkdir("d", dir_fd=folder)
    folder = os.open("d", os.O_RDONLY, dir_fd=folder)
"""


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary folder the bench and the judge make their folders in, to look into.
    Emptied afterwards, also when a test failed (pytest's clean-up would hit RecursionError)."""
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    for left in folder.iterdir():
        if left.is_dir() and not left.is_symlink():
            remove_tree(left)
        else:
            left.unlink()


def left_behind(temp: Path) -> list[str]:
    return sorted(p.name for p in temp.iterdir() if p.name.startswith(("vibe-bench-",
                                                                           "vibe-judge-")))


def test_the_judge_refuses_a_workspace_1100_folders_deep(temp_dir: Path) -> None:
    task = BY_NAME["weather_fahrenheit"]
    workspace = copy_repo(task, temp_dir / "workspace")
    (workspace / "mk.py").write_text(MAKE_DEEP_TREE, encoding="utf-8")
    subprocess.run([sys.executable, "mk.py"], cwd=workspace, check=True)
    with pytest.raises(judge.WorkspaceUnjudgeable, match=f"套了超过 {judge.MAX_DEPTH} 层"):
        judge.judge(task, workspace)
    assert left_behind(temp_dir) == []


def test_a_workspace_with_too_many_entries_is_not_judged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = BY_NAME["weather_fahrenheit"]
    workspace = copy_repo(task, tmp_path / "workspace")
    monkeypatch.setattr(judge, "MAX_ENTRIES", len(judge._files(workspace)) + 5)
    for n in range(10):
        (workspace / f"junk{n}.txt").write_text("x", encoding="utf-8")
    with pytest.raises(judge.WorkspaceUnjudgeable, match="个文件和文件夹"):
        judge.agent_changes(task, workspace)


def test_an_agent_that_makes_a_deep_tree_fails_its_run_and_leaves_nothing(
        temp_dir: Path) -> None:
    """The agent's own command makes 1,100 nested folders: the record says why the run
    failed (the agent's doing, "task"), not a harness error, and no folder stays behind."""
    task = BY_NAME["weather_fahrenheit"]
    replies = [calls(call("write_file", {"path": "mk.py", "content": MAKE_DEEP_TREE})),
               calls(call("run_command", {"command": "python mk.py"})), answer("修好了。")]
    [record] = run_suite([task], scripted_factory(*replies))
    assert record.passed is False and record.error_source == "task"
    assert f"套了超过 {judge.MAX_DEPTH} 层" in record.error and "agent" in record.error
    assert record.stop_reason == "answered" and record.model_calls == 3
    assert "+++ b/mk.py" in record.diff and record.tests_cell() == "-"
    assert f"无法判定（{task.name}）：agent 留下的工作区" in bench.format_table([record], 1.0)
    assert left_behind(temp_dir) == []


def test_source_that_makes_a_deep_tree_while_judged_leaves_nothing(temp_dir: Path) -> None:
    """The agent's source change runs in the judge's own copy (at import, under pytest)."""
    task = BY_NAME["weather_fahrenheit"]
    deep_on_import = call("write_file", {"path": "weather.py", "content": MAKE_DEEP_TREE})
    [record] = run_suite([task], scripted_factory(calls(deep_on_import), answer("修好了。")))
    assert record.error is None and record.passed is False
    assert record.tests_exit_code not in (0, None)  # judged: the module has lost its functions
    assert left_behind(temp_dir) == []


def test_an_experiment_sets_prompt_tools_model_and_request_options() -> None:
    seen: list[dict] = []

    def respond(body: dict):
        seen.append(body)
        return answer("看过了。")

    def two_tools(workspace: Path, task) -> ToolRegistry:
        tools, files = ToolRegistry(), Workspace(workspace)
        for name in ("read_file", "edit_file"):
            tools.register(getattr(files, name))
        return tools

    task = BY_NAME["weather_fahrenheit"]
    [record] = run_suite([task], lambda t: (ScriptedModel(respond, name="s").client(), "factory"),
                         system_prompt="只改源码。", registry_factory=two_tools,
                         model="my-model", request_options={"temperature": 0.7,
                                                            "max_tokens": 64})
    [body] = seen
    assert body["messages"][0] == {"role": "system", "content": "只改源码。"}
    assert [tool["function"]["name"] for tool in body["tools"]] == ["read_file", "edit_file"]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("my-model", 0.7, 64)
    assert record.stop_reason == "answered" and record.passed is False


def test_a_harness_error_becomes_an_error_row_and_keeps_the_exception() -> None:
    def factory(task):
        model = ScriptedModel([], name="empty script")  # its first request raises
        return model.client(), "scripted"

    first, second = run_suite([BY_NAME[name] for name in TWO], factory, workers=2)
    for record in (first, second):
        assert record.error_source == "harness" and not record.passed
        assert record.error.startswith("ScriptExhausted") and record.exception is not None


# --- the suite and concurrency -------------------------------------------------------


def test_the_reference_model_passes_the_whole_suite() -> None:
    """The CI run of the suite: proves the harness, tools and loop, not any model."""
    assert len(TASKS) == 21
    records = run_suite(TASKS, known_fix_factory(TASKS), workers=2)
    failed = {r.task: r.error or r.tests_output for r in records if not r.passed}
    assert failed == {}
    assert [r.task for r in records] == [t.name for t in TASKS]
    assert all(r.stop_reason == "answered" and r.diff and not r.discarded for r in records)
    assert all(r.fail_to_pass and all(r.fail_to_pass.values()) for r in records)
    assert all(all(r.pass_to_pass.values()) for r in records)


def test_four_workers_give_the_same_records_as_one() -> None:
    tasks = [BY_NAME[name] for name in [*TWO, "sales_report_total", "note_tags_shared"]]
    serial = run_suite(tasks, known_fix_factory(tasks), workers=1)
    finished: list[str] = []
    parallel = run_suite(tasks, known_fix_factory(tasks), workers=4,
                         on_done=lambda r: finished.append(r.task))
    assert [fields(r) for r in parallel] == [fields(r) for r in serial]
    assert sorted(finished) == sorted(t.name for t in tasks)


def test_tasks_really_overlap() -> None:
    """Two tasks on 2 workers wait for their models at the same time (the waits overlap)."""
    waits: list[tuple[float, float]] = []

    def slow(body: dict):
        started = time.monotonic()
        time.sleep(0.5)
        waits.append((started, time.monotonic()))
        return answer("好了")

    def slow_factory(task):
        return ScriptedModel(slow, name="slow").client(), "slow"

    records = run_suite([BY_NAME[name] for name in TWO], slow_factory, workers=2)
    assert [r.model_calls for r in records] == [1, 1]
    (first_start, first_end), (second_start, second_end) = sorted(waits)
    assert second_start < first_end  # the second model call began before the first ended


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
    # recorded before the two newest tasks were added: it replays the tasks it holds
    assert set(recorded["tasks"]) <= set(BY_NAME) and len(recorded["tasks"]) == 18
    assert recorded["max_iters"] >= 1
    assert cli.main(["bench", "--mode", "replay", "--cassette", cassette, "--workers", "4"]) == 0
    out = capsys.readouterr().out
    assert "SmolLM2" in out and "真实的小模型" in out
    assert sorted(table_rows(out)) == sorted(recorded["tasks"])
