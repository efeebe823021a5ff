"""The client `make_client` returns: a genuine openai.OpenAI that says where answers come from."""

from __future__ import annotations

import json
from pathlib import Path, PurePath

import httpx2
import openai
import pytest

from vibe_agent.course import client as client_module
from vibe_agent.course.cassette import ReplayMiss
from vibe_agent.course.client import ConfigError, CourseClient, make_client
from vibe_agent.course.pages import ARTICLE_URL, EXAMPLE_URL, BundledPages

CASSETTES = Path(__file__).resolve().parent.parent / "notebooks" / "cassettes"
QUESTION = [{"role": "user", "content": "17 × 23 等于多少？"}]


@pytest.fixture
def recorded(tapes):
    """A cassette in the temporary folder holding one answer to QUESTION."""
    client = make_client("record", "one", source="reference")
    client.chat.completions.create(model=client.model, messages=QUESTION)
    client.cassette.finish()
    return tapes / "one.json"


@pytest.mark.parametrize(
    ("mode", "source", "has_cassette"),
    [
        ("replay", "scripted-reference", True),
        ("offline", "scripted-reference", True),
        ("record", "scripted-reference", True),
        ("reference", "scripted-reference", False),
    ],
    ids=["replay", "offline", "record", "reference"],
)
def test_every_mode_gives_a_genuine_client_that_knows_its_source(recorded, mode, source,
                                                                  has_cassette):
    with make_client(mode, "one") as client:
        assert isinstance(client, openai.OpenAI) and isinstance(client, CourseClient)
        assert client.mode == mode and client.model == "vibe-reference"
        assert client.provenance["source"] == source
        assert (client.cassette is not None) == has_cassette
        reply = client.chat.completions.create(model=client.model, messages=QUESTION)
        assert reply.choices[0].message.content
        assert f"运行模式：{mode}" in client.describe()


