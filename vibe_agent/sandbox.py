"""Run one shell command for a model, safely: a sandbox, limits, and an approval policy.

A coding agent runs commands a model wrote. Three separate guards stand between
those commands and the machine:

    policy.refusal(action)      may this happen at all?      allow-list / ask / function
                                                             (policy.py)
    run_in_sandbox(command)     where does it run?           bubblewrap: only the workspace
                                                             is writable, no network, no secrets,
                                                             an unprivileged user
    limits                      for how long, how much?      time limit kills every process;
                                                             output, processes, memory, file
                                                             size and /tmp are capped

The sandbox is bubblewrap (`bwrap`, Linux): the command sees the workspace read-write
at `/workspace`, the system and the Python installation read-only, a fresh small
`/tmp`, no network, no home directory, /proc/sys read-only, and an environment built
from scratch, so no API key from our process or from `.env` reaches it. It runs as
uid 65534 ("nobody"); when we are root, that is a real change of user (root inside a
sandbox can still write what root may write, e.g. /proc/sys/kernel/core_pattern).
Three programs start per command: bwrap, `prlimit` (the limits, which every process of
the command inherits) and the shell; as root two more: `setpriv` (it changes user) and
`unshare` (a user namespace of the command's own, so that its process limit is its own,
not shared with every other sandbox of uid 65534 running at the same time).

Without a usable bubblewrap (macOS, or bwrap not installed) `run_in_sandbox` refuses
with SandboxUnavailable, unless the person chose, once, to run commands unisolated:
`VIBE_AGENT_SANDBOX=none`. Then commands run as plain processes with the same time
limit, output cap and clean environment, memory and file-size limits, and a supervisor
that kills whatever they leave behind — but NOT isolated: they can read and write
anything you can. That is announced once per process, and `CommandResult.isolated`
is False.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .policy import (  # noqa: F401  the policy's names, where lessons and tools import them
    DEFAULT_COMMANDS,
    DEFAULT_POLICY,
    ONE_QUESTION,
    SHELL_METACHARACTERS,
    YES,
    Action,
    Policy,
    Rule,
    allow_list_refusal,
)
from .supervise import supervised
from .tree import OPEN_FOLDER, raise_error, walk_tree

SANDBOX_ENV = "VIBE_AGENT_SANDBOX"  # "none": the person chose to run commands unisolated
WORKSPACE = "/workspace"  # where the command sees the workspace under bwrap
SANDBOX_UID = SANDBOX_GID = 65534  # "nobody": who the command is inside the sandbox
MAX_OUTPUT = 10_000  # bytes of output kept: the first and the last half
MAX_COMMAND = 100_000  # bytes of command line (Linux refuses one argument over 128 KiB)
CHUNK = 65_536  # bytes per read from the command's pipe
POLL_S = 0.05  # how often to check whether the command ended while its pipe stays open
NOT_ISOLATED = "⚠ 没有 bubblewrap：命令没有隔离，直接在本机运行"  # for people
# What the model reads at the top of such a command's result (tool texts are English).
NOT_ISOLATED_NOTE = "[note: no sandbox: this command ran directly on the host, not isolated]"

# Limits for every command (bubblewrap: all four; unisolated: memory and file size).
MAX_PROCESSES = 128  # processes and threads of one command at once (see _own_user_namespace)
MAX_MEMORY = 1 << 30  # bytes of address space per process (RLIMIT_AS)
MAX_FILE_SIZE = 64 << 20  # bytes: the largest file a command may write (RLIMIT_FSIZE)
TMP_SIZE = 128 << 20  # bytes: the sandbox's own /tmp (memory-backed)

# Read-only pieces of /etc that programs need (the dynamic linker, time zone); passwd and
# group are the sandbox's own (root and nobody); everything else in /etc stays invisible.
ETC_FILES = ("alternatives", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
             "localtime", "nsswitch.conf")
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # besides /usr
# Files in /proc that change the machine rather than the sandbox: bound read-only.
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi", "mtrr")


class SandboxWarning(UserWarning):
    """Commands run without isolation (the person chose VIBE_AGENT_SANDBOX=none)."""


@dataclass
class CommandResult:
    """What a command did.

    Attributes:
        exit_code: the command's exit status; None when it was killed at the time limit.
        output: stdout and stderr merged in order, capped (a notice marks the cut),
            with control characters and bytes that are not UTF-8 escaped (`printable`).
        timed_out: the time limit was reached and every process of the command was killed.
        truncated: output was longer than the cap; only its start and end are kept.
        isolated: the command ran inside bubblewrap.
        elapsed_s: wall-clock seconds, start to cleanup.
    """

    exit_code: int | None
    output: str
    timed_out: bool
    truncated: bool
    isolated: bool
    elapsed_s: float


# ---------------------------------------------------------------------------
# Where the command runs
# ---------------------------------------------------------------------------


def clean_env(home: str) -> dict[str, str]:
    """The whole environment a command gets: built from scratch, so no secret leaks in.

    Args:
        home: the directory to use as HOME (an empty temporary one).
    """
    python_bin = Path(sys.prefix) / "bin"  # the same interpreter as ours comes first
    return {
        "PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ in the workspace
        "PYTHONUNBUFFERED": "1",  # stdout and stderr arrive in the order they were written
        "PYTHONHASHSEED": "0",  # sets and dicts of str print in the same order every run
        # The course's environment carries pytest plugins (nbval, hypothesis …) that a
        # workspace's own tests never need; loading them costs ~3 s per pytest run.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }


def _limit_flags() -> list[str]:
    """`prlimit` options for the limits every command runs under (see MAX_PROCESSES …)."""
    return [f"--nproc={MAX_PROCESSES}", f"--as={MAX_MEMORY}", f"--fsize={MAX_FILE_SIZE}"]


def bwrap_argv(command: str, workspace: Path, *, own_namespace: bool | None = None
               ) -> list[str]:
    """The bubblewrap command line that runs `command` with `workspace` at /workspace.

    The command runs as uid/gid 65534 ("nobody"). When we are root, that is a real
    change of user on the host too (see below), so that nothing root may write —
    /proc/sys/kernel/core_pattern, say — is writable from inside.

    Args:
        command: a shell command line.
        workspace: the host folder the command may read and write.
        own_namespace: as root, whether the command makes a user namespace of its own
            (`_unshare_user`); None: wherever the kernel allows it.
    """
    argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", "sandbox", "--clearenv"]
    if os.geteuid() == 0:
        # bwrap's --uid only renames root inside a user namespace: the kernel still sees
        # uid 0 (bubblewrap issue #181). So as root we make no user namespace, keep just
        # the rights to enter the workspace (nobody's, maybe mode 0700) and to change
        # user, and `setpriv` below becomes nobody for real: that change of user from
        # root clears every capability before the command starts.
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_DAC_READ_SEARCH", "--cap-add",
                 "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        become = [shutil.which("setpriv") or "setpriv", f"--reuid={SANDBOX_UID}",
                  f"--regid={SANDBOX_GID}", "--clear-groups", "--inh-caps=-all",
                  "--bounding-set=-all", "--"]
        if _own_user_namespace() if own_namespace is None else own_namespace:
            become += _unshare_user()
    else:  # a user namespace that maps our own uid to 65534 inside
        argv += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
        become = []
    for name, value in clean_env(home="/tmp").items():
        argv += ["--setenv", name, value]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_DIRS:  # /bin, /lib64 ... are often symlinks into /usr
        path = Path("/", name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--perms", "0755", "--dir", "/etc"]  # else bwrap may make it 0700: nobody shut out
    for name in ETC_FILES:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    argv += ["--ro-bind", str(_sandbox_etc() / "passwd"), "/etc/passwd",
             "--ro-bind", str(_sandbox_etc() / "group"), "/etc/group"]
    argv += ["--proc", "/proc"]
    for name in PROC_READ_ONLY:  # bwrap covers /proc/sys only when it is not running as root
        argv += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    # /tmp before the Python binds: the interpreter may itself live under /tmp
    argv += ["--dev", "/dev", "--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
    for prefix in dict.fromkeys([sys.base_prefix, sys.prefix]):  # same paths as outside
        if not Path(prefix).is_relative_to("/usr"):
            # --dir first: the folders bwrap makes above the bind (e.g. /root) stay readable
            argv += ["--perms", "0755", "--dir", prefix, "--ro-bind", prefix, prefix]
    argv += ["--bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE]
    limits = [shutil.which("prlimit") or "prlimit", *_limit_flags(), "--"]
    return [*argv, *become, *limits, "/bin/sh", "-c", command]


@functools.cache
def _sandbox_etc() -> Path:
    """A folder with the /etc/passwd and /etc/group the sandbox sees: root and nobody only,
    not the host's list of users (made once per process, removed when Python exits)."""
    folder = tempfile.TemporaryDirectory(prefix="vibe-etc-")
    _KEPT.append(folder)  # kept alive until exit, when its finaliser removes it
    path = Path(folder.name)
    (path / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                 f"nobody:x:{SANDBOX_UID}:{SANDBOX_GID}:nobody:/tmp:/bin/sh\n")
    (path / "group").write_text(f"root:x:0:\nnogroup:x:{SANDBOX_GID}:\n")
    path.chmod(0o755)
    return path


