"""What lesson 00 shows of cassettes: `catalogue(folder)` and how a ReplayMiss looks."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibe_agent.course.cassette import SOURCES, Cassette, CassetteError, ReplayMiss, catalogue
from vibe_agent.course.client import make_client

CASSETTE_DIR = Path(__file__).resolve().parent.parent / "notebooks" / "cassettes"


def record(name: str, *temperatures: float | None) -> None:
    """Record one request per temperature; None sends none (the provider's default)."""
    client = make_client("record", name, source="reference")
    for temperature in temperatures:
        chosen = {} if temperature is None else {"temperature": temperature}
        client.chat.completions.create(model=client.model, **chosen,
                                       messages=[{"role": "user", "content": "17 × 23 等于多少？"}])
    client.cassette.finish()


def test_rows_sorted_by_name_with_provenance(tapes):
    record("b_tape", 0, None)
    record("a_tape", 0.7)
    rows = catalogue(tapes)
    assert [row["name"] for row in rows] == ["a_tape", "b_tape"]
    assert rows[1] == {"name": "b_tape", "source": "scripted-reference",
                       "model": "vibe-reference", "recorded_at": rows[1]["recorded_at"],
                       "temperature": [0, "default"], "chats": 2}
    assert rows[0]["temperature"] == [0.7]
    assert rows[0]["recorded_at"][:2] == "20"


def test_empty_folder_gives_no_rows(tmp_path):
    assert catalogue(tmp_path) == []


def test_a_file_that_is_not_a_cassette_raises(tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(CassetteError):
        catalogue(tmp_path)


def test_every_shipped_cassette_is_listed_with_a_known_source():
    rows = catalogue(CASSETTE_DIR)
    assert [row["name"] for row in rows] == sorted(p.stem for p in CASSETTE_DIR.glob("*.json"))
    assert all(row["source"] in SOURCES and row["chats"] > 0 for row in rows)


def test_replay_miss_shows_only_its_explanation_in_jupyter():
    """IPython calls `_render_traceback_` instead of printing the SDK's frames."""
    tape = Cassette("t", {"source": "scripted-reference", "model": "m"}, [
        {"kind": "chat", "request": {"model": "m", "messages": [{"role": "user", "content": "a"}]},
         "response": {"status": 200, "body": {}}}])
    with pytest.raises(ReplayMiss) as miss:
        tape.chat_response({"model": "m", "messages": [{"role": "user", "content": "b"}]})
    lines = miss.value._render_traceback_()
    assert lines[0] == ("\x1b[0;31mReplayMiss\x1b[0m: "
                        "录制文件 t 里没有这个请求（严格回放模式 replay）。")
    assert "  messages[0].content：录制文件里 'a' | 现在 'b'" in lines
    assert lines[-1].startswith("  3. 撤销你的改动")
