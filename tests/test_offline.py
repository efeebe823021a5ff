"""Offline mode never dead-ends: what the cassette lacks is answered, and always labelled.

Strict replay stays what the tests and the solution notebooks use (conftest.py forces it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vibe_agent.course.cassette import ReplayMiss
from vibe_agent.course.client import FALLBACK_LABELS, ConfigError, make_client
from vibe_agent.course.pages import BundledPages
from vibe_agent.course.scenarios import run_demo_tasks
from vibe_agent.loop import run_agent
from vibe_agent.tools import demo_registry

ROOT = Path(__file__).resolve().parent.parent
LABEL = FALLBACK_LABELS["reference"]
EDITED = "17 × 24 等于多少？"


@pytest.fixture
def demo(tapes):
    """The four demo tasks recorded from the reference model into a temporary folder."""
    client = make_client("record", "demo", source="reference", pages=BundledPages())
    run_demo_tasks(client, client.model, client.world)
    client.cassette.finish()
    return tapes / "demo.json"


def ask(client, question: str, **options):
    return run_agent(client, question, demo_registry(client.world), model=client.model,
                     max_tokens=300, **options)


def test_the_keyless_default_is_offline(tapes):
    assert make_client().mode == "offline"


def test_an_edited_request_is_answered_and_labelled(demo, capsys):
    client = make_client("offline", "demo")
    result = ask(client, EDITED)
    assert result.ok and "408" in result.answer  # the reference model did the arithmetic
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err  # one line, however many steps fell back
    line = err[0]
    assert line.startswith("离线回退：") and "demo.json" in line
    assert "messages[1].content" in line and "不是录制的" in line
    assert client.fallback.answered == 2  # the tool-call round and the answer
    assert "已回退 2 次" in client.describe() and client.provenance["fallback"].startswith(LABEL)


def test_every_fallback_response_names_itself(demo):
    client = make_client("offline", "demo")
    reply = client.chat.completions.create(model=client.model,
                                           messages=[{"role": "user", "content": EDITED}])
    assert reply.model == LABEL == "scripted-reference（回退：录制文件里没有这一步）"


def test_a_recorded_request_replays_the_recording(demo, capsys):
    recorded = ask(make_client("replay", "demo"), "17 × 23 等于多少？")
    offline_client = make_client("offline", "demo")
    offline = ask(offline_client, "17 × 23 等于多少？")
    assert offline.answer == recorded.answer and offline.messages == recorded.messages
    assert offline_client.fallback.answered == 0 and capsys.readouterr().err == ""


def test_the_line_is_printed_once_per_client(demo, capsys):
    for _ in range(2):
        client = make_client("offline", "demo")
        for question in (EDITED, "18 × 24 等于多少？"):
            ask(client, question)
    assert len(capsys.readouterr().err.splitlines()) == 2  # two clients, one line each


def test_a_page_the_cassette_lacks_comes_from_the_course_pages(demo, capsys):
    client = make_client("offline", "demo")
    response = client.world.http.get("https://example.com/vibe-agent/article.html")
    assert response.status_code == 200 and "<html" in response.text.lower()
    assert "离线回退" in capsys.readouterr().err


def test_a_cassette_without_clock_readings_uses_the_real_clock(tapes, capsys):
    client = make_client("record", "noclock", source="reference")
    client.chat.completions.create(model=client.model,
                                   messages=[{"role": "user", "content": "你好"}])
    client.cassette.finish()
    offline = make_client("offline", "noclock")
    assert offline.world.now().year >= 2026
    assert "没有时钟读数，改用本机时钟" in capsys.readouterr().err
    with pytest.raises(ReplayMiss, match="没有时钟读数"):
        make_client("replay", "noclock").world.now()


def test_offline_without_a_cassette_is_the_fallback_alone(tapes, capsys):
    client = make_client("offline")
    result = ask(client, "17 × 23 等于多少？")
    assert result.ok and "391" in result.answer
    assert "没有指定录制文件" in capsys.readouterr().err


def test_strict_replay_raises_on_the_same_miss(demo):
    with pytest.raises(ReplayMiss, match=r"messages\[1\]\.content：录制文件里"):
        ask(make_client("replay", "demo"), EDITED)


@pytest.mark.parametrize("value", ["remote", "LLM", "none"])
def test_an_unknown_fallback_is_a_config_error(tapes, monkeypatch, value):
    monkeypatch.setenv("VIBE_AGENT_FALLBACK", value)
    with pytest.raises(ConfigError, match="VIBE_AGENT_FALLBACK"):
        make_client("offline", "demo_reference")


# --- the tests themselves stay strict ----------------------------------------------------------

def test_conftest_forces_strict_replay_for_tests_and_notebook_kernels():
    """conftest.py sets VIBE_AGENT_MODE=replay before any kernel starts (they inherit it)."""
    assert os.environ["VIBE_AGENT_MODE"] == "replay"
    client = make_client(cassette="00_setup_reference")
    assert client.mode == "replay" and client.fallback is None
    with pytest.raises(ReplayMiss):
        client.chat.completions.create(model=client.model,
                                       messages=[{"role": "user", "content": EDITED}])


SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_solution_outputs_never_came_from_a_fallback(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = json.dumps([c.get("outputs", []) for c in cells], ensure_ascii=False)
    for mark in ("离线回退：录制文件", "离线：没有指定录制文件", LABEL, "运行模式：offline"):
        assert mark not in text, mark


@pytest.mark.local
def test_the_local_model_can_be_the_fallback(demo, monkeypatch, capsys):
    pytest.importorskip("xllamacpp")
    from vibe_agent.course.client import FALLBACK_LABELS as LABELS

    monkeypatch.setenv("VIBE_AGENT_FALLBACK", "local")
    client = make_client("offline", "demo")
    reply = client.chat.completions.create(
        model=client.model, max_tokens=8, temperature=0,
        messages=[{"role": "user", "content": EDITED}])
    assert reply.model == LABELS["local"] and reply.usage.prompt_tokens > 0
    assert "SmolLM2" in capsys.readouterr().err
