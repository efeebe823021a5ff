"""`code -p` (one request, exit codes, JSON), `code --model` and `/model`, and `ask` with
no terminal to ask (issue 28): subprocesses for the headless runs, a pty for /model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from forkserver import forked_run
from terminal_helpers import PROMPT, clean_env, finish, spawn_code

from vibe_agent.course.scripted import ScriptedModel, answer, call, calls, usage_of
from vibe_agent.memory import MemoryFile
from vibe_agent.trace import Trace

TASK = "weather_fahrenheit"


def code(*args: str, tmp_path: Path, stdin: str | None = None,
         **env: str) -> subprocess.CompletedProcess:
    """`python -m vibe_agent code ARGS` with stdin a pipe (not a terminal)."""
    return forked_run([sys.executable, "-m", "vibe_agent", "code", *args],
                      input=stdin or "", capture_output=True, text=True, timeout=120,
                      cwd=tmp_path, env=clean_env(tmp_path, **env))


def live(base_url: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "test-key",
            "VIBE_AGENT_MODEL": "env-model", "VIBE_AGENT_MAX_RETRIES": "0"}


def project(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello\n", encoding="utf-8")
    return folder


def copied_to(stderr: str) -> Path:
    """The task's fresh copy, as the session named it."""
    match = re.search(r"新的工作区：(\S+)", stderr)
    assert match, stderr
    return Path(match.group(1))


# --- -p: the answer on stdout, the exit codes --------------------------------------------


