"""Recording: pages read with fetch_url's caps, redirects kept, failed recordings refused,
files written atomically. Every server here listens on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import httpx2
import openai
import pytest

from vibe_agent import web
from vibe_agent.course import cassette as cassette_module
from vibe_agent.course.cassette import Cassette, RecordingFailed, promote_partial
from vibe_agent.course.client import make_client
from vibe_agent.course.transports import RecordTransport, record_world, replay_world
from vibe_agent.tools import DemoTools
from vibe_agent.world import World, system_clock

ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000


def send(status: int, body: bytes = b"", **headers: str):
    def route(handler):
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name.replace("_", "-"), value)
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    return route


def trickle(handler):
    """A page that never ends: one byte every 0.1 s."""
    handler.send_response(200)
    handler.send_header("content-type", "text/html")
    handler.end_headers()
    while True:
        handler.wfile.write(b"x")
        handler.wfile.flush()
        time.sleep(0.1)


def trickle_headers(handler):
    """Headers that never finish: one byte every 0.1 s."""
    handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
    while True:
        handler.wfile.write(b"X")
        handler.wfile.flush()
        time.sleep(0.1)


def gzip_bomb(megabytes: int = 200) -> bytes:
    """~200 KB of gzip that inflates to 200 MB of zeros (built without holding 200 MB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MB)
    return b"".join(packer.compress(zeros) for _ in range(megabytes)) + packer.flush()


BOMB = gzip_bomb()


def recording(tmp_path: Path, deadline: float = web.FETCH_DEADLINE_S) -> tuple[Cassette, World]:
    tape = Cassette("pages", {"source": "scripted-reference"}, [], tmp_path / "pages.json")
    world = World(now=system_clock, http=httpx2.Client(
        transport=RecordTransport(tape, httpx2.HTTPTransport(), deadline=deadline),
        follow_redirects=True))
    return tape, world


# --- (10) pages are recorded with fetch_url's byte cap, decompression cap and deadline ----------

def test_record_uses_the_caps_fetch_url_exports():
    transport = RecordTransport(Cassette("t", {}), httpx2.MockTransport(lambda r: None))
    assert (transport.max_bytes, transport.deadline) == (web.MAX_BYTES, web.FETCH_DEADLINE_S)


@pytest.mark.parametrize(("route", "encoding"), [
    (send(200, b"a" * (20 * MB), content_type="text/plain"), "identity"),
    (send(200, BOMB, content_type="text/plain", content_encoding="gzip"), "gzip"),
], ids=["20MB-page", "gzip-bomb"])
def test_a_huge_page_is_recorded_only_up_to_the_cap(tmp_path, serve, route, encoding):
    base = serve({"/page": route})
    tape, world = recording(tmp_path)
    response = world.http.get(f"{base}/page")
    assert len(response.content) == web.MAX_BYTES
    saved = tape.save()
    # was 21 MB / 1.26 GB; zeros are written as JSON escapes (\u0000, 6 bytes each)
    assert saved.stat().st_size < 7 * web.MAX_BYTES
    page = tape.interactions[0]["response"]
    assert page["truncated_at"] == web.MAX_BYTES and len(page["text"]) == web.MAX_BYTES
    replayed = replay_world(Cassette.load(saved)).http.get(f"{base}/page")
    assert replayed.content == response.content


