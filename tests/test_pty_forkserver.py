"""The terminal tests' fork server starts a program as a spawned `python` would."""

from __future__ import annotations

import json
import os
import sys

import pexpect
import pytest
from pty_forkserver import ForkServerSpawn, servable

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
}))
print("answer:", input("? "))
"""


def start(tmp_path, *args: str, forked: bool, monkeypatch) -> pexpect.spawn:
    monkeypatch.setenv("PTY_FORKSERVER", "1" if forked else "0")
    return ForkServerSpawn(sys.executable, list(args), env={"PROBE": "42", "PATH": "/usr/bin"},
                           cwd=str(tmp_path), encoding="utf-8", timeout=30,
                           dimensions=(33, 111))


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


def test_a_start_it_cannot_reproduce_is_spawned(monkeypatch):
    monkeypatch.delenv("PTY_FORKSERVER", raising=False)
    assert servable([sys.executable, "-m", "vibe_agent", "code"], None)
    assert not servable(["/bin/sh", "-c", "true"], None)
    ours = dict(os.environ)
    assert servable([sys.executable, "-c", "pass"], ours | {"OTHER": "1"})
    assert not servable([sys.executable, "-c", "pass"], ours | {"PYTHONSAFEPATH": "x"})
    assert not servable([sys.executable, "-c", "pass"], ours | {"LC_ALL": "x"})
    monkeypatch.setenv("PTY_FORKSERVER", "0")
    assert not servable([sys.executable, "-m", "vibe_agent", "code"], None)
