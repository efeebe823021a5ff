"""Run one shell command for a model, safely: a sandbox, limits, and an approval policy.

A coding agent runs commands a model wrote. Three separate guards stand between
those commands and the machine:

    policy.refusal(action)      may this happen at all?      allow-list / ask / function
    run_in_sandbox(command)     where does it run?           bubblewrap: only the workspace
                                                             is writable, no network, no secrets
    limits                      for how long, how much?      time limit kills the whole
                                                             process group; output is capped

The sandbox is bubblewrap (`bwrap`, Linux): the command sees the workspace read-write
at `/workspace`, the system and the Python installation read-only, a fresh empty
`/tmp`, no network, no home directory, and an environment built from scratch, so no
API key from our process or from `.env` reaches it. Without bwrap (macOS, or bwrap not
installed) the command runs as a plain subprocess with the same limits and the same
clean environment, but it is NOT isolated: it can read and write anything you can.
That is announced loudly, once per process, and `CommandResult.isolated` is False.
`VIBE_AGENT_SANDBOX=none` forces that fallback (tests use it).

An allow-list only decides which programs may start; it does not make `python` safe
(`python evil.py` passes a `python` prefix). The sandbox is what limits the damage.
"""

from __future__ import annotations

import functools
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SANDBOX_ENV = "VIBE_AGENT_SANDBOX"  # "none" forces the unisolated fallback
WORKSPACE = "/workspace"  # where the command sees the workspace under bwrap
MAX_OUTPUT = 10_000  # bytes of output kept: the first and the last half
CHUNK = 65_536  # bytes per read from the command's pipe
POLL_S = 0.05  # how often to check whether the command ended while its pipe stays open
NOT_ISOLATED = "⚠ 没有 bubblewrap：命令没有隔离，直接在本机运行"

# Read-only pieces of /etc that programs need (the dynamic linker, users, time zone);
# everything else in /etc stays invisible.
ETC_FILES = ("alternatives", "group", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
             "localtime", "nsswitch.conf", "passwd")
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")  # besides /usr


class SandboxWarning(UserWarning):
    """Commands run without isolation (no usable bubblewrap)."""


@dataclass
class CommandResult:
    """What a command did.

    Attributes:
        exit_code: the command's exit status; None when it was killed at the time limit.
        output: stdout and stderr merged in order, capped (a notice marks the cut).
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
# The approval policy
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """Something the agent wants to do: run a command, or write a file."""

    kind: Literal["command", "write"]
    detail: str  # the command line, or the file's path inside the workspace


# A rule: "allow-all", "ask" (a person answers y/n), a list of allowed command prefixes,
# or a function that returns True (allowed), False, or a refusal reason.
Rule = Literal["allow-all", "ask"] | Sequence[str] | Callable[[Action], bool | str]

SHELL_METACHARACTERS = (";", "&", "|", "`", "$", "<", ">", "\n", "\r")
DEFAULT_COMMANDS = ("python", "python3", "pytest", "ls", "cat", "head", "tail", "grep", "wc",
                    "echo", "true", "diff", "pwd")
YES = ("y", "yes", "是", "好", "允许")


@dataclass
class Policy:
    """Decides whether an action may happen.

    With a list of command prefixes, commands must start with one of them (whole
    words: "git status" allows `git status -s`, not `git push`), and writes inside the
    workspace are allowed. "ask" asks a person for both.

    Args:
        rule: "allow-all", "ask", a list of allowed command prefixes, or a function
            `(Action) -> bool | str` (a string is the reason for refusing).
        ask: how "ask" reaches the person; None means the built-in `input()`, which
            works in a terminal and in Jupyter.
    """

    rule: Rule
    ask: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.rule, str) and self.rule not in ("allow-all", "ask"):
            raise ValueError(f'rule must be "allow-all", "ask", a list of command prefixes '
                             f'or a function, not {self.rule!r} (for one prefix: [{self.rule!r}])')

    def refusal(self, action: Action) -> str | None:
        """None when the action may happen, otherwise the reason it may not.

        Args:
            action: what the agent wants to do.
        """
        if callable(self.rule):
            return _verdict(self.rule(action))
        if self.rule == "allow-all":
            return None
        if self.rule == "ask":
            return self._ask_person(action)
        if action.kind == "write":
            return None
        return allow_list_refusal(action.detail, self.rule)

    def _ask_person(self, action: Action) -> str | None:
        what = "运行命令" if action.kind == "command" else "写入文件"
        ask = self.ask or input  # looked up now, so a patched input() is used
        try:
            answer = ask(f"智能体想{what}：{action.detail}\n允许吗？[y/N] ")
        except (EOFError, OSError, NotImplementedError):  # no stdin, or a frontend without one
            return ("需要人来确认，但没有人可以回答（没有标准输入）。"
                    "不要再尝试这个操作，告诉用户你想做什么、为什么。")
        if answer.strip().lower() in YES:
            return None
        return "用户拒绝了。换一种做法，或者先问用户想怎么做。"


def _verdict(decision: bool | str) -> str | None:
    """A policy function's answer as a refusal reason (None = allowed)."""
    if decision is True:
        return None
    if decision is False:
        return "策略不允许这个操作。换一种做法，或者告诉用户需要什么权限。"
    if isinstance(decision, str):
        return decision or "策略不允许这个操作。"
    raise TypeError(f"a policy function must return True, False or a reason (str), "
                    f"not {decision!r}")


