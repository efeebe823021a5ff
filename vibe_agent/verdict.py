"""A verdict instead of a claim: after a turn that changed files, run the project's tests.

The course's rule is that only the tests decide (lessons 09–10). On a course task the
terminal agent asks the held-out judge; on your own project it runs the project's
test command in the sandbox and shows pytest's own summary line:

    find_test_command(root)       --test-command, else AGENTS.md, else a pytest project
    run_project_tests(cmd, root)  in the sandbox -> "13 passed in 0.40s" (exit code, else)

The command is found once, when the session starts, so a model that rewrites
AGENTS.md during a turn cannot choose what runs afterwards; and only a plain test
runner's command line is taken from AGENTS.md (no `;`, `|`, `&&` ...). It runs in the
same sandbox as the model's own commands.
"""

from __future__ import annotations

import re
from pathlib import Path

from .coding import hidden_characters
from .memory import load_project_memory
from .sandbox import SandboxUnavailable, run_in_sandbox

TEST_TIMEOUT = 120.0  # seconds the project's tests may take after a turn
DEFAULT_PYTEST = "python -m pytest -q"
# A test runner's command line as AGENTS.md may name it: a known runner and plain words.
RUNNER = re.compile(r"(?:python3? -m pytest|pytest|uv run pytest|tox|nox|make (?:test|check)"
                    r"|npm (?:run )?test|cargo test|go test)(?: [\w./:=,@+-]+)*")
SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+ in [\d.]+s(?: \([\d:]+\))?|no tests ran"
                     r" in [\d.]+s)\s*=*$")


def command_in_agents_md(text: str) -> str | None:
    """The first test command AGENTS.md names on a line about tests, or None.

    A line counts when it mentions "test" or "测试"; the command is in backticks or
    after the line's colon, and must be a plain test runner command line (RUNNER).
    """
    for line in text.splitlines():
        if not re.search(r"test|测试", line, re.IGNORECASE):
            continue
        candidates = re.findall(r"`([^`\n]+)`", line) or [re.split(r"[:：]", line)[-1]]
        for candidate in candidates:
            command = candidate.strip()
            if RUNNER.fullmatch(command) and not hidden_characters(command):
                return command
    return None


def is_pytest_project(root: Path) -> bool:
    """Whether `root` looks like a project pytest would find tests in."""
    if any((root / name).is_file() for name in ("pytest.ini", "conftest.py")):
        return True
    for config, section in (("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]"),
                            ("tox.ini", "[pytest]")):
        path = root / config
        if path.is_file() and not path.is_symlink() and section in path.read_text(
                "utf-8", "replace"):
            return True
    tests = [*root.glob("test_*.py"), *root.glob("*_test.py"),
             *(root / "tests").glob("test_*.py"), *(root / "tests").glob("*_test.py")]
    return any(path.is_file() for path in tests)


def find_test_command(root: str | Path, given: str | None = None) -> tuple[str, str] | None:
    """(command, where it came from in Chinese) for the project at `root`, or None.

    Args:
        root: the project folder.
        given: a command the person gave (`--test-command`): it wins.
    """
    root = Path(root)
    if given:
        return given, "--test-command"
    found = command_in_agents_md(load_project_memory(root))
    if found:
        return found, "AGENTS.md"
    return (DEFAULT_PYTEST, "检测到的 pytest 项目") if is_pytest_project(root) else None


def pytest_summary(output: str, timings: bool = True) -> str | None:
    """pytest's last summary line ("13 passed, 1 warning in 0.40s"), or None.

    Args:
        output: what the test command printed.
        timings: False drops the " in 0.40s" (for output that is the same every run).
    """
    found = None
    for line in output.splitlines():
        match = SUMMARY.match(line.strip())
        if match:
            found = match.group(1)
    if found is not None and not timings:
        found = re.sub(r" in [\d.]+s(?: \([\d:]+\))?$", "", found)
    return found


def run_project_tests(command: str, root: str | Path, timings: bool = True,
                      timeout: float = TEST_TIMEOUT) -> str:
    """Run `command` in the sandbox and say how it went, in one line (Chinese).

    Args:
        command: the test command line.
        root: the project folder.
        timings: show pytest's seconds.
        timeout: seconds before the tests are stopped.
    """
    try:
        result = run_in_sandbox(command, Path(root), timeout=timeout)
    except SandboxUnavailable as exc:
        return f"没有运行（{exc}）"
    if result.timed_out:
        return f"超过 {timeout:g} 秒没有跑完，已停止"
    summary = pytest_summary(result.output, timings)
    if summary is not None:
        return summary if result.exit_code in (0, 1, 5) else (
            f"{summary}（退出码 {result.exit_code}）")
    last = next((line for line in reversed(result.output.splitlines()) if line.strip()), "")
    return f"退出码 {result.exit_code}" + (f"：{last.strip()[:120]}" if last else "")
