"""Start `python -m vibe_agent …` and `python -c …` in a pseudo-terminal without paying
for `import openai` each time: a fork server for the terminal tests.

Each terminal test starts the command line afresh, and about 0.8 s of CPU of each
start was importing the same libraries (openai and pydantic most of all). This module
is two halves:

- run as a script (`python pty_forkserver.py SOCKET`), it imports those libraries once
  (never vibe_agent itself: its import-time code runs in each child, as in a fresh
  `python`), then forks one child per request. The child makes itself the leader of a
  new session, opens the test's pseudo-terminal by name (so it becomes the child's
  controlling terminal: Ctrl-C, Ctrl-Z and window resizes reach it as they reach a
  spawned process), takes the request's arguments, environment and folder, and runs
  the program as `python -m` or `python -c` would. The server reaps it and writes its
  exit status back.
- imported, `ForkServerSpawn` is `pexpect.spawn` with only how the process starts swapped:
  everything the tests call (expect, send, sendeof, sendintr, close, exitstatus, …)
  is pexpect's own. A start it cannot serve exactly (another executable, or an
  environment that changes how Python itself starts up) is a plain pexpect spawn.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

import pexpect

# What the command line imports that is not ours: the costly part of its start. Not
# vibe_agent itself: its import-time code runs in each child, as in a fresh `python`.
PRELOAD = ("openai", "httpx2", "pydantic", "anyio", "markdown_it", "rich.console",
           "rich.markdown", "rich.syntax", "prompt_toolkit", "prompt_toolkit.shortcuts",
           "unidiff", "regex", "dotenv")
# Environment variables that change how an interpreter starts (they are read before
# any of our code runs); a start that sets them differently from the server is spawned.
STARTUP_ENV = ("PYTHON", "LANG", "LC_")


# --- the server -------------------------------------------------------------------


def _stdio(fd: int, old: Any) -> Any:
    """A standard stream on `fd` as Python makes one for a terminal (line-buffered)."""
    import io
    raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
    buffer = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffer, encoding=old.encoding, errors=old.errors,
                            line_buffering=fd != 0)


def _become(request: dict[str, Any], others: list[socket.socket], reply: socket.socket) -> None:
    """In the forked child: take the terminal, the environment and the folder, then run."""
    import runpy
    import types
    for other in others:
        other.close()
    os.setsid()
    tty = os.open(request["tty"], os.O_RDWR)  # a session leader's first tty: its own
    for fd in (0, 1, 2):
        os.dup2(tty, fd)
    if tty > 2:
        os.close(tty)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdin, sys.stdout, sys.stderr = (_stdio(fd, old) for fd, old in
                                         enumerate((sys.stdin, sys.stdout, sys.stderr)))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    reply.sendall(f"pid {os.getpid()}\n".encode())  # the terminal is open: the test may let go
    reply.close()
    flag, program, *args = request["argv"]
    if flag == "-m":
        sys.argv, sys.path[0] = [program, *args], os.getcwd()
        runpy.run_module(program, run_name="__main__", alter_sys=True)
    else:
        main = types.ModuleType("__main__")
        sys.modules["__main__"], sys.argv, sys.path[0] = main, ["-c", *args], ""
        exec(compile(program, "<string>", "exec"), main.__dict__)
    sys.exit(0)


def serve(path: str) -> None:
    """Answer requests on the Unix socket `path` until the parent process is gone."""
    import importlib
    for name in PRELOAD:
        importlib.import_module(name)
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    children: dict[int, socket.socket] = {}
    while os.getppid() == parent:
        if select.select([listener], [], [], 0.02)[0]:
            conn, _ = listener.accept()
            with conn.makefile("rb") as lines:
                request = json.loads(lines.readline())
            pid = os.fork()
            if pid == 0:
                _become(request, [listener, *children.values()], conn)
            children[pid] = conn
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            with children.pop(pid) as conn, contextlib.suppress(OSError):  # a test let go
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())


# --- the client: what pexpect.spawn talks to --------------------------------------


class _Server:
    """This test process's fork server, started on first use, stopped at exit."""

    process: subprocess.Popen[str] | None = None
    path = ""

    @classmethod
    def socket_path(cls) -> str:
        if cls.process is None:
            folder = tempfile.mkdtemp(prefix="vibe-forkserver-")
            cls.path = str(Path(folder) / "socket")
            cls.process = subprocess.Popen([sys.executable, __file__, cls.path],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                           text=True)
            atexit.register(cls.stop, folder)
            assert cls.process.stdout is not None
            if cls.process.stdout.readline() != "ready\n":
                raise RuntimeError("the terminal tests' fork server did not start")
        return cls.path

    @classmethod
    def stop(cls, folder: str) -> None:
        if cls.process is not None:
            cls.process.kill()
            cls.process.wait()
        shutil.rmtree(folder, ignore_errors=True)