def test_p_on_a_course_task_prints_only_the_answer_and_exits_zero(tmp_path):
    done = code("-p", "/task", "--task", TASK, "--approve", "yolo", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("我按任务自带的已知修复改了 units.py")
    assert done.stdout.count("\n") == 1  # the answer alone: the progress is on stderr
    assert "模型：scripted-known-fix" in done.stderr
    assert "判定：13/13 修好" in done.stderr


def test_p_json_is_one_object_with_the_verdict_and_the_trajectory(tmp_path):
    done = code("-p", "/task", "--task", TASK, "--approve", "yolo", "--output-format", "json",
                tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1  # one line: one object, nothing else
    data = json.loads(done.stdout)
    assert data["stop_reason"] == "answered" and data["exit_code"] == 0
    assert data["verdict"].startswith("改了 1 处 · 判定：13/13 修好，1/1 未破坏")
    assert data["tokens"] is None  # the known-fix model reports no usage: not invented
    assert data["model_calls"] == 6 and data["tool_calls"] == 5 and data["refused"] == 0
    trajectory = Trace.from_json(Path(data["trajectory"]).read_text("utf-8"))
    assert sum(step.kind == "model" for step in trajectory) == 6


def test_p_with_ask_and_no_terminal_refuses_and_says_so_once(tmp_path):
    done = code("-p", "/task", "--task", TASK, "--output-format", "json", tmp_path=tmp_path)
    assert done.returncode == 3, done.stderr  # refused
    data = json.loads(done.stdout)
    assert data["refused"] == 3 and data["exit_code"] == 3
    assert data["verdict"] == "这一轮没有改动工作区里的文件。"
    assert "没有得到批准" in data["answer"]
    assert done.stderr.count("没有终端可以问你") == 1
    assert "允许" not in done.stderr  # no question was put to nobody
    assert not copied_to(done.stderr).parent.exists()  # the copy is removed


def test_p_auto_edit_with_no_terminal_writes_but_refuses_commands(tmp_path):
    done = code("-p", "/task", "--task", TASK, "--approve", "auto-edit", "--output-format",
                "json", tmp_path=tmp_path)
    data = json.loads(done.stdout)
    assert done.returncode == 3 and data["refused"] == 2  # the two test runs
    assert data["verdict"].startswith("改了 1 处 · 判定：13/13 修好")  # the edit went ahead
    assert done.stderr.count("没有终端可以问你") == 1 and "运行命令" in done.stderr


def test_p_stopped_by_a_brake_exits_one(tmp_path):
    done = code("-p", "/task", "--task", TASK, "--approve", "yolo", "--max-iters", "2",
                "--output-format", "json", tmp_path=tmp_path)
    data = json.loads(done.stdout)
    assert done.returncode == 1 and data["stop_reason"] == "max_iters"
    assert data["answer"] is None and data["model_calls"] == 2


def test_p_when_the_service_fails_exits_four(tmp_path):
    done = code("-p", "hi", str(project(tmp_path)), "--output-format", "json",
                tmp_path=tmp_path, **live("http://127.0.0.1:9/v1"))
    assert done.returncode == 4, done.stderr
    data = json.loads(done.stdout)
    assert data["stop_reason"] == "provider_error" and data["answer"] is None
    assert "Traceback" not in done.stderr


def test_p_json_escapes_what_the_model_wrote_and_counts_reported_tokens(tmp_path, serve_model):
    hostile = "done\x1b[2J\x1b]10;#000000\x07 \u202egnp.exe\u009b31m"
    model = ScriptedModel(lambda body: answer(hostile, usage=usage_of(120, 7)))
    base_url = serve_model(model, key="test-key")
    done = code("-p", "hi", str(project(tmp_path)), "--output-format", "json",
                "--model", "chosen-model", tmp_path=tmp_path, **live(base_url))
    assert done.returncode == 0, done.stderr
    assert all(32 <= ord(c) < 127 for c in done.stdout.strip())  # nothing raw reaches stdout
    data = json.loads(done.stdout)
    assert data["answer"] == hostile  # escaped, not lost
    assert data["tokens"] == 127 and data["model"] == "chosen-model"
    assert model.requests[-1]["model"] == "chosen-model"  # --model is what is sent


def test_p_text_answer_is_escaped_for_the_terminal(tmp_path, serve_model):
    model = ScriptedModel(lambda body: answer("ok\x1b[2J\nline two"))
    done = code("-p", "hi", str(project(tmp_path)), tmp_path=tmp_path,
                **live(serve_model(model, key="test-key")))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\\x1b[2J\nline two\n"


@pytest.mark.parametrize("args, says", [
    (["--task", TASK, "--output-format", "json"], "只用于 -p"),
    (["--task", TASK, "-p", "  "], "-p 后面要写请求"),
    (["--task", TASK, "--model", "gpt-x", "-p", "hi"], "--model 只用于 live 模式"),
    (["--task", TASK, "--mode", "local", "--model", "gpt-x"], "SmolLM2"),
])
def test_bad_headless_command_lines_exit_two_before_anything_is_copied(tmp_path, args, says):
    done = code(*args, tmp_path=tmp_path)
    assert done.returncode == 2
    assert says in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == "" and "复制" not in done.stderr  # refused before any copy


def test_exit_codes_are_in_the_help(tmp_path):
    done = code("--help", tmp_path=tmp_path)
    for words in ("0 完成", "1 被刹车停下", "2 命令行或配置有误", "3 有操作没有得到批准",
                  "4 模型服务出错", "130"):
        assert words in done.stdout.replace("\n", "")


# --- an interactive run with stdin piped --------------------------------------------------


def test_piped_interactive_ask_refuses_says_so_once_and_reads_no_answer_from_stdin(tmp_path):
    done = code("--task", TASK, tmp_path=tmp_path, stdin="/task\n/diff\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("没有终端可以问你") == 1
    # before: the approval read "/diff" as its answer; now /diff runs as the next line
    assert "工作区没有变化" in out
    assert "没有得到批准" in out


# --- /model in a real terminal ------------------------------------------------------------


def test_slash_model_shows_and_switches_the_model_for_the_next_request(tmp_path, serve_model):
    replies = iter([answer("first"), answer("second")])
    model = ScriptedModel(lambda body: next(replies))
    trajectory = tmp_path / "t.json"
    child = spawn_code(str(project(tmp_path)), "--mode", "live", "--model", "start-model",
                  "--trajectory", str(trajectory), tmp_path=tmp_path,
                  **live(serve_model(model, key="test-key")))
    child.expect_exact(PROMPT)
    child.send("/model\r")
    child.expect(r"模型：start-model\s+运行模式和来源（启动时）：（运行模式：live")
    child.expect_exact(PROMPT)
    child.send("hello\r")
    child.expect_exact("first")
    child.expect_exact(PROMPT)
    child.send("/model other-model\r")
    child.expect("从下一次请求起用模型 other-model")
    child.expect_exact(PROMPT)
    child.send("/model\r")
    child.expect("模型：other-model")
    child.expect_exact(PROMPT)
    child.send("again\r")
    child.expect_exact("second")
    finish(child)
    assert [r["model"] for r in model.requests] == ["start-model", "other-model"]
    steps = [s for s in Trace.from_json(trajectory.read_text("utf-8")) if s.kind == "model"]
    assert [s.model for s in steps] == ["start-model", "other-model"]  # the trajectory says


def test_slash_model_refuses_what_it_cannot_switch_to_and_is_in_help(tmp_path):
    child = spawn_code("--task", TASK, "--mode", "offline", tmp_path=tmp_path)
    child.expect_exact(PROMPT)
    child.send("/help\r")
    child.expect(r"/model\s+显示现在的模型和运行模式")
    # (an ESC typed at the prompt is the Escape key, never text: see the next test)
    for name, says in (("gpt-x", "离线模式下回答的是已知修复模型"), ("two words", "不像模型名")):
        child.expect_exact(PROMPT)
        child.send(f"/model {name}\r")
        child.expect("没有换：")
        child.expect(says)
    child.expect_exact(PROMPT)
    child.send("/model\r")
    child.expect("模型：scripted-known-fix")
    finish(child)


def test_slash_model_refuses_a_name_with_control_characters(tmp_path):
    from vibe_agent.terminal import COMMANDS, Session

    session = Session(ScriptedModel([]).client(), "m", tmp_path, io_console())
    COMMANDS["/model"].run(session, "evil\x1b[2J")
    shown = session.console.file.getvalue()
    assert session.model == "m" and "不像模型名" in shown and "\x1b" not in shown


# --- bench --agent code: the terminal agent, measured ------------------------------------


def recording_model(requests: list[dict]) -> ScriptedModel:
    """A model that answers at once and keeps every request it was sent."""
    def respond(body: dict) -> object:
        requests.append(body)
        return answer("nothing to do")
    return ScriptedModel(respond)


def offered(body: dict) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def test_bench_agent_code_sends_the_terminal_agents_tools_and_rules(tmp_path):
    from vibe_agent.coding import CODING_SYSTEM_PROMPT
    from vibe_agent.course.bench import BENCH_SYSTEM_PROMPT, code_agent_factories, run_suite
    from vibe_agent.course.tasks import SUITE_DIR, load_task
    from vibe_agent.terminal import Session

    task = load_task(SUITE_DIR / TASK)
    terminal, lesson09, coded = [], [], []
    Session(recording_model(terminal).client(), "m", tmp_path, io_console(),
            approve="yolo", memory=MemoryFile(tmp_path / "notes.md")).turn("hi")
    run_suite([task], lambda t: (recording_model(lesson09).client(), "m"))
    models, registry = code_agent_factories(lambda t: (recording_model(coded).client(), "m"))
    run_suite([task], models, registry_factory=registry, system_prompt=CODING_SYSTEM_PROMPT)
    assert offered(coded[0]) == offered(terminal[0])  # the agent a learner uses
    assert {"todo_write", "remember", "delegate"} <= offered(coded[0])
    assert not {"todo_write", "remember", "delegate"} & offered(lesson09[0])  # default: 09's
    assert coded[0]["messages"][0]["content"] == terminal[0]["messages"][0]["content"] \
        == CODING_SYSTEM_PROMPT
    assert lesson09[0]["messages"][0]["content"] == BENCH_SYSTEM_PROMPT


def test_bench_agent_code_sub_agent_uses_the_tasks_own_client(tmp_path):
    from vibe_agent.course.bench import code_agent_factories, run_suite
    from vibe_agent.course.tasks import SUITE_DIR, load_task

    seen: list[dict] = []

    def respond(body: dict) -> object:
        seen.append(body)
        if body["messages"][-1]["role"] == "tool" or "delegate" not in offered(body):
            return answer("looked")  # the child, or the parent after the child answered
        return calls(call("delegate", {"task": "list the files"}))

    task = load_task(SUITE_DIR / TASK)
    models, registry = code_agent_factories(lambda t: (ScriptedModel(respond).client(), "m"),
                                            model="sent-model")
    [record] = run_suite([task], models, registry_factory=registry, model="sent-model")
    assert record.stop_reason == "answered", record.error
    assert len(seen) == 3 and {body["model"] for body in seen} == {"sent-model"}
    assert "delegate" not in offered(seen[1])  # the child: read-only, cannot delegate


def io_console():
    import io

    from rich.console import Console

    return Console(file=io.StringIO(), width=100)


def test_bench_agent_code_fixes_suite_tasks_offline(tmp_path):
    run = forked_run([sys.executable, "-m", "vibe_agent", "bench", "--agent", "code",
                      "--only", TASK, "bill_split_cents", "--json", str(tmp_path / "b.json")],
                     capture_output=True, text=True, timeout=180, cwd=tmp_path,
                     env=clean_env(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "agent：终端 agent" in run.stdout
    data = json.loads((tmp_path / "b.json").read_text("utf-8"))
    assert data["agent"] == "code"
    assert [(t["task"], t["passed"]) for t in data["tasks"]] == [("bill_split_cents", True),
                                                                (TASK, True)]


def test_p_at_a_terminal_asks_and_a_no_exits_three(tmp_path):
    child = spawn_code("-p", "/task", "--task", TASK, "--output-format", "json", tmp_path=tmp_path)
    for reply in ("y", "n", "y"):  # the first test run, the edit, the second test run
        child.expect(r"允许.*?吗？\[y/N\] ")
        child.send(reply + "\r")
    child.expect(pexpect.EOF)
    child.close()
    line = next(text for text in child.before.splitlines() if text.startswith("{"))
    data = json.loads(line)
    assert child.exitstatus == 3 == data["exit_code"]
    assert data["refused"] == 1 and data["stop_reason"] == "answered"
    assert "没有终端可以问你" not in child.before  # there was one