def test_gzip_bomb_recording_keeps_memory_small(tmp_path):
    """Record the bomb in a fresh process and read its peak memory (reported in the PR)."""
    script = textwrap.dedent(f"""
        import resource, threading, zlib, httpx2
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from vibe_agent.course.cassette import Cassette
        from vibe_agent.course.transports import RecordTransport
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        bomb = b"".join(packer.compress(bytes({MB})) for _ in range(200)) + packer.flush()
        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200); self.send_header("content-encoding", "gzip")
                self.send_header("content-length", str(len(bomb))); self.end_headers()
                self.wfile.write(bomb)
            def log_message(self, *a): pass
        server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tape = Cassette("bomb", {{"source": "scripted-reference"}}, [], None)
        http = httpx2.Client(transport=RecordTransport(tape, httpx2.HTTPTransport()))
        http.get(f"http://127.0.0.1:{{server.server_port}}/")
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(before // 1024, after // 1024, len(tape.to_json()))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    before_mb, after_mb, size = map(int, done.stdout.split())
    print(f"record-mode peak RSS on the gzip bomb: {after_mb} MB (before: {before_mb} MB)")
    assert after_mb - before_mb < 64 and size < 7 * web.MAX_BYTES  # was 3 GB RSS


@pytest.mark.parametrize("route", [trickle, trickle_headers], ids=["body", "headers"])
def test_a_trickling_page_ends_at_the_deadline_and_replays_as_a_timeout(tmp_path, serve, route):
    base = serve({"/slow": route})
    tape, world = recording(tmp_path, deadline=1.0)
    start = time.monotonic()
    with pytest.raises(httpx2.ReadTimeout):
        world.http.get(f"{base}/slow")
    assert time.monotonic() - start < 3  # one deadline, not one per byte
    assert tape.interactions[0]["response"]["error"] == "ReadTimeout"
    with pytest.raises(httpx2.ReadTimeout):
        replay_world(Cassette.load(tape.save())).http.get(f"{base}/slow")


def test_a_page_that_cannot_be_reached_replays_as_the_same_error(tmp_path):
    tape, world = recording(tmp_path)
    with pytest.raises(httpx2.ConnectError):
        world.http.get("http://127.0.0.1:9/")  # the discard port: nobody listens
    with pytest.raises(httpx2.ConnectError):
        replay_world(Cassette.load(tape.save())).http.get("http://127.0.0.1:9/")


def test_redirects_agree_live_while_recording_and_in_replay(tmp_path, serve):
    base = serve({"/old": send(302, b"moved", location="/new"),
                  "/new": send(200, b"<p>new page</p>", content_type="text/html")})
    url = f"{base}/old"
    live = World().http.get(url)
    tape = Cassette("r", {"source": "scripted-reference"}, [], tmp_path / "r.json")
    recorded = record_world(tape, system_clock, httpx2.HTTPTransport()).http.get(url)
    replayed = replay_world(Cassette.load(tape.save())).http.get(url)
    seen = [(r.status_code, str(r.url), r.text, [h.status_code for h in r.history])
            for r in (live, recorded, replayed)]
    assert seen[0] == seen[1] == seen[2] == (200, f"{base}/new", "<p>new page</p>", [302])
    assert tape.interactions[0]["response"]["location"] == "/new"


def test_without_following_the_redirect_target_is_still_there(tmp_path, serve):
    """fetch_url may follow redirects itself (checking each hop): it needs Location."""
    base = serve({"/old": send(301, b"", location="https://example.com/")})
    tape = Cassette("r", {"source": "scripted-reference"}, [], tmp_path / "r.json")
    world = record_world(tape, system_clock, httpx2.HTTPTransport())
    first = world.http.get(f"{base}/old", follow_redirects=False)
    again = replay_world(Cassette.load(tape.save())).http.get(f"{base}/old",
                                                                follow_redirects=False)
    assert first.headers["location"] == again.headers["location"] == "https://example.com/"


def packed(data: bytes, wbits: int) -> bytes:
    """`data` compressed: wbits 31 is gzip, 15 zlib-wrapped deflate, -15 raw deflate."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


PAGE_TEXT = "<p>Hello, 世界</p>"


@pytest.mark.parametrize(("body", "encoding"), [
    (PAGE_TEXT.encode(), "identity"),
    (packed(PAGE_TEXT.encode(), 31), "gzip"),
    (packed(PAGE_TEXT.encode(), 15), "deflate"),
    (packed(PAGE_TEXT.encode(), -15), "deflate"),  # no zlib header: some servers send it
    (packed(packed(PAGE_TEXT.encode(), 31), 31), "gzip, gzip"),
], ids=["identity", "gzip", "deflate", "raw-deflate", "gzip-twice"])
def test_a_compressed_page_is_recorded_as_fetch_url_reads_it(tmp_path, serve, body, encoding):
    """The recorder reads pages with fetch_url's own reader: live, recorded and replayed agree."""
    base = serve({"/page": send(200, body, content_type="text/html; charset=utf-8",
                                content_encoding=encoding)})
    url = f"{base}/page"
    tape = Cassette("pages", {"source": "scripted-reference"}, [], tmp_path / "pages.json")
    live = DemoTools(World(), allow_private=True).fetch_url(url)
    recorded = DemoTools(record_world(tape, system_clock, httpx2.HTTPTransport()),
                         allow_private=True).fetch_url(url)
    replayed = DemoTools(replay_world(Cassette.load(tape.save())),
                         allow_private=True).fetch_url(url)
    assert live == recorded == replayed == PAGE_TEXT
    assert tape.interactions[0]["response"]["text"] == PAGE_TEXT


# --- (11) a recording whose model calls failed never replaces a good cassette ---------------

@pytest.fixture
def good(tapes):
    """A good committed-like cassette `demo_reference` in the temporary folder."""
    source = ROOT / "notebooks" / "cassettes" / "demo_reference.json"
    target = tapes / "demo_reference.json"
    target.write_bytes(source.read_bytes())
    return target


def unauthorized(handler):
    length = int(handler.headers.get("content-length", 0))
    handler.rfile.read(length)
    key = handler.headers["authorization"].removeprefix("Bearer ")
    masked = f"{key[:8]}{'*' * 20}{key[-4:]}"
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {masked}. Your key "
                                            f"was {key}.", "type": "invalid_request_error",
                                 "code": "invalid_api_key"}}).encode()
    send(401, body, content_type="application/json")(handler)


