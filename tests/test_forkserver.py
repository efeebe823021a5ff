"""The tests' fork server starts a program as a spawned `python` would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pexpect
import pytest
from forkserver import ForkedProcess, ForkServerPopen, ForkServerSpawn, forked_run, servable

# What a started program can tell about how it was started.
REPORT = """
import json, os, signal, sys
print(json.dumps({
    "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "env": os.environ.get("PROBE"),
    "tty": [os.isatty(fd) for fd in (0, 1, 2)],
    "session_leader": os.getsid(0) == os.getpid(),
    "foreground": os.tcgetpgrp(0) == os.getpgrp(),
    "line_buffered": sys.stdout.line_buffering, "encoding": sys.stdout.encoding,
    "size": list(os.get_terminal_size()), "main": __name__,
    "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "streams": [(s.line_buffering, s.write_through, type(s.buffer).__name__)
                for s in (sys.stdin, sys.stdout, sys.stderr)],
}))
print("answer:", input("? "))
"""


def start(tmp_path, *args: str, forked: bool, monkeypatch) -> pexpect.spawn:
    monkeypatch.setenv("FORKSERVER", "1" if forked else "0")
    child = ForkServerSpawn(sys.executable, list(args), env={"PROBE": "42", "PATH": "/usr/bin"},
                            cwd=str(tmp_path), encoding="utf-8", timeout=30,
                            dimensions=(33, 111))
    assert isinstance(child.ptyproc, ForkedProcess) == forked  # the way asked for
    return child


def report(child: pexpect.spawn) -> dict:
    child.expect(r"(\{.*\})\r\n")
    data = json.loads(child.match.group(1))
    child.expect_exact("? ")
    child.sendline("yes")
    child.expect_exact("answer: yes")
    child.expect(pexpect.EOF)
    child.close()
    data["exit"] = child.exitstatus
    return data


def test_a_forked_start_is_a_spawned_start(tmp_path, monkeypatch):
    spawned = report(start(tmp_path, "-c", REPORT, "a b", forked=False, monkeypatch=monkeypatch))
    forked = report(start(tmp_path, "-c", REPORT, "a b", forked=True, monkeypatch=monkeypatch))
    assert forked == spawned
    assert spawned["tty"] == [True] * 3 and spawned["size"] == [111, 33]
    assert spawned["argv"] == ["-c", "a b"] and spawned["env"] == "42"


@pytest.mark.parametrize("forked", [False, True], ids=["spawned", "forked"])
def test_ctrl_c_and_exit_codes_arrive_as_from_a_spawned_start(tmp_path, forked, monkeypatch):
    child = start(tmp_path, "-c", "import time; print('ready', flush=True); time.sleep(30)",
                  forked=forked, monkeypatch=monkeypatch)
    child.expect_exact("ready")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert (child.exitstatus, child.signalstatus) == (None, 2)  # KeyboardInterrupt: SIGINT
    child = start(tmp_path, "-c", "import sys; sys.exit(7)", forked=forked,
                  monkeypatch=monkeypatch)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 7


PIPED = REPORT.replace('"tty"', '"tty_"').replace('"size": list(os.get_terminal_size()), ', "")
PIPED = PIPED.replace('"session_leader": os.getsid(0) == os.getpid(),', "").replace(
    '"foreground": os.tcgetpgrp(0) == os.getpgrp(),', "")


@pytest.mark.parametrize("unbuffered", ["", "1"], ids=["buffered", "python-u"])
def test_a_forked_run_is_a_subprocess_run(tmp_path, monkeypatch, unbuffered):
    env = dict(os.environ, PROBE="42", PYTHONUNBUFFERED=unbuffered)  # a server for each

    def done(run) -> tuple:
        result = run([sys.executable, "-c", PIPED, "a b"], input="yes\n", capture_output=True,
                     text=True, env=env, cwd=tmp_path, timeout=30)
        return result.returncode, result.stdout, result.stderr

    monkeypatch.setenv("FORKSERVER", "1")
    assert servable([sys.executable, "-c", PIPED])
    forked = done(forked_run)
    assert forked == done(subprocess.run)
    assert forked[0] == 0 and "answer: yes" in forked[1]


def test_popen_poll_wait_and_a_signal_are_a_subprocess_popen(monkeypatch):
    monkeypatch.setenv("FORKSERVER", "1")
    code = "import sys, time; print('up', flush=True); time.sleep(30)"
    with ForkServerPopen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        assert proc._forked is not None  # started by the fork server
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        assert proc.poll() is None
        proc.terminate()
        assert proc.wait(timeout=10) == -15 and proc.poll() == -15
    with pytest.raises(subprocess.TimeoutExpired):
        forked_run([sys.executable, "-c", code], timeout=0.5)
    assert forked_run([sys.executable, "-c", "raise SystemExit(9)"]).returncode == 9


def test_options_the_fork_server_does_not_honour_mean_a_plain_spawn(tmp_path, monkeypatch):
    monkeypatch.setenv("FORKSERVER", "1")
    for options in ({"echo": False}, {"ignore_sighup": True}, {"preexec_fn": lambda: None}):
        child = ForkServerSpawn(sys.executable, ["-c", "pass"], cwd=str(tmp_path), **options)
        assert not isinstance(child.ptyproc, ForkedProcess), options
        child.expect(pexpect.EOF)
        child.close()


def test_a_start_it_cannot_reproduce_is_spawned(monkeypatch):
    monkeypatch.delenv("FORKSERVER", raising=False)
    assert servable([sys.executable, "-m", "vibe_agent", "code"])
    assert servable([sys.executable, "-c", "pass"])
    assert not servable(["/bin/sh", "-c", "true"])
    assert not servable([sys.executable, "script.py"])
    monkeypatch.setenv("FORKSERVER", "0")
    assert not servable([sys.executable, "-m", "vibe_agent", "code"])
