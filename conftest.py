"""pytest set-up shared by the unit tests and the notebook runs.

`python -m pytest` collects tests/ and, through nbval (see pyproject.toml), runs every
solutions/*.ipynb and compares its outputs. Notebook kernels are separate processes: no
fixture or patch reaches them, but they inherit this process's environment. So STRICT
replay is forced here, before any kernel starts, whatever a developer's shell or `.env`
says (`.env` is read from the kernel's folder or its parent, and a key there means live).
Strict, not the keyless default `offline`: a solution notebook whose request is not in
its cassette must fail with ReplayMiss, never be answered by the labelled fallback
(tests/test_offline.py checks both).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Learners' notebooks are run by tests/test_notebooks.py, never compared by nbval; the
# fixtures are inputs of the generator's tests, not notebooks to run.
collect_ignore = ["notebooks", "tests/fixtures"]


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, there only when it is
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under pytest-xdist (the README's test command runs `-n auto`), spread the tests one
    by one, but keep each notebook whole: its cells share one kernel and run in order.

    (xdist's own `--dist loadgroup` cannot be told so with pytest 9.2: it renames items
    through an attribute that pytest no longer reads.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class NotebooksWhole(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") else nodeid

    return NotebooksWhole(config, log)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: three workers for every two CPUs this process may run on (at least two).

    A worker often waits (for a pseudo-terminal's screen, a kernel, a timeout a test
    is about), so one worker per CPU left the CPUs idle: measured on two cores, 73-82 %
    busy with two workers, 90 % with three. PYTEST_XDIST_AUTO_NUM_WORKERS still decides
    when it is set (xdist's own hook reads it).
    """
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(2, (cpus or 1) * 3 // 2)


def pytest_configure(config: pytest.Config) -> None:
    os.environ["VIBE_AGENT_MODE"] = "replay"
    # addopts names the sanitizer relative to the repository; nbval opens it relative to
    # the current folder, so running pytest from a subfolder needs the full path.
    sanitize = config.getoption("nbval_sanitize_with", default=None)
    if sanitize and not Path(sanitize).exists():
        config.option.nbval_sanitize_with = str(config.rootpath / sanitize)