_KEPT: list[tempfile.TemporaryDirectory[str]] = []


def _unshare_user() -> list[str]:
    """As root, after setpriv: nobody makes a user namespace of its own, nobody mapped to
    itself and the host's root not mapped at all.

    The kernel counts RLIMIT_NPROC per user namespace, so one command's fork bomb does not
    starve the other sandboxes of uid 65534 (a bench's four workers, a second test
    worker). The capabilities a new namespace brings are over that namespace only, and
    the exec that follows (uid 65534, not 0, inside) clears them.
    """
    return [shutil.which("unshare") or "unshare", "--user", f"--map-user={SANDBOX_UID}",
            f"--map-group={SANDBOX_GID}", "--"]


@functools.cache
def _own_user_namespace() -> bool:
    """As root: whether nobody may make a user namespace here (checked once).

    Where the kernel forbids it (user.max_user_namespaces = 0, or AppArmor as on Ubuntu
    24.04), commands still run as nobody, but all of them share one MAX_PROCESSES.
    """
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("bwrap") is None:
        return False
    with tempfile.TemporaryDirectory() as probe:  # the whole chain, as a command runs
        argv = bwrap_argv("true", Path(probe), own_namespace=True)
        with _handed_over(Path(probe)):
            done = subprocess.run(argv, capture_output=True, timeout=30)
    return done.returncode == 0