def html_page(handler):
    handler.rfile.read(int(handler.headers.get("content-length", 0)))
    send(200, b"<!doctype html><title>Open WebUI</title>", content_type="text/html")(handler)


def record_scenario(base_url: str, good: Path, monkeypatch) -> Path:
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdefWXYZ")
    monkeypatch.setenv("VIBE_AGENT_MODEL", "m")
    monkeypatch.setenv("VIBE_AGENT_MAX_RETRIES", "0")
    client = make_client("record", "demo_reference", source="live")
    for question in ("17 × 23 等于多少？", "现在几点？"):
        try:
            client.chat.completions.create(model=client.model,
                                           messages=[{"role": "user", "content": question}])
        except openai.APIError:
            pass  # what the recording makes of it is the point here
    return client.cassette.finish()


@pytest.mark.parametrize(("server", "words"), [
    ("closed-port", "没有得到响应"),
    ("wrong-key", "被拒绝：HTTP 401"),
    ("html-not-json", "不是 JSON"),
], ids=["closed-port", "wrong-key", "html-not-json"])
def test_a_failed_recording_keeps_the_good_cassette(good, serve, monkeypatch, server, words):
    before = good.read_bytes()
    base = {"closed-port": "http://127.0.0.1:9/v1",
            "wrong-key": f"{serve({'/v1/chat/completions': unauthorized})}/v1",
            "html-not-json": f"{serve({'/v1/chat/completions': html_page})}/v1"}[server]
    with pytest.raises(RecordingFailed) as failed:
        record_scenario(base, good, monkeypatch)
    assert good.read_bytes() == before
    assert words in str(failed.value) and "没有被这次录制替换" in str(failed.value)
    partial = good.with_name(good.name + ".partial")
    text = partial.read_text(encoding="utf-8")
    assert "0123456789abcdefWXYZ" not in text and "WXYZ" not in text  # key and masked form


def test_an_empty_recording_is_refused(tapes):
    client = make_client("record", "nothing", source="reference")
    with pytest.raises(RecordingFailed, match="一次模型调用也没有录到"):
        client.cassette.finish()
    assert not (tapes / "nothing.json").exists()


def test_a_recording_with_some_legitimate_errors_is_kept(tapes):
    """Lesson 02 records the HTTP 400 a broken history gets: that is content, not failure."""
    client = make_client("record", "mixed", source="reference")
    client.chat.completions.create(model=client.model, messages=[{"role": "user", "content": "a"}])
    orphan = {"role": "tool", "tool_call_id": "x", "content": "1"}  # answers no call: HTTP 400
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=client.model, messages=[
            {"role": "user", "content": "a"}, orphan])
    assert client.cassette.finish() == tapes / "mixed.json"
    assert not (tapes / "mixed.json.partial").exists()