class ForkedProcess:
    """The part of ptyprocess.PtyProcess that pexpect.spawn uses, for a child that the
    fork server started: its status comes over the server's socket, not from waitpid."""

    delayafterclose = delayafterterminate = 0.1

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str,
                 dimensions: tuple[int, int]) -> None:
        self.fd, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *dimensions, 0, 0))
        self._status = socket.socket(socket.AF_UNIX)
        self._status.connect(_Server.socket_path())
        self._status.sendall(json.dumps({"argv": argv, "env": env, "cwd": cwd,
                                         "tty": os.ttyname(slave)}).encode() + b"\n")
        started = self._line()  # sent once the child holds the terminal
        os.close(slave)  # so that the child's end closing is an EOF here
        if not started.startswith("pid "):
            raise RuntimeError(f"the fork server could not start {argv[:2]}: {started!r}")
        self.pid = int(started.split()[1])
        self.status: int | None = None
        self.exitstatus: int | None = None
        self.signalstatus: int | None = None
        self.flag_eof = False
        self.closed = False
        self._chars = termios.tcgetattr(self.fd)[6]

    def _line(self) -> str:
        """One line from the server, read byte by byte (nothing of the next is taken)."""
        line = b""
        while not line.endswith(b"\n"):
            byte = self._status.recv(1)
            if not byte:
                break
            line += byte
        return line.decode()

    def _read_status(self) -> None:
        line = self._line()
        if not line.startswith("exit "):
            raise RuntimeError(f"the fork server ended before pid {self.pid} did: {line!r}")
        code = int(line.removeprefix("exit "))
        self.status = code
        self.exitstatus, self.signalstatus = (code, None) if code >= 0 else (None, -code)
        self._status.close()

    def isalive(self) -> bool:
        if self.status is None and select.select([self._status], [], [], 0)[0]:
            self._read_status()
        return self.status is None

    def wait(self) -> int | None:
        if self.status is None:
            self._read_status()
        return self.exitstatus

    def kill(self, sig: int) -> None:
        if self.isalive():
            os.kill(self.pid, sig)

    def terminate(self, force: bool = False) -> bool:
        """As ptyprocess does: SIGHUP, SIGCONT, SIGINT, then (forced) SIGKILL."""
        for sig in (signal.SIGHUP, signal.SIGCONT, signal.SIGINT,
                    *([signal.SIGKILL] if force else [])):
            if not self.isalive():
                return True
            self.kill(sig)
            time.sleep(self.delayafterterminate)
        return not self.isalive()

    def close(self, force: bool = True) -> None:
        if not self.closed:
            os.close(self.fd)
            time.sleep(self.delayafterclose)
            if self.isalive() and not self.terminate(force):
                raise RuntimeError("could not terminate the child")
            self.fd, self.closed = -1, True

    def _control(self, index: int) -> tuple[int, bytes]:
        byte = self._chars[index]
        return os.write(self.fd, byte), byte

    def sendcontrol(self, char: str) -> tuple[int, bytes]:
        byte = bytes([ord(char.lower()) - ord("a") + 1])
        return os.write(self.fd, byte), byte

    def sendeof(self) -> tuple[int, bytes]:
        return self._control(termios.VEOF)

    def sendintr(self) -> tuple[int, bytes]:
        return self._control(termios.VINTR)

    def getwinsize(self) -> tuple[int, int]:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(self.fd, termios.TIOCGWINSZ,
                                                             b"\0" * 8))
        return rows, cols

    def setwinsize(self, rows: int, cols: int) -> None:
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def servable(args: list[str], env: dict[str, str] | None) -> bool:
    """Whether the fork server starts this exactly as `exec` would."""
    if os.environ.get("PTY_FORKSERVER") == "0":
        return False
    startup = {k: v for k, v in (env or os.environ).items() if k.startswith(STARTUP_ENV)}
    ours = {k: v for k, v in os.environ.items() if k.startswith(STARTUP_ENV)}
    return (len(args) >= 3 and args[0] == sys.executable and args[1] in ("-m", "-c")
            and startup == ours)


class ForkServerSpawn(pexpect.spawn):
    """`pexpect.spawn`, started by the fork server when it can start the command exactly.

    PTY_FORKSERVER=0 in the tests' environment spawns every command (to compare).
    """

    def _spawnpty(self, args: list[bytes | str], **options: Any) -> Any:
        argv = [a.decode() if isinstance(a, bytes) else a for a in args]
        env = options.get("env")
        if not servable(argv, env):
            return super()._spawnpty(args, **options)
        return ForkedProcess(argv[1:], dict(env if env is not None else os.environ),
                             str(options.get("cwd") or os.getcwd()),
                             options.get("dimensions") or (24, 80))


if __name__ == "__main__":
    serve(sys.argv[1])
