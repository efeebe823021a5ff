"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def tapes(tmp_path, monkeypatch):
    """Record into and replay from a temporary cassette folder, with no key around."""
    monkeypatch.setenv("VIBE_AGENT_CASSETTES", str(tmp_path))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VIBE_AGENT_MODE", "VIBE_AGENT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    return tmp_path
