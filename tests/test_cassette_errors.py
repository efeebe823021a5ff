"""Every damaged cassette is a CassetteError naming the file, what is wrong and what to do.

One row per shape; each must fail to load with its own reason (in Chinese), never a bare
JSONDecodeError / KeyError / UnicodeDecodeError, and the command line must turn it into
exit code 3 without a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from forkserver import forked_run

from vibe_agent.course.cassette import Cassette, CassetteError, catalogue

GOOD = {
    "format": 1, "name": "good",
    "provenance": {"source": "scripted-reference", "model": "vibe-reference",
                   "recorded_with": "python -m vibe_agent record good"},
    "interactions": [
        {"kind": "chat", "request": {"model": "m", "messages": [{"role": "user", "content": "a"}]},
         "response": {"status": 200, "body": {"id": "x"}}},
        {"kind": "http", "request": {"method": "GET", "url": "https://example.com/"},
         "response": {"status": 200, "content_type": "text/html", "text": "<p>hi</p>"}},
        {"kind": "clock", "value": "2026-11-30T13:00:00+00:00"},
    ],
}
GOOD_TEXT = json.dumps(GOOD, ensure_ascii=False, indent=1)


def changed(edit) -> bytes:
    data = json.loads(GOOD_TEXT)
    edit(data)
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def item(n: int, *path: str, value=..., drop: bool = False):
    """An edit of interactions[n] at `path`: set `value`, or drop the key."""
    def edit(data):
        target = data["interactions"][n]
        for key in path[:-1]:
            target = target[key]
        if drop:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return edit


# (id, file content: bytes, or None for a directory / "missing" for no file, expected words)
ROWS = [
    ("missing-file", "missing", "文件不存在"),
    ("directory", None, "这是一个文件夹"),
    ("empty", b"", "文件是空的"),
    ("whitespace", b"  \n\t\n", "文件是空的"),
    ("truncated", GOOD_TEXT.encode()[:200], "JSON 在中途就结束了"),
    ("cut-after-brace", GOOD_TEXT.encode()[:1], "JSON 在中途就结束了"),
    ("syntax-error", GOOD_TEXT.replace('"format": 1,', '"format": 1,,').encode(),
     "不是有效的 JSON：第 2 行"),
    ("trailing-garbage", GOOD_TEXT.encode() + b"\n}{", "JSON 结束之后还有多余的内容"),
    ("two-cassettes-concatenated", (GOOD_TEXT + GOOD_TEXT).encode(), "多余的内容"),
    ("latin-1", GOOD_TEXT.replace("hi", "café").encode("latin-1"), "不是 UTF-8 编码"),
    ("utf-16", GOOD_TEXT.encode("utf-16"), "不是 UTF-8 编码"),
    ("binary", bytes(range(256)), "不是 UTF-8 编码"),
    ("list-at-top", b"[]", "最外层应该是一个 JSON 对象 {…}，这里是一个列表"),
    ("string-at-top", b'"cassette"', "这里是一个字符串"),
    ("null-at-top", b"null", "这里是null"),
    ("no-format", changed(lambda d: d.pop("format")), "\"format\" 应该是 1，这里是 '<没有>'"),
    ("format-2", changed(lambda d: d.update(format=2)), "\"format\" 应该是 1，这里是 2"),
    ("format-as-text", changed(lambda d: d.update(format="1")), "这里是 '1'"),
    ("name-not-text", changed(lambda d: d.update(name=7)), "\"name\" 应该是字符串"),
    ("no-provenance", changed(lambda d: d.pop("provenance")), "缺少 \"provenance\" 对象"),
    ("provenance-list", changed(lambda d: d.update(provenance=[])), "缺少 \"provenance\" 对象"),
    ("empty-provenance", changed(lambda d: d.update(provenance={})), "provenance.source 应该是"),
    ("unknown-source", changed(lambda d: d["provenance"].update(source="gpt")), "这里是 'gpt'"),
    ("no-interactions", changed(lambda d: d.pop("interactions")),
     "\"interactions\" 应该是一个列表"),
    ("interactions-dict", changed(lambda d: d.update(interactions={})),
     "\"interactions\" 应该是一个列表，这里是一个对象"),
    ("item-not-object", changed(lambda d: d["interactions"].append("chat")),
     "interactions[3] 应该是一个对象"),
    ("item-without-kind", changed(item(0, "kind", drop=True)), "interactions[0].kind 应该是"),
    ("unknown-kind", changed(item(2, "kind", value="video")), "这里是 'video'"),
    ("chat-without-request", changed(item(0, "request", drop=True)),
     "interactions[0].request 应该是请求体对象"),
    ("chat-request-text", changed(item(0, "request", value="hi")), "这里是一个字符串"),
    ("chat-without-response", changed(item(0, "response", drop=True)),
     "interactions[0].response 应该是一个对象"),
    ("chat-without-status", changed(item(0, "response", "status", drop=True)),
     "interactions[0].response.status 应该是 HTTP 状态码"),
    ("chat-status-text", changed(item(0, "response", "status", value="200")), "这里是 '200'"),
    ("chat-status-999", changed(item(0, "response", "status", value=999)), "这里是 999"),
    ("chat-without-body", changed(item(0, "response", "body", drop=True)),
     "interactions[0].response 缺少 \"body\""),
    ("page-without-url", changed(item(1, "request", "url", drop=True)),
     "interactions[1].request 应该是带 \"method\" 和 \"url\""),
    ("page-without-status", changed(item(1, "response", "status", drop=True)),
     "interactions[1].response.status"),
    ("page-text-not-text", changed(item(1, "response", "text", value=["hi"])),
     "interactions[1].response.text 应该是字符串"),
    ("page-bad-base64", changed(item(1, "response", "base64", value="***")),
     "response.base64 不是有效的 base64"),
    ("clock-without-value", changed(item(2, "value", drop=True)),
     "interactions[2].value 应该是 ISO 格式的时间"),
    ("clock-not-a-time", changed(item(2, "value", value="13 o'clock")), "这里是 \"13 o'clock\""),
    ("failures-not-list", changed(lambda d: d.update(failures="401")),
     "\"failures\" 应该是字符串列表"),
]


def place(tmp_path: Path, content) -> Path:
    path = tmp_path / "damaged.json"
    if content is None:
        path.mkdir()
    elif content != "missing":
        path.write_bytes(content)
    return path


def test_there_are_at_least_25_shapes():
    assert len(ROWS) >= 25


@pytest.mark.parametrize(("content", "words"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_damaged_cassette_names_file_problem_and_remedy(tmp_path, content, words):
    path = place(tmp_path, content)
    with pytest.raises(CassetteError) as error:
        Cassette.load(path)
    text = str(error.value)
    assert text.startswith(f"录制文件 {path} 用不了：")
    assert words in error.value.problem, text
    assert "怎么办：" in text and error.value.remedy
    assert type(error.value.__cause__) is not json.JSONDecodeError


@pytest.mark.parametrize("remedy_of", [
    ("truncated", "git checkout --"), ("truncated", "python -m vibe_agent record"),
    ("missing-file", "检查录制文件名"), ("missing-file", "VIBE_AGENT_MODE=offline"),
    ("unknown-kind", "python -m vibe_agent record good"),  # the cassette's own command
], ids=lambda r: f"{r[0]}:{r[1]}")
def test_the_remedy_fits_the_problem(tmp_path, remedy_of):
    row_id, words = remedy_of
    content = next(r[1] for r in ROWS if r[0] == row_id)
    with pytest.raises(CassetteError) as error:
        Cassette.load(place(tmp_path, content))
    assert words in error.value.remedy


@pytest.mark.parametrize(("variant", "content"), [
    ("good", GOOD_TEXT.encode()),
    ("utf-8-bom", b"\xef\xbb\xbf" + GOOD_TEXT.encode()),
    ("no-name", changed(lambda d: d.pop("name"))),
    ("recorded-timeout", changed(item(1, "response", value={"error": "ReadTimeout"}))),
], ids=["good", "utf-8-bom", "no-name", "recorded-timeout"])
def test_harmless_variants_load(tmp_path, variant, content):
    tape = Cassette.load(place(tmp_path, content))
    assert tape.name in ("good", "damaged") and len(tape.interactions) == 3


def test_catalogue_names_the_damaged_file(tmp_path):
    (tmp_path / "a.json").write_text(GOOD_TEXT, encoding="utf-8")
    (tmp_path / "b.json").write_bytes(b"[]")
    with pytest.raises(CassetteError, match="b.json 用不了"):
        catalogue(tmp_path)


# --- the command line maps cassette problems and replay misses to exit codes -----------------

def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "VIBE_AGENT_"))}
    return forked_run([sys.executable, "-m", "vibe_agent", *args], capture_output=True,
                      text=True, timeout=120, env=clean | (env or {}), cwd=cwd)


@pytest.mark.parametrize(("row_id", "mode"), [
    ("truncated", "replay"), ("list-at-top", "offline"), ("latin-1", "replay"),
    ("directory", "offline"), ("missing-file", "replay")])
def test_cli_exits_3_on_a_damaged_cassette_without_traceback(tmp_path, row_id, mode):
    content = next(r[1] for r in ROWS if r[0] == row_id)
    path = place(tmp_path, content)
    done = run_cli("ask", "hi", "--mode", mode, "--cassette", str(path), cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert f"录制文件 {path} 用不了" in done.stderr


def test_cli_exits_4_on_a_strict_replay_miss(tmp_path):
    done = run_cli("ask", "17 × 24 等于多少？", "--mode", "replay", "--cassette",
                   "demo_reference", cwd=tmp_path)
    assert done.returncode == 4
    assert "Traceback" not in done.stdout + done.stderr
    assert "回放对不上：录制文件" in done.stderr
    assert "messages[1].content：录制文件里" in done.stderr