def test_cli_record_against_a_closed_port_exits_non_zero_and_keeps_the_cassette(good):
    before = good.read_bytes()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    done = subprocess.run(
        [sys.executable, "-m", "vibe_agent", "record", "demo_reference", "--source", "live"],
        capture_output=True, text=True, timeout=120, cwd=good.parent,
        env=env | {"VIBE_AGENT_CASSETTES": str(good.parent), "OPENAI_API_KEY": "sk-x-123456789",
                   "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "VIBE_AGENT_MODEL": "m",
                   "VIBE_AGENT_MAX_RETRIES": "0"})
    assert done.returncode == 3
    assert "Traceback" not in done.stdout + done.stderr and "已录制" not in done.stdout
    assert "录制" in done.stderr and "失败" in done.stderr and "没有得到响应" in done.stderr
    assert good.read_bytes() == before


def test_promote_partial_replaces_only_a_good_recording(tapes):
    client = make_client("record", "p", source="reference")
    client.chat.completions.create(model=client.model, messages=[{"role": "user", "content": "a"}])
    partial = tapes / "p.json.partial"
    assert partial.exists() and not (tapes / "p.json").exists()  # autosave wrote the partial
    assert promote_partial(partial) == tapes / "p.json"
    assert Cassette.load(tapes / "p.json").interactions and not partial.exists()


# --- writes are atomic -------------------------------------------------------------------

