"""Kill everything a command leaves behind, without bubblewrap: a tiny supervisor process.

Inside bubblewrap a command lives in its own process namespace, and when the sandbox
ends, every process in it ends. The unisolated choice (VIBE_AGENT_SANDBOX=none) has no
such namespace, and a `setsid` daemon that forks twice slips out of any process group.
So `run_in_sandbox` starts the command under this script instead:

    python -I -S supervise.py MAX_MEMORY MAX_FILE_SIZE /bin/sh -c COMMAND

It sets the two limits that hold without a sandbox (address space and file size; -1
leaves a limit as it is),
becomes a *child subreaper* (Linux): every orphan among the command's descendants is
re-parented to it instead of to init. When the command ends, or when it is told to
stop (SIGTERM), it kills its children until none is left. What it cannot stop: a
command that kills the supervisor first (it runs as the same user) leaves orphans to
init. Without /proc (macOS) only the process group is killed, by `run_in_sandbox`.

MCP servers (mcp_connection.py) run under it too, without limits (`supervised(argv)`), so
that a server's `setsid` daemon ends with the server.

It starts once per command, so it does as little as it can: only the standard
library's smallest modules (not `ctypes`: see become_subreaper), and its children come
from the kernel's list of them, /proc/self/task/PID/children, not from reading every
process's /proc/PID/stat. What remains is one Python start: a C program such as
bubblewrap starts faster than that.
"""

from __future__ import annotations

import _signal as signal  # the C module: `signal` itself imports enum, ~10 ms per command
import os
import sys

PR_SET_CHILD_SUBREAPER = 36  # prctl(2): orphans of our descendants become our children
NO_LIMIT = -1  # a limit of -1: leave it as it is


def supervised(argv: list[str], max_memory: int = NO_LIMIT,
               max_file_size: int = NO_LIMIT) -> list[str]:
    """The command line that runs the program `argv` (its path first) under this supervisor."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(max_memory),
            str(max_file_size), *argv]


def set_limits(max_memory: int, max_file_size: int) -> None:
    """Cap every process of the command: bytes of address space, bytes per file written."""
    import resource  # Unix only; this script runs only there

    for limit, value in ((resource.RLIMIT_AS, max_memory), (resource.RLIMIT_FSIZE, max_file_size)):
        if value == NO_LIMIT:
            continue
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):  # macOS refuses RLIMIT_AS
            pass


def become_subreaper() -> None:
    """Linux: make orphans of our descendants our children (elsewhere: nothing to do).

    prctl(2) is called through `_ctypes`, the C half of ctypes, the way ctypes itself
    does it: `import ctypes` would cost half as much again as the Python start.
    """
    if not sys.platform.startswith("linux"):
        return
    import _ctypes

    class Prctl(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL  # a C function that returns an int

    class Libc:  # where CFuncPtr looks a name up: our own program and its C library
        _handle = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: as ctypes.CDLL(None)

    prctl = Prctl(("prctl", Libc()))  # type: ignore[arg-type]  # any object with a _handle
    if prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_CHILD_SUBREAPER) failed: leftovers could not be killed")


def children_of(parent: int) -> list[int]:
    """The pids whose parent is `parent`, read from /proc (none where there is no /proc).

    Linux keeps a list of each thread's children; `parent` is this single-threaded
    script, so its main thread's list holds them all (orphans re-parented to a
    subreaper are listed too). Without that list, every process's parent is read.
    """
    try:
        with open(f"/proc/{parent}/task/{parent}/children", encoding="utf-8") as file:
            return [int(pid) for pid in file.read().split()]
    except FileNotFoundError:  # a kernel built without the list (CONFIG_PROC_CHILDREN), or no /proc
        if not os.path.isdir("/proc"):
            return []
    children = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as file:
                fields = file.read().rpartition(")")[2].split()  # the name may hold spaces
        except OSError:  # the process has just ended
            continue
        if int(fields[1]) == parent:
            children.append(int(name))
    return children


def kill_children() -> None:
    """Kill this process's children until none is left: each round's orphans come next."""
    for _ in range(1000):  # bounded; a round kills every child there is
        children = children_of(os.getpid())
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def main(argv: list[str]) -> int:
    """Run `argv[2:]` with the limits `argv[0]`, `argv[1]`; return its exit status."""
    set_limits(int(argv[0]), int(argv[1]))
    become_subreaper()

    def stop(signum: int, frame: object) -> None:  # run_in_sandbox's time limit
        kill_children()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    pid = os.fork()
    if pid == 0:  # the command; Python ignores SIGPIPE and SIGXFSZ, a shell must not
        for signum in (signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(signum, signal.SIG_DFL)
        try:
            os.execv(argv[2], argv[2:])
        finally:
            os._exit(127)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])  # -N: killed by signal N
    kill_children()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
