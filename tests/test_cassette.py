"""Cassettes and run modes: record -> replay, misses that explain themselves, no secrets."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from vibe_agent.course.cassette import Cassette, CassetteError, ReplayMiss
from vibe_agent.course.client import ConfigError, make_client, resolve_mode
from vibe_agent.course.matching import differences, normalise, request_key
from vibe_agent.course.pages import BundledPages
from vibe_agent.course.scenarios import SCENARIOS, run_demo_tasks
from vibe_agent.loop import run_agent
from vibe_agent.tools import demo_registry
from vibe_agent.world import World

CASSETTE_DIR = Path(__file__).resolve().parent.parent / "notebooks" / "cassettes"
ALL_CASSETTES = sorted(CASSETTE_DIR.glob("*.json"))


def record_demo(tmp_path: Path) -> Path:
    client = make_client("record", "demo", source="reference", pages=BundledPages())
    run_demo_tasks(client, client.model, client.world)
    return client.cassette.finish()


# --- normalising and diffing ---------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"b": 1, "a": None}, {"b": 1}),
        ({"tools": [], "messages": [{"content": "", "role": "user"}]},
         {"messages": [{"role": "user"}]}),
        ({"z": {"y": {}}, "a": [1, None]}, {"a": [1, None]}),
    ],
    ids=["drop-none", "drop-empty", "nested"],
)
def test_normalise(raw, expected):
    assert normalise(raw) == expected


def test_key_ignores_key_order_and_empty_fields():
    assert request_key({"a": 1, "b": [], "c": None}) == request_key({"a": 1})


def test_differences_name_each_field():
    recorded = {"messages": [{"role": "user", "content": "17 × 23"}], "temperature": 0}
    now = {"messages": [{"role": "user", "content": "17 × 24"}], "temperature": 0.7}
    assert differences(recorded, now) == [
        "messages[0].content：录制文件里 '17 × 23' | 现在 '17 × 24'",
        "temperature：录制文件里 '0' | 现在 '0.7'",
    ]


# --- record -> replay ------------------------------------------------------------------

def test_record_then_replay_round_trip(tapes):
    path = record_demo(tapes)
    saved = json.loads(path.read_text(encoding="utf-8"))
    kinds = [i["kind"] for i in saved["interactions"]]
    assert kinds.count("chat") == 8 and "clock" in kinds and "http" in kinds
    assert saved["provenance"]["source"] == "scripted-reference"

    client = make_client("replay", "demo")
    results = run_demo_tasks(client, client.model, client.world)
    assert [r.ok for r in results] == [True] * 4
    assert "391" in results[1].answer
    recorded_time = next(i["value"] for i in saved["interactions"] if i["kind"] == "clock")
    shanghai = datetime.fromisoformat(recorded_time).astimezone().strftime("%M:%S")
    assert shanghai in results[0].answer  # the clock replays its recorded instant


def test_replay_runs_our_code_for_real(tapes):
    """A broken tool shows up as broken in replay too: only the outside world is replayed."""
    record_demo(tapes)
    client = make_client("replay", "demo")
    registry = demo_registry(client.world)
    registry._tools["calculator"].fn = lambda expression: "Error: broken on purpose"
    with pytest.raises(ReplayMiss, match=r"messages\[3\]\.content"):
        run_agent(client, "17 × 23 等于多少？", registry, model=client.model, max_tokens=300)


def test_edited_prompt_misses_with_field_and_remedy(tapes):
    record_demo(tapes)
    client = make_client("replay", "demo")
    with pytest.raises(ReplayMiss) as miss:
        run_agent(client, "17 × 24 等于多少？", demo_registry(client.world), model=client.model,
                  max_tokens=300)
    text = str(miss.value)
    assert "demo.json" in text and "最接近的录制文件：第 3 次模型调用（共 8 次）" in text
    assert ("messages[1].content：录制文件里 '17 × 23 等于多少？' | 现在 '17 × 24 等于多少？'"
            in text)
    assert "VIBE_AGENT_MODE=offline" in text and "VIBE_AGENT_MODE=live" in text
    assert "make_client(mode='record', cassette='demo', source='reference')" in text
    assert "撤销你的改动" in text


def test_non_deterministic_tool_misses(tapes):
    """If a tool's output changes between runs, the next request no longer matches."""
    record_demo(tapes)
    client = make_client("replay", "demo")
    later = datetime(2027, 1, 1, tzinfo=UTC)  # a clock that does not replay
    registry = demo_registry(World(now=lambda: later, http=client.world.http))
    with pytest.raises(ReplayMiss, match=r"messages\[3\]\.content：录制文件里"):
        run_agent(client, "现在几点？", registry, model=client.model, max_tokens=300)


def test_unrecorded_page_misses(tapes):
    record_demo(tapes)
    client = make_client("replay", "demo")
    with pytest.raises(ReplayMiss, match="录到的网页：https://example.com/"):
        client.world.http.get("https://example.org/")


def test_rerunning_a_cell_replays_the_same_response(tapes):
    record_demo(tapes)
    client = make_client("replay", "demo")
    first = run_agent(client, "2099 年世界杯冠军是谁？", demo_registry(client.world),
                      model=client.model, max_tokens=300)
    again = run_agent(client, "2099 年世界杯冠军是谁？", demo_registry(client.world),
                      model=client.model, max_tokens=300)
    assert first.answer == again.answer