def test_a_write_that_fails_half_way_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "t.json"
    target.write_text("old", encoding="utf-8")

    def crash(fd):
        raise OSError("disk full")

    monkeypatch.setattr(cassette_module.os, "fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        Cassette("t", {"source": "scripted-reference"}, [{"kind": "clock", "value": "x"}]
                 ).save(target)
    assert target.read_text(encoding="utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]  # no temp file left


def test_a_recording_killed_at_any_moment_leaves_a_loadable_file(tmp_path):
    script = textwrap.dedent("""
        import sys
        from vibe_agent.course.cassette import Cassette
        tape = Cassette("k", {"source": "scripted-reference"}, [], __import__("pathlib").Path(
            sys.argv[1]), autosave=True)
        print("ready", flush=True)
        for n in range(100000):
            tape.add({"kind": "clock", "value": "2026-11-30T13:00:00+00:00",
                      "padding": "x" * 2000})
    """)
    for delay in (0.3, 0.6, 0.9):
        target = tmp_path / f"k{delay}.json"
        process = subprocess.Popen([sys.executable, "-c", script, str(target)],
                                   stdout=subprocess.PIPE, text=True,
                                   env=os.environ | {"PYTHONPATH": str(ROOT)})
        assert process.stdout.readline().strip() == "ready"
        partial = target.with_name(target.name + ".partial")
        waited = time.monotonic() + 30  # a loaded machine (parallel tests) may be slow to save
        while not partial.exists() and time.monotonic() < waited:
            time.sleep(0.01)
        time.sleep(delay)  # then kill it somewhere in its stream of saves
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert Cassette.load(partial).interactions  # complete JSON, never a torn file


# --- recording from code: close(), `with`, and the end of the program ----------------------

QUESTION = [{"role": "user", "content": "17 × 23 等于多少？"}]


@pytest.fixture(autouse=True)
def _no_recordings_left_for_exit(monkeypatch):
    """Recordings a test leaves unfinished are not finished when pytest exits."""
    from vibe_agent.course import client as client_module

    monkeypatch.setattr(client_module, "_FINISH_AT_EXIT", {})


def ask(client) -> None:
    client.chat.completions.create(model=client.model, messages=QUESTION)


@pytest.mark.parametrize("finish", [
    pytest.param(lambda client: client.close(), id="close"),
    pytest.param(lambda client: client.__exit__(None, None, None), id="end-of-with-block"),
    pytest.param(lambda client: client.finish_recording(), id="finish_recording"),
])
def test_a_recording_made_from_code_lands(tapes, finish):
    client = make_client(mode="record", cassette="mine.json")
    ask(client)
    assert not (tapes / "mine.json").exists()
    finish(client)
    saved = Cassette.load(tapes / "mine.json")
    assert saved.interactions and not (tapes / "mine.json.partial").exists()
    assert saved.provenance["recorded_with"] == (
        "从代码录制：make_client(mode='record', cassette='mine.json')")


def test_a_with_block_that_raises_keeps_only_the_partial(tapes):
    with pytest.raises(RuntimeError), make_client("record", "mine") as client:
        ask(client)
        raise RuntimeError("the run broke")
    assert (tapes / "mine.json.partial").exists() and not (tapes / "mine.json").exists()


def test_closing_a_failed_recording_keeps_the_cassette(good, monkeypatch):
    before = good.read_bytes()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x-123456789")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("VIBE_AGENT_MODEL", "m")
    monkeypatch.setenv("VIBE_AGENT_MAX_RETRIES", "0")
    client = make_client("record", good, source="live")
    with pytest.raises(openai.APIConnectionError):
        ask(client)
    with pytest.raises(RecordingFailed, match="没有得到响应"):
        client.close()
    assert good.read_bytes() == before


def test_under_the_record_command_the_command_finishes(tapes, monkeypatch):
    """`record LESSON` checks each kernel's NAME.json.partial itself: close() leaves it."""
    monkeypatch.setenv("VIBE_AGENT_RECORDED_WITH", "python -m vibe_agent record 02_protocol")
    client = make_client("record", "lesson")
    ask(client)
    client.close()
    assert (tapes / "lesson.json.partial").exists() and not (tapes / "lesson.json").exists()
    assert client.provenance["recorded_with"] == "python -m vibe_agent record 02_protocol"


SCRIPT = """
from vibe_agent.course.client import make_client
client = make_client(mode="record", cassette="mine.json")
client.chat.completions.create(model=client.model, messages=[{"role": "user", "content": "1+1"}])
"""


@pytest.mark.parametrize(("ending", "lands", "said"), [
    pytest.param("", True, "已保存录制文件", id="script-ends"),
    pytest.param("raise RuntimeError('boom')", False, "没有换成正式的录制文件",
                 id="script-crashes"),
])
def test_a_script_finishes_its_recording_when_it_ends(tapes, ending, lands, said):
    (tapes / "rec.py").write_text(SCRIPT + ending + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    done = subprocess.run([sys.executable, "rec.py"], cwd=tapes, capture_output=True, text=True,
                          timeout=120, env=env | {"PYTHONPATH": str(ROOT)})
    assert said in done.stderr
    assert (tapes / "mine.json").exists() == lands
    assert (tapes / "mine.json.partial").exists() != lands
    if lands:
        how = Cassette.load(tapes / "mine.json").provenance["recorded_with"]
        assert how == ("从代码录制：make_client(mode='record', cassette='mine.json')，"
                       f"在 {tapes / 'rec.py'} 里")


def test_a_missing_cassette_points_at_the_partial_beside_it(tapes):
    client = make_client("record", "mine")
    ask(client)
    with pytest.raises(cassette_module.CassetteError) as missing:
        make_client("replay", "mine")
    text = str(missing.value)
    assert "mine.json.partial" in text and "client.close()" in text and "promote_partial" in text
    promote_partial(tapes / "mine.json.partial")  # what the message says to do
    assert make_client("replay", "mine").cassette.interactions


def test_a_miss_also_points_at_a_newer_partial(tapes):
    with make_client("record", "mine") as client:
        ask(client)
    client = make_client("record", "mine")  # a second recording, never finished
    client.chat.completions.create(model=client.model, messages=[{"role": "user", "content": "x"}])
    with pytest.raises(cassette_module.ReplayMiss, match="没收尾的录制 mine.json.partial"):
        ask_other = make_client("replay", "mine")
        ask_other.chat.completions.create(model=ask_other.model,
                                          messages=[{"role": "user", "content": "y"}])