@functools.cache
def _bwrap_problem() -> str | None:
    """None when bubblewrap can start a sandbox here, otherwise why not (checked once)."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap 只支持 Linux，这里是 {sys.platform}"
    if shutil.which("bwrap") is None:
        return "没有找到 bwrap（Debian/Ubuntu：sudo apt-get install bubblewrap）"
    needed = ["prlimit", "setpriv"] if os.geteuid() == 0 else ["prlimit"]
    missing = [name for name in needed if shutil.which(name) is None]
    if missing:
        return f"没有找到 {'、'.join(missing)}（它们在 util-linux 里）"
    with tempfile.TemporaryDirectory() as probe:
        # the same interpreter the commands get, as the sandbox's user: can it start?
        argv = bwrap_argv(f"{shlex.quote(sys.executable)} -I -S -c ''", Path(probe))
        with _handed_over(Path(probe)):
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return f"bwrap 无法创建沙箱：{done.stderr.strip()}"
    return None


def unisolated_chosen() -> bool:
    """Whether the person chose to run commands without a sandbox (VIBE_AGENT_SANDBOX=none)."""
    return os.environ.get(SANDBOX_ENV, "").strip().lower() == "none"


def why_not_isolated() -> str | None:
    """None when commands will run inside bubblewrap, otherwise the reason they will not."""
    if unisolated_chosen():
        return f"{SANDBOX_ENV}=none"
    return _bwrap_problem()


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot run here, and nobody chose to run commands unisolated."""