def allow_list_refusal(command: str, prefixes: Sequence[str]) -> str | None:
    """None when `command` starts with one of `prefixes`, otherwise why it is refused.

    Shell syntax is refused outright: `python; rm -rf .` starts with "python" too.

    Args:
        command: the command line the model wants to run.
        prefixes: allowed command prefixes, e.g. ["python", "git status"].
    """
    found = [char for char in SHELL_METACHARACTERS if char in command]
    if found:
        shown = " ".join(repr(char) for char in found)
        return (f"命令里有 shell 符号 {shown}。允许列表模式下一次只能运行一条简单命令，"
                "不能用 ; & | ` $ < > 或换行。需要组合多步时，先用 write_file 写一个 "
                "Python 脚本，再用 python 运行它。")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"无法解析这条命令（{exc}）。检查引号是否成对，再试一次。"
    for prefix in prefixes:
        prefix_words = shlex.split(prefix)
        if prefix_words and words[: len(prefix_words)] == prefix_words:
            return None
    first = words[0] if words else "（空命令）"
    return (f"{first} 不在允许列表里（允许的命令：{', '.join(prefixes)}）。"
            "只用这些命令，或者告诉用户你需要运行什么。")


DEFAULT_POLICY = Policy(DEFAULT_COMMANDS)


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


def bwrap_argv(command: str, workspace: Path) -> list[str]:
    """The bubblewrap command line that runs `command` with `workspace` at /workspace.

    Args:
        command: a shell command line.
        workspace: the host folder the command may read and write.
    """
    argv = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL",  # as root, capabilities would allow remounting read-write
            "--hostname", "sandbox", "--clearenv"]
    for name, value in clean_env(home="/tmp").items():
        argv += ["--setenv", name, value]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_DIRS:  # /bin, /lib64 ... are often symlinks into /usr
        path = Path("/", name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # /tmp before the Python binds: the interpreter may itself live under /tmp
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for prefix in dict.fromkeys([sys.base_prefix, sys.prefix]):  # same paths as outside
        if not Path(prefix).is_relative_to("/usr"):
            argv += ["--ro-bind", prefix, prefix]
    argv += ["--bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE]
    return [*argv, "/bin/sh", "-c", command]


@functools.cache
def _bwrap_problem() -> str | None:
    """None when bubblewrap can start a sandbox here, otherwise why not (checked once)."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap 只支持 Linux，这里是 {sys.platform}"
    if shutil.which("bwrap") is None:
        return "没有找到 bwrap（Debian/Ubuntu：sudo apt-get install bubblewrap）"
    with tempfile.TemporaryDirectory() as probe:
        done = subprocess.run(bwrap_argv("true", Path(probe)), capture_output=True, text=True,
                              timeout=10)
    if done.returncode != 0:
        return f"bwrap 无法创建沙箱：{done.stderr.strip()}"
    return None


def why_not_isolated() -> str | None:
    """None when commands will run inside bubblewrap, otherwise the reason they will not."""
    if os.environ.get(SANDBOX_ENV, "").lower() == "none":
        return f"{SANDBOX_ENV}=none"
    return _bwrap_problem()


_warned = False


def _warn_not_isolated(reason: str) -> None:
    """Say it loudly, once per process: commands are not isolated."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"{NOT_ISOLATED}（{reason}）。命令能读写你能读写的一切。",
                      SandboxWarning, stacklevel=3)


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
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if omitted == 0:
            return head + tail, False
        notice = (f"\n[... {omitted} bytes omitted: the output had {self.total} bytes, "
                  f"only the first and last {self.head_limit + self.tail_limit} are shown. "
                  "Run a narrower command to see the middle ...]\n")
        return head + notice + tail, True


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


def run_in_sandbox(command: str, workspace: Path, *, timeout: float,
                   max_output: int = MAX_OUTPUT) -> CommandResult:
    """Run a shell command in the workspace: isolated when possible, always with limits.

    Background jobs the command leaves behind are killed when it ends.

    Args:
        command: a shell command line, run by /bin/sh.
        workspace: the folder the command works in (the only one it may write under bwrap).
        timeout: seconds before every process of the command is killed.
        max_output: bytes of output to keep (the start and the end).
    """
    if os.name != "posix":
        raise OSError("run_in_sandbox needs Linux or macOS (on Windows, use WSL)")
    workspace = Path(workspace).resolve()
    reason = why_not_isolated()
    if reason is not None:
        _warn_not_isolated(reason)
    capture = _Capture(max_output)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vibe-home-") as home:
        if reason is None:
            argv, cwd, env = bwrap_argv(command, workspace), None, clean_env("/tmp")
        else:  # no isolation, but at least a fresh empty HOME and TMPDIR
            argv, cwd = ["/bin/sh", "-c", command], workspace
            env = clean_env(home) | {"TMPDIR": home}
        # 1. start it as the leader of a new process group, so one kill reaches everyone
        with subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True) as proc:
            # 2. read its output (capped) until it ends or the time is up
            deadline = started + timeout
            _read_output(proc, capture, deadline)
            finished = _wait(proc, deadline)
            # 3. kill what is left: everything on timeout, stray background jobs otherwise
            _kill_group(proc)
            _read_output(proc, capture, time.monotonic() + 1.0)  # what is still in the pipe
            exit_code = proc.wait()
    output, truncated = capture.text()
    return CommandResult(
        exit_code=exit_code if finished else None,
        output=output,
        timed_out=not finished,
        truncated=truncated,
        isolated=reason is None,
        elapsed_s=time.monotonic() - started,
    )
