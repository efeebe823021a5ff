"""Start `python -m vibe_agent …` and `python -c …` without paying for `import openai`
each time: a fork server for the tests that run the command line.

Each such test starts the command line afresh, and about 0.8 s of CPU of each start
was importing the same libraries (openai and pydantic most of all). This module is
two halves:

- run as a script (`python forkserver.py SOCKET`), it imports those libraries once
  (never vibe_agent itself: its import-time code runs in each child, as in a fresh
  `python`), then forks one child per request. The child takes the request's standard
  streams: either a pseudo-terminal, opened by name after it made itself the leader of
  a new session (so it is the child's controlling terminal: Ctrl-C and window resizes
  reach it as they reach a spawned process), or the three file descriptors the test
  sent over the socket (pipes, as subprocess gives). Then its arguments, environment
  and folder, and it runs the program as `python -m` or `python -c` would. The server
  reaps it and writes its exit status back.
- imported, `ForkServerSpawn` is `pexpect.spawn` and `ForkServerPopen` (and `forked_run`) is
  `subprocess.Popen` (and `subprocess.run`), with only how the process starts swapped:
  everything the tests call on them is pexpect's or subprocess's own. A start that sets
  the variables Python reads as it starts (PYTHON*, LANG, LC_*) differently gets a
  server started with those; another program, a shell or a preexec_fn is a plain start.
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
# any of our code runs): a start is served by a server started with the same ones.
STARTUP_ENV = ("PYTHON", "LANG", "LC_")


# --- the server -------------------------------------------------------------------


def _stdio(fd: int, old: Any) -> Any:
    """A standard stream on `fd` as Python makes one at start-up (create_stdio in
    CPython's pylifecycle.c): line-buffered at a terminal and for stderr, and
    unbuffered writes under -u or PYTHONUNBUFFERED."""
    import io
    buffered, writing = not old.write_through, fd != 0  # write_through: -u at our start
    raw = io.FileIO(fd, "w" if writing else "r", closefd=False)
    buffer = (raw if writing and not buffered else
              io.BufferedWriter(raw) if writing else io.BufferedReader(raw))
    return io.TextIOWrapper(buffer, encoding=old.encoding, errors=old.errors,
                            line_buffering=buffered and (fd == 2 or os.isatty(fd)),
                            write_through=not buffered)


def _become(request: dict[str, Any], streams: list[int], others: list[socket.socket],
            reply: socket.socket) -> None:
    """In the forked child: take the streams, the environment and the folder, then run."""
    import runpy
    import types
    for other in others:
        other.close()
    if request.get("tty"):
        os.setsid()
        tty = os.open(request["tty"], os.O_RDWR)  # a session leader's first tty: its own
        streams = [tty] * 3
    for fd, stream in enumerate(streams):
        os.dup2(stream, fd)
    for stream in set(streams) - {0, 1, 2}:
        os.close(stream)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.stdin, sys.stdout, sys.stderr = (_stdio(fd, old) for fd, old in
                                         enumerate((sys.stdin, sys.stdout, sys.stderr)))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    reply.sendall(f"pid {os.getpid()}\n".encode())  # its streams are open: the test may let go
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
            _, streams, _, _ = socket.recv_fds(conn, 1, 3)  # none for a terminal
            with conn.makefile("rb") as lines:
                request = json.loads(lines.readline())
            pid = os.fork()
            if pid == 0:
                _become(request, streams, [listener, *children.values()], conn)
            for stream in streams:
                os.close(stream)
            children[pid] = conn
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            with children.pop(pid) as conn, contextlib.suppress(OSError):  # a test let go
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())


# --- the client: what pexpect.spawn and subprocess.Popen talk to ------------------


class _Servers:
    """This test process's fork servers, one for each start-up environment (PYTHON*,
    LANG, LC_* as a request has them), started on first use, stopped at exit."""

    running: dict[frozenset[tuple[str, str]], tuple[subprocess.Popen[str], str]] = {}

    @classmethod
    def socket_path(cls, env: dict[str, str]) -> str:
        startup = {k: v for k, v in env.items() if k.startswith(STARTUP_ENV)}
        key = frozenset(startup.items())
        if key not in cls.running:
            folder = tempfile.mkdtemp(prefix="vibe-forkserver-")
            path = str(Path(folder) / "socket")
            own = {k: v for k, v in os.environ.items() if not k.startswith(STARTUP_ENV)}
            process = subprocess.Popen([sys.executable, __file__, path], env=own | startup,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       text=True)
            atexit.register(cls.stop, process, folder)
            assert process.stdout is not None
            if process.stdout.readline() != "ready\n":
                raise RuntimeError("the tests' fork server did not start")
            cls.running[key] = process, path
        return cls.running[key][1]

    @staticmethod
    def stop(process: subprocess.Popen[str], folder: str) -> None:
        process.kill()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


class _Child:
    """A child the fork server started: its pid, and its exit code, which comes over the
    server's socket (it is not our child: waitpid cannot see it)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, *,
                 tty: str = "", streams: tuple[int, int, int] | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(_Servers.socket_path(env))
        socket.send_fds(self.sock, [b"."], list(streams or ()))
        self.sock.sendall(json.dumps({"argv": argv, "env": env, "cwd": cwd,
                                      "tty": tty}).encode() + b"\n")
        started = self.line()  # sent once the child holds its streams
        if not started.startswith("pid "):
            raise RuntimeError(f"the fork server could not start {argv[:2]}: {started!r}")
        self.pid = int(started.split()[1])
        self.code: int | None = None

    def line(self) -> str:
        """One line from the server, read byte by byte (nothing of the next is taken)."""
        line = b""
        while not line.endswith(b"\n"):
            byte = self.sock.recv(1)
            if not byte:
                break
            line += byte
        return line.decode()

    def exit_code(self, block: bool) -> int | None:
        """Its exit code (minus the signal that ended it); None while it runs (block=False)."""
        if self.code is None and (block or select.select([self.sock], [], [], 0)[0]):
            line = self.line()
            if not line.startswith("exit "):
                raise RuntimeError(f"the fork server ended before pid {self.pid}: {line!r}")
            self.code = int(line.removeprefix("exit "))
            self.sock.close()
        return self.code