def test_live_client_knows_its_model_and_endpoint(tapes, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("VIBE_AGENT_MODEL", "my-model")
    client = make_client()
    assert (client.mode, client.model, client.cassette) == ("live", "my-model", None)
    assert client.provenance == {"source": "live-provider", "model": "my-model",
                                 "endpoint": "127.0.0.1"}


@pytest.mark.parametrize(
    "derive",
    [lambda c: c.with_options(timeout=5), lambda c: c.copy(), lambda c: c.with_options(
        max_retries=0).copy(timeout=3)],
    ids=["with_options", "copy", "chained"],
)
def test_sdk_copies_keep_the_connection_and_still_replay(recorded, derive):
    client = make_client("replay", "one")
    twin = derive(client)
    assert type(twin) is CourseClient and twin is not client
    assert (twin.mode, twin.model, twin.world, twin.cassette) == (
        client.mode, client.model, client.world, client.cassette)
    reply = twin.chat.completions.create(model=twin.model, messages=QUESTION)
    assert reply.choices[0].message.content.startswith("回答这个问题需要 calculator 工具")


def test_with_options_changes_only_what_it_is_asked(recorded):
    client = make_client("replay", "one")
    assert client.with_options(timeout=5).timeout == 5
    assert client.timeout != 5


@pytest.mark.parametrize("name", ["mode", "model", "world", "provenance", "cassette",
                                  "fallback"])
def test_connection_attributes_are_read_only(recorded, name):
    client = make_client("replay", "one")
    with pytest.raises(AttributeError):
        setattr(client, name, None)


def test_a_plain_course_client_says_it_was_not_made_by_make_client():
    client = CourseClient(api_key="x", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="不是 make_client"):
        _ = client.model


def test_no_module_level_table_and_no_dead_helpers():
    for gone in ("client_info", "ClientInfo", "world_of", "model_name", "_INFO"):
        assert not hasattr(client_module, gone), gone


@pytest.mark.parametrize(
    "cassette",
    [lambda p: str(p), lambda p: p, lambda p: PurePath(p), lambda p: p.stem],
    ids=["str-path", "pathlib-Path", "PurePath", "name"],
)
def test_cassette_may_be_a_name_a_str_or_a_pathlike(recorded, cassette):
    client = make_client("replay", cassette(recorded))
    assert client.cassette.path == recorded


# --- pages="bundled": the course's own pages in every mode that needs them ------------------

def page_text(url: str) -> str:
    file = "article.html" if url == ARTICLE_URL else "example.html"
    return (Path(__file__).resolve().parent.parent / "vibe_agent" / "data" / file).read_text(
        encoding="utf-8")


@pytest.mark.parametrize("url", [EXAMPLE_URL, ARTICLE_URL], ids=["example", "article"])
@pytest.mark.parametrize(
    ("mode", "says_where"),
    [
        pytest.param("reference", lambda c: c.provenance["pages"], id="reference-provenance"),
        pytest.param("offline", lambda c: c.fallback.pages_about, id="offline-fallback"),
    ],
)
def test_bundled_pages_are_served_without_a_recording(tapes, mode, says_where, url):
    client = make_client(mode, pages="bundled")
    response = client.world.http.get(url)
    assert response.status_code == 200 and response.text == page_text(url)
    assert "vibe_agent/data" in says_where(client)


def test_bundled_pages_in_live_mode(tapes, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("VIBE_AGENT_MODEL", "m")
    client = make_client("live", pages="bundled")
    assert client.world.http.get(ARTICLE_URL).text == page_text(ARTICLE_URL)
    assert "vibe_agent/data/article.html" in client.provenance["pages"]


def test_bundled_pages_pass_other_addresses_on(serve):
    base = serve({"/x": lambda h: (h.send_response(200), h.end_headers(), h.wfile.write(b"ok"))})
    pages = BundledPages(other=httpx2.HTTPTransport())
    with httpx2.Client(transport=pages) as http:
        assert http.get(f"{base}/x").text == "ok"
        assert http.get(EXAMPLE_URL).text == page_text(EXAMPLE_URL)
    assert httpx2.Client(transport=BundledPages()).get(f"{base}/x").status_code == 404


def test_replay_serves_the_recording_whatever_pages_says():
    """Lesson 07 passes pages="bundled": what replay returns must not change."""
    plain = make_client("replay", "07_trace_context_smollm2")
    bundled = make_client("replay", "07_trace_context_smollm2", pages="bundled")
    tape = json.loads((CASSETTES / "07_trace_context_smollm2.json").read_text(encoding="utf-8"))
    recorded = next(i["response"]["text"] for i in tape["interactions"] if i["kind"] == "http")
    assert plain.world.http.get(ARTICLE_URL).text == recorded
    assert bundled.world.http.get(ARTICLE_URL).text == recorded
    assert plain.provenance == bundled.provenance


@pytest.mark.parametrize("pages", ["offline", 3, "Bundled"], ids=["word", "number", "case"])
def test_pages_must_be_bundled_network_or_a_transport(tapes, pages):
    with pytest.raises(ConfigError, match="pages="):
        make_client("reference", pages=pages)


# --- the cassette as a person is shown it: the same on every machine ---------------------

ROOT = Path(__file__).resolve().parent.parent


def test_describe_names_a_project_cassette_relative_to_the_project(monkeypatch, tmp_path):
    monkeypatch.delenv("VIBE_AGENT_CASSETTES", raising=False)
    monkeypatch.chdir(tmp_path)  # wherever the notebook runs from
    client = make_client("replay", "00_setup_reference")
    assert "录制文件：notebooks/cassettes/00_setup_reference.json\n" in client.describe()
    assert str(ROOT) not in client.describe()


def test_replay_miss_and_the_fallback_notice_name_it_the_same_way(monkeypatch, tmp_path,
                                                                   capsys):
    monkeypatch.delenv("VIBE_AGENT_CASSETTES", raising=False)
    monkeypatch.chdir(tmp_path)
    strict = make_client("replay", "00_setup_reference")
    with pytest.raises(ReplayMiss) as miss:
        strict.chat.completions.create(model=strict.model, messages=[
            {"role": "user", "content": "一个录制文件里没有的问题"}])
    assert str(miss.value).startswith(
        "录制文件 notebooks/cassettes/00_setup_reference.json 里没有这个请求")
    offline = make_client("offline", "00_setup_reference")
    offline.chat.completions.create(model=offline.model, messages=[
        {"role": "user", "content": "一个录制文件里没有的问题"}])
    told = capsys.readouterr()
    assert "录制文件 notebooks/cassettes/00_setup_reference.json 里没有这个请求" \
        in told.out + told.err
    assert str(ROOT) not in str(miss.value) + told.out + told.err


def test_a_cassette_outside_the_project_is_named_by_its_whole_path(recorded):
    client = make_client("replay", recorded)
    assert f"录制文件：{recorded}\n" in client.describe()
