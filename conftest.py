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


def pytest_configure(config: pytest.Config) -> None:
    os.environ["VIBE_AGENT_MODE"] = "replay"
    # addopts names the sanitizer relative to the repository; nbval opens it relative to
    # the current folder, so running pytest from a subfolder needs the full path.
    sanitize = config.getoption("nbval_sanitize_with", default=None)
    if sanitize and not Path(sanitize).exists():
        config.option.nbval_sanitize_with = str(config.rootpath / sanitize)