class ForkedProcess:
    """The part of ptyprocess.PtyProcess that pexpect.spawn uses, for a child that the
    fork server started in a new pseudo-terminal."""

    delayafterclose = delayafterterminate = 0.1

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str,
                 dimensions: tuple[int, int]) -> None:
        self.fd, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *dimensions, 0, 0))
        try:
            self._child = _Child(argv, env, cwd, tty=os.ttyname(slave))
        finally:
            os.close(slave)  # the child has it open: its end closing is an EOF here
        self.pid = self._child.pid
        self.status: int | None = None
        self.exitstatus: int | None = None
        self.signalstatus: int | None = None
        self.flag_eof = False
        self.closed = False
        self._chars = termios.tcgetattr(self.fd)[6]

    def _read_status(self, block: bool = True) -> None:
        code = self._child.exit_code(block)
        if code is None:
            return
        self.status = code
        self.exitstatus, self.signalstatus = (code, None) if code >= 0 else (None, -code)

    def isalive(self) -> bool:
        if self.status is None:
            self._read_status(block=False)
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


def servable(args: list[str]) -> bool:
    """Whether a fork server starts this exactly as `exec` would: `python -m` or
    `python -c` (the server is one started with the same start-up environment)."""
    return (os.environ.get("FORKSERVER") != "0" and len(args) >= 3
            and args[0] == sys.executable and args[1] in ("-m", "-c"))


class ForkServerSpawn(pexpect.spawn):
    """`pexpect.spawn`, started by the fork server when it can start the command exactly.

    FORKSERVER=0 in the tests' environment spawns every command (to compare).
    """

    def _spawnpty(self, args: list[bytes | str], **options: Any) -> Any:
        argv = [a.decode() if isinstance(a, bytes) else a for a in args]
        env = options.get("env")
        plain = options.get("preexec_fn") is None and options.get("echo", True)
        if not (plain and servable(argv)):  # ignore_sighup arrives as a preexec_fn
            return super()._spawnpty(args, **options)
        return ForkedProcess(argv[1:], dict(env if env is not None else os.environ),
                             str(options.get("cwd") or os.getcwd()),
                             options.get("dimensions") or (24, 80))


class ForkServerPopen(subprocess.Popen):  # type: ignore[type-arg]
    """`subprocess.Popen`, started by the fork server when it can start the command
    exactly (no shell, no preexec_fn, the default signal and session handling)."""

    _forked: _Child | None = None

    def _execute_child(self, args: Any, executable: Any, preexec_fn: Any, close_fds: bool,
                       pass_fds: Any, cwd: Any, env: Any, startupinfo: Any,
                       creationflags: Any, shell: bool, p2cread: int, p2cwrite: int,
                       c2pread: int, c2pwrite: int, errread: int, errwrite: int,
                       *rest: Any) -> None:
        argv = [os.fsdecode(a) for a in ([args] if isinstance(args, str | bytes) else args)]
        plain = (not shell and executable is None and preexec_fn is None and not pass_fds
                 and rest == (True, None, None, None, -1, False, -1))
        if not (plain and servable(argv)):
            super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd,
                                   env, startupinfo, creationflags, shell, p2cread, p2cwrite,
                                   c2pread, c2pwrite, errread, errwrite, *rest)
            return
        streams = (p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
                   errwrite if errwrite != -1 else 2)
        self._forked = _Child(argv[1:], dict(env if env is not None else os.environ),
                              os.fsdecode(cwd) if cwd is not None else os.getcwd(),
                              streams=streams)
        self.pid, self._child_created = self._forked.pid, True
        for ours, theirs in ((p2cread, p2cwrite), (c2pwrite, c2pread), (errwrite, errread)):
            if ours != -1 and theirs != -1:  # the pipe's other end is ours: this one is not
                os.close(ours)
        self._closed_child_pipe_fds = True

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:  # what wait() asks
        if self._forked is None:
            return super()._try_wait(wait_flags)
        code = self._forked.exit_code(block=not wait_flags & os.WNOHANG)
        if code is None:
            return 0, 0
        return self.pid, code << 8 if code >= 0 else -code  # as waitpid would say it

    def _internal_poll(self, *args: Any, **kwargs: Any) -> int | None:  # what poll() asks
        if self._forked is None:
            return super()._internal_poll(*args, **kwargs)
        if self.returncode is None:
            pid, status = self._try_wait(os.WNOHANG)
            if pid:
                self._handle_exitstatus(status)
        return self.returncode


def forked_run(args: list[str], *, input: Any = None, timeout: float | None = None,
        check: bool = False, capture_output: bool = False, **kwargs: Any
        ) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run`, through the fork server when it can start the command exactly."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with ForkServerPopen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


if __name__ == "__main__":
    serve(sys.argv[1])