def _refuse_unisolated(problem: str) -> SandboxUnavailable:
    return SandboxUnavailable(
        f"命令没有运行：这里没法用 bubblewrap 沙箱（{problem}）。"
        "装上 bubblewrap（Debian/Ubuntu：sudo apt-get install bubblewrap）后重启 Python；"
        f"或者明确选择不隔离：设置环境变量 {SANDBOX_ENV}=none（比如在笔记本里先运行 "
        f"os.environ[\"{SANDBOX_ENV}\"] = \"none\"），那样命令能读写你能读写的一切。")


_warned = False


def _warn_not_isolated(reason: str) -> None:
    """Say it once per process, as one plain line on stderr: commands are not isolated.

    It still goes through `warnings` first, so a filter that ignores SandboxWarning
    (or turns it into an error) keeps working; only the display is ours.
    """
    global _warned
    if _warned:
        return
    _warned = True
    text = f"{NOT_ISOLATED}（{reason}）。命令能读写你能读写的一切。"
    with warnings.catch_warnings(record=True) as shown:
        warnings.warn_explicit(text, SandboxWarning, __file__, 0, registry={})
    for warning in shown:
        print(warning.message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# The workspace changes hands while a command runs (only when we are root)
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def _handed_over(workspace: Path) -> Iterator[None]:
    """As root, lend the workspace to the sandbox's user for the command, then take it back.

    The command runs as nobody, so it may only write what nobody owns. Before it
    starts, everything in the workspace is given to nobody; afterwards, everything
    (also what the command made) goes back to the workspace folder's owner. Links are
    never followed, and a file with a second hard link keeps its owner (it may be
    another folder's file too). Not root: nothing to do, the files are already ours.
    """
    if os.geteuid() != 0:
        yield
        return
    owner = workspace.stat()
    _chown_tree(workspace, SANDBOX_UID, SANDBOX_GID)
    try:
        yield
    finally:
        _chown_tree(workspace, owner.st_uid, owner.st_gid)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give `root` and everything under it to uid:gid, following no link.

    The walk (`vibe_agent.tree.walk_tree`) keeps its own stack of open folders (os.fwalk
    recurses, and a command that made 1,100 nested folders would raise RecursionError).
    """
    os.chown(root, uid, gid, follow_symlinks=False)
    top = os.open(root, OPEN_FOLDER)
    try:
        for _, info, folder, name, _ in walk_tree(top, onerror=raise_error):
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                continue
            os.chown(name, uid, gid, dir_fd=folder, follow_symlinks=False)
    finally:
        os.close(top)


# ---------------------------------------------------------------------------
# Running with limits
# ---------------------------------------------------------------------------


class _Capture:
    """Keeps the first and the last `limit // 2` bytes of a stream, and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.head_limit, self.tail_limit = limit - limit // 2, limit // 2
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.tail_limit:
            del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> tuple[str, bool]:
        """The kept output as text, and whether something in the middle was dropped."""
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted == 0:
            return printable(bytes(self.head + self.tail)), False
        notice = (f"\n[... {omitted} bytes omitted: the output had {self.total} bytes, "
                  f"only the first {len(self.head)} and the last {len(self.tail)} are shown. "
                  "Run a narrower command to see the middle ...]\n")
        return printable(bytes(self.head)) + notice + printable(bytes(self.tail)), True


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but tab and newline


def printable(data: bytes) -> str:
    """A command's output as text that shows what it held, and does nothing to a terminal.

    Bytes that are not UTF-8 become `\\xff`; control characters (an ANSI colour code's
    ESC, a carriage return that would overwrite a line) become `\\x1b`, `\\r`. Tabs and
    newlines stay. CRLF line ends become plain newlines.

    Args:
        data: the bytes a command wrote.
    """
    text = data.replace(b"\r\n", b"\n").decode("utf-8", errors="backslashreplace")
    return CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


def _read_output(proc: subprocess.Popen[bytes], capture: _Capture, deadline: float) -> None:
    """Read the merged output until the pipe closes, the command ends, or the deadline."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    while (remaining := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], min(remaining, POLL_S))
        if ready:
            chunk = os.read(fd, CHUNK)
            if not chunk:  # every writer closed the pipe
                return
            capture.add(chunk)
        elif proc.poll() is not None:  # ended, but a background job keeps the pipe open
            return


def _wait(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait for the command itself to exit; False if the deadline comes first."""
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group (children and grandchildren too)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # everyone has already exited
        pass


def _stop(proc: subprocess.Popen[bytes], isolated: bool) -> None:
    """Stop the command now: the unisolated supervisor first kills what escaped the group."""
    if not isolated and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # the supervisor kills its children, then exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
    _kill_group(proc)


def _check_command(command: str) -> None:
    """Refuse a command no shell can be given, with a reason the model can act on."""
    if "\0" in command:
        raise ValueError("the command contains a NUL character (\\x00), which no shell "
                         "command can hold. Remove it and try again.")
    try:  # as the operating system will get it: \udcff stands for the byte 0xff
        size = len(command.encode("utf-8", errors="surrogateescape"))
    except UnicodeEncodeError as exc:
        raise ValueError(f"the command holds {command[exc.start]!r}, half of a character "
                         "(a lone surrogate) that no shell command can hold. Remove it and "
                         "try again.") from None
    if size > MAX_COMMAND:
        raise ValueError(f"the command is {size} bytes long; at most {MAX_COMMAND} fit. "
                         "Write the long part to a file with write_file, then run that file.")


def run_in_sandbox(command: str, workspace: Path, *, timeout: float,
                   max_output: int = MAX_OUTPUT) -> CommandResult:
    """Run a shell command in the workspace: in bubblewrap, always with limits.

    Background jobs the command leaves behind are killed when it ends. A command that
    holds a NUL or is longer than MAX_COMMAND bytes raises ValueError. Without a
    usable bubblewrap it raises SandboxUnavailable, unless the person chose to run
    commands unisolated (VIBE_AGENT_SANDBOX=none): then it runs them as plain
    processes, says so once, and CommandResult.isolated is False.

    Args:
        command: a shell command line, run by /bin/sh.
        workspace: the folder the command works in (the only one it may write under bwrap).
        timeout: seconds before every process of the command is killed.
        max_output: bytes of output to keep (the start and the end).
    """
    if os.name != "posix":
        raise OSError("run_in_sandbox needs Linux or macOS (on Windows, use WSL)")
    _check_command(command)
    workspace = Path(workspace).resolve()
    isolated = not unisolated_chosen()
    if isolated and (problem := _bwrap_problem()) is not None:
        raise _refuse_unisolated(problem)
    if not isolated:
        _warn_not_isolated(f"{SANDBOX_ENV}=none")
    capture = _Capture(max_output)
    started = time.monotonic()
    with contextlib.ExitStack() as cleanup:
        if isolated:  # HOME is the sandbox's own fresh /tmp: no folder to make on the host
            cleanup.enter_context(_handed_over(workspace))
            argv, cwd, env = bwrap_argv(command, workspace), None, clean_env("/tmp")
        else:  # no isolation, but a fresh empty HOME and TMPDIR, and a supervisor
            home = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="vibe-home-"))
            argv = supervised(["/bin/sh", "-c", command], MAX_MEMORY, MAX_FILE_SIZE)
            cwd, env = workspace, clean_env(home) | {"TMPDIR": home}
        # 1. start it as the leader of a new process group, so one kill reaches everyone
        with subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True) as proc:
            # 2. read its output (capped) until it ends or the time is up
            deadline = started + timeout
            _read_output(proc, capture, deadline)
            finished = _wait(proc, deadline)
            # 3. kill what is left: everything on timeout, stray background jobs otherwise
            _stop(proc, isolated)
            _read_output(proc, capture, time.monotonic() + 1.0)  # what is still in the pipe
            exit_code = proc.wait()
    output, truncated = capture.text()
    return CommandResult(
        exit_code=exit_code if finished else None,
        output=output,
        timed_out=not finished,
        truncated=truncated,
        isolated=isolated,
        elapsed_s=time.monotonic() - started,
    )