def test_replay_client_is_a_real_openai_client_without_retries(tapes):
    import openai

    record_demo(tapes)
    client = make_client("replay", "demo")
    assert isinstance(client, openai.OpenAI) and client.max_retries == 0


# --- configuration -----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("mode", "env", "expected"),
    [
        (None, {}, "offline"),
        (None, {"OPENAI_API_KEY": "k"}, "live"),
        (None, {"OPENAI_API_KEY": "k", "VIBE_AGENT_MODE": "replay"}, "replay"),
        ("local", {"OPENAI_API_KEY": "k"}, "local"),
        (None, {"VIBE_AGENT_MODE": " Record "}, "record"),
    ],
    ids=["no-key", "key", "env-wins", "argument-wins", "case-and-spaces"],
)
def test_mode_resolution(mode, env, expected):
    assert resolve_mode(mode, env) == expected


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        ({"mode": "replay"}, {}, "需要指定录制文件"),
        ({"mode": "replay", "cassette": "nope"}, {}, "nope.json 用不了：文件不存在"),
        ({"mode": "live"}, {}, "OPENAI_API_KEY"),
        ({"mode": "live"}, {"OPENAI_API_KEY": "k"}, "VIBE_AGENT_MODEL"),
        ({"mode": "warp"}, {}, "未知的运行模式"),
    ],
    ids=["replay-needs-cassette", "missing-cassette", "live-needs-key", "live-needs-model",
         "unknown-mode"],
)
def test_configuration_errors_are_clear(tapes, monkeypatch, kwargs, env, message):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises((ConfigError, CassetteError), match=message):
        make_client(**kwargs)


def test_dotenv_is_honoured_but_environment_wins(tapes, monkeypatch):
    (tapes / ".env").write_text("OPENAI_API_KEY=from-dotenv\nVIBE_AGENT_MODEL='m1'\n"
                                "# a comment\n", encoding="utf-8")
    client = make_client()
    assert client.mode == "live" and client.model == "m1"
    assert client.api_key == "from-dotenv"
    monkeypatch.setenv("VIBE_AGENT_MODEL", "m2")
    assert make_client().model == "m2"


def test_live_client_uses_the_configured_endpoint(tapes, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("VIBE_AGENT_MODEL", "deepseek-chat")
    client = make_client()
    assert str(client.base_url) == "http://127.0.0.1:9/v1/"
    assert client.provenance["endpoint"] == "127.0.0.1"


# --- every committed cassette -----------------------------------------------------------

SECRET = re.compile(r'"authorization"|"cookie"|"set-cookie"|bearer\s+\w|sk-[A-Za-z0-9]{16,}'
                    r'|"api[_-]?key"', re.I)


def test_there_are_committed_cassettes():
    assert {p.stem for p in ALL_CASSETTES} >= {"demo_reference"}


@pytest.mark.parametrize("path", ALL_CASSETTES, ids=lambda p: p.stem)
def test_cassette_has_no_secrets(path):
    text = path.read_text(encoding="utf-8")
    assert not SECRET.search(text), f"{path.name} looks like it holds a secret"


@pytest.mark.parametrize("path", ALL_CASSETTES, ids=lambda p: p.stem)
def test_cassette_provenance_and_sdk_types(path):
    tape = Cassette.load(path)
    for field in ("source", "model", "recorded_at", "recorded_with", "temperature"):
        assert tape.provenance.get(field), f"{path.name}: provenance lacks {field}"
    if tape.provenance["source"] == "real-model":
        assert tape.provenance.get("quantisation")
    for item in tape.interactions:
        if item["kind"] == "chat" and "stream" in item["response"]:
            for event in item["response"]["stream"]:  # a streamed reply: every chunk
                ChatCompletionChunk.model_validate(event["chunk"], strict=True)
        elif item["kind"] == "chat" and item["response"]["status"] == 200:
            # strict: a response missing a required field must fail here
            ChatCompletion.model_validate(item["response"]["body"], strict=True)


@pytest.mark.parametrize("name", [n for n in SCENARIOS if (CASSETTE_DIR / f"{n}.json").exists()])
def test_scenario_replays_end_to_end(name, monkeypatch):
    monkeypatch.delenv("VIBE_AGENT_CASSETTES", raising=False)
    client = make_client("replay", name)
    SCENARIOS[name].run(client, client.model, client.world)
    assert client.cassette.unused_chats() == []  # the scenario and its cassette agree


def test_missing_provenance_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"format": 1, "name": "bad", "provenance": {},
                                "interactions": []}), encoding="utf-8")
    with pytest.raises(CassetteError, match="provenance"):
        Cassette.load(path)


def test_clock_replays_in_order(tmp_path):
    tape = Cassette("t", {"source": "scripted-reference"}, [
        {"kind": "clock", "value": "2026-01-01T00:00:00+00:00"},
        {"kind": "clock", "value": "2026-01-01T00:00:05+00:00"}])
    assert [tape.clock_value().second for _ in range(3)] == [0, 5, 5]
    assert tape.clock_value().tzinfo == UTC
